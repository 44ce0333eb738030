// EdgeList: a distributed graph held as parallel source / destination (and
// optional weight) DistArrays, in Heap or Shared storage.
//
// Layout, relied on by every algorithm above it:
//  * vertices are split into contiguous ranges, one per rank, chosen so ranks
//    hold about equal numbers of edges (a weighted block Distribution);
//  * edge (u, v) lives on the rank that owns vertex u, so a vertex and its
//    out-edges are on the same rank;
//  * within a rank, edges are sorted by (source, destination, weight), and
//    row offsets (CSR style, one per local vertex) say where each vertex's
//    out-edges start, so a vertex's neighbours are a span of the destination
//    array (out_neighbours) and nothing scans the source array for them.
// An undirected graph stores both directions of every edge.
#pragma once
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "tessera/array/dist_array.hpp"

namespace tessera::graph {

// Edges held by one rank in any order, before distribution. `weight` is
// either empty (unweighted) or as long as `src`.
struct LocalEdges {
  std::vector<std::uint64_t> src, dst;
  std::vector<double> weight;

  std::size_t size() const noexcept { return src.size(); }
  bool weighted() const noexcept { return !weight.empty(); }
  void add(std::uint64_t u, std::uint64_t v) {
    src.push_back(u);
    dst.push_back(v);
  }
  void add(std::uint64_t u, std::uint64_t v, double w) {
    add(u, v);
    weight.push_back(w);
  }
};

// What to clean while building.
struct BuildOptions {
  bool symmetrize = false;          // add (v, u) for every (u, v); the result is undirected
  bool drop_self_loops = false;
  bool drop_duplicates = false;     // keeps the smallest weight of equal (u, v)
  StorageOptions storage;           // Shared: arrays named <name>-src, <name>-dst, <name>-weight
};

class EdgeList {
 public:
  // Collective. Distributes `edges` (held anywhere) by source vertex, sorts
  // them and applies `options`. Every id must be < vertices (RangeError
  // names the first bad edge). `directed` is ignored when symmetrizing.
  static EdgeList build(Runtime& rt, std::uint64_t vertices, bool directed, LocalEdges edges,
                        const BuildOptions& options = {});
  // Collective. Wraps arrays that already satisfy the layout above (used by
  // loaders that map existing files). Checks the layout.
  static EdgeList adopt(std::uint64_t vertices, bool directed, Distribution vertex_ranges, DistArray<std::uint64_t> src,
                        DistArray<std::uint64_t> dst, std::optional<DistArray<double>> weight);

  EdgeList(EdgeList&&) noexcept = default;
  EdgeList& operator=(EdgeList&&) noexcept = default;

  Runtime& runtime() const noexcept { return vertex_map_.runtime(); }
  std::uint64_t vertices() const noexcept { return vertices_; }
  std::uint64_t edges() const noexcept { return src_.size(); }
  bool directed() const noexcept { return directed_; }
  bool weighted() const noexcept { return weight_.has_value(); }

  // Vertex ranges: vertex arrays of this graph use this distribution; the
  // vertex map is the same ranges bound to the graph's runtime.
  const Distribution& vertex_ranges() const noexcept { return vertex_map_.distribution(); }
  const Map& vertex_map() const noexcept { return vertex_map_; }
  const Distribution& edge_ranges() const noexcept { return src_.distribution(); }
  std::uint64_t local_vertex_begin() const noexcept { return vertex_map_.local_begin(); }
  std::uint64_t local_vertex_end() const noexcept { return vertex_map_.local_end(); }
  std::uint64_t local_vertices() const noexcept { return vertex_map_.local_size(); }

  const DistArray<std::uint64_t>& src() const noexcept { return src_; }
  const DistArray<std::uint64_t>& dst() const noexcept { return dst_; }
  const DistArray<double>* weight() const noexcept { return weight_ ? &*weight_ : nullptr; }
  std::span<const std::uint64_t> local_src() const noexcept { return src_.local(); }
  std::span<const std::uint64_t> local_dst() const noexcept { return dst_.local(); }
  std::span<const double> local_weight() const noexcept {
    return weight_ ? weight_->local() : std::span<const double>{};
  }

  // Where each local vertex's out-edges start in the local edge arrays: CSR
  // row offsets, local_vertices() + 1 of them (8 bytes per local vertex),
  // built with the graph. Local vertex i = local_vertex_begin() + i.
  std::span<const std::uint64_t> row_offsets() const noexcept { return row_offsets_; }
  // Out-neighbours of local vertex v, increasing (GAPBS's out_neigh), and
  // their weights (empty when unweighted). RangeError for a vertex this rank
  // does not own.
  std::span<const std::uint64_t> out_neighbours(std::uint64_t v) const {
    auto [first, last] = out_edges(v);
    return local_dst().subspan(first, last - first);
  }
  std::span<const double> out_weights(std::uint64_t v) const {
    if (!weighted()) return {};
    auto [first, last] = out_edges(v);
    return local_weight().subspan(first, last - first);
  }
  std::uint64_t out_degree(std::uint64_t v) const {
    auto [first, last] = out_edges(v);
    return last - first;
  }
  // Local edge positions [first, last) of local vertex v.
  std::pair<std::size_t, std::size_t> out_edges(std::uint64_t v) const {
    if (!vertex_map_.is_local(v)) throw_not_local(v);
    std::size_t i = static_cast<std::size_t>(v - local_vertex_begin());
    return {static_cast<std::size_t>(row_offsets_[i]), static_cast<std::size_t>(row_offsets_[i + 1])};
  }
  // Calls f(v, first, last) for every local vertex with at least one out-edge.
  template <class F>
  void for_each_row(F&& f) const {
    const std::uint64_t base = local_vertex_begin();
    for (std::size_t i = 0; i + 1 < row_offsets_.size(); ++i)
      if (row_offsets_[i] < row_offsets_[i + 1])
        f(base + i, static_cast<std::size_t>(row_offsets_[i]), static_cast<std::size_t>(row_offsets_[i + 1]));
  }

  // This rank's edges as plain vectors (a copy).
  LocalEdges local_copy() const;

  // New graphs (collective); this one is unchanged.
  // keep_ranges: the result keeps these vertex ranges (so vertex arrays of
  // this graph fit it) instead of rebalancing its edges.
  EdgeList symmetrized(const StorageOptions& storage = {}, bool keep_ranges = false) const;
  // Every edge (u, v) as (v, u): out_neighbours of the result are the
  // in-neighbours here (pull kernels, bottom-up search). Weights follow.
  EdgeList transposed(const StorageOptions& storage = {}, bool keep_ranges = false) const;
  EdgeList without_self_loops(const StorageOptions& storage = {}) const;
  EdgeList without_duplicates(const StorageOptions& storage = {}) const;
  // Recomputes the vertex ranges so ranks hold equal numbers of edges again.
  EdgeList rebalanced(const StorageOptions& storage = {}) const;

  // Out-degree (number of stored edges) of each vertex; local, no messages.
  DistArray<std::uint64_t> out_degrees() const;
  // In-degree, through an aggregated add.
  DistArray<std::uint64_t> in_degrees() const;
  // The ranks' largest / mean local edge counts (1.0 is perfect balance).
  double edge_imbalance() const;

 private:
  EdgeList(std::uint64_t vertices, bool directed, Distribution vertex_ranges, DistArray<std::uint64_t> src,
           DistArray<std::uint64_t> dst, std::optional<DistArray<double>> weight);
  EdgeList rebuilt(const BuildOptions& options, bool keep_ranges) const;
  [[noreturn]] void throw_not_local(std::uint64_t v) const;

  std::uint64_t vertices_ = 0;
  bool directed_ = true;
  Map vertex_map_;
  DistArray<std::uint64_t> src_, dst_;
  std::optional<DistArray<double>> weight_;
  std::vector<std::uint64_t> row_offsets_;
};

// Storage options for one of a graph's arrays: a Shared name gets `-suffix`.
StorageOptions array_storage(const StorageOptions& graph, const std::string& suffix);

}  // namespace tessera::graph
