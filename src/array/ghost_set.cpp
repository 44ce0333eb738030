#include "tessera/array/ghost_set.hpp"

#include <bit>
#include <string>

#include "tessera/runtime/error.hpp"

namespace tessera {

GhostSet::GhostSet(std::vector<std::uint64_t> ids, std::uint64_t space) : ids_(std::move(ids)) {
  std::sort(ids_.begin(), ids_.end());
  ids_.erase(std::unique(ids_.begin(), ids_.end()), ids_.end());
  ids_.shrink_to_fit();
  if (ids_.size() >= (1ull << 32)) throw ConfigError("more than 2^32 ghost indices on one rank; use more ranks");
  if (!ids_.empty() && ids_.back() >= space)
    throw RangeError("ghost index " + std::to_string(ids_.back()) + " is outside [0, " + std::to_string(space) + ")");
  // About one ghost per bucket: 2^bits buckets with 2^bits >= ghosts.
  unsigned space_bits = static_cast<unsigned>(std::bit_width(space > 0 ? space - 1 : 0));
  unsigned bucket_bits = static_cast<unsigned>(std::bit_width(ids_.size()));
  shift_ = space_bits > bucket_bits ? space_bits - bucket_bits : 0;
  std::uint64_t buckets = space > 0 ? ((space - 1) >> shift_) + 1 : 1;
  bucket_.assign(buckets + 1, 0);
  std::size_t k = 0;
  for (std::uint64_t b = 0; b <= buckets; ++b) {
    while (k < ids_.size() && (ids_[k] >> shift_) < b) ++k;
    bucket_[b] = static_cast<std::uint32_t>(k);
  }
}

namespace {

// One implementation for both index widths; the scan stays a tight loop
// over the caller's span.
template <class Id>
GhostSet remote_of_impl(std::span<const Id> indices, std::uint64_t owned_begin, std::uint64_t owned_end,
                        std::uint64_t space) {
  std::vector<std::uint64_t> bits((space + 63) / 64, 0);
  std::size_t count = 0;
  for (Id id : indices) {
    const std::uint64_t i = id;
    if (i >= owned_begin && i < owned_end) continue;
    if (i >= space)
      throw RangeError("index " + std::to_string(i) + " is outside [0, " + std::to_string(space) + ")");
    std::uint64_t& word = bits[i >> 6];
    std::uint64_t bit = 1ull << (i & 63);
    count += (word & bit) == 0;
    word |= bit;
  }
  std::vector<std::uint64_t> ids;
  ids.reserve(count);
  for (std::size_t w = 0; w < bits.size(); ++w)
    for (std::uint64_t b = bits[w]; b; b &= b - 1) ids.push_back(w * 64 + static_cast<std::uint64_t>(std::countr_zero(b)));
  bits = {};
  return GhostSet(std::move(ids), space);
}

}  // namespace

GhostSet GhostSet::remote_of(std::span<const std::uint32_t> indices, std::uint64_t owned_begin,
                             std::uint64_t owned_end, std::uint64_t space) {
  return remote_of_impl(indices, owned_begin, owned_end, space);
}

GhostSet GhostSet::remote_of(std::span<const std::uint64_t> indices, std::uint64_t owned_begin,
                             std::uint64_t owned_end, std::uint64_t space) {
  return remote_of_impl(indices, owned_begin, owned_end, space);
}

}  // namespace tessera
