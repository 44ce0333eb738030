#include "tessera/chunks/placement.hpp"

#include "tessera/chunks/grid.hpp"
#include "tessera/runtime/error.hpp"

namespace tessera::chunks {

Placement block_placement(std::size_t chunks, int ranks) {
  if (ranks < 1) throw RangeError("block placement: " + std::to_string(ranks) + " ranks; need at least 1");
  Placement p(chunks);
  auto P = static_cast<std::size_t>(ranks);
  std::size_t base = chunks / P, extra = chunks % P, c = 0;
  for (std::size_t r = 0; r < P; ++r)
    for (std::size_t k = 0; k < base + (r < extra ? 1 : 0); ++k) p[c++] = static_cast<int>(r);
  return p;
}

void check_placement(const Placement& placement, std::size_t chunks, int ranks, const std::string& what) {
  if (placement.size() != chunks)
    throw RangeError(what + " has " + std::to_string(placement.size()) + " entries for " + std::to_string(chunks) +
                     " chunks");
  for (std::size_t c = 0; c < placement.size(); ++c)
    if (placement[c] < 0 || placement[c] >= ranks)
      throw RangeError(what + " puts chunk " + std::to_string(c) + " on rank " + std::to_string(placement[c]) +
                       ", outside 0.." + std::to_string(ranks - 1));
}

std::vector<std::size_t> chunks_per_rank(const Placement& placement, int ranks) {
  std::vector<std::size_t> n(static_cast<std::size_t>(ranks), 0);
  for (int r : placement) ++n.at(static_cast<std::size_t>(r));
  return n;
}

ChunkGrid parse_chunk_grid(const std::string& text, const std::string& option) {
  ChunkGrid g;
  std::vector<long> parts;
  std::size_t at = 0;
  auto bad = [&](const std::string& why) {
    return ConfigError(option + " '" + text + "': " + why + " (expected e.g. 4x4x4, 4x2 or 8)");
  };
  while (true) {
    std::size_t x = text.find('x', at);
    std::string part = text.substr(at, x == std::string::npos ? std::string::npos : x - at);
    if (part.empty() || part.find_first_not_of("0123456789") != std::string::npos) throw bad("not a number: '" + part + "'");
    if (part.size() > 6) throw bad("dimension " + part + " too large");
    parts.push_back(std::stol(part));
    if (parts.back() < 1) throw bad("dimensions must be positive");
    if (x == std::string::npos) break;
    at = x + 1;
  }
  if (parts.size() > 3) throw bad("more than three dimensions");
  if (parts.size() == 1) parts = {parts[0], parts[0], parts[0]};
  while (parts.size() < 3) parts.push_back(1);
  for (int a = 0; a < 3; ++a) g.dims[static_cast<std::size_t>(a)] = static_cast<int>(parts[static_cast<std::size_t>(a)]);
  return g;
}

}  // namespace tessera::chunks
