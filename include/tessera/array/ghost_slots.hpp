// GhostSlots: the slot of a ghost column (its rank among a rank's ghosts in
// id order) in O(1), for the per-edge loop of a product that keeps ghost
// values in id order. A bitmap with a running count every 64 ids: one word
// load and a popcount. The bitmap spans only the ids from the lowest to the
// highest ghost with the rank's owned range cut out (0.25 byte per id
// spanned): a few planes for a mesh cut in slabs, every id at worst.
#pragma once
#include <bit>
#include <cstdint>
#include <limits>
#include <span>
#include <vector>

namespace tessera {

class GhostSlots {
  struct Word {
    std::uint64_t bits;    // ghosts among these 64 spanned ids
    std::uint64_t before;  // ghosts in earlier words
  };

 public:
  // What a per-edge loop captures: trivially copyable, no ownership.
  struct View {
    const Word* words = nullptr;
    std::uint64_t low = 0;                                          // first spanned id
    std::uint64_t gap_begin = std::numeric_limits<std::uint64_t>::max();  // the owned range cut out
    std::uint64_t gap = 0;
    // `v` must be a ghost.
    std::size_t slot(std::uint64_t v) const noexcept {
      const std::uint64_t i = v - low - (v >= gap_begin ? gap : 0);
      const Word& w = words[i >> 6];
      return static_cast<std::size_t>(w.before +
                                      static_cast<std::uint64_t>(std::popcount(w.bits & ((1ull << (i & 63)) - 1))));
    }
  };

  GhostSlots() = default;
  // `ghosts` sorted, distinct, none in [owned_begin, owned_end).
  GhostSlots(std::span<const std::uint64_t> ghosts, std::uint64_t owned_begin, std::uint64_t owned_end)
      : low_(ghosts.empty() ? 0 : ghosts.front()) {
    if (ghosts.empty()) return;
    // Cut the owned range out only when ghosts lie on both sides of it.
    if (ghosts.front() < owned_begin && ghosts.back() >= owned_end) {
      gap_begin_ = owned_begin;
      gap_ = owned_end - owned_begin;
    }
    words_.assign(static_cast<std::size_t>(spanned(ghosts, owned_begin, owned_end) + 63) / 64, Word{0, 0});
    for (auto v : ghosts) {
      const std::uint64_t i = index(v);
      words_[i >> 6].bits |= 1ull << (i & 63);
    }
    std::uint64_t before = 0;
    for (auto& w : words_) w.before = before, before += static_cast<std::uint64_t>(std::popcount(w.bits));
  }

  View view() const noexcept { return {words_.data(), low_, gap_begin_, gap_}; }
  std::size_t slot(std::uint64_t v) const noexcept { return view().slot(v); }
  // Whether `v` (any id, owned ones too) is a ghost.
  bool contains(std::uint64_t v) const noexcept {
    if (words_.empty() || v < low_ || (v >= gap_begin_ && v - gap_begin_ < gap_)) return false;
    const std::uint64_t i = index(v);
    return (i >> 6) < words_.size() && (words_[i >> 6].bits >> (i & 63) & 1);
  }
  std::size_t memory_bytes() const noexcept { return words_.capacity() * sizeof(Word); }
  // The bytes GhostSlots over these ghosts would hold, before building it.
  static std::uint64_t bytes_for(std::span<const std::uint64_t> ghosts, std::uint64_t owned_begin,
                                 std::uint64_t owned_end) noexcept {
    return ghosts.empty() ? 0 : (spanned(ghosts, owned_begin, owned_end) + 63) / 64 * sizeof(Word);
  }

 private:
  static std::uint64_t spanned(std::span<const std::uint64_t> ghosts, std::uint64_t owned_begin,
                               std::uint64_t owned_end) noexcept {
    const std::uint64_t all = ghosts.back() - ghosts.front() + 1;
    return ghosts.front() < owned_begin && ghosts.back() >= owned_end ? all - (owned_end - owned_begin) : all;
  }
  std::uint64_t index(std::uint64_t v) const noexcept { return v - low_ - (v >= gap_begin_ ? gap_ : 0); }

  std::vector<Word> words_;
  std::uint64_t low_ = 0;
  std::uint64_t gap_begin_ = std::numeric_limits<std::uint64_t>::max();
  std::uint64_t gap_ = 0;
};

}  // namespace tessera
