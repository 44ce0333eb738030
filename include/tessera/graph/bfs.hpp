// Breadth-first search from one source over an EdgeList's arrays,
// direction-optimizing (Beamer's top-down / bottom-up switch, as GAPBS's
// `bfs`), producing parents and depths; and the verifier beside it.
//
// Parents: each reached vertex's parent is its smallest-id in-neighbour one
// level closer to the source (both directions pick it), so the answer is the
// same at every rank count and whichever direction ran. The source is its
// own parent; an unreached vertex has parent -1 and depth -1. A directed
// graph is searched along its arcs.
#pragma once
#include <cstdint>
#include <functional>
#include <string>

#include "tessera/comm/options.hpp"
#include "tessera/graph/edge_list.hpp"
#include "tessera/graph/packed_graph.hpp"
#include "tessera/graph/subgraph.hpp"

namespace tessera::graph {

enum class BfsDirection {
  optimizing,  // GAPBS's heuristics choose each step
  top_down,    // every step pushes from the frontier (for tests and comparisons)
  bottom_up,   // every step pulls into the unvisited vertices
};

struct BfsOptions {
  BfsDirection direction = BfsDirection::optimizing;
  // GAPBS's switch: to bottom-up when the frontier's out-arcs exceed the
  // unexplored arcs / alpha; back to top-down when the frontier shrinks and
  // holds fewer than vertices / beta.
  int alpha = 15, beta = 18;
  // Stop after this depth (the k-hop neighbourhood; vertices beyond are
  // left unreached, so check_bfs does not apply); -1: no limit.
  int max_depth = -1;
  AggregationOptions aggregation;
  // Called on every rank after each step: the depth just reached, the
  // vertices found at it (whole graph), whether the step was bottom-up,
  // seconds since the start.
  std::function<void(int, std::uint64_t, bool, double)> on_level;
};

struct Bfs {
  DistArray<std::int64_t> parents;  // on the graph's vertex ranges; -1: not reached
  DistArray<std::int64_t> depths;   // hops from the source; -1: not reached
  std::uint64_t reached = 0;        // vertices reached, the source included
  int levels = 0;                   // the largest depth
  int top_down_steps = 0, bottom_up_steps = 0;
  double seconds = 0;
  std::uint64_t extra_bytes = 0;    // working memory beyond the two arrays and the graph, largest rank
};

// Collective. Top-down steps send each frontier arc that crosses ranks
// through a message aggregator; bottom-up steps read an all-gathered bitmap
// of the frontier (n / 8 bytes a rank) along in-arcs: an undirected graph's
// own arrays, a directed graph's transpose on the same vertex ranges
// (EdgeList::transposed(storage, true), which keeps the id width), passed as
// `in_arcs` or made here (not for BfsDirection::top_down); MismatchError for
// in-arcs of another graph or id width. RangeError when the source is not a
// vertex.
Bfs bfs(const EdgeList& g, std::uint64_t source, const BfsOptions& options = {}, const EdgeList* in_arcs = nullptr);
// The same search reading a packed graph's rows as they are. A directed
// packed graph's in-arcs are its transpose packed on the same vertex ranges
// and numbering (PackOptions::by_degree off), passed as `in_arcs`; without
// them only BfsDirection::top_down runs (ConfigError).
Bfs bfs(const PackedGraph& g, std::uint64_t source, const BfsOptions& options = {}, const PackedGraph* in_arcs = nullptr);

// GAPBS's BFS verifier, distributed and without a search of its own: the
// source is its own parent; every other parent is -1 or a vertex p with an
// arc (p, v); the parent chains reach the source (pointer jumping, which
// also gives each vertex its tree depth); and along every arc (u, v) with u
// reached, v is reached with depth(v) <= depth(u) + 1 (so tree depths are
// the shortest distances, and every reachable vertex is reached). "" when
// it passes, else the first thing wrong (the same on every rank). Collective.
std::string check_bfs(const EdgeList& g, std::uint64_t source, const DistArray<std::int64_t>& parents);
std::string check_bfs(const PackedGraph& g, std::uint64_t source, const DistArray<std::int64_t>& parents);

// The k-hop neighbourhood of `source` (the vertices at most `hops` arcs
// away, by a BFS stopped at that depth) as the subgraph it induces, into
// `storage`. RangeError for a source outside the graph. Collective.
Subgraph khop_subgraph(const EdgeList& g, std::uint64_t source, int hops, const StorageOptions& storage = {},
                       const BfsOptions& options = {});

BfsDirection parse_bfs_direction(const std::string& name);  // optimizing | top-down | bottom-up
const char* bfs_direction_name(BfsDirection direction);

}  // namespace tessera::graph
