// Afforest over one parent array in node-shared memory (afforest_node.cpp):
// the components path when every rank of the job shares one node.
#pragma once
#include <optional>

#include "tessera/graph/components.hpp"

namespace tessera::graph {

// Collective. nullopt, on every rank alike, when it does not apply: one
// rank, ranks on several nodes, an empty graph, options.node_shared off, or
// a rank that could not map the first rank's array; afforest() then runs
// the distributed form. G: EdgeList or PackedGraph (instantiated for both,
// one kernel over their rows views).
template <class G>
std::optional<Components> afforest_on_node(const G& g, const ComponentsOptions& options);

}  // namespace tessera::graph
