// Subgraphs induced by a set of vertices: the arcs with both ends kept,
// vertices renumbered 0..size-1 in their order (so every row stays sorted).
// Either into new arrays, or in place: the graph's own arrays compacted and
// shrunk, so extracting the largest component of a graph that fills memory
// never holds a second copy of its edges.
#pragma once
#include <cstdint>

#include "tessera/graph/edge_list.hpp"
#include "tessera/graph/packed_graph.hpp"

namespace tessera::graph {

// A subgraph as a new graph: vertices renumbered 0..size-1 in their order,
// and the id each had in the graph it came from.
struct Subgraph {
  EdgeList graph;
  DistArray<std::uint64_t> original_ids;  // new id -> id in the input graph
};

// The subgraph induced by the vertices whose `keep` is nonzero (on g's
// vertex ranges): every arc with both ends kept. Vertices keep their rank
// and order; ids keep g's width; the arrays go to `storage` (Shared:
// <name>-offsets, -dst, -weight, -ids), so another process can attach to
// the new graph. Collective.
Subgraph induced_subgraph(const EdgeList& g, const DistArray<std::uint8_t>& keep, const StorageOptions& storage = {});

// The same in g's own arrays: each rank compacts its rows in place and
// shrinks the arrays (a Shared graph keeps its names and its segments
// shrink; the original ids go to `ids_storage`). g is consumed: on an error
// it is gone too. MismatchError when g's arrays are another job's, mapped
// in place. Collective.
Subgraph induced_subgraph(EdgeList&& g, const DistArray<std::uint8_t>& keep, const StorageOptions& ids_storage = {});

struct PackedSubgraph {
  PackedGraph graph;                      // its original_ids(): g's composed (ids in the EdgeList packed)
  DistArray<std::uint64_t> original_ids;  // new id -> id in the input packed graph
};

// The same for a packed graph, in its own arrays (there is no copying
// form): each rank re-codes its kept rows in place, arcs to dropped vertices
// left out, and shrinks the arrays. A row never grows: the renumbering keeps
// the order, so no difference gets larger, and a dropped neighbour merges
// two differences into one no longer than both codes (the same for the
// first value and the degree). The new ids of arbitrary neighbours come
// from a bitmap of the kept vertices on every rank (n/8 + n/16 bytes a rank
// for n vertices; no message per arc). The result's original_ids() are g's
// composed with the new ones (no messages: a rank keeps its own vertices),
// or a copy of `original_ids` when g had none, so they still lead to the
// EdgeList that was packed; `ids_storage` must not name g's own arrays.
// g is consumed: on an error it is gone too. MismatchError when g's arrays
// are another job's, mapped in place, or `keep` is not on g's vertex
// ranges. Collective.
PackedSubgraph induced_subgraph(PackedGraph&& g, const DistArray<std::uint8_t>& keep,
                                const StorageOptions& ids_storage = {});

}  // namespace tessera::graph
