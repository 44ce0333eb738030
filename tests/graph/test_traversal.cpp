// PageRank and direction-optimizing BFS against serial references computed
// here from the gathered edges, at every rank count: undirected generated
// graphs, directed graphs with dangling vertices, self loops, duplicate arcs
// and isolated vertices, graphs so small that ranks own no vertex. Their
// verifiers accept the answers and reject deliberately wrong ones.
#include <gtest/gtest.h>

#include <cmath>
#include <deque>
#include <limits>
#include <numeric>

#include "../test_util.hpp"
#include "graph_test_util.hpp"
#include "tessera/graph/bfs.hpp"
#include "tessera/graph/generators.hpp"
#include "tessera/graph/pagerank.hpp"
#include "tessera/runtime/collective.hpp"

using namespace tessera;
using namespace tessera::graph;
using tessera::test::EdgeTuple;

namespace {

// A directed graph from rank 0's edge list (the others pass none).
EdgeList directed(Runtime& rt, std::uint64_t n, const std::vector<std::pair<std::uint64_t, std::uint64_t>>& arcs) {
  LocalEdges e;
  if (rt.rank() == 0)
    for (auto [u, v] : arcs) e.add(u, v);
  return EdgeList::build(rt, n, true, std::move(e));
}

// Directed, 40 vertices: a dangling vertex (7), self loops, duplicate arcs,
// isolated vertices (30..39), a part unreachable from 0.
EdgeList awkward_directed(Runtime& rt) {
  std::vector<std::pair<std::uint64_t, std::uint64_t>> arcs;
  for (std::uint64_t v = 0; v < 25; ++v)
    if (v != 7) arcs.emplace_back(v, (v * 7 + 3) % 25), arcs.emplace_back(v, (v + 1) % 25);
  arcs.emplace_back(3, 3);
  arcs.emplace_back(11, 11);
  arcs.emplace_back(4, 9);
  arcs.emplace_back(4, 9);  // a duplicate arc counts twice
  arcs.emplace_back(26, 27);
  arcs.emplace_back(27, 28);
  arcs.emplace_back(28, 26);
  arcs.emplace_back(29, 5);  // 29 reaches the main part; nothing reaches 26..29
  return directed(rt, 40, arcs);
}

// The serial solution of x = (1 - d) p + d A^T D^-1 x, by power iteration to
// 1e-15 (dangling vertices pass nothing on, as GAPBS).
std::vector<double> serial_pagerank(std::uint64_t n, const std::vector<EdgeTuple>& edges, double d,
                                    const std::vector<std::uint64_t>& personal = {}) {
  std::vector<double> deg(n, 0), p(n, personal.empty() ? 1.0 / static_cast<double>(n) : 0.0), x(n), y(n);
  for (auto& [u, v, w] : edges) deg[u] += 1;
  for (auto v : personal) p[v] = 1.0 / static_cast<double>(personal.size());
  x = p;
  for (int it = 0; it < 10000; ++it) {
    for (std::uint64_t v = 0; v < n; ++v) y[v] = (1 - d) * p[v];
    for (auto& [u, v, w] : edges) y[v] += d * x[u] / deg[u];
    double change = 0;
    for (std::uint64_t v = 0; v < n; ++v) change += std::fabs(y[v] - x[v]);
    x.swap(y);
    if (change < 1e-15) break;
  }
  return x;
}

// Depths by a serial BFS, and the parent rule the kernel promises: the
// smallest in-neighbour one level up.
struct SerialBfs {
  std::vector<std::int64_t> depth, parent;
};
SerialBfs serial_bfs(std::uint64_t n, const std::vector<EdgeTuple>& edges, std::uint64_t source) {
  std::vector<std::vector<std::uint64_t>> out(n);
  for (auto& [u, v, w] : edges) out[u].push_back(v);
  SerialBfs s{std::vector<std::int64_t>(n, -1), std::vector<std::int64_t>(n, -1)};
  std::deque<std::uint64_t> q{source};
  s.depth[source] = 0;
  while (!q.empty()) {
    auto u = q.front();
    q.pop_front();
    for (auto v : out[u])
      if (s.depth[v] < 0) s.depth[v] = s.depth[u] + 1, q.push_back(v);
  }
  s.parent[source] = static_cast<std::int64_t>(source);
  for (auto& [u, v, w] : edges)
    if (v != source && s.depth[v] > 0 && s.depth[u] == s.depth[v] - 1 &&
        (s.parent[v] < 0 || static_cast<std::int64_t>(u) < s.parent[v]))
      s.parent[v] = static_cast<std::int64_t>(u);
  return s;
}

void expect_near_all(const std::vector<double>& got, const std::vector<double>& want, double tol, const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  double worst = 0;
  for (std::size_t i = 0; i < got.size(); ++i) worst = std::max(worst, std::fabs(got[i] - want[i]));
  EXPECT_LT(worst, tol) << what;
}

PageRankOptions tight(PageRankMethod method) {
  PageRankOptions o;
  o.tolerance = 1e-13;
  o.max_iterations = 1000;
  o.method = method;
  return o;
}

// A row's sum in the kernel's order: the arcs one after another, from 0.
template <class Term>
double row_sum(const std::vector<std::uint64_t>& row, Term term) {
  double sum = 0;
  for (auto u : row) sum += term(u);
  return sum;
}

// `iterations` serial Jacobi sweeps of GAPBS's PageRank (damping 0.85) in
// the kernel's order, each contribution rounded to a float first when
// `single` (as the kernel does from a tolerance of 1e-6).
std::vector<double> serial_jacobi(const EdgeList& g, int iterations, bool single) {
  std::vector<std::vector<std::uint64_t>> in(g.vertices());
  std::vector<double> deg(g.vertices(), 0);
  for (auto& [u, v, w] : test::gather_edges(g)) in[v].push_back(u), deg[u] += 1;
  const double n = static_cast<double>(g.vertices());
  std::vector<double> x(g.vertices(), 1.0 / n), y(g.vertices());
  for (int it = 0; it < iterations; ++it) {
    for (std::size_t v = 0; v < x.size(); ++v) {
      const double s = row_sum(in[v], [&](std::uint64_t u) {
        const double c = deg[u] ? x[u] / deg[u] : 0.0;
        return single ? static_cast<double>(static_cast<float>(c)) : c;
      });
      y[v] = (1 - 0.85) / n + 0.85 * s;
    }
    x.swap(y);
  }
  return x;
}

// A copy of `x` on the same ranges with `change` applied to vertex v's entry.
DistArray<double> altered(const DistArray<double>& x, std::uint64_t v, double value) {
  DistArray<double> y(x.map());
  std::copy(x.local().begin(), x.local().end(), y.local().begin());
  if (x.is_local(v)) y.at(v) = value;
  return y;
}
DistArray<std::int64_t> altered(const DistArray<std::int64_t>& x, std::uint64_t v, std::int64_t value) {
  DistArray<std::int64_t> y(x.map());
  std::copy(x.local().begin(), x.local().end(), y.local().begin());
  if (x.is_local(v)) y.at(v) = value;
  return y;
}

}  // namespace

TEST(PageRank, MatchesSerialOnGeneratedGraphs) {
  Runtime& rt = Runtime::current();
  for (auto spec : {GraphSpec::kronecker(10, 8, 3), GraphSpec::grid({20, 30}, 2), GraphSpec::uniform(9, 4, 5)}) {
    auto g = generate(rt, spec);
    auto want = serial_pagerank(g.vertices(), test::gather_edges(g), 0.85);
    for (auto method : {PageRankMethod::gauss_seidel, PageRankMethod::jacobi}) {
      auto pr = pagerank(g, tight(method));
      EXPECT_TRUE(pr.converged) << spec.describe();
      expect_near_all(test::gather_all(pr.scores), want, 1e-10, spec.describe() + " " + pagerank_method_name(method));
      EXPECT_EQ(check_pagerank(g, pr.scores, {}, 1e-10), "") << spec.describe();
    }
  }
}

// A packed graph's rows are summed in place: in the same ids Jacobi gives
// the EdgeList's bits; numbered by degree, the scores mapped back agree to
// rounding. Gauss-Seidel (its own order) passes the verifier either way.
TEST(PageRank, PackedGraphMatchesTheEdgeList) {
  Runtime& rt = Runtime::current();
  auto g = generate(rt, GraphSpec::kronecker(11, 8, 4));
  PageRankOptions jacobi;
  jacobi.method = PageRankMethod::jacobi;
  jacobi.tolerance = 1e-8;
  auto want = test::gather_all(pagerank(g, jacobi).scores);
  PackOptions same;
  same.by_degree = false;
  auto p = PackedGraph::pack(g, same);
  EXPECT_EQ(test::gather_all(pagerank(p, jacobi).scores), want);
  auto q = PackedGraph::pack(g);
  auto old_of_new = test::gather_all(*q.original_ids());
  auto got = test::gather_all(pagerank(q, jacobi).scores);
  for (std::size_t v = 0; v < got.size(); ++v) ASSERT_NEAR(got[v], want[old_of_new[v]], 1e-12) << "vertex " << v;
  // Gauss-Seidel in the same ids: the EdgeList's bits. Numbered by degree
  // it sweeps in another order and needs more iterations on Kronecker
  // graphs (docs/graph-formats.md): allowed 100.
  auto gs_plain = pagerank(g);
  EXPECT_EQ(test::gather_all(pagerank(p).scores), test::gather_all(gs_plain.scores));
  PageRankOptions patient;
  patient.max_iterations = 100;
  auto gs = pagerank(q, patient);
  EXPECT_TRUE(gs.converged) << gs.iterations << " iterations, change " << gs.change;
  EXPECT_EQ(check_pagerank(q, gs.scores, {}, 1e-4), "");
  EXPECT_NE(check_pagerank(q, altered(gs.scores, 9, 0.5), {}, 1e-4), "");
  // Directed: its in-arcs packed beside it.
  auto d = awkward_directed(rt);
  auto pd = PackedGraph::pack(d, same);
  auto pt = PackedGraph::pack(d.transposed({}, true), same);
  EXPECT_EQ(test::gather_all(pagerank(pd, jacobi, &pt).scores), test::gather_all(pagerank(d, jacobi).scores));
  test::expect_error<ConfigError>([&] { pagerank(pd); }, "pass its transpose packed");
}

TEST(PageRank, DirectedWithDanglingSelfLoopsAndDuplicates) {
  Runtime& rt = Runtime::current();
  auto g = awkward_directed(rt);
  auto edges = test::gather_edges(g);
  for (auto method : {PageRankMethod::gauss_seidel, PageRankMethod::jacobi}) {
    auto pr = pagerank(g, tight(method));
    expect_near_all(test::gather_all(pr.scores), serial_pagerank(40, edges, 0.85), 1e-12, pagerank_method_name(method));
    // The transpose given by the caller gives the same scores.
    auto in = g.transposed({}, true);
    auto again = pagerank(g, tight(method), &in);
    EXPECT_EQ(test::gather_all(again.scores), test::gather_all(pr.scores));
    // So does an index made beforehand, used twice.
    const PageRankIndex index(g, &in);
    for (int run = 0; run < 2; ++run)
      EXPECT_EQ(test::gather_all(pagerank(g, tight(method), nullptr, &index).scores), test::gather_all(pr.scores));
  }
  // Personalized, from a set with a repeat.
  auto o = tight(PageRankMethod::jacobi);
  o.personalization = {5, 26, 5, 33};
  auto pr = pagerank(g, o);
  expect_near_all(test::gather_all(pr.scores), serial_pagerank(40, edges, 0.85, {5, 26, 33}), 1e-12, "personalized");
  EXPECT_EQ(check_pagerank(g, pr.scores, o, 1e-10), "");
  EXPECT_NE(check_pagerank(g, pr.scores, {}, 1e-6), "") << "personalized scores are not the plain PageRank";
}

TEST(PageRank, DefaultsStopAsGapbs) {
  Runtime& rt = Runtime::current();
  auto g = generate(rt, GraphSpec::kronecker(11, 16, 1));
  std::vector<double> changes;
  PageRankOptions o;
  o.on_iteration = [&](int, double change, double) { changes.push_back(change); };
  auto pr = pagerank(g, o);
  ASSERT_EQ(static_cast<int>(changes.size()), pr.iterations);
  EXPECT_LE(pr.iterations, 20);
  // Stopped at the first change below 1e-4, or at the cap.
  for (std::size_t i = 0; i + 1 < changes.size(); ++i) EXPECT_GE(changes[i], 1e-4);
  EXPECT_EQ(pr.converged, changes.back() < 1e-4);
  if (pr.converged) {
    EXPECT_EQ(check_pagerank(g, pr.scores, {}, 1e-4), "");  // GAPBS's verifier's bound
  }
}

TEST(PageRank, JacobiGivesTheSameBitsAtEveryRankCount) {
  // Each sum runs over a vertex's in-neighbours in id order and the change
  // is summed exactly, so a serial sweep in that order gives every bit.
  Runtime& rt = Runtime::current();
  auto g = generate(rt, GraphSpec::kronecker(9, 8, 7));
  // More than 1/8 of the rows have no arcs, so the sweeps after the first
  // skip them (the kernel's busy rows): the same bits all the same.
  std::uint64_t empty = 0;
  auto rows = g.row_offsets();
  for (std::size_t i = 0; i + 1 < rows.size(); ++i) empty += rows[i + 1] == rows[i];
  EXPECT_GE(all_reduce(rt.comm(), empty, MPI_SUM), g.vertices() / 6);
  auto pr = pagerank(g, tight(PageRankMethod::jacobi));
  // A serial Jacobi sweep in the kernel's order reproduces every bit.
  EXPECT_EQ(test::gather_all(pr.scores), serial_jacobi(g, pr.iterations, false));
}

TEST(PageRank, SinglePrecisionWithinOneMillionth) {
  // From a tolerance of 1e-6 the contributions are floats: the scores still
  // match the double-precision serial solution to 1e-6 and pass the
  // verifier at that tolerance; below it everything is double.
  Runtime& rt = Runtime::current();
  auto kron = generate(rt, GraphSpec::kronecker(10, 8, 3));
  auto awkward = awkward_directed(rt);
  for (const EdgeList* g : {&kron, &awkward}) {
    auto want = serial_pagerank(g->vertices(), test::gather_edges(*g), 0.85);
    for (auto method : {PageRankMethod::gauss_seidel, PageRankMethod::jacobi}) {
      auto o = tight(method);
      o.tolerance = kPageRankSinglePrecisionTolerance;
      auto pr = pagerank(*g, o);
      EXPECT_TRUE(pr.single_precision);
      EXPECT_TRUE(pr.converged);
      const std::string what = std::to_string(g->vertices()) + " vertices, " + pagerank_method_name(method);
      expect_near_all(test::gather_all(pr.scores), want, 1e-6, what);
      EXPECT_EQ(check_pagerank(*g, pr.scores, o, 1e-6), "") << what;
      EXPECT_FALSE(pagerank(*g, tight(method)).single_precision) << what;
    }
  }
}

TEST(PageRank, SinglePrecisionJacobiGivesTheSameBitsAtEveryRankCount) {
  // As in double, with each contribution rounded to a float before the
  // (double) sum: a serial sweep doing the same gives every bit.
  Runtime& rt = Runtime::current();
  auto g = generate(rt, GraphSpec::kronecker(9, 8, 7));
  PageRankOptions o;
  o.method = PageRankMethod::jacobi;
  o.tolerance = 1e-5;
  o.max_iterations = 100;
  auto pr = pagerank(g, o);
  ASSERT_TRUE(pr.single_precision);
  EXPECT_EQ(test::gather_all(pr.scores), serial_jacobi(g, pr.iterations, true));
}

TEST(PageRank, VerifierRejectsWrongScores) {
  Runtime& rt = Runtime::current();
  auto g = awkward_directed(rt);
  auto pr = pagerank(g, tight(PageRankMethod::gauss_seidel));
  ASSERT_EQ(check_pagerank(g, pr.scores, {}, 1e-9), "");
  EXPECT_NE(check_pagerank(g, altered(pr.scores, 9, 0.5), {}, 1e-4), "");
  EXPECT_NE(check_pagerank(g, altered(pr.scores, 0, -0.01), {}, 1e-4).find("vertex 0 has score"), std::string::npos);
  EXPECT_NE(check_pagerank(g, altered(pr.scores, 39, std::numeric_limits<double>::quiet_NaN()), {}, 1e-4), "");
  // A uniform vector is no fixed point here.
  DistArray<double> uniform(g.vertex_map());
  std::fill(uniform.local().begin(), uniform.local().end(), 1.0 / 40);
  EXPECT_NE(check_pagerank(g, uniform, {}, 1e-4).find("not a fixed point"), std::string::npos);
  // Scores stopped early (GAPBS's rule) fail a tighter residual.
  PageRankOptions early;
  early.max_iterations = 2;
  EXPECT_NE(check_pagerank(g, pagerank(g, early).scores, {}, 1e-6), "");
}

TEST(PageRank, BadInput) {
  Runtime& rt = Runtime::current();
  auto g = awkward_directed(rt);
  PageRankOptions o;
  o.personalization = {3, 40};
  test::expect_error<RangeError>([&] { pagerank(g, o); }, "personalization vertex 40 is outside the graph's vertex ids 0..39");
  PageRankOptions bad;
  bad.damping = 1;
  test::expect_error<ConfigError>([&] { pagerank(g, bad); }, "damping");
  auto other = directed(rt, 41, {{0, 1}});
  auto wrong_in = other.transposed({}, true);
  test::expect_error<MismatchError>([&] { pagerank(g, {}, &wrong_in); }, "transpose");
  PageRankIndex wrong_index(other);
  test::expect_error<MismatchError>([&] { pagerank(g, {}, nullptr, &wrong_index); },
                                    "made for another graph (41 vertices, 1 arcs; this one has 40");
  test::expect_error<ConfigError>([&] { parse_pagerank_method("power"); }, "gauss-seidel or jacobi");
}

TEST(Bfs, MatchesSerialInEveryDirection) {
  Runtime& rt = Runtime::current();
  std::vector<std::pair<std::string, EdgeList>> graphs;
  graphs.emplace_back("kron 11", generate(rt, GraphSpec::kronecker(11, 8, 4)));
  auto sparse = GraphSpec::uniform(10, 2, 3);
  sparse.delete_fraction = 0.3;
  graphs.emplace_back("sparse uniform", generate(rt, sparse));
  graphs.emplace_back("grid", generate(rt, GraphSpec::grid({15, 40}, 1)));
  graphs.emplace_back("awkward directed", awkward_directed(rt));
  for (auto& [name, g] : graphs) {
    auto edges = test::gather_edges(g);
    for (std::uint64_t source : {std::uint64_t{0}, g.vertices() / 3, g.vertices() - 1}) {
      auto want = serial_bfs(g.vertices(), edges, source);
      for (auto dir : {BfsDirection::optimizing, BfsDirection::top_down, BfsDirection::bottom_up}) {
        BfsOptions o;
        o.direction = dir;
        auto b = bfs(g, source, o);
        const std::string what = name + " from " + std::to_string(source) + " " + bfs_direction_name(dir);
        EXPECT_EQ(test::gather_all(b.depths), want.depth) << what;
        EXPECT_EQ(test::gather_all(b.parents), want.parent) << what;
        EXPECT_EQ(check_bfs(g, source, b.parents), "") << what;
        std::uint64_t reached = 0;
        for (auto d : want.depth) reached += d >= 0;
        EXPECT_EQ(b.reached, reached) << what;
        if (dir == BfsDirection::top_down) {
          EXPECT_EQ(b.bottom_up_steps, 0) << what;
        }
        if (dir == BfsDirection::bottom_up) {
          EXPECT_EQ(b.top_down_steps, 0) << what;
        }
      }
    }
  }
}

TEST(Bfs, SwitchesDirectionOnKronecker) {
  Runtime& rt = Runtime::current();
  auto g = generate(rt, GraphSpec::kronecker(12, 16, 2));
  auto hub = [&] {  // the vertex of largest degree: its component is the big one
    std::uint64_t best = 0, best_v = 0;
    for (std::uint64_t v = g.local_vertex_begin(); v < g.local_vertex_end(); ++v)
      if (g.out_degree(v) > best) best = g.out_degree(v), best_v = v;
    return all_argmax<std::uint64_t>(rt.comm(), best, best_v).index;
  }();
  std::vector<bool> steps;
  BfsOptions o;
  o.on_level = [&](int, std::uint64_t, bool bottom_up, double) { steps.push_back(bottom_up); };
  auto b = bfs(g, hub, o);
  EXPECT_GT(b.top_down_steps, 0);
  EXPECT_GT(b.bottom_up_steps, 0);
  EXPECT_FALSE(steps.front()) << "starts top-down";
  EXPECT_EQ(check_bfs(g, hub, b.parents), "");
}

TEST(Bfs, TinyPathAndIsolatedSource) {
  Runtime& rt = Runtime::current();
  // A 3-vertex path: at 4 ranks one rank owns nothing.
  LocalEdges e;
  if (rt.rank() == 0) e.add(0, 1), e.add(1, 2);
  BuildOptions sym;
  sym.symmetrize = true;
  auto path = EdgeList::build(rt, 3, false, std::move(e), sym);
  auto b = bfs(path, 2);
  EXPECT_EQ(test::gather_all(b.parents), (std::vector<std::int64_t>{1, 2, 2}));
  EXPECT_EQ(test::gather_all(b.depths), (std::vector<std::int64_t>{2, 1, 0}));
  EXPECT_EQ(b.levels, 2);
  // An isolated source reaches only itself.
  auto g = awkward_directed(rt);
  auto alone = bfs(g, 35);
  EXPECT_EQ(alone.reached, 1u);
  EXPECT_EQ(check_bfs(g, 35, alone.parents), "");
  test::expect_error<RangeError>([&] { bfs(g, 40); }, "source vertex 40 is outside the graph's vertex ids 0..39");
  test::expect_error<RangeError>([&] { check_bfs(g, 41, alone.parents); }, "source vertex 41");
}

TEST(Bfs, VerifierRejectsWrongParents) {
  Runtime& rt = Runtime::current();
  auto g = generate(rt, GraphSpec::grid({10, 12}, 1));  // vertex v = row * 12 + column
  auto b = bfs(g, 0);
  ASSERT_EQ(check_bfs(g, 0, b.parents), "");
  auto expect_rejected = [&](const DistArray<std::int64_t>& p, const std::string& fragment) {
    std::string found = check_bfs(g, 0, p);
    EXPECT_NE(found.find(fragment), std::string::npos) << "'" << found << "' lacks '" << fragment << "'";
  };
  expect_rejected(altered(b.parents, 0, 1), "the source 0 has parent 1");
  expect_rejected(altered(b.parents, 50, 200), "neither -1 nor a vertex");
  expect_rejected(altered(b.parents, 50, -2), "neither -1 nor a vertex");
  expect_rejected(altered(b.parents, 50, 77), "no arc (77, 50)");        // not a neighbour
  expect_rejected(altered(b.parents, 119, -1), "not reached");           // a reachable leaf left out
  expect_rejected(altered(b.parents, 1, -1), "which has no parent");     // 2's chain ends at 1
  // 13's parent 1 or 12 replaced by its neighbour 14 (depth 3): a real arc, a longer path.
  expect_rejected(altered(b.parents, 13, 14), "not a shortest path");
  // A two-cycle of neighbours: 1's parent 2, 2's parent 1.
  auto cycle = altered(altered(b.parents, 1, 2), 2, 1);
  expect_rejected(cycle, "does not reach the source");
  // Another source's tree is wrong for this one.
  expect_rejected(bfs(g, 5).parents, "the source 0 has parent");
}

// A packed graph is searched in place: in the packed numbering (by degree)
// the depths, mapped back, are the EdgeList's; parents are smallest in the
// packed ids, so they are checked by the verifier and the serial search
// run on the packed graph's own arcs.
TEST(Bfs, PackedGraphMatchesSerialInEveryDirection) {
  Runtime& rt = Runtime::current();
  std::vector<std::pair<std::string, EdgeList>> graphs;
  graphs.emplace_back("kron 11", generate(rt, GraphSpec::kronecker(11, 8, 4)));
  graphs.emplace_back("grid", generate(rt, GraphSpec::grid({15, 40}, 1)));
  for (auto& [name, g] : graphs)
    for (bool by_degree : {true, false}) {
      PackOptions po;
      po.by_degree = by_degree;
      auto p = PackedGraph::pack(g, po);
      std::vector<std::uint64_t> old_of_new(g.vertices());
      std::iota(old_of_new.begin(), old_of_new.end(), 0);
      if (by_degree) old_of_new = test::gather_all(*p.original_ids());
      std::vector<std::uint64_t> new_of_old(g.vertices());
      for (std::uint64_t v = 0; v < g.vertices(); ++v) new_of_old[old_of_new[v]] = v;
      auto packed_edges = test::gather_edges(p.unpacked());
      for (std::uint64_t source : {std::uint64_t{0}, g.vertices() / 3}) {
        auto plain = test::gather_all(bfs(g, source).depths);
        auto want = serial_bfs(g.vertices(), packed_edges, new_of_old[source]);
        for (auto dir : {BfsDirection::optimizing, BfsDirection::top_down, BfsDirection::bottom_up}) {
          BfsOptions o;
          o.direction = dir;
          auto b = bfs(p, new_of_old[source], o);
          const std::string what = name + (by_degree ? " by degree" : "") + " from " + std::to_string(source) + " " +
                                   bfs_direction_name(dir);
          auto depths = test::gather_all(b.depths);
          EXPECT_EQ(depths, want.depth) << what;
          EXPECT_EQ(test::gather_all(b.parents), want.parent) << what;
          for (std::uint64_t v = 0; v < g.vertices(); ++v)
            ASSERT_EQ(depths[new_of_old[v]], plain[v]) << what << " vertex " << v;
          EXPECT_EQ(check_bfs(p, new_of_old[source], b.parents), "") << what;
        }
      }
    }
}

TEST(Bfs, PackedVerifierRejectsWrongParentsAndDirectedNeedsInArcs) {
  Runtime& rt = Runtime::current();
  PackOptions same;
  same.by_degree = false;
  auto p = PackedGraph::pack(generate(rt, GraphSpec::grid({10, 12}, 1)), same);
  auto b = bfs(p, 0);
  ASSERT_EQ(check_bfs(p, 0, b.parents), "");
  auto expect_rejected = [&](const DistArray<std::int64_t>& q, const std::string& fragment) {
    std::string found = check_bfs(p, 0, q);
    EXPECT_NE(found.find(fragment), std::string::npos) << "'" << found << "' lacks '" << fragment << "'";
  };
  expect_rejected(altered(b.parents, 50, 77), "no arc (77, 50)");
  expect_rejected(altered(b.parents, 50, 60), "no arc (60, 50)");  // row 60 is decoded past 50
  expect_rejected(altered(b.parents, 119, -1), "not reached");
  expect_rejected(altered(b.parents, 13, 14), "not a shortest path");
  expect_rejected(altered(altered(b.parents, 1, 2), 2, 1), "does not reach the source");
  // A directed packed graph: top-down alone, or with its packed transpose.
  auto d = awkward_directed(rt);
  auto pd = PackedGraph::pack(d, same);
  auto pt = PackedGraph::pack(d.transposed({}, true), same);
  auto want = serial_bfs(d.vertices(), test::gather_edges(d), 0);
  BfsOptions top;
  top.direction = BfsDirection::top_down;
  EXPECT_EQ(test::gather_all(bfs(pd, 0, top).parents), want.parent);
  EXPECT_EQ(test::gather_all(bfs(pd, 0, {}, &pt).parents), want.parent);
  EXPECT_EQ(check_bfs(pd, 0, bfs(pd, 0, {}, &pt).parents), "");
  test::expect_error<ConfigError>([&] { bfs(pd, 0); }, "pass its transpose packed");
}

TEST(Bfs, KhopSubgraphInSharedStorage) {
  Runtime& rt = Runtime::current();
  auto spec = GraphSpec::uniform(9, 3, 6);
  std::vector<std::pair<std::string, EdgeList>> graphs;
  graphs.emplace_back("uniform", generate(rt, spec));
  graphs.emplace_back("awkward directed", awkward_directed(rt));
  for (auto& [name, g] : graphs) {
    auto edges = test::gather_edges(g);
    for (int hops : {0, 1, 2, 5}) {
      const std::uint64_t source = 4;
      auto want = serial_bfs(g.vertices(), edges, source);
      // Serially: the kept vertices in order, renumbered, and the arcs between them.
      std::vector<std::uint64_t> kept, renumber(g.vertices(), ~0ull);
      for (std::uint64_t v = 0; v < g.vertices(); ++v)
        if (want.depth[v] >= 0 && want.depth[v] <= hops) renumber[v] = kept.size(), kept.push_back(v);
      std::vector<EdgeTuple> arcs;
      for (auto& [u, v, w] : edges)
        if (renumber[u] != ~0ull && renumber[v] != ~0ull) arcs.emplace_back(renumber[u], renumber[v], w);
      const std::string what = name + ", " + std::to_string(hops) + " hops";

      BfsOptions limited;
      limited.max_depth = hops;
      auto b = bfs(g, source, limited);
      EXPECT_EQ(b.reached, kept.size()) << what;
      EXPECT_LE(b.levels, hops) << what;

      const std::string shm = test::unique_name(rt, "khop-" + std::to_string(hops));
      auto sub = khop_subgraph(g, source, hops, StorageOptions::shared(shm));
      EXPECT_EQ(sub.graph.vertices(), kept.size()) << what;
      EXPECT_EQ(test::gather_all(sub.original_ids), kept) << what;
      EXPECT_EQ(test::gather_edges(sub.graph), arcs) << what;
      EXPECT_EQ(sub.graph.directed(), g.directed()) << what;
      EXPECT_EQ(sub.graph.storage_kind(), StorageKind::shared) << what;
      EXPECT_EQ(sub.original_ids.storage_kind(), StorageKind::shared) << what;
    }
  }
  auto g = awkward_directed(rt);
  DistArray<std::uint8_t> wrong(rt, 41);
  test::expect_error<MismatchError>([&] { induced_subgraph(g, wrong); }, "not distributed like the graph");
  test::expect_error<ConfigError>([&] { khop_subgraph(g, 0, -1); }, "hops");
  test::expect_error<RangeError>([&] { khop_subgraph(g, 99, 1); }, "source vertex 99");
}
