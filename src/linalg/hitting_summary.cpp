#include "tessera/linalg/hitting_summary.hpp"

#include <cmath>

namespace tessera::linalg {

HittingSummary summarize(const Vector& times) {
  MPI_Comm comm = times.runtime().comm();
  const std::uint64_t first = times.distribution().begin(times.runtime().rank());
  auto t = times.local();
  double lo = 0, hi = 0, sum = 0;
  std::uint64_t lo_at = kNoIndex, hi_at = kNoIndex, count = 0;
  for (std::size_t i = 0; i < t.size(); ++i) {
    if (std::isnan(t[i])) continue;
    // Strict comparisons keep the smallest index of equal values.
    if (lo_at == kNoIndex || t[i] < lo) lo = t[i], lo_at = first + i;
    if (hi_at == kNoIndex || t[i] > hi) hi = t[i], hi_at = first + i;
    sum += t[i];
    ++count;
  }
  HittingSummary s;
  auto smallest = all_argmin(comm, lo, lo_at);
  auto largest = all_argmax(comm, hi, hi_at);
  s.reachable = all_reduce(comm, count, MPI_SUM);
  s.unreachable = times.size() - s.reachable;
  sum = all_reduce(comm, sum, MPI_SUM);
  if (s.reachable > 0) {
    s.min = smallest.value;
    s.max = largest.value;
    s.mean = sum / static_cast<double>(s.reachable);
    s.farthest = largest.index;
  }
  return s;
}

std::uint64_t highest_degree_vertex(const graph::EdgeList& g) {
  std::uint64_t best = 0, at = kNoIndex;
  g.for_each_row([&](std::uint64_t v, std::size_t begin, std::size_t end) {
    std::uint64_t degree = end - begin;
    if (degree > best) best = degree, at = v;
  });
  return all_argmax(g.runtime().comm(), best, at).index;
}

}  // namespace tessera::linalg
