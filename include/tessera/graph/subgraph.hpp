// Subgraphs induced by a set of vertices: the arcs with both ends kept,
// vertices renumbered 0..size-1 in their order (so every row stays sorted).
// Either into new arrays, or in place: the graph's own arrays compacted and
// shrunk, so extracting the largest component of a graph that fills memory
// never holds a second copy of its edges.
#pragma once
#include <cstdint>

#include "tessera/graph/edge_list.hpp"

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

}  // namespace tessera::graph
