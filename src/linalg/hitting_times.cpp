#include "tessera/linalg/hitting_times.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>
#include <utility>

#include "tessera/comm/aggregators.hpp"
#include "tessera/linalg/laplacian.hpp"
#include "tessera/runtime/collective.hpp"

namespace tessera::linalg {

std::vector<std::uint64_t> checked_targets(std::span<const std::uint64_t> targets, std::uint64_t vertices) {
  if (targets.empty()) throw ConfigError("hitting times need at least one target vertex");
  std::vector<std::uint64_t> t(targets.begin(), targets.end());
  for (auto v : t)
    if (v >= vertices)
      throw RangeError("target vertex " + std::to_string(v) + " is outside [0, " + std::to_string(vertices) + ")");
  std::sort(t.begin(), t.end());
  t.erase(std::unique(t.begin(), t.end()), t.end());
  return t;
}

HittingTimes hitting_times(const graph::EdgeList& g, const RowMatrix& a, std::span<const std::uint64_t> targets,
                           const HittingOptions& options) {
  auto t0 = std::chrono::steady_clock::now();
  Runtime& rt = g.runtime();
  if (g.directed())
    throw ConfigError("hitting times need an undirected graph: symmetrize it first (--undirected)");
  if (!(a.row_distribution() == g.vertex_ranges()))
    throw MismatchError("the matrix rows are not distributed like the graph's vertices");
  const std::vector<std::uint64_t> t = checked_targets(targets, g.vertices());

  // A vertex can reach a target iff its component holds one (every vertex
  // of a graph the caller knows to be connected).
  const std::uint64_t base = g.local_vertex_begin();
  const std::size_t local = g.local_vertices();
  std::vector<std::uint8_t> grounded(local, 0);
  std::vector<std::uint8_t> unreachable(local, 0);
  std::uint64_t lost = 0;
  if (options.connected) {
    for (std::size_t i = 0; i < local; ++i) grounded[i] = std::binary_search(t.begin(), t.end(), base + i);
  } else {
    auto comps = graph::fastsv(g, options.components);
    std::vector<std::uint64_t> target_labels(t.size());
    {
      SrcAggregator<std::uint64_t> read(comps.labels);
      for (std::size_t k = 0; k < t.size(); ++k) read.get(t[k], target_labels[k]);
    }
    std::sort(target_labels.begin(), target_labels.end());
    auto labels = comps.labels.local();
    for (std::size_t i = 0; i < local; ++i) {
      if (!std::binary_search(target_labels.begin(), target_labels.end(), labels[i])) {
        unreachable[i] = grounded[i] = 1;
        ++lost;
      } else if (std::binary_search(t.begin(), t.end(), base + i)) {
        grounded[i] = 1;
      }
    }
  }

  Laplacian lap(a, std::move(grounded), options.laplacian_buffers);
  const Vector& b = lap.degrees();  // d on U, 0 on the grounded vertices: no vector of its own
  HittingTimes out{Vector(rt, g.vertex_ranges()), all_reduce(rt.comm(), lost, MPI_SUM), t.size(), {}, 0};
  out.times.fill(0.0);
  out.setup_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  out.solve = options.solver ? options.solver(lap, lap.grounded_flags(), b, out.times)
                             : conjugate_gradient(lap, b, out.times, options.cg);
  auto h = out.times.local();
  for (std::size_t i = 0; i < h.size(); ++i)
    if (unreachable[i]) h[i] = std::numeric_limits<double>::quiet_NaN();
  return out;
}

}  // namespace tessera::linalg
