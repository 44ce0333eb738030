// Spectral bisection from a vertex vector (Fiedler 1975: split the vertices
// by the Fiedler vector's values; Pothen, Simon and Liou 1990: at the
// median). No Trilinos: built with or without it.
#include <algorithm>
#include <cmath>
#include <limits>

#include "tessera/array/ghost_set.hpp"
#include "tessera/linalg/row_matrix.hpp"
#include "tessera/runtime/collective.hpp"
#include "tessera/runtime/error.hpp"
#include "tessera/trilinos/spectral.hpp"

namespace tessera::trilinos {

namespace {

std::uint64_t count_above(MPI_Comm comm, std::span<const double> x, double t) {
  std::uint64_t c = 0;
  for (double v : x) c += v > t;
  return all_reduce<std::uint64_t>(comm, c, MPI_SUM);
}

}  // namespace

Bisection bisect(const graph::EdgeList& g, std::span<const double> x, SplitRule rule) {
  Runtime& rt = g.runtime();
  MPI_Comm comm = rt.comm();
  if (g.directed()) throw ConfigError("spectral bisection needs an undirected graph");
  agree(comm, [&] {
    if (x.size() != g.local_vertices())
      throw MismatchError("bisection: " + std::to_string(x.size()) + " values for this rank's " +
                          std::to_string(g.local_vertices()) + " vertices");
  });
  for (double v : x)
    if (!std::isfinite(v)) throw RangeError("bisection: the vector has a value that is not finite");
  Bisection b;
  const std::uint64_t n = g.vertices();
  if (rule == SplitRule::median && n > 0) {
    // The smallest t with at most n/2 values above it, by bisection on the
    // value range (each step one reduction; no value is gathered).
    double lo = std::numeric_limits<double>::infinity(), hi = -lo;
    for (double v : x) lo = std::min(lo, v), hi = std::max(hi, v);
    lo = all_reduce(comm, lo, MPI_MIN);
    hi = all_reduce(comm, hi, MPI_MAX);
    const std::uint64_t half = n / 2;
    if (count_above(comm, x, lo) <= half) {
      b.threshold = lo;
    } else {
      // Invariant: above(lo) > half >= above(hi).
      for (int step = 0; step < 200 && lo < hi; ++step) {
        const double mid = lo + (hi - lo) / 2;
        if (mid <= lo || mid >= hi) break;
        if (count_above(comm, x, mid) > half) lo = mid;
        else hi = mid;
      }
      b.threshold = hi;
    }
  }
  b.part.resize(x.size());
  std::uint64_t ones = 0;
  for (std::size_t i = 0; i < x.size(); ++i) ones += b.part[i] = x[i] > b.threshold;
  b.sizes[1] = all_reduce<std::uint64_t>(comm, ones, MPI_SUM);
  b.sizes[0] = n - b.sizes[1];
  // The ghosts' parts through an import (O(ghosts)), then every edge once
  // from its smaller end (both directions are stored).
  const std::uint64_t begin = g.local_vertex_begin();
  GhostSet ghosts = g.with_dst([&](auto dst) { return GhostSet::remote_of(dst, begin, g.local_vertex_end(), n); });
  linalg::Import import(g.vertex_map(), ghosts);
  std::vector<double> owned(b.part.begin(), b.part.end()), ghost_parts(ghosts.size());
  import.gather(owned, ghost_parts);
  auto offsets = g.row_offsets();
  std::uint64_t cut = 0;
  g.with_dst([&](auto dst) {
    for (std::size_t i = 0; i < x.size(); ++i) {
      const std::uint64_t u = begin + i;
      for (std::size_t e = offsets[i]; e < offsets[i + 1]; ++e) {
        const std::uint64_t v = dst[e];
        if (v <= u) continue;
        const bool pv = g.vertex_map().is_local(v) ? b.part[v - begin] != 0 : ghost_parts[ghosts.position(v)] != 0;
        cut += pv != (b.part[i] != 0);
      }
    }
  });
  b.cut_edges = all_reduce<std::uint64_t>(comm, cut, MPI_SUM);
  return b;
}

}  // namespace tessera::trilinos
