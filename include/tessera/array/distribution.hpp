// How a global index space [0, n) is split over ranks: block (equal parts, the
// first n % P ranks one larger) or weighted block (the caller gives each
// rank's size). n may be smaller than the rank count: empty ranks are legal.
#pragma once
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace tessera {

// Division by a divisor fixed at construction, as a multiply by its rounded-up
// reciprocal (Granlund and Montgomery, "Division by Invariant Integers using
// Multiplication", PLDI 1994): a hardware divide costs tens of cycles on every
// aggregated operation. Exact for every dividend below the `limit` given at
// construction when limit * divisor < 2^64; otherwise it divides.
class FastDivisor {
 public:
  FastDivisor() = default;
  FastDivisor(std::uint64_t divisor, std::uint64_t limit);
  std::uint64_t divide(std::uint64_t i) const noexcept { return exact_ ? divide_exact(i) : i / divisor_; }
  // divide() of an exact() divisor: the multiply-high alone, no branch.
  std::uint64_t divide_exact(std::uint64_t i) const noexcept {
    return static_cast<std::uint64_t>((static_cast<unsigned __int128>(i) * magic_) >> 64);
  }
  std::uint64_t divisor() const noexcept { return divisor_; }
  // divide() is one multiply-high, no division (see with_locator()).
  bool exact() const noexcept { return exact_; }

 private:
  std::uint64_t divisor_ = 1, magic_ = 0;
  bool exact_ = false;
};

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
    if (block_) return block_owner(i, large_, small_, extra_, split_);
    auto it = std::upper_bound(offsets_.begin(), offsets_.end(), i);
    return static_cast<int>(it - offsets_.begin()) - 1;
  }
  std::uint64_t local_offset(std::uint64_t i, int owner_rank) const noexcept {
    return i - offsets_[static_cast<std::size_t>(owner_rank)];
  }

  // owner() and local_offset() by value, for a loop to copy into a local:
  // there its fields stay in registers, where a Distribution reached by
  // reference is reloaded after every call or store the compiler cannot see
  // through. Valid while the Distribution lives unchanged.
  class Locator {
   public:
    int owner(std::uint64_t i) const noexcept {
      if (block_) return block_owner(i, large_, small_, extra_, split_);
      return static_cast<int>(std::upper_bound(offsets_, offsets_ + ends_, i) - offsets_) - 1;
    }
    std::uint64_t local_offset(std::uint64_t i, int owner_rank) const noexcept {
      return i - offsets_[static_cast<std::size_t>(owner_rank)];
    }

   private:
    friend class Distribution;
    const std::uint64_t* offsets_ = nullptr;
    std::size_t ends_ = 0;  // entries of offsets_: ranks + 1
    bool block_ = true;
    std::uint64_t extra_ = 0, split_ = 0;
    FastDivisor large_, small_;
  };
  // An even block distribution's Locator (n = base * P, base > 1): the
  // owner is one multiply-high and the offset one multiply-subtract, with
  // no table load and neither half of block_owner() to mask.
  class EvenLocator {
   public:
    int owner(std::uint64_t i) const noexcept { return static_cast<int>(by_base_.divide_exact(i)); }
    std::uint64_t local_offset(std::uint64_t i, int owner_rank) const noexcept {
      return i - static_cast<std::uint64_t>(owner_rank) * by_base_.divisor();
    }

   private:
    friend class Distribution;
    FastDivisor by_base_;  // exact
  };
  // Calls f(locator) with the fastest locator exact for this distribution:
  // an EvenLocator or the general Locator. A loop written once as a generic
  // lambda is then compiled per kind, the choice made once, outside it.
  template <class F>
  decltype(auto) with_locator(F&& f) const {
    if (block_ && extra_ == 0 && small_.exact()) {
      EvenLocator even;
      even.by_base_ = small_;
      return std::forward<F>(f)(even);
    }
    return std::forward<F>(f)(locator());
  }
  Locator locator() const noexcept {
    Locator l;
    l.offsets_ = offsets_.data();
    l.ends_ = offsets_.size();
    l.block_ = block_;
    l.extra_ = extra_;
    l.split_ = split_;
    l.large_ = large_;
    l.small_ = small_;
    return l;
  }
  // Throws RangeError naming the index and the valid range.
  void check(std::uint64_t i) const;

  // A block distribution's owner of i: both halves without a branch (random
  // indices would mispredict it), chosen with a mask, not ?: (which GCC turns
  // into a jump here). owner() calls it directly: through a Locator made
  // per call, gathers ran 0.7-0.8x (argsort's gather, DistArray.gather).
  static int block_owner(std::uint64_t i, const FastDivisor& large, const FastDivisor& small, std::uint64_t extra,
                         std::uint64_t split) noexcept {
    const std::uint64_t low = large.divide(i), high = extra + small.divide(i - split);
    const std::uint64_t high_mask = std::uint64_t{0} - static_cast<std::uint64_t>(i >= split);
    return static_cast<int>(low ^ ((low ^ high) & high_mask));
  }

  bool operator==(const Distribution& o) const { return offsets_ == o.offsets_; }

 private:
  std::vector<std::uint64_t> offsets_{0};
  bool block_ = true;
  std::uint64_t base_ = 0, extra_ = 0, split_ = 0;  // block: n = base*P + extra
  FastDivisor large_, small_;                        // by base + 1 and by base (1 when base is 0)
};

}  // namespace tessera
