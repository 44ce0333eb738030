// Afforest and local-first label propagation: the same labels as the serial
// union-find (the smallest id of each component) at every rank count, on
// Kronecker, uniform random and grid graphs with and without deleted edges,
// directed graphs (weak components without a copy) and graphs so small that
// some ranks own no vertex; Afforest both over one node-shared parent array
// and distributed (as across nodes). The verifier (check_labels) must accept each.
// The same graphs packed (PackedGraph, numbered by degree or not, directed
// too): Afforest reads the rows in place and gives the union-find's
// partition in the packed ids; the verifier accepts that and refuses wrong
// answers.
#include <gtest/gtest.h>

#include <numeric>
#include <unordered_map>

#include "../test_util.hpp"
#include "graph_test_util.hpp"
#include "tessera/graph/components.hpp"
#include "tessera/graph/generators.hpp"
#include "tessera/graph/packed_graph.hpp"
#include "tessera/runtime/collective.hpp"

using namespace tessera;
using namespace tessera::graph;
using tessera::test::EdgeTuple;

namespace {

GraphSpec spec_of(int which) {
  GraphSpec spec;
  switch (which) {
    case 0: spec = GraphSpec::kronecker(11, 8, 5); break;
    case 1: spec = GraphSpec::kronecker(10, 4, 3); spec.delete_fraction = 0.6; break;
    case 2: spec = GraphSpec::uniform(10, 4, 7); break;
    case 3: spec = GraphSpec::uniform(11, 2, 2); spec.delete_fraction = 0.3; break;  // many small components
    case 4: spec = GraphSpec::grid({30, 40}, 9); spec.delete_fraction = 0.45; break;
    case 5: spec = GraphSpec::grid({6, 7, 8}, 4); spec.delete_fraction = 0.6; spec.permute = true; break;
    case 6: spec = GraphSpec::grid({60, 60}); break;
    default: spec = GraphSpec::grid({60, 60}); spec.permute = true; break;
  }
  return spec;
}

// Every algorithm's labels against the union-find of the same edges.
void expect_union_find_labels(const EdgeList& g, const std::string& what) {
  auto want = test::union_find_labels(g.vertices(), test::gather_edges(g));
  ComponentsOptions distributed;
  distributed.node_shared = false;
  for (const char* name : {"afforest", "afforest distributed", "lp", "fastsv"}) {
    const bool apart = std::string(name) == "afforest distributed";
    auto c = components_by(apart ? "afforest" : name, g, apart ? distributed : ComponentsOptions{});
    EXPECT_EQ(test::gather_all(c.labels), want) << name << " on " << what;
    EXPECT_EQ(c.labels.distribution(), g.vertex_ranges()) << name;
    EXPECT_EQ(check_labels(g, c.labels), "") << name << " on " << what;
  }
}

PackOptions packing(bool by_degree) {
  PackOptions o;
  o.by_degree = by_degree;
  return o;
}

// The labels p's components must have: the union-find components of the
// EdgeList it was packed from (`original`: its labels, in its ids), each
// vertex labelled with the smallest packed id of its component.
std::vector<std::uint64_t> packed_labels(const PackedGraph& p, const std::vector<std::uint64_t>& original) {
  std::vector<std::uint64_t> ids(p.vertices());
  if (p.original_ids())
    ids = test::gather_all(*p.original_ids());
  else
    std::iota(ids.begin(), ids.end(), std::uint64_t{0});
  std::unordered_map<std::uint64_t, std::uint64_t> smallest;  // original label -> smallest packed id
  std::vector<std::uint64_t> want(p.vertices());
  for (std::uint64_t v = 0; v < p.vertices(); ++v) want[v] = smallest.try_emplace(original[ids[v]], v).first->second;
  return want;
}

// `all` (every vertex's label) as a DistArray on p's vertex ranges.
DistArray<std::uint64_t> distributed(const PackedGraph& p, const std::vector<std::uint64_t>& all) {
  DistArray<std::uint64_t> out(p.runtime(), p.vertex_ranges());
  auto l = out.local();
  for (std::size_t i = 0; i < l.size(); ++i) l[i] = all[p.local_vertex_begin() + i];
  return out;
}

// check_labels refuses three wrong answers near `right`: two components
// sharing a label (only the search can tell), a vertex claiming to be its
// component's root, a label above its vertex.
void expect_wrong_labels_refused(const PackedGraph& p, const std::vector<std::uint64_t>& right,
                                 const std::string& what) {
  const std::uint64_t n = p.vertices();
  if (auto other = std::find_if(right.begin() + 1, right.end(), [&](std::uint64_t l) { return l != 0; });
      other != right.end()) {
    const std::uint64_t r = *other;
    auto merged = right;
    for (auto& l : merged) l = l == r ? 0 : l;
    EXPECT_NE(check_labels(p, distributed(p, merged)).find("share that label"), std::string::npos)
        << what << ": component " << r << " labelled 0";
  }
  std::uint64_t v = n;
  while (v > 0 && right[v - 1] == v - 1) --v;  // the last vertex that is not a root, plus one
  if (v > 0) {
    auto split = right;
    split[v - 1] = v - 1;
    EXPECT_NE(check_labels(p, distributed(p, split)).find("joins labels"), std::string::npos)
        << what << ": vertex " << v - 1 << " labelled as a root";
  }
  if (n >= 2) {
    auto above = right;
    above[0] = 1;
    EXPECT_NE(check_labels(p, distributed(p, above)).find("above its own id"), std::string::npos) << what;
  }
}

// g packed both ways: every Afforest form's labels against the union-find's,
// accepted by check_labels, wrong ones refused; the summary as the EdgeList's.
void expect_packed_components(const EdgeList& g, const std::string& what) {
  Runtime& rt = g.runtime();
  auto original = test::union_find_labels(g.vertices(), test::gather_edges(g));
  DistArray<std::uint64_t> plain_labels(rt, g.vertex_ranges());
  for (std::size_t i = 0; i < plain_labels.local().size(); ++i)
    plain_labels.local()[i] = original[g.local_vertex_begin() + i];
  const ComponentSummary plain = summarize(g, plain_labels);
  for (bool by_degree : {true, false}) {
    const auto p = PackedGraph::pack(g, packing(by_degree));
    const std::string on = what + (by_degree ? ", packed by degree" : ", packed in its own ids");
    ASSERT_EQ(p.original_ids() != nullptr, by_degree) << on;
    const auto want = packed_labels(p, original);
    ComponentsOptions apart, hooking;
    apart.node_shared = false;
    hooking.node_shared = false;
    hooking.gather_limit = 1;
    for (const auto& [form, options] : {std::pair{"node-shared", ComponentsOptions{}}, std::pair{"distributed", apart},
                                        std::pair{"hooking", hooking}}) {
      auto c = components(p, options);
      EXPECT_EQ(test::gather_all(c.labels), want) << form << " on " << on;
      EXPECT_EQ(c.labels.distribution(), p.vertex_ranges()) << form << " on " << on;
      EXPECT_EQ(check_labels(p, c.labels), "") << form << " on " << on;
      if (std::string(form) == "distributed") {
        // Blocks of arcs that cut rows (a few blocks: each read is collective).
        const std::size_t block = std::max<std::uint64_t>(7, p.arcs() / 16);
        EXPECT_EQ(check_labels(p, c.labels, block), "") << on << ", " << block << " arcs a block";
      }
      if (std::string(form) == "node-shared" && rt.size() > 1 && g.vertices() > 0) {
        EXPECT_EQ(c.extra_bytes, g.id_bytes() * g.vertices()) << on;  // the parents at the EdgeList's width
      }
    }
    expect_wrong_labels_refused(p, want, on);
    const ComponentSummary s = summarize(p, distributed(p, want));
    EXPECT_EQ(s.count, plain.count) << on;
    EXPECT_EQ(s.largest_size, plain.largest_size) << on;
    EXPECT_EQ(s.isolated, plain.isolated) << on;
    EXPECT_EQ(s.vertices, g.vertices()) << on;
  }
}

// full with each edge kept in one direction only, some pointing up and some down.
EdgeList one_way(const EdgeList& full) {
  LocalEdges e;
  auto [s, d] = test::local_arcs(full);
  for (std::size_t k = 0; k < s.size(); ++k)
    if ((s[k] + d[k]) % 2 ? s[k] < d[k] : s[k] > d[k]) e.add(s[k], d[k]);
  return EdgeList::build(full.runtime(), full.vertices(), true, std::move(e));
}

// n vertices and `edges` of two edge sets (n-1 -- 0, then 1 -- 2), all on
// rank 0 (at 4 ranks some own no vertex); with `loop`, the second set also
// has a self loop at 0.
EdgeList tiny_graph(Runtime& rt, std::uint64_t n, int edges, bool loop) {
  LocalEdges e;
  if (rt.rank() == 0 && n > 1) {
    if (edges >= 1) e.add(n - 1, 0), e.add(0, n - 1);
    if (edges >= 2 && n > 2) e.add(1, 2), e.add(2, 1);
  }
  if (loop && rt.rank() == 0 && edges == 2) e.add(0, 0);
  return EdgeList::build(rt, n, false, std::move(e));
}

}  // namespace

class AfforestOn : public ::testing::TestWithParam<int> {};

TEST_P(AfforestOn, MatchesUnionFind) {
  Runtime& rt = Runtime::current();
  auto spec = spec_of(GetParam());
  auto g = generate(rt, spec);
  auto want = test::union_find_labels(g.vertices(), test::gather_edges(g));

  // Every rank of these tests shares one node: Afforest over one
  // node-shared parent array (above 1 rank), three rounds (the start, both
  // sampled neighbours in one pass, the rest), its memory an id's width per
  // vertex on the node's first rank.
  auto shared = afforest(g);
  EXPECT_EQ(test::gather_all(shared.labels), want) << spec.describe();
  EXPECT_EQ(check_labels(g, shared.labels), "") << spec.describe();
  if (rt.size() > 1) {
    EXPECT_EQ(shared.rounds, 3);
    EXPECT_EQ(shared.extra_bytes, g.id_bytes() * g.vertices());
  }

  // The distributed form, as across nodes.
  ComponentsOptions apart;
  apart.node_shared = false;
  auto af = afforest(g, apart);
  EXPECT_EQ(test::gather_all(af.labels), want) << spec.describe();
  EXPECT_EQ(check_labels(g, af.labels), "") << spec.describe();
  EXPECT_GE(af.rounds, rt.size() > 1 ? 1 : 0);  // at 1 rank no edge crosses ranks
  EXPECT_LE(af.rounds, 30) << spec.describe();  // log of the trees a component spans, not its diameter
  EXPECT_GT(af.extra_bytes, 0u);
  // O(vertices per rank) plus the cut arcs actually linked and their hash
  // forests (power-of-two tables: a few KiB on these small graphs): below
  // 16 bytes per stored arc (what the edge arrays were at 8-byte ids with a
  // source array; the bound does not depend on the id width).
  EXPECT_LT(af.extra_bytes, 8 * g.vertices() + 16 * g.arcs() + 32 * 1024) << spec.describe();

  // Forced to hook across ranks round by round instead of solving the
  // contracted graph on rank 0: the same labels.
  ComponentsOptions hooking = apart;
  hooking.gather_limit = 1;
  auto hooked = afforest(g, hooking);
  EXPECT_EQ(test::gather_all(hooked.labels), want) << spec.describe();
  EXPECT_LE(hooked.rounds, 30) << spec.describe();

  auto lp = label_propagation(g);
  EXPECT_EQ(test::gather_all(lp.labels), want) << spec.describe();
  EXPECT_EQ(lp.local_rounds, lp.rounds);  // one local fixed point before each global round
  if (GetParam() == 6) {
    // Unscrambled grid: vertex ranges are bands of rows, so a path crosses
    // each rank boundary once: rounds follow ranks, not the diameter of 118.
    EXPECT_LE(lp.rounds, 2 * rt.size() + 2);
  }
}

INSTANTIATE_TEST_SUITE_P(Graphs, AfforestOn, ::testing::Range(0, 8));

class PackedAfforestOn : public ::testing::TestWithParam<int> {};

TEST_P(PackedAfforestOn, MatchesUnionFindThroughOriginalIds) {
  auto spec = spec_of(GetParam());
  expect_packed_components(generate(Runtime::current(), spec), spec.describe());
}

INSTANTIATE_TEST_SUITE_P(Graphs, PackedAfforestOn, ::testing::Range(0, 8));

TEST(PackedAfforest, DirectedGraphsGetWeakComponents) {
  // Rows are out-arcs only: each arc is linked from its source's row.
  Runtime& rt = Runtime::current();
  auto full = generate(rt, GraphSpec::kronecker(10, 4, 11));
  auto directed = one_way(full);
  ASSERT_TRUE(directed.directed());
  expect_packed_components(directed, "one-way kron 10");
  // The weak components are the undirected graph's.
  auto want = test::union_find_labels(full.vertices(), test::gather_edges(full));
  auto p = PackedGraph::pack(directed, packing(false));
  EXPECT_EQ(test::gather_all(components(p).labels), want);

  LocalEdges e;
  if (rt.rank() == 0) e.add(1, 0), e.add(2, 1), e.add(4, 3), e.add(5, 5), e.add(6, 9), e.add(9, 8), e.add(7, 8);
  expect_packed_components(EdgeList::build(rt, 10, true, std::move(e)), "10 vertices, one-way arcs");
}

TEST(PackedAfforest, DirectedCutArcsTravelInChunks) {
  // Over 65536 arcs per rank cross ranks at 2-4 ranks: sent in several
  // chunks, a chunk ending inside a row and the next going on from there.
  Runtime& rt = Runtime::current();
  auto full = generate(rt, GraphSpec::kronecker(16, 8, 13));
  auto want = test::union_find_labels(full.vertices(), test::gather_edges(full));
  auto p = PackedGraph::pack(one_way(full), packing(false));
  ComponentsOptions apart;
  apart.node_shared = false;
  EXPECT_EQ(test::gather_all(components(p, apart).labels), want);
}

TEST(PackedAfforest, TinyGraphsWhereRanksOwnNoVertex) {
  Runtime& rt = Runtime::current();
  for (std::uint64_t n : {1, 2, 3, 5}) {
    for (int edges = 0; edges < 3; ++edges) {
      auto g = tiny_graph(rt, n, edges, false);
      expect_packed_components(g, std::to_string(n) + " vertices, edge set " + std::to_string(edges));
    }
  }
}

TEST(Afforest, DirectedGraphsGetWeakComponentsWithoutACopy) {
  Runtime& rt = Runtime::current();
  LocalEdges e;
  // Arcs only one way, some pointing up and some down, across ranks.
  if (rt.rank() == 0) e.add(1, 0), e.add(2, 1), e.add(4, 3), e.add(5, 5), e.add(6, 9), e.add(9, 8), e.add(7, 8);
  auto g = EdgeList::build(rt, 10, true, std::move(e));
  std::vector<std::uint64_t> want{0, 0, 0, 3, 3, 5, 6, 6, 6, 6};
  auto af = afforest(g);
  EXPECT_EQ(test::gather_all(af.labels), want);
  EXPECT_EQ(af.labels.distribution(), g.vertex_ranges());
  EXPECT_EQ(check_labels(g, af.labels), "");

  // A generated graph with each edge kept in one direction only.
  auto full = generate(rt, GraphSpec::kronecker(10, 4, 11));
  auto directed = one_way(full);
  auto want_full = test::union_find_labels(full.vertices(), test::gather_edges(full));
  auto c = afforest(directed);
  EXPECT_EQ(test::gather_all(c.labels), want_full);
  expect_union_find_labels(directed, "one-way kron 10");
}

TEST(Afforest, DirectedCutArcsTravelInChunks) {
  // Over 65536 arcs per rank cross ranks at 2-4 ranks: sent in several
  // chunks (of max(local vertices, 65536) arcs) into one forest per owner.
  Runtime& rt = Runtime::current();
  auto full = generate(rt, GraphSpec::kronecker(16, 8, 13));  // many small components besides the largest
  auto directed = one_way(full);
  auto c = afforest(directed);
  EXPECT_EQ(test::gather_all(c.labels), test::union_find_labels(full.vertices(), test::gather_edges(full)));
  ComponentsOptions hooking;
  hooking.gather_limit = 1;
  hooking.node_shared = false;
  EXPECT_EQ(test::gather_all(afforest(directed, hooking).labels), test::gather_all(c.labels));
}

TEST(Afforest, TinyGraphsWhereRanksOwnNoVertex) {
  Runtime& rt = Runtime::current();
  for (std::uint64_t n : {1, 2, 3, 5}) {
    for (int edges = 0; edges < 3; ++edges) {
      auto g = tiny_graph(rt, n, edges, true);
      expect_union_find_labels(g, std::to_string(n) + " vertices, edge set " + std::to_string(edges));
    }
  }
}

TEST(Afforest, SelectableByName) {
  Runtime& rt = Runtime::current();
  auto g = generate(rt, GraphSpec::grid({4, 4}));
  EXPECT_THROW(components_by("afforst", g), ConfigError);
  try {
    components_by("union-find", g);
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("afforest, fastsv or lp"), std::string::npos) << e.what();
  }
}
