// A fingerprint of a graph's arcs: the sum over arcs of a 64-bit hash of
// (source, destination, weight bits), so the same graph gives the same value
// whatever the rank count, the vertex ranges and the id width. Runs that
// must agree (1, 2 and 4 ranks; 32- and 64-bit ids) compare it without a
// reference solver. Collective: one pass over the arcs and one all-reduce.
#pragma once
#include <cstdint>
#include <string>

#include "tessera/graph/edge_list.hpp"

namespace tessera::graph {

std::uint64_t arc_set_hash(const EdgeList& g);
// The same as 16 hexadecimal digits (JSON numbers lose bits past 2^53).
std::string arc_set_hash_hex(const EdgeList& g);

}  // namespace tessera::graph
