#include "tessera/chunks/placement.hpp"

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

}  // namespace tessera::chunks
