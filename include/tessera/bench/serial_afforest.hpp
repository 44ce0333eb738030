// The components benchmark's second baseline: serial Afforest as GAPBS's
// `cc` runs it on one thread (Sutton, Ben-Nun and Barak, IPDPS 2018), over a
// CSR of both directions of every edge. Labels are the smallest vertex id of
// each component (min-id roots), like bench::UnionFind's.
#pragma once
#include <cstdint>
#include <numeric>
#include <unordered_map>
#include <vector>

namespace tessera::bench {

struct Csr {
  std::vector<std::uint64_t> offsets;  // vertices + 1
  std::vector<std::uint64_t> targets;  // sorted within a row
};

// Both directions of every (u, v) in `edges` (self loops once).
template <class Edges>
Csr symmetric_csr(std::uint64_t vertices, const Edges& edges) {
  Csr g;
  g.offsets.assign(vertices + 1, 0);
  for (const auto& e : edges) {
    ++g.offsets[e.src + 1];
    if (e.src != e.dst) ++g.offsets[e.dst + 1];
  }
  std::partial_sum(g.offsets.begin(), g.offsets.end(), g.offsets.begin());
  g.targets.resize(g.offsets.back());
  std::vector<std::uint64_t> at(g.offsets.begin(), g.offsets.end() - 1);
  for (const auto& e : edges) {
    g.targets[at[e.src]++] = e.dst;
    if (e.src != e.dst) g.targets[at[e.dst]++] = e.src;
  }
  return g;
}

// GAPBS Afforest with one thread: two neighbour rounds, compress, the most
// frequent of 1024 sampled labels, then every other vertex's remaining
// neighbours; labels compressed at the end.
inline std::vector<std::uint64_t> serial_afforest(const Csr& g) {
  const std::uint64_t n = g.offsets.size() - 1;
  std::vector<std::uint64_t> comp(n);
  std::iota(comp.begin(), comp.end(), std::uint64_t{0});
  auto link = [&](std::uint64_t u, std::uint64_t v) {
    std::uint64_t a = comp[u], b = comp[v];
    while (a != b) {
      std::uint64_t high = a > b ? a : b, low = a + b - high;
      if (comp[high] == high) {
        comp[high] = low;
        break;
      }
      if (comp[high] == low) break;
      a = comp[comp[high]];
      b = comp[low];
    }
  };
  auto compress = [&] {
    for (std::uint64_t v = 0; v < n; ++v)
      while (comp[v] != comp[comp[v]]) comp[v] = comp[comp[v]];
  };
  constexpr std::uint64_t kRounds = 2;
  for (std::uint64_t r = 0; r < kRounds; ++r) {
    for (std::uint64_t u = 0; u < n; ++u)
      if (g.offsets[u] + r < g.offsets[u + 1]) link(u, g.targets[g.offsets[u] + r]);
    compress();
  }
  std::uint64_t c = 0;
  if (n > 0) {
    std::unordered_map<std::uint64_t, std::uint64_t> counts;
    std::uint64_t x = 0x9e3779b97f4a7c15ull, best = 0;
    for (int s = 0; s < 1024; ++s) {
      x ^= x << 13, x ^= x >> 7, x ^= x << 17;
      ++counts[comp[x % n]];
    }
    for (auto [label, count] : counts)
      if (count > best) best = count, c = label;
  }
  for (std::uint64_t u = 0; u < n; ++u) {
    if (comp[u] == c) continue;
    for (std::uint64_t k = g.offsets[u] + kRounds; k < g.offsets[u + 1]; ++k) link(u, g.targets[k]);
  }
  compress();
  return comp;
}

}  // namespace tessera::bench
