// PackedGraph: the byte code against a plain reference encoder, every row
// decoded (whole, in part, until found) equal to the EdgeList it came from,
// the numbering by degree against a serial one (the same at every rank
// count), the arcs mapped back through original_ids equal to the input's,
// multigraph rows, and a weighted graph refused.
#include <gtest/gtest.h>

#include <cstdlib>
#include <numeric>

#include "../test_util.hpp"
#include "graph_test_util.hpp"
#include "tessera/graph/generators.hpp"
#include "tessera/graph/packed_graph.hpp"
#include "tessera/runtime/error.hpp"

using namespace tessera;
using namespace tessera::graph;
using tessera::test::EdgeTuple;

namespace {

// LEB128 written out the long way, as a reference.
std::vector<std::uint8_t> leb128(std::uint64_t x) {
  std::vector<std::uint8_t> out;
  do {
    std::uint8_t b = x % 128;
    x /= 128;
    out.push_back(x ? b + 128 : b);
  } while (x);
  return out;
}

std::vector<std::uint64_t> row_of(const EdgeList& g, std::size_t i) {
  std::vector<std::uint64_t> out;
  g.with_dst([&](auto dst) {
    auto rows = g.row_offsets();
    for (auto k = rows[i]; k < rows[i + 1]; ++k) out.push_back(dst[k]);
  });
  return out;
}

// Every local row decoded each way equals the EdgeList's.
void expect_same_rows(const EdgeList& g, const PackedGraph& p) {
  ASSERT_EQ(p.local_vertices(), g.local_vertices());
  auto r = p.rows();
  for (std::size_t i = 0; i < r.size(); ++i) {
    auto want = row_of(g, i);
    ASSERT_EQ(r.degree(i), want.size()) << "row " << i;
    std::vector<std::uint64_t> all, middle;
    r.for_each(i, [&](std::uint64_t v) { all.push_back(v); });
    ASSERT_EQ(all, want) << "row " << i;
    r.for_range(i, 1, 3, [&](std::uint64_t v) { middle.push_back(v); });
    std::vector<std::uint64_t> want_middle;
    for (std::size_t k = 1; k < std::min<std::size_t>(3, want.size()); ++k) want_middle.push_back(want[k]);
    ASSERT_EQ(middle, want_middle) << "row " << i;
    if (!want.empty()) {
      std::size_t seen = 0;
      EXPECT_TRUE(r.find(i, [&](std::uint64_t v) { return ++seen, v == want.back(); }));
      EXPECT_EQ(seen, std::find(want.begin(), want.end(), want.back()) - want.begin() + 1);
    }
    EXPECT_FALSE(r.find(i, [](std::uint64_t) { return false; }));
  }
}

}  // namespace

TEST(ByteCode, MatchesTheReferenceAtEveryLengthBoundary) {
  std::vector<std::uint64_t> values = {0, 1, 127, 128, 300, 16383, 16384, (1ull << 21) - 1, 1ull << 21,
                                       (1ull << 32) - 1, 1ull << 32, (1ull << 63) + 5, ~0ull};
  for (auto x : values) {
    std::uint8_t buf[16];
    auto* end = byte_code::put(x, buf);
    EXPECT_EQ(std::vector<std::uint8_t>(buf, end), leb128(x)) << x;
    EXPECT_EQ(byte_code::size_of(x), leb128(x).size()) << x;
    const std::uint8_t* p = buf;
    EXPECT_EQ(byte_code::get(p), x);
    EXPECT_EQ(p, end);
  }
  for (std::int64_t d : {0LL, 1LL, -1LL, 63LL, -64LL, 1LL << 40, -(1LL << 40)})
    EXPECT_EQ(byte_code::unzigzag(byte_code::zigzag(d)), d);
  EXPECT_EQ(byte_code::zigzag(-1), 1u);
  EXPECT_EQ(byte_code::zigzag(1), 2u);
}

TEST(PackedGraph, RowsDecodeAsTheEdgeListsInTheSameIds) {
  Runtime& rt = Runtime::current();
  for (auto spec : {GraphSpec::kronecker(10, 8, 3), GraphSpec::grid({20, 30}), GraphSpec::uniform(9, 4, 2)}) {
    auto g = generate(rt, spec);
    PackOptions o;
    o.by_degree = false;
    auto p = PackedGraph::pack(g, o);
    EXPECT_EQ(p.original_ids(), nullptr);
    EXPECT_EQ(p.vertices(), g.vertices());
    EXPECT_EQ(p.arcs(), g.arcs());
    EXPECT_EQ(p.edges(), g.edges());
    EXPECT_EQ(p.vertex_ranges(), g.vertex_ranges());
    expect_same_rows(g, p);
    // The bytes are the reference encoder's, row by row.
    std::uint64_t want_bytes = 0;
    for (std::size_t i = 0; i < g.local_vertices(); ++i) {
      auto row = row_of(g, i);
      if (row.empty()) continue;
      want_bytes += leb128(row.size()).size();
      const auto u = static_cast<std::int64_t>(g.local_vertex_begin() + i);
      const auto d0 = static_cast<std::int64_t>(row[0]) - u;
      want_bytes += leb128(d0 >= 0 ? 2 * static_cast<std::uint64_t>(d0) : 2 * static_cast<std::uint64_t>(-d0) - 1).size();
      for (std::size_t k = 1; k < row.size(); ++k) want_bytes += leb128(row[k] - row[k - 1]).size();
    }
    EXPECT_EQ(p.bytes().local().size(), want_bytes);
    EXPECT_EQ(test::gather_edges(p.unpacked()), test::gather_edges(g));
  }
}

TEST(PackedGraph, ByDegreeNumbersAsASerialStableSortAndKeepsEveryArc) {
  Runtime& rt = Runtime::current();
  auto g = generate(rt, GraphSpec::kronecker(11, 8, 5));
  auto degree = test::gather_all(g.out_degrees());
  std::uint64_t one_block_bytes = 0;
  for (std::uint64_t blocks : {1, 16, 3}) {
    PackOptions o;
    o.blocks = blocks;
    auto p = PackedGraph::pack(g, o);
    ASSERT_NE(p.original_ids(), nullptr);
    auto old_of_new = test::gather_all(*p.original_ids());
    // Serial: by block of old ids, then decreasing degree, then id.
    std::vector<std::uint64_t> want(g.vertices());
    std::iota(want.begin(), want.end(), 0);
    auto block = [&](std::uint64_t v) { return v * blocks / g.vertices(); };
    std::stable_sort(want.begin(), want.end(), [&](auto a, auto b) {
      return block(a) != block(b) ? block(a) < block(b) : degree[a] > degree[b];
    });
    EXPECT_EQ(old_of_new, want) << blocks << " blocks";
    // The arcs, renamed back, are the input's.
    auto packed = test::gather_edges(p.unpacked());
    for (auto& [u, v, w] : packed) u = old_of_new[u], v = old_of_new[v];
    std::sort(packed.begin(), packed.end());
    EXPECT_EQ(packed, test::gather_edges(g)) << blocks << " blocks";
    EXPECT_EQ(p.edges(), g.edges());
    EXPECT_LT(p.bytes_per_edge(), 4.0);
    if (blocks == 1) one_block_bytes = p.edge_array_bytes();
  }
  // By default the vertex count chooses the blocks: one below 2^17 vertices.
  EXPECT_EQ(test::gather_all(*PackedGraph::pack(g).original_ids()),
            test::gather_all(*PackedGraph::pack(g, PackOptions{.by_degree = true, .blocks = 1, .storage = {}}).original_ids()));
  // Numbering by degree shrinks a Kronecker graph's rows.
  PackOptions same;
  same.by_degree = false;
  EXPECT_LT(one_block_bytes, PackedGraph::pack(g, same).edge_array_bytes());
}

TEST(PackedGraph, MultigraphRowsAndSelfLoopsPack) {
  Runtime& rt = Runtime::current();
  LocalEdges e;
  if (rt.rank() == 0) {
    for (auto [u, v] : {std::pair{0, 1}, {0, 1}, {2, 2}, {3, 0}, {3, 3}, {1, 2}}) e.add(u, v);
  }
  BuildOptions b;
  b.symmetrize = true;
  b.keep_duplicates = true;
  auto g = EdgeList::build(rt, 5, false, std::move(e), b);
  PackOptions o;
  o.by_degree = false;
  auto p = PackedGraph::pack(g, o);
  expect_same_rows(g, p);
  EXPECT_EQ(p.edges(), g.edges());
  EXPECT_EQ(p.self_loops(), g.self_loops());
}

TEST(PackedGraph, AWeightedGraphIsRefusedByName) {
  Runtime& rt = Runtime::current();
  LocalEdges e;
  if (rt.rank() == 0) e.add(0, 1, 2.5);
  auto g = EdgeList::build(rt, 2, true, std::move(e));
  try {
    PackedGraph::pack(g);
    FAIL() << "a weighted graph packed";
  } catch (const ConfigError& err) {
    EXPECT_NE(std::string(err.what()).find("weights"), std::string::npos) << err.what();
  }
}

// Serial reference of a generated graph's numbering: each vertex's arcs as
// the generator gives them (both directions, loops dropped, duplicates
// counted), then by block of old ids, decreasing count, id.
std::vector<std::uint64_t> numbering_of(const GraphSpec& spec, std::uint64_t blocks) {
  const std::uint64_t n = spec.vertices();
  std::vector<std::uint64_t> src, dst, count(n, 0);
  spec.edges(0, spec.candidate_edges(), src, dst);
  for (std::size_t k = 0; k < src.size(); ++k)
    if (src[k] != dst[k]) ++count[src[k]], ++count[dst[k]];
  std::vector<std::uint64_t> order(n);
  std::iota(order.begin(), order.end(), 0);
  auto block = [&](std::uint64_t v) { return v * blocks / n; };
  std::stable_sort(order.begin(), order.end(), [&](auto a, auto b) {
    return block(a) != block(b) ? block(a) < block(b) : count[a] > count[b];
  });
  return order;
}

TEST(PackedGraph, BuiltStraightFromTheGeneratorInWindowsIsTheGeneratedGraph) {
  Runtime& rt = Runtime::current();
  GraphSpec thinned = GraphSpec::kronecker(11, 8, 9);
  thinned.delete_fraction = 0.4;
  GraphSpec grid = GraphSpec::grid({30, 41}, 2);
  grid.permute = true;
  for (const GraphSpec& spec : {GraphSpec::kronecker(12, 8, 3), thinned, grid, GraphSpec::uniform(11, 6, 4)}) {
    auto g = generate(rt, spec);
    auto want = test::gather_edges(g);
    std::vector<std::uint8_t> one_window;
    for (const char* window : {"", "3K"}) {  // one window; many (each a pass over the generator)
      ::setenv("TESSERA_FILL_WINDOW_BYTES", window, 1);
      std::vector<std::string> phases;
      auto p = generate_packed(rt, spec, PackOptions{.by_degree = true, .blocks = 3, .storage = {}},
                               [&](const std::string& s) { phases.push_back(s); });
      ::unsetenv("TESSERA_FILL_WINDOW_BYTES");
      ASSERT_NE(p.original_ids(), nullptr);
      auto old_of_new = test::gather_all(*p.original_ids());
      EXPECT_EQ(old_of_new, numbering_of(spec, 3)) << spec.describe();
      auto got = test::gather_edges(p.unpacked());
      for (auto& [u, v, w] : got) u = old_of_new[u], v = old_of_new[v];
      std::sort(got.begin(), got.end());
      EXPECT_EQ(got, want) << spec.describe() << " window " << window;
      EXPECT_EQ(p.edges(), g.edges());
      EXPECT_EQ(p.self_loops(), 0u);
      EXPECT_FALSE(p.directed());
      auto bytes = test::gather_all(p.bytes());
      if (*window == '\0') {
        one_window = bytes;
        EXPECT_EQ(phases.size(), 3u);
      } else {
        EXPECT_EQ(bytes, one_window) << spec.describe() << ": windows changed the rows";
        EXPECT_GT(phases.size(), 3u) << "a 3 KB window is one pass";
      }
    }
  }
}

TEST(PackedGraph, ABuildFromASourceRefusesWhatItCannotHold) {
  Runtime& rt = Runtime::current();
  auto refused = [&](const EdgeSource& source, const std::string& words) {
    try {
      PackedGraph::build(rt, 8, true, source);
      ADD_FAILURE() << "built, expected: " << words;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(words), std::string::npos) << e.what();
    }
  };
  std::vector<std::uint64_t> a{0, 1, 2}, b{1, 2, 9};
  std::vector<double> w{1, 2, 3};
  refused([&](const EdgeSink& take) { take({a, b, {}}); }, "outside [0, 8)");
  b[2] = 3;
  refused([&](const EdgeSink& take) { take({a, b, w}); }, "no weights");
  int calls = 0;  // a source that gives more edges on its second pass
  refused([&](const EdgeSink& take) { take({std::span(a).first(++calls == 1 ? 2 : 3), std::span(b).first(calls == 1 ? 2 : 3), {}}); },
          "other edges");
}
