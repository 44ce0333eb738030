// What a user wants to know about hitting times without reading all of them:
// how many vertices reach a target, the mean, the extremes and where the
// largest one is. And the target the pipeline picks when none is named.
#pragma once
#include <cstdint>

#include "tessera/graph/edge_list.hpp"
#include "tessera/linalg/vector.hpp"
#include "tessera/runtime/collective.hpp"

namespace tessera::linalg {

struct HittingSummary {
  std::uint64_t reachable = 0;    // vertices with a number (targets included)
  std::uint64_t unreachable = 0;  // NaN: no target in their component
  double min = 0, mean = 0, max = 0;  // over the reachable vertices; 0 when there are none
  std::uint64_t farthest = kNoIndex;  // internal id of the largest time (ties: smallest id); kNoIndex when none
};

// Collective. `times` as hitting_times() returns them (NaN = unreachable).
HittingSummary summarize(const Vector& times);

// Collective: the vertex of highest out-degree (ties: smallest id), a
// well-connected default target; kNoIndex for a graph without edges.
std::uint64_t highest_degree_vertex(const graph::EdgeList& g);

}  // namespace tessera::linalg
