// IdMap: the id a graph FILE gives each vertex of a graph held in Tessera.
//
// Algorithms number vertices 0..n-1 on the graph's vertex ranges (internal
// ids). A user names vertices by the ids of the file they gave: 1-based in a
// Matrix Market file or with --base 1, sparse ids numbered densely by
// --relabel, and a subgraph (the largest component) renumbers its vertices
// again. An IdMap follows the graph through those steps so that every id a
// user types or reads is a file id:
//   compose        after extracting a subgraph (its new -> old id array);
//   redistributed  after a step that moved the vertex ranges (symmetrizing,
//                  rebalancing), so the map stays beside the graph's vertices;
//   translate      internal ids held as values (component labels, the
//                  farthest vertex) -> file ids;
//   find           file id -> internal id (collective).
// An identity map (no --relabel, no subgraph) holds no array: file id =
// internal id + base.
#pragma once
#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "tessera/array/dist_array.hpp"
#include "tessera/runtime/collective.hpp"

namespace tessera::graph {

class IdMap {
 public:
  // file id = internal id + base, for vertices on `ranges`.
  static IdMap identity(Runtime& rt, const Distribution& ranges, std::uint64_t base = 0);
  // `file_ids_from_base`: the file id - base of every vertex, on the graph's
  // vertex ranges (what --relabel produces). Collective.
  static IdMap relabelled(DistArray<std::uint64_t> file_ids_from_base, std::uint64_t base);

  IdMap(IdMap&&) noexcept = default;
  IdMap& operator=(IdMap&&) noexcept = default;

  Runtime& runtime() const noexcept { return *rt_; }
  const Distribution& vertex_ranges() const noexcept { return ranges_; }
  std::uint64_t vertices() const noexcept { return ranges_.size(); }
  std::uint64_t base() const noexcept { return base_; }
  bool is_identity() const noexcept { return !ids_.has_value(); }
  // file id - base of each vertex, on vertex_ranges(); null for an identity map.
  const DistArray<std::uint64_t>* relabelled_ids() const noexcept { return ids_ ? &*ids_ : nullptr; }

  // File ids of this rank's vertices, in vertex order. Local, no messages.
  std::vector<std::uint64_t> local_file_ids() const;

  // Collective: replaces each internal vertex id in `values` (any vertex of
  // the graph, on any rank) by its file id; kNoIndex stays kNoIndex.
  // RangeError for a value that is no vertex.
  void translate(std::span<std::uint64_t> values) const;
  // Collective: one internal id (kNoIndex stays kNoIndex).
  std::uint64_t file_id(std::uint64_t internal) const;

  // Collective, every rank passes the same ids (a short list such as the
  // targets): the internal id of each file id, or kNoIndex where the graph
  // has no vertex with that file id.
  std::vector<std::uint64_t> find(std::span<const std::uint64_t> file_ids) const;
  std::uint64_t find(std::uint64_t file_id) const;

  // Collective: the map of a subgraph whose vertex v is vertex
  // old_of_new[v] of this map's graph (LargestComponent::original_ids);
  // the result lies on old_of_new's distribution.
  IdMap compose(const DistArray<std::uint64_t>& old_of_new) const;
  // Collective: the same map on other vertex ranges of the same vertices
  // (EdgeList::symmetrized() and rebalanced() choose new ranges).
  IdMap redistributed(const Distribution& ranges) const;

 private:
  IdMap(Runtime& rt, Distribution ranges, std::uint64_t base, std::optional<DistArray<std::uint64_t>> ids);
  void note_order();  // collective: sets ascending_

  Runtime* rt_;
  Distribution ranges_;
  std::uint64_t base_ = 0;
  std::optional<DistArray<std::uint64_t>> ids_;  // file id - base of each vertex; none: identity
  bool ascending_ = true;  // ids_ increase with the vertex (relabel and subgraphs keep order): find bisects
};

}  // namespace tessera::graph
