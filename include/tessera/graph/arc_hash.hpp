// A fingerprint of a graph's arcs: the sum over arcs of a 64-bit hash of
// (source, destination, weight bits), so the same graph gives the same value
// whatever the rank count, the vertex ranges and the id width. Runs that
// must agree (1, 2 and 4 ranks; 32- and 64-bit ids) compare it without a
// reference solver. It is the forward symmetry sum below, so reading an
// undirected file, which checks the symmetry sums, gives it with no pass of
// its own. Collective: one pass over the arcs and one all-reduce, once per
// graph (EdgeList::arc_hash).
#pragma once
#include <cstdint>
#include <span>
#include <string>

#include "tessera/graph/edge_list.hpp"

namespace tessera::graph {

std::uint64_t arc_set_hash(const EdgeList& g);
// The same as 16 hexadecimal digits (JSON numbers lose bits past 2^53).
std::string arc_set_hash_hex(const EdgeList& g);

// An undirected graph stores both arcs of every edge: its multiset of arcs
// equals the multiset of reversed arcs. Two sums over the arcs decide it:
// equal for every symmetric graph, and for any other equal with chance
// 2^-64. Sums of parts add up to the sums of the whole.
struct SymmetrySums {
  std::uint64_t forward = 0, backward = 0;
  SymmetrySums& operator+=(const SymmetrySums& o) {
    forward += o.forward, backward += o.backward;
    return *this;
  }
};
// The sums over the arcs of local rows: row i (vertex lo + i) holds arcs
// rows[i] to rows[i + 1] of dst (and of weight, when not empty).
SymmetrySums symmetry_sums(std::span<const std::uint64_t> rows, std::span<const std::uint32_t> dst,
                           std::span<const double> weight, std::uint64_t lo);
SymmetrySums symmetry_sums(std::span<const std::uint64_t> rows, std::span<const std::uint64_t> dst,
                           std::span<const double> weight, std::uint64_t lo);
// Collective: whether g's arcs (with their weights) are their own reverses.
bool arcs_are_symmetric(const EdgeList& g);

}  // namespace tessera::graph
