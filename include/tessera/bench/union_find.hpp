// The serial connected-components reference: union-find with path halving on
// one process. The components benchmark times it as its baseline and checks
// the distributed labels against it; the graph tests use the same one.
#pragma once
#include <algorithm>
#include <cstdint>
#include <numeric>
#include <vector>

namespace tessera::bench {

class UnionFind {
 public:
  explicit UnionFind(std::uint64_t vertices) : parent_(vertices) {
    std::iota(parent_.begin(), parent_.end(), std::uint64_t{0});
  }
  void unite(std::uint64_t u, std::uint64_t v) {
    auto a = find(u), b = find(v);
    if (a != b) parent_[std::max(a, b)] = std::min(a, b);  // the smaller id stays root
  }
  // Each vertex's label: the smallest vertex id of its component (the
  // convention of graph::fastsv and graph::label_propagation).
  std::vector<std::uint64_t> labels() && {
    for (std::uint64_t v = 0; v < parent_.size(); ++v) parent_[v] = find(v);
    return std::move(parent_);
  }

 private:
  std::uint64_t find(std::uint64_t x) {
    while (parent_[x] != x) x = parent_[x] = parent_[parent_[x]];
    return x;
  }
  std::vector<std::uint64_t> parent_;
};

}  // namespace tessera::bench
