// Edge list: a distributed graph held the way GAPBS holds it, as CSR rows
// (Shared or Heap storage):
//  * vertices are split into contiguous ranges, one per rank, chosen so ranks
//    hold about equal numbers of arcs (a weighted block Distribution);
//  * the arcs out of vertex u live on the rank that owns u, in one
//    destination array, sorted by (source, destination, weight);
//  * row offsets (local_vertices() + 1 per rank, themselves a DistArray so
//    another process can attach them) say where each vertex's row starts, so
//    no source array is stored: a source is the row an arc sits in;
//  * vertex ids are as wide as the graph needs: 4 bytes while every id fits
//    in 32 bits, 8 beyond (IdWidth); offsets are always 8 bytes.
// An undirected graph stores both arcs of every edge (a self loop once), so
// at 4-byte ids it costs GAPBS's 8 bytes per undirected edge.
#pragma once
#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <variant>
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

// A batch of edges from an EdgeSource: parallel spans; `weight` empty
// (unweighted) or as long as `src`.
struct EdgeBatch {
  std::span<const std::uint64_t> src, dst;
  std::span<const double> weight;
};
using EdgeSink = std::function<void(const EdgeBatch&)>;
// This rank's edges, produced in batches each time it is called. A build
// calls it twice (once to count the arcs out of every vertex, once to write
// them into the final arrays), so it must give the same edges both times;
// it never needs to hold them all. It may throw (a parse error): the build
// then fails on every rank with that error.
using EdgeSource = std::function<void(const EdgeSink&)>;

// Bytes of a vertex id in a graph's destination array.
enum class IdWidth : std::uint8_t { narrow = 4, wide = 8 };
// The width a graph of `vertices` vertices needs: narrow while every id fits
// in 32 bits. TESSERA_ID_BITS=64 in the environment forces wide (so tests run
// both widths on small graphs); ConfigError for any other value but 32.
IdWidth id_width_for(std::uint64_t vertices);
std::string id_width_name(IdWidth w);  // "uint32" or "uint64"

// The destination array at either width.
using IdArray = std::variant<DistArray<std::uint32_t>, DistArray<std::uint64_t>>;

// What a build found in its source (BuildOptions::counts), over all ranks:
// arcs (u, u) the source gave, and arcs that repeated a (u, v) already in
// their row after symmetrizing (self loops among them apart), whether the
// build dropped them or not.
struct BuildCounts {
  std::uint64_t self_loops = 0;
  std::uint64_t duplicate_arcs = 0;   // repeats of an arc (u, v), u != v
  std::uint64_t duplicate_loops = 0;  // repeats of a kept self loop (u, u)
};

// What to clean while building.
struct BuildOptions {
  bool symmetrize = false;          // add (v, u) for every (u, v); the result is undirected
  bool drop_self_loops = false;
  bool drop_duplicates = false;     // keeps the smallest weight of equal (u, v)
  // Symmetrizing drops duplicates unless this is set: every arc is kept (an
  // undirected multigraph: each line an edge, its reverse added).
  bool keep_duplicates = false;
  // When set, filled on every rank with what the build found (BuildCounts).
  BuildCounts* counts = nullptr;
  std::optional<IdWidth> id_width;  // default: id_width_for(vertices)
  // The result's vertex ranges (so vertex arrays of another graph fit it);
  // default: ranges that give ranks equal numbers of arcs.
  std::optional<Distribution> vertex_ranges;
  StorageOptions storage;           // Shared: arrays named <name>-offsets, <name>-dst, <name>-weight
  // Called on every rank as each phase of a build from an EdgeSource starts
  // (counting, placing the arcs: one pass a window on the disk tier,
  // sorting): a build of billions of arcs takes many minutes.
  std::function<void(const std::string&)> on_phase;
};

class EdgeList {
 public:
  // Collective. Distributes `edges` (held anywhere) by source vertex, sorts
  // them and applies `options`. Every id must be < vertices (RangeError
  // names the first bad edge). `directed` is ignored when symmetrizing.
  static EdgeList build(Runtime& rt, std::uint64_t vertices, bool directed, LocalEdges edges,
                        const BuildOptions& options = {});
  // Collective. The same from edges produced on the fly (a generator, a
  // file parsed in place): the build holds the final arrays, O(vertices) of
  // counts and cursors and its aggregation buffers, never an edge list.
  static EdgeList build(Runtime& rt, std::uint64_t vertices, bool directed, const EdgeSource& source,
                        const BuildOptions& options = {});
  // Collective. Wraps arrays that already satisfy the layout above (used by
  // loaders that map existing files). `offsets` holds local_vertices + 1
  // entries on each rank, starting at 0 and ending at the rank's arc count.
  // Checks the layout (MismatchError / RangeError name the first bad arc).
  // With `symmetric`, also sets it to whether the arcs are their own
  // reverses (arcs_are_symmetric), checked in the same pass over the arcs.
  static EdgeList adopt(std::uint64_t vertices, bool directed, Distribution vertex_ranges, DistArray<std::uint64_t> offsets,
                        IdArray dst, std::optional<DistArray<double>> weight, bool* symmetric = nullptr);

  EdgeList(EdgeList&&) noexcept = default;
  EdgeList& operator=(EdgeList&&) noexcept = default;

  Runtime& runtime() const noexcept { return vertex_map_.runtime(); }
  std::uint64_t vertices() const noexcept { return vertices_; }
  // Stored arcs: a directed graph's edges, twice an undirected graph's
  // edges less its self loops.
  std::uint64_t arcs() const noexcept { return arcs_; }
  // Edges as the field counts them (GAPBS, networkx): a directed graph's
  // arcs; an undirected graph's undirected edges, a self loop counting once.
  std::uint64_t edges() const noexcept { return directed_ ? arcs_ : (arcs_ + self_loops_) / 2; }
  std::uint64_t self_loops() const noexcept { return self_loops_; }
  // What a reader did to make a file's graph simple (ReadOptions::multigraph):
  // the file's entries that repeated an edge already given, and its self
  // loops (a repeated loop counts as a loop), dropped or (a multigraph)
  // kept. All zero for a graph not read from a text or GAPBS file.
  struct Cleaning {
    std::uint64_t duplicates = 0, self_loops = 0;
    bool kept = false;
  };
  const Cleaning& cleaning() const noexcept { return cleaning_; }
  void set_cleaning(const Cleaning& c) noexcept { cleaning_ = c; }
  bool directed() const noexcept { return directed_; }
  bool weighted() const noexcept { return weight_.has_value(); }
  IdWidth id_width() const noexcept { return dst_.index() == 0 ? IdWidth::narrow : IdWidth::wide; }
  std::size_t id_bytes() const noexcept { return static_cast<std::size_t>(id_width()); }
  // Bytes of the arc arrays over all ranks (destinations and weights: what
  // grows with the edges), and of the row offsets (what grows with the
  // vertices and ranks).
  std::uint64_t edge_array_bytes() const noexcept { return arcs_ * (id_bytes() + (weighted() ? sizeof(double) : 0)); }
  std::uint64_t offset_array_bytes() const noexcept { return offsets_.size() * sizeof(std::uint64_t); }
  // edge_array_bytes() per edge as edges() counts them (GAPBS: 8 for an
  // undirected graph at 32-bit ids); 0 without edges.
  double bytes_per_edge() const noexcept {
    return edges() ? static_cast<double>(edge_array_bytes()) / static_cast<double>(edges()) : 0.0;
  }

  // Vertex ranges: vertex arrays of this graph use this distribution; the
  // vertex map is the same ranges bound to the graph's runtime.
  const Distribution& vertex_ranges() const noexcept { return vertex_map_.distribution(); }
  const Map& vertex_map() const noexcept { return vertex_map_; }
  const Distribution& edge_ranges() const noexcept { return edge_ranges_; }
  std::uint64_t local_vertex_begin() const noexcept { return vertex_map_.local_begin(); }
  std::uint64_t local_vertex_end() const noexcept { return vertex_map_.local_end(); }
  std::uint64_t local_vertices() const noexcept { return vertex_map_.local_size(); }
  std::uint64_t local_arcs() const noexcept { return edge_ranges_.count(runtime().rank()); }

  // The arrays themselves (their storage and metadata paths).
  const DistArray<std::uint64_t>& offsets() const noexcept { return offsets_; }
  const IdArray& dst() const noexcept { return dst_; }
  const DistArray<double>* weight() const noexcept { return weight_ ? &*weight_ : nullptr; }
  StorageKind storage_kind() const noexcept { return offsets_.storage_kind(); }
  std::string offsets_metadata_path() const { return offsets_.metadata_path(); }
  std::string dst_metadata_path() const {
    return std::visit([](const auto& a) { return a.metadata_path(); }, dst_);
  }

  // Calls f(std::span<const Id> dst) with this rank's destinations at the
  // graph's width (Id = std::uint32_t or std::uint64_t). A kernel written
  // once as a generic lambda is compiled for both widths; the choice is made
  // once, outside its loops.
  template <class F>
  decltype(auto) with_dst(F&& f) const {
    if (auto* narrow = std::get_if<DistArray<std::uint32_t>>(&dst_)) return std::forward<F>(f)(narrow->local());
    return std::forward<F>(f)(std::get<DistArray<std::uint64_t>>(dst_).local());
  }
  // This rank's destinations at width Id; MismatchError at the other width.
  template <class Id>
  std::span<const Id> local_dst_as() const {
    if (auto* a = std::get_if<DistArray<Id>>(&dst_)) return a->local();
    throw_wrong_width(sizeof(Id));
  }
  std::span<const double> local_weight() const noexcept {
    return weight_ ? weight_->local() : std::span<const double>{};
  }

  // Where each local vertex's out-arcs start in the local arc arrays: CSR
  // row offsets, local_vertices() + 1 of them. Local vertex i =
  // local_vertex_begin() + i.
  std::span<const std::uint64_t> row_offsets() const noexcept { return offsets_.local(); }
  std::span<const double> out_weights(std::uint64_t v) const {
    if (!weighted()) return {};
    auto [first, last] = out_edges(v);
    return local_weight().subspan(first, last - first);
  }
  std::uint64_t out_degree(std::uint64_t v) const {
    auto [first, last] = out_edges(v);
    return last - first;
  }
  // Local arc positions [first, last) of local vertex v. RangeError for a
  // vertex this rank does not own.
  std::pair<std::size_t, std::size_t> out_edges(std::uint64_t v) const {
    if (!vertex_map_.is_local(v)) throw_not_local(v);
    auto rows = row_offsets();
    std::size_t i = static_cast<std::size_t>(v - local_vertex_begin());
    return {static_cast<std::size_t>(rows[i]), static_cast<std::size_t>(rows[i + 1])};
  }
  // Out-neighbours of local vertex v, increasing (GAPBS's out_neigh), as
  // 64-bit ids (a copy of one row).
  std::vector<std::uint64_t> out_neighbours(std::uint64_t v) const;
  // Calls f(v, first, last) for every local vertex with at least one out-arc.
  template <class F>
  void for_each_row(F&& f) const {
    const std::uint64_t base = local_vertex_begin();
    auto rows = row_offsets();
    for (std::size_t i = 0; i + 1 < rows.size(); ++i)
      if (rows[i] < rows[i + 1])
        f(base + i, static_cast<std::size_t>(rows[i]), static_cast<std::size_t>(rows[i + 1]));
  }
  // Calls f(u, v, k) for every local arc (u, v) at local position k, in
  // order; u and v as std::uint64_t.
  template <class F>
  void for_each_arc(F&& f) const {
    with_dst([&](auto dst) {
      for_each_row([&](std::uint64_t u, std::size_t first, std::size_t last) {
        for (std::size_t k = first; k < last; ++k) f(u, static_cast<std::uint64_t>(dst[k]), k);
      });
    });
  }

  // The arrays themselves, taken out of a graph that is then empty (only
  // its destruction may follow): for code that compacts them in place and
  // adopts them as a new graph.
  struct Arrays {
    DistArray<std::uint64_t> offsets;
    IdArray dst;
    std::optional<DistArray<double>> weight;
  };
  Arrays release_arrays() && { return {std::move(offsets_), std::move(dst_), std::move(weight_)}; }

  // This rank's arcs as plain vectors (a copy).
  LocalEdges local_copy() const;

  // New graphs (collective); this one is unchanged. They keep this graph's
  // id width.
  // keep_ranges: the result keeps these vertex ranges (so vertex arrays of
  // this graph fit it) instead of rebalancing its edges.
  EdgeList symmetrized(const StorageOptions& storage = {}, bool keep_ranges = false) const;
  // Every edge (u, v) as (v, u): the out-neighbours of the result are the
  // in-neighbours here (pull kernels, bottom-up search). Weights follow.
  EdgeList transposed(const StorageOptions& storage = {}, bool keep_ranges = false) const;
  EdgeList without_self_loops(const StorageOptions& storage = {}) const;
  EdgeList without_duplicates(const StorageOptions& storage = {}) const;
  // Recomputes the vertex ranges so ranks hold equal numbers of edges again.
  EdgeList rebalanced(const StorageOptions& storage = {}) const;
  // The same graph at another id width (IdWidth::narrow: RangeError when
  // some id does not fit in 32 bits).
  EdgeList with_id_width(IdWidth width, const StorageOptions& storage = {}) const;

  // Out-degree (number of stored arcs) of each vertex; local, no messages.
  DistArray<std::uint64_t> out_degrees() const;
  // In-degree, through an aggregated add.
  DistArray<std::uint64_t> in_degrees() const;
  // The ranks' largest / mean local arc counts (1.0 is perfect balance).
  double edge_imbalance() const;
  // Collective: arc_set_hash (arc_hash.hpp), computed once per graph: its
  // arrays never change, and every document about it gives the hash (a
  // pass over all arcs; a session asks again at each analysis).
  std::uint64_t arc_hash() const;

 private:
  EdgeList(std::uint64_t vertices, bool directed, Distribution vertex_ranges, DistArray<std::uint64_t> offsets,
           IdArray dst, std::optional<DistArray<double>> weight, bool* symmetric = nullptr);
  EdgeList rebuilt(const BuildOptions& options, bool keep_ranges, bool reversed = false) const;
  [[noreturn]] void throw_not_local(std::uint64_t v) const;
  [[noreturn]] void throw_wrong_width(std::size_t asked) const;

  std::uint64_t vertices_ = 0, arcs_ = 0, self_loops_ = 0;
  bool directed_ = true;
  Map vertex_map_;
  Distribution edge_ranges_;
  DistArray<std::uint64_t> offsets_;
  IdArray dst_;
  std::optional<DistArray<double>> weight_;
  Cleaning cleaning_;
  mutable std::optional<std::uint64_t> arc_hash_;  // the same on every rank: set by a collective call
};

// Calls f(Id{}) with a value of the id type of `width`: a generic lambda is
// then compiled for both widths (build-side code with no graph yet).
template <class F>
decltype(auto) with_id_type(IdWidth width, F&& f) {
  if (width == IdWidth::narrow) return std::forward<F>(f)(std::uint32_t{});
  return std::forward<F>(f)(std::uint64_t{});
}

// Storage options for one of a graph's arrays: a Shared name gets `-suffix`.
StorageOptions array_storage(const StorageOptions& graph, const std::string& suffix);

}  // namespace tessera::graph
