// Connected components of an EdgeList or a PackedGraph, and an EdgeList's
// largest component.
//
// Labels: every vertex gets the smallest vertex id of its component, so the
// result does not depend on the algorithm or the rank count. A directed graph
// gets its weakly connected components: afforest reads each arc in both
// directions and makes no copy; label_propagation, fastsv and check_labels
// symmetrize first (a copy: symmetrize once yourself when you call these
// repeatedly). A PackedGraph is read in place by the same kernels (Afforest,
// the verifier, the summary), never expanded back into an id array, except
// for check_labels on a directed one (see there).
#pragma once
#include <cstdint>
#include <functional>
#include <string>

#include "tessera/comm/options.hpp"
#include "tessera/graph/edge_list.hpp"
#include "tessera/graph/packed_graph.hpp"

namespace tessera::graph {

struct ComponentsOptions {
  AggregationOptions aggregation;
  // Called on every rank after each round: round, vertices whose label
  // changed (whole graph), seconds since the start.
  std::function<void(int, std::uint64_t, double)> on_round;
  // Afforest: cut-edge pairs of local roots (summed over the ranks) up to
  // which rank 0 solves them in one round trip; above it, roots hook across
  // ranks round by round until the pairs left fit. 0: the average vertex
  // count per rank, at least 65536 (rank 0's extra memory stays O(vertices
  // per rank)).
  std::uint64_t gather_limit = 0;
  // Afforest, when every rank of the job shares one node: the ranks link
  // into one parent array in node-shared memory (GAPBS's Afforest, ranks
  // for threads) instead of exchanging cut arcs. Off: always distributed.
  bool node_shared = true;
};

struct Components {
  DistArray<std::uint64_t> labels;  // on the graph's vertex ranges
  int rounds = 0;                   // global rounds: exchanges between ranks, each ending in a reduction
  int local_rounds = 0;             // passes within each rank without messages (label propagation's local fixed points)
  double seconds = 0;
  // The algorithm's working memory beyond the labels and the graph, the
  // largest of any rank (aggregation buffers excluded).
  std::uint64_t extra_bytes = 0;
};

// Afforest, distributed (the default): a union-find over the edges whose two
// ends are on this rank, Afforest's sampling (Sutton, Ben-Nun and Barak,
// IPDPS 2018: link two neighbours of each vertex, find the likely largest
// component, skip its vertices' other edges), then the graph that cut edges
// make between the local trees, contracted: each owner keeps a spanning
// forest of root pairs, and rank 0 solves up to gather_limit pairs in one
// round trip (min-hooking of roots with pointer jumping, Shiloach-Vishkin,
// for more). Rounds: 2 when the contracted graph fits, else about log of
// the number of local trees a component spans, not its diameter. When every
// rank shares one node (and options.node_shared), Afforest itself over one
// node-shared parent array instead: 4 rounds, each a barrier, no exchange.
Components afforest(const EdgeList& g, const ComponentsOptions& options = {});
// The same kernels over a packed graph's rows, decoded as they are read (the
// labels in the packed graph's ids: map them through original_ids() for
// the packed EdgeList's). The node-shared parent array and the local forest
// are as wide as an EdgeList of as many vertices would hold ids.
Components afforest(const PackedGraph& g, const ComponentsOptions& options = {});
// The components of either form by the default algorithm (Afforest; the
// only one that reads a packed graph).
inline Components components(const EdgeList& g, const ComponentsOptions& options = {}) { return afforest(g, options); }
inline Components components(const PackedGraph& g, const ComponentsOptions& options = {}) {
  return afforest(g, options);
}
// True when afforest() on a graph of `rt` links in one node-shared parent
// array: more than one rank, all on one node, and options.node_shared
// (unless a rank then cannot map the array: the distributed form runs).
bool afforest_on_one_node(const Runtime& rt, const ComponentsOptions& options = {});
// Label propagation with a frontier, local first: each global round starts
// from the rank's local fixed point (the smallest label of each piece joined
// by local edges), then only vertices whose label changed push it across cut
// edges, through an UpdateAggregator with min. Global rounds: about the
// number of rank crossings of a shortest path, not hops.
Components label_propagation(const EdgeList& g, const ComponentsOptions& options = {});
// FastSV: min-hooking and shortcutting; O(log n)-like rounds on high-diameter graphs.
Components fastsv(const EdgeList& g, const ComponentsOptions& options = {});

struct ComponentSummary {
  std::uint64_t count = 0;          // number of components
  std::uint64_t largest_label = 0;  // smallest id of the largest (ties: smallest label)
  std::uint64_t largest_size = 0;
  std::uint64_t isolated = 0;       // components of a single vertex
  std::uint64_t vertices = 0;       // the component sizes summed (the graph's vertex count when right)
};
// The names --algorithm accepts ("afforest", "fastsv", "lp") and the run.
Components components_by(const std::string& algorithm, const EdgeList& g, const ComponentsOptions& options = {});
// Component sizes through an aggregated histogram.
ComponentSummary summarize(const EdgeList& g, const DistArray<std::uint64_t>& labels);
ComponentSummary summarize(const PackedGraph& g, const DistArray<std::uint64_t>& labels);

// The verifier: "" when `labels` are exactly the components' labels (each
// vertex labelled with the smallest id of its component), else what is wrong,
// the same message on every rank. Proves it rather than comparing with a
// second algorithm: labels are roots at most their vertex's id, agree across
// every edge, and each label class is connected (a search from the roots
// reaches every vertex), so two components sharing a label are rejected.
// Collective; rounds: about the number of rank boundaries a search crosses.
// Memory O(vertices): the far ends' labels are read `arcs_per_block` arcs at
// a time (0: as many as the rank has vertices, at least 2^20).
std::string check_labels(const EdgeList& g, const DistArray<std::uint64_t>& labels, std::size_t arcs_per_block = 0);
// The same over a packed graph's rows in place when it is undirected. A
// directed one is unpacked and symmetrized first (a copy, as for a directed
// EdgeList: the search needs each arc from both ends).
std::string check_labels(const PackedGraph& g, const DistArray<std::uint64_t>& labels,
                         std::size_t arcs_per_block = 0);

struct LargestComponent {
  EdgeList graph;                         // vertices renumbered 0..size-1, order kept
  DistArray<std::uint64_t> original_ids;  // new id -> id in the input graph
  ComponentSummary summary;
};
// The subgraph induced by the largest component. Vertices keep their rank
// and relative order; the arrays go to `storage` (names <name>-offsets,
// -dst, -weight, -ids). Collective.
LargestComponent largest_component(const EdgeList& g, const DistArray<std::uint64_t>& labels,
                                   const StorageOptions& storage = {});
// The same in g's own arrays, compacted in place (induced_subgraph(EdgeList&&)):
// no second copy of the edges; a component is closed under arcs, so every
// arc of a kept vertex stays. g is consumed. Collective.
LargestComponent largest_component(EdgeList&& g, const DistArray<std::uint64_t>& labels,
                                   const StorageOptions& ids_storage = {});

struct PackedLargestComponent {
  PackedGraph graph;                      // vertices renumbered 0..size-1, order kept
  DistArray<std::uint64_t> original_ids;  // new id -> id in the input packed graph
  ComponentSummary summary;
};
// The largest component of a packed graph in its own arrays: each rank
// re-codes its kept rows in place (an order-kept renumbering never makes a
// difference larger, so a row never grows) and shrinks the arrays; one pass
// over the kept rows, the degrees unchanged (see induced_subgraph(PackedGraph&&)
// in subgraph.hpp for the memory, the ids and the errors). The summary and
// the tie rule are summarize()'s. `labels` must be the components' (as
// components() gives them): a kept vertex with a neighbour outside its
// label is a MismatchError, found once g is gone. g is consumed. Collective.
PackedLargestComponent largest_component(PackedGraph&& g, const DistArray<std::uint64_t>& labels,
                                         const StorageOptions& ids_storage = {});

}  // namespace tessera::graph
