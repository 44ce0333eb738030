// How a global index space [0, n) is split over ranks: block (equal parts, the
// first n % P ranks one larger) or weighted block (the caller gives each
// rank's size). n may be smaller than the rank count: empty ranks are legal.
#pragma once
#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

namespace tessera {

class Distribution {
 public:
  static Distribution block(std::uint64_t n, int ranks);
  static Distribution weighted_block(const std::vector<std::uint64_t>& sizes);

  std::uint64_t size() const noexcept { return offsets_.back(); }
  int ranks() const noexcept { return static_cast<int>(offsets_.size()) - 1; }
  std::uint64_t begin(int rank) const { return offsets_.at(static_cast<std::size_t>(rank)); }
  std::uint64_t end(int rank) const { return offsets_.at(static_cast<std::size_t>(rank) + 1); }
  std::uint64_t count(int rank) const { return end(rank) - begin(rank); }
  const std::vector<std::uint64_t>& offsets() const noexcept { return offsets_; }
  bool is_block() const noexcept { return block_; }
  std::string kind() const { return block_ ? "block" : "weighted_block"; }

  // Owner of global index i < size(). Unchecked: the hot path of every
  // aggregated operation; use check() first for untrusted indices.
  int owner(std::uint64_t i) const noexcept {
    if (block_) {
      if (i < split_) return static_cast<int>(i / (base_ + 1));
      return static_cast<int>(extra_ + (i - split_) / base_);
    }
    auto it = std::upper_bound(offsets_.begin(), offsets_.end(), i);
    return static_cast<int>(it - offsets_.begin()) - 1;
  }
  std::uint64_t local_offset(std::uint64_t i, int owner_rank) const noexcept {
    return i - offsets_[static_cast<std::size_t>(owner_rank)];
  }
  // Throws RangeError naming the index and the valid range.
  void check(std::uint64_t i) const;

  bool operator==(const Distribution& o) const { return offsets_ == o.offsets_; }

 private:
  std::vector<std::uint64_t> offsets_{0};
  bool block_ = true;
  std::uint64_t base_ = 0, extra_ = 0, split_ = 0;  // block: n = base*P + extra
};

}  // namespace tessera
