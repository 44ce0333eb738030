// LocalForest: a union-find over one rank's vertices, shared by Afforest and
// local-first label propagation. SparseForest: a union-find over any 64-bit
// ids (the local roots that cut edges join, from every rank).
#pragma once
#include <bit>
#include <cstdint>
#include <span>
#include <stdexcept>
#include <utility>
#include <vector>

#include "tessera/runtime/vector_clones.hpp"

namespace tessera::graph {

// A union-find over this rank's vertices, held in a span of parents (ids
// of local vertices, offset by `base`: global ids, or local indices with
// base 0 in an Id narrower than a global id, which halves the random
// reads' footprint). Roots are the smallest id of their tree, so a parent
// is never above its child (what the one-pass compress relies on).
template <class Id = std::uint64_t>
class LocalForest {
 public:
  LocalForest(std::span<Id> parent, Id base) : parent_(parent), base_(base) {}

  // Always inlined: they are the kernels' inner loop, and a caller written
  // once for every rows view (afforest.cpp) grows past GCC's inlining limits.
  TESSERA_INLINE Id find(Id x) {
    // Path splitting: every vertex on the path skips to its grandparent.
    for (;;) {
      Id p = parent_[x - base_];
      if (p == x) return x;
      Id gp = parent_[p - base_];
      parent_[x - base_] = gp;
      x = p;
    }
  }
  TESSERA_INLINE void link(Id u, Id v) {
    Id a = find(u), b = find(v);
    if (a == b) return;
    if (a < b) std::swap(a, b);
    parent_[a - base_] = b;
  }
  // Every vertex points at its root (parents come before children).
  void compress() {
    for (auto& p : parent_) p = parent_[p - base_];
  }

 private:
  std::span<Id> parent_;
  Id base_;
};

// A union-find over ids met one pair at a time (Afforest's contracted graph:
// local roots of any rank), each root the smallest id of its tree. The
// nodes are the slots of an open-addressing table (12 bytes per slot, at
// most two thirds full), sized for `expected_ids` and doubled when full, so
// its memory follows the distinct ids met, not the pairs.
class SparseForest {
 public:
  explicit SparseForest(std::size_t expected_ids) { allocate(std::bit_ceil(expected_ids + expected_ids / 2 + 16)); }

  // True when a and b were in different trees (the pair is a forest edge).
  bool unite(std::uint64_t a, std::uint64_t b) {
    if (3 * (used_ + 2) > 2 * slots_) grow();
    std::uint32_t x = find(slot(a)), y = find(slot(b));
    if (x == y) return false;
    if (key_[x] < key_[y]) std::swap(x, y);
    parent_[x] = y;
    return true;
  }
  // Calls f(id, smallest id joined to it) for every id met.
  template <class F>
  void for_each(F&& f) {
    for (std::size_t s = 0; s < slots_; ++s)
      if (key_[s] != kEmpty) f(key_[s], key_[find(static_cast<std::uint32_t>(s))]);
  }
  std::size_t memory_bytes() const noexcept { return slots_ * (sizeof(std::uint64_t) + sizeof(std::uint32_t)); }

 private:
  static constexpr std::uint64_t kEmpty = ~std::uint64_t{0};  // never a vertex id

  void allocate(std::size_t slots) {
    if (slots > std::size_t{1} << 32) throw std::length_error("SparseForest: more than 2^32 ids");
    slots_ = slots;
    shift_ = 64 - std::countr_zero(slots_);
    key_.assign(slots_, kEmpty);
    parent_.assign(slots_, 0);
    used_ = 0;
  }
  // Twice the slots: every id moves, and its parent with it.
  void grow() {
    std::vector<std::uint64_t> old_key;
    std::vector<std::uint32_t> old_parent, moved(slots_);
    old_key.swap(key_);
    old_parent.swap(parent_);
    allocate(2 * old_key.size());
    for (std::size_t s = 0; s < old_key.size(); ++s)
      if (old_key[s] != kEmpty) moved[s] = slot(old_key[s]);
    for (std::size_t s = 0; s < old_key.size(); ++s)
      if (old_key[s] != kEmpty) parent_[moved[s]] = moved[old_parent[s]];
  }
  std::uint32_t slot(std::uint64_t id) {
    // Fibonacci hashing, linear probing.
    for (std::size_t s = static_cast<std::size_t>((id * 0x9e3779b97f4a7c15ull) >> shift_);; s = (s + 1) & (slots_ - 1)) {
      if (key_[s] == id) return static_cast<std::uint32_t>(s);
      if (key_[s] == kEmpty) {
        key_[s] = id;
        parent_[s] = static_cast<std::uint32_t>(s);
        ++used_;
        return static_cast<std::uint32_t>(s);
      }
    }
  }
  std::uint32_t find(std::uint32_t i) {
    while (parent_[i] != i) i = parent_[i] = parent_[parent_[i]];  // path halving
    return i;
  }

  std::size_t slots_ = 0, used_ = 0;
  int shift_ = 0;
  std::vector<std::uint64_t> key_;
  std::vector<std::uint32_t> parent_;
};

}  // namespace tessera::graph
