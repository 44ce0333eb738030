// LocalForest: a union-find over one rank's vertices, shared by Afforest and
// local-first label propagation.
#pragma once
#include <cstdint>
#include <span>
#include <utility>

namespace tessera::graph {

// A union-find over this rank's vertices, held in a span of parents (global
// ids of local vertices). Roots are the smallest id of their tree, so a
// parent is never above its child (what the one-pass compress relies on).
class LocalForest {
 public:
  LocalForest(std::span<std::uint64_t> parent, std::uint64_t base) : parent_(parent), base_(base) {}

  std::uint64_t find(std::uint64_t x) {
    // Path splitting: every vertex on the path skips to its grandparent.
    for (;;) {
      std::uint64_t p = parent_[x - base_];
      if (p == x) return x;
      std::uint64_t gp = parent_[p - base_];
      parent_[x - base_] = gp;
      x = p;
    }
  }
  void link(std::uint64_t u, std::uint64_t v) {
    std::uint64_t a = find(u), b = find(v);
    if (a == b) return;
    if (a < b) std::swap(a, b);
    parent_[a - base_] = b;
  }
  // Every vertex points at its root (parents come before children).
  void compress() {
    for (auto& p : parent_) p = parent_[p - base_];
  }

 private:
  std::span<std::uint64_t> parent_;
  std::uint64_t base_;
};

}  // namespace tessera::graph
