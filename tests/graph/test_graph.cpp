// EdgeList layout and operations, generators, components and the largest
// component, against serial references that every rank recomputes from the
// gathered graph. The same answers are expected at 1, 2, 3 and 4 ranks.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <map>
#include <optional>
#include <set>

#include "../test_util.hpp"
#include "graph_test_util.hpp"
#include "tessera/graph/arc_hash.hpp"
#include "tessera/graph/components.hpp"
#include "tessera/graph/generators.hpp"
#include "tessera/graph/read.hpp"
#include "tessera/graph/subgraph.hpp"
#include "tessera/graph/write.hpp"
#include "tessera/storage/disk_tier.hpp"
#include "tessera/storage/metadata.hpp"
#include "tessera/runtime/collective.hpp"
#include "tessera/runtime/splitmix64.hpp"
#include "tessera/runtime/wait.hpp"

using namespace tessera;
using namespace tessera::graph;
using tessera::test::EdgeTuple;

namespace {

// The layout every algorithm relies on, checked on this rank: one row per
// local vertex, rows covering the rank's arcs in order, each row's
// destinations inside the graph and increasing.
void expect_layout(const EdgeList& g) {
  auto rows = g.row_offsets();
  ASSERT_EQ(rows.size(), g.local_vertices() + 1);
  ASSERT_EQ(rows.front(), 0u);
  ASSERT_EQ(rows.back(), g.local_arcs());
  g.with_dst([&](auto d) {
    ASSERT_EQ(d.size(), g.local_arcs());
    for (std::size_t i = 0; i + 1 < rows.size(); ++i) {
      ASSERT_LE(rows[i], rows[i + 1]);
      for (std::size_t k = rows[i]; k < rows[i + 1]; ++k) {
        ASSERT_LT(d[k], g.vertices());
        if (k > rows[i]) {
          ASSERT_LE(d[k - 1], d[k]);
        }
      }
    }
  });
  if (g.weighted()) {
    ASSERT_EQ(g.local_weight().size(), g.local_arcs());
  }
}

// Serial construction of a generated graph: every candidate edge, both
// directions, no self loops, no duplicates.
std::vector<EdgeTuple> serial_generate(const GraphSpec& spec) {
  std::set<std::pair<std::uint64_t, std::uint64_t>> set;
  Edge e;
  for (std::uint64_t i = 0; i < spec.candidate_edges(); ++i)
    if (spec.edge(i, e) && e.src != e.dst) {
      set.emplace(e.src, e.dst);
      set.emplace(e.dst, e.src);
    }
  std::vector<EdgeTuple> out;
  for (auto [u, v] : set) out.emplace_back(u, v, 1.0);
  return out;
}

std::vector<EdgeTuple> grid_edges(std::uint64_t rows, std::uint64_t cols) {
  std::vector<EdgeTuple> out;
  for (std::uint64_t i = 0; i < rows; ++i)
    for (std::uint64_t j = 0; j < cols; ++j) {
      std::uint64_t v = i * cols + j;
      if (j + 1 < cols) out.emplace_back(v, v + 1, 1.0), out.emplace_back(v + 1, v, 1.0);
      if (i + 1 < rows) out.emplace_back(v, v + cols, 1.0), out.emplace_back(v + cols, v, 1.0);
    }
  std::sort(out.begin(), out.end());
  return out;
}

// Sets (or, given nullptr, unsets) an environment variable on this rank for
// one scope and puts the old value back at its end.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const char* value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old;
    if (value)
      ::setenv(name, value, 1);
    else
      ::unsetenv(name);
  }
  ~ScopedEnv() {
    if (old_)
      ::setenv(name_.c_str(), old_->c_str(), 1);
    else
      ::unsetenv(name_.c_str());
  }
  ScopedEnv(const ScopedEnv&) = delete;
  ScopedEnv& operator=(const ScopedEnv&) = delete;

 private:
  std::string name_;
  std::optional<std::string> old_;
};

// Whether this run forces wide ids (the suite's TESSERA_ID_BITS=64 runs).
bool wide_ids_forced() {
  const char* bits = std::getenv("TESSERA_ID_BITS");
  return bits && std::string(bits) == "64";
}

}  // namespace

TEST(EdgeList, BuildDistributesSortsAndCleans) {
  Runtime& rt = Runtime::current();
  // Rank 0 holds every edge, in reverse order, with a self loop and duplicates.
  LocalEdges e;
  const std::uint64_t n = 50;
  if (rt.rank() == 0)
    for (std::uint64_t u = n; u-- > 0;) {
      e.add(u, (u * 7 + 3) % n, static_cast<double>(u));
      e.add(u, (u * 7 + 3) % n, static_cast<double>(u) + 0.5);  // duplicate, larger weight
      e.add(u, u, 1.0);
    }
  BuildOptions o;
  o.drop_self_loops = true;
  o.drop_duplicates = true;
  auto g = EdgeList::build(rt, n, true, std::move(e), o);
  expect_layout(g);
  auto all = test::gather_edges(g);
  std::vector<EdgeTuple> want;
  for (std::uint64_t u = 0; u < n; ++u)
    if ((u * 7 + 3) % n != u) want.emplace_back(u, (u * 7 + 3) % n, static_cast<double>(u));
  EXPECT_EQ(all, want);
  EXPECT_EQ(g.arcs(), want.size());
  EXPECT_EQ(g.edges(), want.size());  // directed: every arc is an edge
  EXPECT_TRUE(g.weighted());
  EXPECT_TRUE(g.directed());

  auto sym = g.symmetrized();
  expect_layout(sym);
  EXPECT_FALSE(sym.directed());
  std::set<std::pair<std::uint64_t, std::uint64_t>> pairs;
  for (auto& [u, v, w] : test::gather_edges(sym)) pairs.emplace(u, v);
  for (auto& [u, v, w] : want) {
    EXPECT_TRUE(pairs.count({u, v}) && pairs.count({v, u})) << u << " " << v;
  }

  auto out_deg = test::gather_all(g.out_degrees()), in_deg = test::gather_all(g.in_degrees());
  std::vector<std::uint64_t> want_out(n, 0), want_in(n, 0);
  for (auto& [u, v, w] : want) ++want_out[u], ++want_in[v];
  EXPECT_EQ(out_deg, want_out);
  EXPECT_EQ(in_deg, want_in);
}

TEST(EdgeList, RejectsOutOfRangeIds) {
  Runtime& rt = Runtime::current();
  LocalEdges e;
  if (rt.rank() == rt.size() - 1) e.add(3, 10);
  try {
    EdgeList::build(rt, 10, true, std::move(e));
    FAIL() << "expected RangeError";
  } catch (const Error& err) {
    EXPECT_NE(std::string(err.what()).find("(3, 10)"), std::string::npos) << "message: " << err.what();
  }
}

// Issue 41: a build reads its edges twice from a source (count, then fill
// the final arrays) and gives the graph a build from vectors gives, in
// whatever batches the source hands them over.
TEST(EdgeList, BuildsFromASourceAsFromVectors) {
  Runtime& rt = Runtime::current();
  const std::uint64_t n = 300;
  LocalEdges e;  // each rank its share, with loops, duplicates and weights
  for (std::uint64_t k = static_cast<std::uint64_t>(rt.rank()); k < 2000; k += static_cast<std::uint64_t>(rt.size()))
    e.add((k * 37) % n, (k * 101 + k / 7) % n, static_cast<double>(k % 13));
  for (bool sym : {false, true}) {
    BuildOptions o;
    o.symmetrize = sym;
    o.drop_self_loops = !sym;
    o.drop_duplicates = true;
    auto want = test::gather_edges(EdgeList::build(rt, n, true, e, o));
    int passes = 0;
    EdgeSource source = [&](const EdgeSink& take) {
      ++passes;
      for (std::size_t at = 0; at < e.size(); at += 17) {  // uneven batches
        const std::size_t len = std::min<std::size_t>(17, e.size() - at);
        take(EdgeBatch{std::span(e.src).subspan(at, len), std::span(e.dst).subspan(at, len),
                       std::span(e.weight).subspan(at, len)});
      }
    };
    auto g = EdgeList::build(rt, n, true, source, o);
    expect_layout(g);
    EXPECT_EQ(passes, 2);
    EXPECT_EQ(test::gather_edges(g), want);
    EXPECT_EQ(g.directed(), !sym);
    EXPECT_TRUE(g.weighted());
  }
}

// The disk tier fills the destination array in windows of rows, one pass
// of the source each: the same graph as in memory, whatever the windows.
TEST(EdgeList, BuildsOnDiskInWindowsAsInMemory) {
  Runtime& rt = Runtime::current();
  test::ScratchDir dir(rt, std::filesystem::current_path().string());
  BuildOptions o;
  o.symmetrize = true;
  o.storage = StorageOptions::shared(test::unique_name(rt, "disk"), dir.path());
  if (!on_disk(rt, o.storage)) GTEST_SKIP() << dir.path() << " is not on disk";
  const std::uint64_t n = 500;
  LocalEdges e;
  for (std::uint64_t k = static_cast<std::uint64_t>(rt.rank()); k < 3000; k += static_cast<std::uint64_t>(rt.size()))
    e.add((k * 31) % n, (k * 17 + k / 11) % n, static_cast<double>(k % 7));
  BuildOptions in_memory = o;
  in_memory.storage = {};
  auto want = test::gather_edges(EdgeList::build(rt, n, true, e, in_memory));
  int passes = 0;
  EdgeSource source = [&](const EdgeSink& take) {
    ++passes;
    take(EdgeBatch{e.src, e.dst, e.weight});
  };
  ScopedEnv window("TESSERA_FILL_WINDOW_BYTES", "600");  // 50 arcs of 12 bytes a window
  std::vector<std::string> phases;  // what a long build says as it goes
  o.on_phase = [&](const std::string& phase) { phases.push_back(phase); };
  auto g = EdgeList::build(rt, n, true, source, o);
  expect_layout(g);
  EXPECT_EQ(test::gather_edges(g), want);
  EXPECT_GT(all_reduce(rt.comm(), passes, MPI_MAX), 10);  // the count, then many windows
  const int windows = all_reduce(rt.comm(), passes, MPI_MAX) - 1;
  ASSERT_EQ(phases.size(), static_cast<std::size_t>(windows) + 2);
  EXPECT_NE(phases.front().find("counting"), std::string::npos);
  EXPECT_NE(phases[1].find("window 1 of " + std::to_string(windows)), std::string::npos) << phases[1];
  EXPECT_NE(phases.back().find("sorting"), std::string::npos);
  barrier(rt.comm());
}

// A source must give the same edges on both passes, and an error on one
// rank (a parse error, an id out of range) fails the build on every rank
// instead of leaving the others waiting.
TEST(EdgeList, ASourceThatChangesOrFailsFailsEverywhere) {
  Runtime& rt = Runtime::current();
  const bool last = rt.rank() == rt.size() - 1;
  int pass = 0;
  std::vector<std::uint64_t> src{1, 2}, dst{2, 3};
  EdgeSource changing = [&](const EdgeSink& take) {
    if (last && ++pass == 2) src[1] = 4;  // the second pass gives another edge
    take(EdgeBatch{src, dst, {}});
  };
  test::expect_error<MismatchError>([&] { EdgeList::build(rt, 10, true, changing); }, "same edges twice");
  EdgeSource failing = [&](const EdgeSink& take) {
    take(EdgeBatch{src, dst, {}});
    if (last) throw FormatError("edges.el:7: 'x' is not a vertex id");
  };
  test::expect_error<FormatError>([&] { EdgeList::build(rt, 10, true, failing); }, "edges.el:7");
  std::vector<std::uint64_t> far{1, 12};
  EdgeSource out_of_range = [&](const EdgeSink& take) { take(EdgeBatch{last ? far : src, dst, {}}); };
  test::expect_error<RangeError>([&] { EdgeList::build(rt, 10, true, out_of_range); }, "(12, 3)");
  std::vector<double> w{1.0, 2.0};
  EdgeSource mixed = [&](const EdgeSink& take) { take(EdgeBatch{src, dst, last ? std::span<const double>(w) : std::span<const double>()}); };
  if (rt.size() > 1) {
    test::expect_error<MismatchError>([&] { EdgeList::build(rt, 10, true, mixed); }, "with weights and others without");
  }
}

TEST(EdgeList, BalancesEdgesAcrossRanks) {
  Runtime& rt = Runtime::current();
  auto g = generate(rt, GraphSpec::uniform(12, 8));
  expect_layout(g);
  EXPECT_LT(g.edge_imbalance(), 1.05);
  // All edges with one source are on one rank: vertex ranges are contiguous.
  EXPECT_EQ(g.vertex_ranges().size(), g.vertices());
  auto r = g.rebalanced();
  EXPECT_EQ(test::gather_edges(r), test::gather_edges(g));
}

TEST(Generators, GridIsTheLattice) {
  Runtime& rt = Runtime::current();
  auto g = generate(rt, GraphSpec::grid({5, 7}));
  expect_layout(g);
  EXPECT_EQ(g.vertices(), 35u);
  EXPECT_EQ(test::gather_edges(g), grid_edges(5, 7));
  EXPECT_FALSE(g.directed());

  auto g3 = generate(rt, GraphSpec::grid({3, 4, 5}));
  std::vector<EdgeTuple> want;
  auto id = [](std::uint64_t x, std::uint64_t y, std::uint64_t z) { return (x * 4 + y) * 5 + z; };
  for (std::uint64_t x = 0; x < 3; ++x)
    for (std::uint64_t y = 0; y < 4; ++y)
      for (std::uint64_t z = 0; z < 5; ++z) {
        auto v = id(x, y, z);
        for (auto u : {x + 1 < 3 ? id(x + 1, y, z) : v, y + 1 < 4 ? id(x, y + 1, z) : v, z + 1 < 5 ? id(x, y, z + 1) : v})
          if (u != v) want.emplace_back(u, v, 1.0), want.emplace_back(v, u, 1.0);
      }
  std::sort(want.begin(), want.end());
  EXPECT_EQ(test::gather_edges(g3), want);
}

TEST(Generators, SameGraphWhateverTheRankCount) {
  Runtime& rt = Runtime::current();
  for (auto spec : {GraphSpec::kronecker(9, 8, 42), GraphSpec::uniform(9, 4, 7)}) {
    spec.delete_fraction = 0.25;
    auto g = generate(rt, spec);
    expect_layout(g);
    EXPECT_EQ(test::gather_edges(g), serial_generate(spec)) << spec.describe();
  }
  auto a = GraphSpec::kronecker(9, 8, 1), b = GraphSpec::kronecker(9, 8, 2);
  EXPECT_NE(serial_generate(a), serial_generate(b));
  // The scramble is a bijection.
  for (std::uint64_t n : {1ull, 2ull, 7ull, 1000ull, 1024ull}) {
    std::set<std::uint64_t> seen;
    for (std::uint64_t v = 0; v < n; ++v) seen.insert(permute_vertex(v, n, 5));
    EXPECT_EQ(seen.size(), n);
    EXPECT_LT(*seen.rbegin(), n);
  }
}

// edges() generates a batch at once (Kronecker eight candidates side by
// side); it must give what edge() gives one candidate at a time.
TEST(Generators, BatchIsEdgeByEdge) {
  auto deleted = GraphSpec::kronecker(7, 4, 3);
  deleted.delete_fraction = 0.5;
  for (const auto& spec : {GraphSpec::kronecker(1, 4, 1), GraphSpec::kronecker(9, 8, 42), GraphSpec::kronecker(33, 2, 5),
                           GraphSpec::uniform(9, 4, 7), GraphSpec::grid({5, 7}), deleted}) {
    const std::uint64_t total = spec.candidate_edges(), first = total / 3 + 1, last = std::min(total, first + 203);
    std::vector<std::uint64_t> src{17}, dst{19}, want_src{17}, want_dst{19};  // appended to, not replaced
    spec.edges(first, last, src, dst);
    Edge e;
    for (std::uint64_t i = first; i < last; ++i)
      if (spec.edge(i, e)) want_src.push_back(e.src), want_dst.push_back(e.dst);
    EXPECT_EQ(src, want_src) << spec.describe();
    EXPECT_EQ(dst, want_dst) << spec.describe();
  }
}

TEST(Generators, RejectBadParameters) {
  Runtime& rt = Runtime::current();
  EXPECT_THROW(generate(rt, GraphSpec::kronecker(0)), ConfigError);
  EXPECT_THROW(generate(rt, GraphSpec::grid({4})), ConfigError);
  auto s = GraphSpec::grid({4, 4});
  s.delete_fraction = 1.0;
  EXPECT_THROW(generate(rt, s), ConfigError);
}

class ComponentsOn : public ::testing::TestWithParam<int> {};

TEST_P(ComponentsOn, BothAlgorithmsMatchUnionFind) {
  Runtime& rt = Runtime::current();
  GraphSpec spec;
  switch (GetParam()) {
    case 0: spec = GraphSpec::kronecker(10, 4, 3); spec.delete_fraction = 0.6; break;
    case 1: spec = GraphSpec::grid({30, 40}, 9); spec.delete_fraction = 0.45; break;
    case 2: spec = GraphSpec::grid({6, 7, 8}, 4); spec.delete_fraction = 0.6; spec.permute = true; break;
    default: spec = GraphSpec::grid({60, 60}); break;
  }
  auto g = generate(rt, spec);
  auto edges = test::gather_edges(g);
  auto want = test::union_find_labels(g.vertices(), edges);

  auto lp = label_propagation(g);
  auto sv = fastsv(g);
  EXPECT_EQ(test::gather_all(lp.labels), want) << spec.describe();
  EXPECT_EQ(test::gather_all(sv.labels), want) << spec.describe();
  EXPECT_EQ(check_labels(g, lp.labels), "");
  EXPECT_GT(lp.rounds, 0);
  if (GetParam() == 3) {
    // Label propagation is local first: on the unscrambled grid (ranks hold
    // bands of rows) its global rounds follow the rank crossings, not the
    // diameter of 118; at 1 rank one round finds everything.
    EXPECT_LE(lp.rounds, 2 * rt.size() + 2);
    if (rt.size() == 1) {
      EXPECT_EQ(lp.rounds, 1);
    }
  }

  std::map<std::uint64_t, std::uint64_t> sizes;
  for (auto l : want) ++sizes[l];
  std::uint64_t best = 0, best_label = 0;
  for (auto [l, s] : sizes)
    if (s > best) best = s, best_label = l;
  auto summary = summarize(g, sv.labels);
  EXPECT_EQ(summary.count, sizes.size());
  EXPECT_EQ(summary.largest_size, best);
  EXPECT_EQ(summary.largest_label, best_label);
  EXPECT_EQ(summary.vertices, g.vertices());  // the sizes sum to the vertex count (what --verify checks)

  // The largest component: kept vertices numbered in order, edges relabelled.
  auto lcc = largest_component(g, sv.labels);
  expect_layout(lcc.graph);
  std::vector<std::uint64_t> old_ids, new_of(g.vertices(), ~0ull);
  for (std::uint64_t v = 0; v < g.vertices(); ++v)
    if (want[v] == best_label) new_of[v] = old_ids.size(), old_ids.push_back(v);
  EXPECT_EQ(test::gather_all(lcc.original_ids), old_ids);
  std::vector<EdgeTuple> want_edges;
  for (auto& [u, v, w] : edges)
    if (want[u] == best_label) want_edges.emplace_back(new_of[u], new_of[v], w);
  std::sort(want_edges.begin(), want_edges.end());
  EXPECT_EQ(lcc.graph.vertices(), best);
  EXPECT_EQ(test::gather_edges(lcc.graph), want_edges);
  auto again = fastsv(lcc.graph);
  EXPECT_EQ(summarize(lcc.graph, again.labels).count, 1u);
}

INSTANTIATE_TEST_SUITE_P(Graphs, ComponentsOn, ::testing::Values(0, 1, 2, 3));

TEST(Components, CheckLabelsFindsWrongLabels) {
  Runtime& rt = Runtime::current();
  auto g = generate(rt, GraphSpec::grid({8, 8}));
  auto c = fastsv(g);
  EXPECT_EQ(check_labels(g, c.labels), "");
  if (c.labels.is_local(63)) c.labels.at(63) = 62;
  EXPECT_NE(check_labels(g, c.labels), "");
}

// Two triangles {0,1,2} {3,4,5} and a path 6-7-8, plus isolated vertex 9,
// checked with labellings given in full (the same on every rank count).
struct LabelCase {
  const char* why;
  std::vector<std::uint64_t> labels;
  const char* expected_words;  // "" for a right labelling
};

std::string check_given_labels(const std::vector<std::uint64_t>& given, bool directed, std::size_t arcs_per_block) {
  Runtime& rt = Runtime::current();
  LocalEdges e;
  if (rt.rank() == 0) {
    for (auto [u, v] : std::vector<std::pair<int, int>>{{0, 1}, {1, 2}, {2, 0}, {3, 4}, {4, 5}, {5, 3}, {6, 7}, {7, 8}}) {
      e.add(u, v);
      if (!directed) e.add(v, u);
    }
  }
  auto g = EdgeList::build(rt, 10, directed, std::move(e));
  DistArray<std::uint64_t> labels(rt, g.vertex_ranges());
  auto l = labels.local();
  for (std::size_t i = 0; i < l.size(); ++i) l[i] = given[g.local_vertex_begin() + i];
  return check_labels(g, labels, arcs_per_block);
}

TEST(Components, CheckLabelsRejectsEveryWrongLabelling) {
  const std::vector<LabelCase> cases = {
      {"right", {0, 0, 0, 3, 3, 3, 6, 6, 6, 9}, ""},
      {"two triangles share label 0", {0, 0, 0, 0, 0, 0, 6, 6, 6, 9}, "share that label"},
      {"everything labelled 0", {0, 0, 0, 0, 0, 0, 0, 0, 0, 0}, "share that label"},
      {"isolated vertex joins a path's label", {0, 0, 0, 3, 3, 3, 6, 6, 6, 6}, "share that label"},
      {"a triangle split in two", {0, 0, 2, 3, 3, 3, 6, 6, 6, 9}, "joins labels"},
      {"a label above the vertex id", {0, 0, 0, 4, 4, 4, 6, 6, 6, 9}, "above its own id"},
      {"a label that is not a root", {0, 0, 0, 3, 3, 3, 6, 6, 7, 9}, "whose own label"},
      {"a component labelled with a middle vertex", {0, 0, 0, 3, 3, 3, 7, 7, 7, 9}, "above its own id"},
      {"a label that is another component's root", {0, 0, 0, 3, 3, 3, 3, 3, 3, 9}, "share that label"},
  };
  // Blocks of 3 arcs: the far ends' labels read in several blocks, the
  // wrong edge in any of them (ranks with fewer arcs read empty blocks).
  for (std::size_t arcs_per_block : {std::size_t{0}, std::size_t{3}}) {
    for (bool directed : {false, true}) {
      for (const auto& c : cases) {
        std::string got = check_given_labels(c.labels, directed, arcs_per_block);
        if (*c.expected_words == 0)
          EXPECT_EQ(got, "") << c.why;
        else
          EXPECT_NE(got.find(c.expected_words), std::string::npos) << c.why << ": got \"" << got << "\"";
        // Every rank returns the same message.
        auto all = gather_to_root<char>(Runtime::current().comm(), std::vector<char>(got.begin(), got.end()), 0);
        if (Runtime::current().rank() == 0) {
          std::string joined(all.begin(), all.end()), want;
          for (int r = 0; r < Runtime::current().size(); ++r) want += got;
          EXPECT_EQ(joined, want) << c.why;
        }
      }
    }
  }
}

TEST(Components, CheckLabelsRejectsMergedComponentsOfGeneratedGraphs) {
  Runtime& rt = Runtime::current();
  GraphSpec spec = GraphSpec::grid({20, 20}, 5);
  spec.delete_fraction = 0.5;
  auto g = generate(rt, spec);
  auto c = fastsv(g);
  ASSERT_EQ(check_labels(g, c.labels), "");
  auto summary = summarize(g, c.labels);
  ASSERT_GT(summary.count, 2u);
  // Merge the component of the last vertex into component 0.
  auto all = test::gather_all(c.labels);
  const std::uint64_t victim = all.back();
  ASSERT_NE(victim, 0u);
  for (std::size_t i = 0; i < c.labels.local().size(); ++i)
    if (c.labels.local()[i] == victim) c.labels.local()[i] = 0;
  EXPECT_NE(check_labels(g, c.labels).find("share that label"), std::string::npos);
  EXPECT_NE(check_labels(g, c.labels, 5).find("share that label"), std::string::npos);
  // A labelling that splits the largest component (its last vertex labelled
  // with itself), found inside a later block.
  auto right = fastsv(g);
  std::uint64_t split = 0;
  for (std::size_t i = 0; i < all.size(); ++i)
    if (all[i] == summary.largest_label) split = i;
  ASSERT_GT(split, summary.largest_label);
  if (right.labels.is_local(split)) right.labels.at(split) = split;
  EXPECT_NE(check_labels(g, right.labels, 5).find("joins labels"), std::string::npos);
}

TEST(Components, DirectedGraphsGetWeakComponents) {
  Runtime& rt = Runtime::current();
  LocalEdges e;
  if (rt.rank() == 0) e.add(1, 0), e.add(2, 1), e.add(4, 3), e.add(5, 5);
  auto g = EdgeList::build(rt, 6, true, std::move(e));
  std::vector<std::uint64_t> want{0, 0, 0, 3, 3, 5};
  auto lp = label_propagation(g), sv = fastsv(g);
  EXPECT_EQ(test::gather_all(lp.labels), want);
  EXPECT_EQ(test::gather_all(sv.labels), want);
  // Labels fit the directed graph's own vertex ranges, so they index it.
  EXPECT_EQ(lp.labels.distribution(), g.vertex_ranges());
  EXPECT_EQ(sv.labels.distribution(), g.vertex_ranges());
  auto lcc = largest_component(g, sv.labels);
  EXPECT_EQ(lcc.graph.vertices(), 3u);
  EXPECT_EQ(test::gather_edges(lcc.graph), (std::vector<EdgeTuple>{{1, 0, 1.0}, {2, 1, 1.0}}));
  DistArray<std::uint64_t> wrong(rt, Distribution::block(7, rt.size()));
  EXPECT_THROW(summarize(g, wrong), MismatchError);
  // A label outside the graph on one rank only: every rank throws, none waits.
  DistArray<std::uint64_t> outside(rt, g.vertex_ranges());
  if (outside.is_local(5)) outside.at(5) = 99;
  try {
    summarize(g, outside);
    ADD_FAILURE() << "no error";
  } catch (const RangeError& e) {
    EXPECT_NE(std::string(e.what()).find("vertex 5 has label 99"), std::string::npos) << e.what();
  }
}

TEST(LargestComponent, GoesToSharedStorageWhenAsked) {
  Runtime& rt = Runtime::current();
  auto g = generate(rt, GraphSpec::grid({10, 10}));
  auto c = fastsv(g);
  auto name = test::unique_name(rt, "lcc");
  {
    auto lcc = largest_component(g, c.labels, StorageOptions::shared(name));
    EXPECT_EQ(lcc.graph.storage_kind(), StorageKind::shared);
    EXPECT_EQ(lcc.original_ids.storage_kind(), StorageKind::shared);
    EXPECT_NE(lcc.graph.dst_metadata_path().find(name + "-dst"), std::string::npos);
    EXPECT_NE(lcc.graph.offsets_metadata_path().find(name + "-offsets"), std::string::npos);
    EXPECT_EQ(lcc.graph.vertices(), 100u);
    barrier(rt.comm());
  }
}

// Issue 41: the arc fingerprint runs compare without a reference solver:
// the sum over every arc of the same hash (A(u) times A(v) turned by 32
// bits, A a 64-bit mix: the forward symmetry sum), whatever the ranks and
// widths, and the same when reading an undirected file gives it.
TEST(ArcHash, IsTheSumOverTheGathersArcsAtEitherWidth) {
  Runtime& rt = Runtime::current();
  auto spec = GraphSpec::kronecker(10, 8, 5);
  auto g = generate(rt, spec);
  auto arc = [](std::uint64_t u, std::uint64_t v) {
    const std::uint64_t a = splitmix64(v);
    return splitmix64(u) * ((a << 32) | (a >> 32));
  };
  std::uint64_t want = 0;
  for (auto& [u, v, w] : test::gather_edges(g)) want += arc(u, v);
  EXPECT_EQ(arc_set_hash(g), want);
  {
    test::ScratchDir dir(rt);
    write_graph(g, dir.path() + "/g.tsg");
    auto read = read_graph(rt, dir.path() + "/g.tsg");
    EXPECT_FALSE(read.graph.directed());
    EXPECT_EQ(arc_set_hash(read.graph), want) << "the hash the undirected file's check computed";
  }
  auto other = g.with_id_width(g.id_width() == IdWidth::narrow ? IdWidth::wide : IdWidth::narrow);
  EXPECT_EQ(arc_set_hash(other), want);
  EXPECT_NE(arc_set_hash(g.transposed()), 0u);
  auto fewer = g.without_self_loops();  // none to drop: the same arcs
  EXPECT_EQ(arc_set_hash_hex(fewer), arc_set_hash_hex(g));
  auto sub = induced_subgraph(g, DistArray<std::uint8_t>(g.vertex_map()));  // nothing kept
  EXPECT_EQ(arc_set_hash(sub.graph), 0u);
  // A hub whose row is longer than the hash's block of arcs, beside short rows.
  LocalEdges star;
  if (rt.rank() == 0)
    for (std::uint64_t v = 1; v <= 9000; ++v) star.add(0, v), star.add(v, (v * 7) % 9001);
  auto hub = EdgeList::build(rt, 9001, true, std::move(star));
  want = 0;
  for (auto& [u, v, w] : test::gather_edges(hub)) want += arc(u, v);
  EXPECT_EQ(arc_set_hash(hub), want);
}

// Issue 41: the largest component in the graph's own arrays. The same graph
// and ids as the copy, for weighted and unweighted graphs with many
// components; a Shared graph keeps its names, its segments shrink to the
// component and the metadata says so.
TEST(LargestComponent, InPlaceIsTheCopyWithoutTheCopy) {
  Runtime& rt = Runtime::current();
  test::ScratchDir dir(rt);
  for (int weighted = 0; weighted < 2; ++weighted) {
    auto spec = GraphSpec::grid({30, 40}, 9);  // many components, the largest not all of the arcs
    spec.delete_fraction = 0.45;
    spec.permute = true;
    auto made = generate(rt, spec);
    LocalEdges e = made.local_copy();
    for (std::size_t k = 0; k < e.size() && weighted; ++k) e.weight.push_back(1.0 + static_cast<double>((e.src[k] + e.dst[k]) % 5));
    BuildOptions o;
    o.storage = StorageOptions::shared(test::unique_name(rt, "inplace"), dir.path());
    auto g = EdgeList::build(rt, made.vertices(), false, e, o);
    auto labels = fastsv(g).labels;
    auto copy = largest_component(g, labels);
    const std::string dst_meta = g.dst_metadata_path();
    const std::uint64_t arcs_before = g.arcs();
    auto lcc = largest_component(std::move(g), labels);
    expect_layout(lcc.graph);
    EXPECT_LT(lcc.graph.arcs(), arcs_before);
    EXPECT_EQ(lcc.graph.vertices(), copy.graph.vertices());
    EXPECT_EQ(lcc.graph.weighted(), weighted == 1);
    EXPECT_EQ(test::gather_edges(lcc.graph), test::gather_edges(copy.graph));
    EXPECT_EQ(test::gather_all(lcc.original_ids), test::gather_all(copy.original_ids));
    EXPECT_EQ(lcc.graph.dst_metadata_path(), dst_meta);  // the same arrays
    auto meta = SharedArrayMetadata::read(dst_meta);
    EXPECT_EQ(meta.length, lcc.graph.arcs());
    const std::string seg = dst_meta.substr(0, dst_meta.size() - 5) + ".r" + std::to_string(rt.rank()) + ".seg";
    EXPECT_EQ(std::filesystem::file_size(seg), meta.header_bytes + lcc.graph.id_bytes() * lcc.graph.local_arcs());
    EXPECT_EQ(summarize(lcc.graph, fastsv(lcc.graph).labels).count, 1u);
    barrier(rt.comm());
  }
}

// A kept set that is not a union of components loses the arcs that leave
// it, in place as in a copy.
TEST(LargestComponent, InPlaceSubgraphDropsArcsThatLeaveTheSet) {
  Runtime& rt = Runtime::current();
  auto g = generate(rt, GraphSpec::grid({12, 9}));
  DistArray<std::uint8_t> keep(g.vertex_map());
  for (std::size_t i = 0; i < keep.local().size(); ++i) keep.local()[i] = (g.local_vertex_begin() + i) % 3 != 1;
  auto copy = induced_subgraph(g, keep);
  auto moved = induced_subgraph(std::move(g), keep);
  expect_layout(moved.graph);
  EXPECT_EQ(test::gather_edges(moved.graph), test::gather_edges(copy.graph));
  EXPECT_EQ(test::gather_all(moved.original_ids), test::gather_all(copy.original_ids));
}

// Issue 41: the destination array is as wide as the graph needs.
TEST(IdWidth, NeededWidthFollowsTheVertexCount) {
  ScopedEnv unset("TESSERA_ID_BITS", nullptr);
  EXPECT_EQ(id_width_for(0), IdWidth::narrow);
  EXPECT_EQ(id_width_for(10), IdWidth::narrow);
  EXPECT_EQ(id_width_for(std::uint64_t{1} << 32), IdWidth::narrow);  // ids 0 .. 2^32 - 1 fit
  EXPECT_EQ(id_width_for((std::uint64_t{1} << 32) + 1), IdWidth::wide);
  EXPECT_EQ(id_width_for(~std::uint64_t{0}), IdWidth::wide);
  EXPECT_EQ(id_width_name(IdWidth::narrow), "uint32");
  EXPECT_EQ(id_width_name(IdWidth::wide), "uint64");
  EXPECT_EQ(static_cast<int>(IdWidth::narrow), 4);
  EXPECT_EQ(static_cast<int>(IdWidth::wide), 8);
  // Asked for 32-bit ids, a graph whose ids do not fit is refused on every
  // rank, before any vertex array of its size exists.
  Runtime& rt = Runtime::current();
  BuildOptions narrow;
  narrow.id_width = IdWidth::narrow;
  test::expect_error<RangeError>(
      [&] { EdgeList::build(rt, (std::uint64_t{1} << 32) + 1, true, LocalEdges{}, narrow); }, "64-bit");
}

// The suite runs this program again with TESSERA_ID_BITS=64: there every
// graph the other tests build is really wide.
TEST(IdWidth, DefaultWidthFollowsTheEnvironment) {
  Runtime& rt = Runtime::current();
  const IdWidth want = wide_ids_forced() ? IdWidth::wide : IdWidth::narrow;
  EXPECT_EQ(id_width_for(100), want);
  auto g = generate(rt, GraphSpec::grid({4, 4}));
  EXPECT_EQ(g.id_width(), want);
  EXPECT_EQ(g.symmetrized().id_width(), want);
  EXPECT_EQ(largest_component(g, fastsv(g).labels).graph.id_width(), want);
}

TEST(IdWidth, TesseraIdBitsForcesWideIdsOrIsRefused) {
  Runtime& rt = Runtime::current();
  auto small = [&](const BuildOptions& o = {}) {
    LocalEdges e;
    if (rt.rank() == 0) e.add(0, 1), e.add(1, 2), e.add(2, 2);
    return EdgeList::build(rt, 3, true, std::move(e), o);
  };
  {
    ScopedEnv bits("TESSERA_ID_BITS", "64");
    EXPECT_EQ(id_width_for(10), IdWidth::wide);
    auto g = small();
    EXPECT_EQ(g.id_width(), IdWidth::wide);
    EXPECT_EQ(g.id_bytes(), 8u);
    BuildOptions narrow;  // an explicit width wins over the variable
    narrow.id_width = IdWidth::narrow;
    EXPECT_EQ(small(narrow).id_width(), IdWidth::narrow);
    // Derived graphs keep their width whatever the variable says.
    EXPECT_EQ(small(narrow).symmetrized().id_width(), IdWidth::narrow);
  }
  {
    ScopedEnv bits("TESSERA_ID_BITS", "32");  // as narrow as the graph allows
    EXPECT_EQ(id_width_for(10), IdWidth::narrow);
    EXPECT_EQ(id_width_for((std::uint64_t{1} << 32) + 1), IdWidth::wide);
    EXPECT_EQ(small().id_width(), IdWidth::narrow);
  }
  {
    ScopedEnv bits("TESSERA_ID_BITS", "");  // empty: as if unset
    EXPECT_EQ(id_width_for(10), IdWidth::narrow);
  }
  for (const char* bad : {"17", "0", "64x", "thirty-two"}) {
    ScopedEnv bits("TESSERA_ID_BITS", bad);
    test::expect_error<ConfigError>([] { id_width_for(10); }, "TESSERA_ID_BITS");
    test::expect_error<ConfigError>([] { id_width_for(10); }, bad);
    // Building with the default width meets the same error, on every rank.
    test::expect_error<ConfigError>([&] { small(); }, "TESSERA_ID_BITS");
  }
}

// Both widths hold the same graph: the same arcs, rows, degrees and
// components, whichever width it was built or converted at.
TEST(IdWidth, BothWidthsGiveTheSameArcsAndComponents) {
  Runtime& rt = Runtime::current();
  ScopedEnv unset("TESSERA_ID_BITS", nullptr);
  std::vector<std::pair<std::string, EdgeList>> graphs;
  {
    auto spec = GraphSpec::kronecker(10, 4, 3);
    spec.delete_fraction = 0.6;
    graphs.emplace_back(spec.describe(), generate(rt, spec));
    auto grid = GraphSpec::grid({6, 7, 8}, 4);
    grid.delete_fraction = 0.6;
    grid.permute = true;
    graphs.emplace_back(grid.describe(), generate(rt, grid));
  }
  {
    // Directed and weighted, with self loops and duplicates, held on the last rank.
    LocalEdges e;
    if (rt.rank() == rt.size() - 1)
      for (std::uint64_t u = 0; u < 60; ++u) {
        e.add(u, (u * 13 + 5) % 60, static_cast<double>(u) + 0.25);
        if (u % 7 == 0) e.add(u, u, 2.0), e.add(u, (u * 13 + 5) % 60, 1.0);
      }
    graphs.emplace_back("weighted directed", EdgeList::build(rt, 60, true, std::move(e)));
  }
  for (const auto& [what, g] : graphs) {
    ASSERT_EQ(g.id_width(), IdWidth::narrow) << what;  // small graphs are narrow by default
    EXPECT_EQ(g.id_bytes(), 4u) << what;
    auto wide = g.with_id_width(IdWidth::wide);
    auto back = wide.with_id_width(IdWidth::narrow);
    EXPECT_EQ(wide.id_width(), IdWidth::wide) << what;
    EXPECT_EQ(wide.id_bytes(), 8u) << what;
    EXPECT_EQ(back.id_width(), IdWidth::narrow) << what;
    expect_layout(wide);
    expect_layout(back);

    auto arcs = test::gather_edges(g);
    EXPECT_EQ(test::gather_edges(wide), arcs) << what;
    EXPECT_EQ(test::gather_edges(back), arcs) << what;
    for (const EdgeList* h : {&wide, &back}) {
      EXPECT_EQ(h->vertex_ranges(), g.vertex_ranges()) << what;  // converting keeps the ranges
      EXPECT_EQ(h->arcs(), g.arcs()) << what;
      EXPECT_EQ(h->edges(), g.edges()) << what;
      EXPECT_EQ(h->self_loops(), g.self_loops()) << what;
      EXPECT_EQ(h->directed(), g.directed()) << what;
      EXPECT_EQ(h->weighted(), g.weighted()) << what;
      EXPECT_EQ(test::gather_all(h->in_degrees()), test::gather_all(g.in_degrees())) << what;
    }
    // The destinations read at their own width only.
    EXPECT_EQ(g.local_dst_as<std::uint32_t>().size(), g.local_arcs());
    EXPECT_EQ(wide.local_dst_as<std::uint64_t>().size(), wide.local_arcs());
    EXPECT_THROW(g.local_dst_as<std::uint64_t>(), MismatchError);
    EXPECT_THROW(wide.local_dst_as<std::uint32_t>(), MismatchError);
    for (std::uint64_t v = g.local_vertex_begin(); v < g.local_vertex_end(); ++v)
      ASSERT_EQ(wide.out_neighbours(v), g.out_neighbours(v)) << what << ", vertex " << v;
    // for_each_arc and local_copy see the rows the same way at both widths.
    auto narrow_copy = g.local_copy(), wide_copy = wide.local_copy();
    EXPECT_EQ(wide_copy.src, narrow_copy.src) << what;
    EXPECT_EQ(wide_copy.dst, narrow_copy.dst) << what;
    EXPECT_EQ(wide_copy.weight, narrow_copy.weight) << what;
    // Derived graphs keep the width.
    EXPECT_EQ(wide.symmetrized().id_width(), IdWidth::wide) << what;
    EXPECT_EQ(wide.transposed().id_width(), IdWidth::wide) << what;
    EXPECT_EQ(wide.without_self_loops().id_width(), IdWidth::wide) << what;
    EXPECT_EQ(test::gather_edges(wide.transposed()), test::gather_edges(g.transposed())) << what;

    auto want = test::union_find_labels(g.vertices(), arcs);
    for (const char* name : {"afforest", "fastsv", "lp"}) {
      auto narrow_labels = components_by(name, g), wide_labels = components_by(name, wide);
      EXPECT_EQ(test::gather_all(narrow_labels.labels), want) << name << " on " << what;
      EXPECT_EQ(test::gather_all(wide_labels.labels), want) << name << " on " << what << " (wide)";
      EXPECT_EQ(check_labels(wide, wide_labels.labels), "") << name << " on " << what;
    }
    auto lcc_narrow = largest_component(g, fastsv(g).labels);
    auto lcc_wide = largest_component(wide, fastsv(wide).labels);
    EXPECT_EQ(lcc_wide.graph.id_width(), IdWidth::wide) << what;
    EXPECT_EQ(test::gather_edges(lcc_wide.graph), test::gather_edges(lcc_narrow.graph)) << what;
    EXPECT_EQ(test::gather_all(lcc_wide.original_ids), test::gather_all(lcc_narrow.original_ids)) << what;
  }
  // Built wide on request, without a conversion.
  BuildOptions wide_sym;
  wide_sym.id_width = IdWidth::wide;
  wide_sym.symmetrize = true;
  LocalEdges e;
  if (rt.rank() == 0) e.add(0, 3), e.add(3, 1), e.add(2, 2);
  auto direct = EdgeList::build(rt, 4, false, std::move(e), wide_sym);
  EXPECT_EQ(direct.id_width(), IdWidth::wide);
  EXPECT_EQ(test::gather_edges(direct), (std::vector<EdgeTuple>{{0, 3, 1.0}, {1, 3, 1.0}, {2, 2, 1.0}, {3, 0, 1.0},
                                                                {3, 1, 1.0}}));
}

// Issue 41: edges() counts as the field does, arcs() what is stored.
TEST(EdgeList, CountsEdgesAsTheFieldDoesAndArcsAsStored) {
  Runtime& rt = Runtime::current();
  // Undirected: m = 12 distinct non-loop edges (some given twice, some in
  // both directions) and k = 3 self loops (one given twice), spread over the ranks.
  const std::uint64_t m = 12, k = 3;
  std::vector<std::pair<std::uint64_t, std::uint64_t>> given;
  for (std::uint64_t u = 0; u + 1 < 10; ++u) given.emplace_back(u, u + 1);  // path: 9 edges
  given.insert(given.end(), {{0, 9}, {12, 3}, {5, 11}});                      // 3 more
  given.insert(given.end(), {{1, 0}, {4, 5}, {3, 12}});                       // repeated edges
  given.insert(given.end(), {{2, 2}, {7, 7}, {13, 13}, {7, 7}});             // loops, one twice
  LocalEdges e;
  for (std::size_t i = 0; i < given.size(); ++i)
    if (i % static_cast<std::size_t>(rt.size()) == static_cast<std::size_t>(rt.rank()))
      e.add(given[i].first, given[i].second);
  BuildOptions o;
  o.symmetrize = true;
  o.drop_duplicates = true;
  auto g = EdgeList::build(rt, 14, false, std::move(e), o);
  EXPECT_FALSE(g.directed());
  EXPECT_EQ(g.self_loops(), k);
  EXPECT_EQ(g.arcs(), 2 * m + k);
  EXPECT_EQ(g.edges(), m + k);
  EXPECT_EQ(test::gather_edges(g).size(), g.arcs());
  EXPECT_EQ(all_reduce<std::uint64_t>(rt.comm(), g.local_arcs(), MPI_SUM), g.arcs());
  // Without its loops: 2m arcs, m edges.
  auto no_loops = g.without_self_loops();
  EXPECT_EQ(no_loops.self_loops(), 0u);
  EXPECT_EQ(no_loops.arcs(), 2 * m);
  EXPECT_EQ(no_loops.edges(), m);
  // A generated grid: 5 x 7 has 5 * 6 + 7 * 4 = 58 edges.
  auto grid = generate(rt, GraphSpec::grid({5, 7}));
  EXPECT_EQ(grid.edges(), 58u);
  EXPECT_EQ(grid.arcs(), 116u);
  EXPECT_EQ(grid.self_loops(), 0u);

  // Directed: every stored arc is an edge, loops and repeats included.
  LocalEdges d;
  if (rt.rank() == 0)
    for (auto [u, v] : given) d.add(u, v);
  auto dg = EdgeList::build(rt, 14, true, std::move(d));
  EXPECT_EQ(dg.arcs(), given.size());
  EXPECT_EQ(dg.edges(), dg.arcs());
  EXPECT_EQ(dg.self_loops(), 4u);
  // Symmetrizing a directed graph with loops: each loop stays one arc, and
  // repeats go (a symmetrized graph is simple), so it is g again.
  auto sym = dg.symmetrized();
  EXPECT_EQ(sym.self_loops(), k);
  EXPECT_EQ(sym.arcs(), 2 * m + k);
  EXPECT_EQ(sym.edges(), m + k);
  EXPECT_EQ(test::gather_edges(sym), test::gather_edges(g));

  // Bytes: destinations at the id width (and 8 per weight), offsets 8 bytes
  // for each rank's local vertices + 1.
  const auto P = static_cast<std::uint64_t>(rt.size());
  for (IdWidth width : {IdWidth::narrow, IdWidth::wide}) {
    auto h = g.with_id_width(width);
    EXPECT_EQ(h.id_bytes(), static_cast<std::size_t>(width));
    EXPECT_EQ(h.edge_array_bytes(), h.arcs() * h.id_bytes());
    EXPECT_EQ(h.offset_array_bytes(), (h.vertices() + P) * 8);
  }
  LocalEdges w;
  if (rt.rank() == 0) w.add(0, 1, 0.5), w.add(1, 2, 1.5), w.add(2, 2, 3.0);
  auto weighted = EdgeList::build(rt, 3, false, std::move(w), o);
  EXPECT_EQ(weighted.arcs(), 5u);
  EXPECT_EQ(weighted.edges(), 3u);
  for (IdWidth width : {IdWidth::narrow, IdWidth::wide}) {
    auto h = weighted.with_id_width(width);
    EXPECT_EQ(h.edge_array_bytes(), h.arcs() * (h.id_bytes() + 8));
  }
}
