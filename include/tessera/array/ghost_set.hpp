// GhostSet: the sorted, distinct global indices a rank reads from other ranks
// (its "ghosts"), with a position lookup that costs O(1) expected time and
// O(ghosts) memory: a bucket table over the index space, sized to the number
// of ghosts, points into the sorted list.
#pragma once
#include <algorithm>
#include <cstdint>
#include <span>
#include <vector>

namespace tessera {

class GhostSet {
 public:
  GhostSet() = default;
  // `ids` in any order, duplicates allowed; every id < space.
  GhostSet(std::vector<std::uint64_t> ids, std::uint64_t space);
  // The distinct indices of `indices` outside [owned_begin, owned_end),
  // found through a bitmap of `space` bits: no copy of `indices` (which may
  // be a rank's whole edge array) is ever made.
  // Both widths of a graph's destination array are accepted.
  static GhostSet remote_of(std::span<const std::uint32_t> indices, std::uint64_t owned_begin,
                            std::uint64_t owned_end, std::uint64_t space);
  static GhostSet remote_of(std::span<const std::uint64_t> indices, std::uint64_t owned_begin,
                            std::uint64_t owned_end, std::uint64_t space);

  std::size_t size() const noexcept { return ids_.size(); }
  std::span<const std::uint64_t> ids() const noexcept { return ids_; }
  // Position of `id` in ids(); `id` must be in the set.
  std::size_t position(std::uint64_t id) const noexcept {
    std::uint64_t b = id >> shift_;
    auto first = ids_.begin() + bucket_[b], last = ids_.begin() + bucket_[b + 1];
    if (last - first <= 8) {
      while (*first != id) ++first;
      return static_cast<std::size_t>(first - ids_.begin());
    }
    return static_cast<std::size_t>(std::lower_bound(first, last, id) - ids_.begin());
  }
  std::size_t memory_bytes() const noexcept {
    return ids_.capacity() * sizeof(std::uint64_t) + bucket_.capacity() * sizeof(std::uint32_t);
  }

 private:
  std::vector<std::uint64_t> ids_;
  std::vector<std::uint32_t> bucket_;  // first position of each bucket, plus an end
  unsigned shift_ = 63;
};

}  // namespace tessera
