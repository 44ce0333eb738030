// Strongly connected components of a directed EdgeList (trimming, then
// colouring; see src/graph/strong_components.cpp for the papers).
//
// Labels as for connected components: every vertex gets the smallest vertex
// id of its strongly connected component, whatever the rank count. An
// undirected graph's strong components are its connected components (FastSV).
// Cost: trimming removes every vertex on no cycle in O(arcs) work; each
// colouring pass then removes at least the component of the smallest live id,
// and its rounds grow with the longest live path, so graphs with many large
// nested cycles take more passes (the algorithm's known weak case).
#pragma once
#include "tessera/graph/components.hpp"

namespace tessera::graph {

// Collective. `on_round` is called after each colouring pass with the
// number of vertices it assigned.
Components strong_components(const EdgeList& g, const ComponentsOptions& options = {});

}  // namespace tessera::graph
