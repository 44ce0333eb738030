// Strongly connected components against a serial reference (Kosaraju), on
// hand-made shapes that stress trimming and colouring across rank
// boundaries, and on random directed graphs; the same labels at every rank
// count.
#include <gtest/gtest.h>

#include "../test_util.hpp"
#include "graph_test_util.hpp"
#include "tessera/graph/generators.hpp"
#include "tessera/graph/strong_components.hpp"

using namespace tessera;
using namespace tessera::graph;

namespace {

// Kosaraju: finish order on the graph, then searches on the transpose in
// reverse finish order; each component labelled with its smallest id.
std::vector<std::uint64_t> serial_strong_labels(std::uint64_t n, const std::vector<test::EdgeTuple>& arcs) {
  std::vector<std::vector<std::uint64_t>> out(n), in(n);
  for (auto& [u, v, w] : arcs) out[u].push_back(v), in[v].push_back(u);
  std::vector<std::uint8_t> seen(n, 0);
  std::vector<std::uint64_t> order;
  for (std::uint64_t r = 0; r < n; ++r) {
    if (seen[r]) continue;
    std::vector<std::pair<std::uint64_t, std::size_t>> stack{{r, 0}};
    seen[r] = 1;
    while (!stack.empty()) {
      auto& [v, next] = stack.back();
      if (next < out[v].size()) {
        std::uint64_t w = out[v][next++];
        if (!seen[w]) seen[w] = 1, stack.emplace_back(w, 0);
      } else {
        order.push_back(v);
        stack.pop_back();
      }
    }
  }
  std::vector<std::uint64_t> label(n, ~0ull);
  for (auto it = order.rbegin(); it != order.rend(); ++it) {
    if (label[*it] != ~0ull) continue;
    std::vector<std::uint64_t> members{*it}, stack{*it};
    label[*it] = *it;
    while (!stack.empty()) {
      std::uint64_t v = stack.back();
      stack.pop_back();
      for (auto u : in[v])
        if (label[u] == ~0ull) label[u] = *it, members.push_back(u), stack.push_back(u);
    }
    std::uint64_t smallest = *std::min_element(members.begin(), members.end());
    for (auto m : members) label[m] = smallest;
  }
  return label;
}

void expect_matches_reference(const EdgeList& g, const std::string& what) {
  auto arcs = test::gather_edges(g);
  auto want = serial_strong_labels(g.vertices(), arcs);
  auto got = strong_components(g);
  EXPECT_EQ(test::gather_all(got.labels), want) << what;
  EXPECT_EQ(got.labels.distribution(), g.vertex_ranges()) << what;
}

EdgeList directed_from_pairs(std::uint64_t n, const std::vector<std::pair<std::uint64_t, std::uint64_t>>& arcs) {
  Runtime& rt = Runtime::current();
  LocalEdges e;
  // Spread the lines over the ranks, as a parallel reader would.
  for (std::size_t k = 0; k < arcs.size(); ++k)
    if (static_cast<int>(k % static_cast<std::size_t>(rt.size())) == rt.rank()) e.add(arcs[k].first, arcs[k].second);
  return EdgeList::build(rt, n, true, std::move(e));
}

TEST(StrongComponents, HandMadeShapes) {
  std::vector<std::pair<std::uint64_t, std::uint64_t>> chain, back_chain, ring, rings;
  for (std::uint64_t v = 0; v + 1 < 200; ++v) chain.emplace_back(v, v + 1), back_chain.emplace_back(v + 1, v);
  for (std::uint64_t v = 0; v < 200; ++v) ring.emplace_back(v, (v + 1) % 200);
  // Rings of 10 joined one way, with a self loop and a duplicate arc.
  for (std::uint64_t r = 0; r < 10; ++r) {
    for (std::uint64_t k = 0; k < 10; ++k) rings.emplace_back(10 * r + k, 10 * r + (k + 1) % 10);
    if (r + 1 < 10) rings.emplace_back(10 * r + 3, 10 * (r + 1) + 7);
  }
  rings.emplace_back(55, 55);
  rings.emplace_back(0, 1);
  expect_matches_reference(directed_from_pairs(200, chain), "chain");
  expect_matches_reference(directed_from_pairs(200, back_chain), "backward chain");
  expect_matches_reference(directed_from_pairs(200, ring), "ring");
  expect_matches_reference(directed_from_pairs(100, rings), "rings in a row");
  // Tiny graphs leave ranks without vertices or arcs.
  expect_matches_reference(directed_from_pairs(3, {{0, 1}, {1, 2}}), "3-path");
  expect_matches_reference(directed_from_pairs(3, {{0, 1}, {1, 2}, {2, 0}}), "3-cycle");
  expect_matches_reference(directed_from_pairs(2, {{1, 1}}), "self loop only");
  // A star whose leaves point back: one component through the hub.
  std::vector<std::pair<std::uint64_t, std::uint64_t>> star;
  for (std::uint64_t v = 1; v <= 10; ++v) star.emplace_back(0, v), star.emplace_back(v, v % 3 == 0 ? 0 : v);
  expect_matches_reference(directed_from_pairs(11, star), "star");
}

TEST(StrongComponents, RandomDirectedGraphs) {
  Runtime& rt = Runtime::current();
  for (auto spec : {GraphSpec::kronecker(10, 4, 7), GraphSpec::uniform(10, 1, 3), GraphSpec::uniform(11, 2, 5)}) {
    LocalEdges e;
    Edge edge;
    for (std::uint64_t i = static_cast<std::uint64_t>(rt.rank()); i < spec.candidate_edges();
         i += static_cast<std::uint64_t>(rt.size()))
      if (spec.edge(i, edge)) e.add(edge.src, edge.dst);
    auto g = EdgeList::build(rt, spec.vertices(), true, std::move(e));
    expect_matches_reference(g, spec.describe());
  }
}

TEST(StrongComponents, UndirectedGraphsGetConnectedComponents) {
  Runtime& rt = Runtime::current();
  auto g = generate(rt, GraphSpec::grid({12, 12}, 3));
  auto want = test::union_find_labels(g.vertices(), test::gather_edges(g));
  EXPECT_EQ(test::gather_all(strong_components(g).labels), want);
}

}  // namespace
