// The largest component (and any induced subgraph) of a PackedGraph, re-coded
// in its own arrays: against a serial reference on the gathered arcs (union
// find, the largest component with the smallest label on ties, renumbered
// in order: the same at every rank count) and against the EdgeList's
// in-place extraction of the graph that was packed, mapped to its ids
// through original_ids(). The rows decode sorted and in range, each row's
// bytes are the ones a fresh encoding of it gives (so in place loses
// nothing), never more than before; a graph that is one component keeps its bytes;
// labels or flags on other vertex ranges and another job's arrays are
// refused by name.
#include <gtest/gtest.h>


#include "../test_util.hpp"
#include "graph_test_util.hpp"
#include "tessera/graph/components.hpp"
#include "tessera/graph/generators.hpp"
#include "tessera/graph/packed_graph.hpp"
#include "tessera/graph/subgraph.hpp"
#include "tessera/runtime/collective.hpp"
#include "tessera/runtime/error.hpp"

using namespace tessera;
using namespace tessera::graph;
using tessera::test::EdgeTuple;

namespace {

using Arc = std::pair<std::uint64_t, std::uint64_t>;

std::vector<Arc> arcs_of(const EdgeList& g) {
  std::vector<Arc> out;
  for (auto& [u, v, w] : test::gather_edges(g)) out.emplace_back(u, v);
  return out;
}
std::vector<Arc> mapped(std::vector<Arc> arcs, const std::vector<std::uint64_t>& ids) {
  for (auto& [u, v] : arcs) u = ids.at(u), v = ids.at(v);
  std::sort(arcs.begin(), arcs.end());
  return arcs;
}
std::vector<std::uint64_t> ids_or_identity(const DistArray<std::uint64_t>* ids, std::uint64_t n) {
  if (ids) return test::gather_all(*ids);
  std::vector<std::uint64_t> out(n);
  std::iota(out.begin(), out.end(), 0);
  return out;
}
std::vector<std::uint64_t> composed(const std::vector<std::uint64_t>& outer, const std::vector<std::uint64_t>& inner) {
  std::vector<std::uint64_t> out;
  for (auto x : inner) out.push_back(outer.at(x));
  return out;
}

// The serial answer for a packed graph's arcs (its ids): the summary, the
// kept vertices' old ids in order, the component's arcs in new ids.
struct Reference {
  ComponentSummary summary;
  std::vector<std::uint64_t> original;
  std::vector<Arc> arcs;
  std::uint64_t self_loops = 0;
};
Reference serial_largest(std::uint64_t n, const std::vector<EdgeTuple>& edges) {
  auto labels = test::union_find_labels(n, edges);
  std::vector<std::uint64_t> size(n, 0);
  for (auto l : labels) ++size[l];
  Reference r;
  for (std::uint64_t v = 0; v < n; ++v) {
    if (!size[v]) continue;
    ++r.summary.count;
    r.summary.isolated += size[v] == 1;
    r.summary.vertices += size[v];
    if (size[v] > r.summary.largest_size) r.summary.largest_size = size[v], r.summary.largest_label = v;
  }
  std::vector<std::uint64_t> new_id(n, kNoIndex);
  for (std::uint64_t v = 0; v < n; ++v)
    if (labels[v] == r.summary.largest_label && n) new_id[v] = r.original.size(), r.original.push_back(v);
  for (auto& [u, v, w] : edges)
    if (new_id[u] != kNoIndex) {
      EXPECT_NE(new_id[v], kNoIndex) << "an arc leaves the component";
      r.arcs.emplace_back(new_id[u], new_id[v]);
      r.self_loops += u == v;
    }
  std::sort(r.arcs.begin(), r.arcs.end());
  return r;
}

void expect_same_summary(const ComponentSummary& a, const ComponentSummary& b, bool same_ids) {
  EXPECT_EQ(a.count, b.count);
  EXPECT_EQ(a.largest_size, b.largest_size);
  EXPECT_EQ(a.isolated, b.isolated);
  EXPECT_EQ(a.vertices, b.vertices);
  if (same_ids) {
    EXPECT_EQ(a.largest_label, b.largest_label);
  }
}

// Every row decodes to sorted neighbours inside the graph, and its bytes are
// exactly those a fresh encoding of it gives.
void expect_canonical(const PackedGraph& p) {
  auto r = p.rows();
  auto off = p.offsets().local();
  auto bytes = p.bytes().local();
  ASSERT_EQ(off.size(), p.local_vertices() + 1);
  ASSERT_EQ(off.front(), 0u);
  ASSERT_EQ(off.back(), bytes.size());
  for (std::size_t i = 0; i < r.size(); ++i) {
    const std::uint64_t u = p.local_vertex_begin() + i;
    std::vector<std::uint64_t> row;
    const std::uint64_t d = r.for_each(i, [&](std::uint64_t v) { row.push_back(v); });
    ASSERT_EQ(d, row.size());
    ASSERT_TRUE(std::is_sorted(row.begin(), row.end())) << "row " << u;
    ASSERT_TRUE(row.empty() || row.back() < p.vertices()) << "row " << u;
    std::vector<std::uint8_t> want(byte_code::row_size<std::uint64_t>(u, row));
    byte_code::put_row<std::uint64_t>(u, row, want.data());
    ASSERT_TRUE(std::ranges::equal(bytes.subspan(off[i], off[i + 1] - off[i]), want)) << "row " << u;
  }
}

// e's rows packed by hand on e's own vertex ranges, its ids kept.
PackedGraph packed_as_is(const EdgeList& e) {
  Runtime& rt = e.runtime();
  auto rows = e.row_offsets();
  std::vector<std::uint64_t> off{0};
  std::vector<std::uint8_t> buf;
  e.with_dst([&](auto dst) {
    using Id = std::remove_const_t<typename decltype(dst)::element_type>;
    for (std::size_t i = 0; i + 1 < rows.size(); ++i) {
      auto row = std::span<const Id>(dst.subspan(rows[i], rows[i + 1] - rows[i]));
      const std::size_t at = buf.size();
      buf.resize(at + byte_code::row_size(e.local_vertex_begin() + i, row));
      byte_code::put_row(e.local_vertex_begin() + i, row, buf.data() + at);
      off.push_back(buf.size());
    }
  });
  DistArray<std::uint64_t> offsets(rt, Distribution::weighted_block(all_gather(rt.comm(), std::uint64_t{off.size()})));
  std::copy(off.begin(), off.end(), offsets.local().begin());
  DistArray<std::uint8_t> bytes(rt, Distribution::weighted_block(all_gather(rt.comm(), std::uint64_t{buf.size()})));
  std::copy(buf.begin(), buf.end(), bytes.local().begin());
  auto p = PackedGraph::adopt(e.vertices(), e.directed(), e.self_loops(), std::move(offsets), std::move(bytes));
  EXPECT_EQ(p.vertex_ranges(), e.vertex_ranges());
  return p;
}

// The packed graph of `e` (options), its largest component in place, checked
// against the serial reference and the EdgeList's in-place component of e.
// `same_ids`: the packed graph keeps e's ids (ties then pick the same
// component in both; numbered by degree, the smallest label may differ).
// Returns the component.
PackedLargestComponent expect_matches(EdgeList e, const PackOptions& options) {
  const bool same_ids = !options.by_degree;
  auto p = options.by_degree ? PackedGraph::pack(e, options) : packed_as_is(e);
  const auto to_e = ids_or_identity(p.original_ids(), p.vertices());
  auto reference = serial_largest(p.vertices(), test::gather_edges(p.unpacked()));
  auto labels = components(p).labels;
  const ComponentSummary summary = summarize(p, labels);
  const std::uint64_t bytes_before = p.edge_array_bytes();
  const std::uint64_t old_begin = p.local_vertex_begin(), old_end = p.local_vertex_end();

  auto lcc = largest_component(std::move(p), labels);
  expect_canonical(lcc.graph);
  EXPECT_LE(lcc.graph.edge_array_bytes(), bytes_before);
  EXPECT_EQ(lcc.summary.count, summary.count);
  EXPECT_EQ(lcc.summary.largest_label, summary.largest_label);
  EXPECT_EQ(lcc.summary.largest_size, summary.largest_size);
  EXPECT_EQ(lcc.summary.isolated, summary.isolated);
  EXPECT_EQ(lcc.summary.vertices, summary.vertices);
  expect_same_summary(lcc.summary, reference.summary, true);
  // The serial reference, in the packed graph's ids: rank-count free.
  const auto original = test::gather_all(lcc.original_ids);
  EXPECT_EQ(original, reference.original);
  EXPECT_EQ(lcc.graph.vertices(), reference.original.size());
  EXPECT_EQ(arcs_of(lcc.graph.unpacked()), reference.arcs);
  EXPECT_EQ(lcc.graph.arcs(), reference.arcs.size());
  EXPECT_EQ(lcc.graph.self_loops(), reference.self_loops);
  EXPECT_EQ(lcc.graph.directed(), e.directed());
  // Its bytes: the reference's rows encoded, whatever the rank count.
  std::uint64_t want_bytes = 0;
  for (std::size_t k = 0; k < reference.arcs.size();) {
    std::vector<std::uint64_t> row;
    const std::uint64_t u = reference.arcs[k].first;
    for (; k < reference.arcs.size() && reference.arcs[k].first == u; ++k) row.push_back(reference.arcs[k].second);
    want_bytes += byte_code::row_size<std::uint64_t>(u, row);
  }
  EXPECT_EQ(lcc.graph.edge_array_bytes(), want_bytes);
  // Each rank kept its own vertices, in order.
  std::vector<std::uint64_t> mine;
  for (auto v : reference.original)
    if (v >= old_begin && v < old_end) mine.push_back(v);
  EXPECT_TRUE(std::ranges::equal(lcc.original_ids.local(), mine));
  EXPECT_EQ(lcc.graph.local_vertices(), mine.size());
  // The graph's own original_ids lead to e's ids.
  EXPECT_NE(lcc.graph.original_ids(), nullptr);
  if (lcc.graph.original_ids()) {
    EXPECT_EQ(test::gather_all(*lcc.graph.original_ids()), composed(to_e, original));
  }

  // The EdgeList's path on the graph that was packed, in e's ids.
  auto e_labels = components(e).labels;
  auto e_lcc = largest_component(std::move(e), e_labels);
  expect_same_summary(e_lcc.summary, lcc.summary, same_ids);
  const auto e_original = test::gather_all(e_lcc.original_ids);
  auto packed_set = composed(to_e, original);
  std::sort(packed_set.begin(), packed_set.end());
  EXPECT_EQ(packed_set, e_original);  // the EdgeList's is in order already
  EXPECT_EQ(mapped(arcs_of(lcc.graph.unpacked()), composed(to_e, original)),
            mapped(arcs_of(e_lcc.graph), e_original));
  EXPECT_EQ(lcc.graph.edges(), e_lcc.graph.edges());
  EXPECT_EQ(lcc.graph.self_loops(), e_lcc.graph.self_loops());
  return lcc;
}

PackOptions by_degree(bool on) {
  PackOptions o;
  o.by_degree = on;
  return o;
}

}  // namespace

TEST(PackedLargestComponent, KroneckerWithManyComponentsMatchesTheEdgeLists) {
  Runtime& rt = Runtime::current();
  for (int on = 0; on < 2; ++on)
    for (auto [scale, drop] : {std::pair{10, 0.6}, {11, 0.8}}) {
      auto spec = GraphSpec::kronecker(scale, 8, 4);
      spec.delete_fraction = drop;
      SCOPED_TRACE(spec.describe() + " by degree " + std::to_string(on));
      auto lcc = expect_matches(generate(rt, spec), by_degree(on == 1));
      EXPECT_GT(lcc.summary.count, 10u);
      EXPECT_LT(lcc.graph.vertices(), std::uint64_t{1} << scale);
    }
}

TEST(PackedLargestComponent, GridWithDeletionsMatchesTheEdgeLists) {
  Runtime& rt = Runtime::current();
  for (int on = 0; on < 2; ++on) {
    auto spec = GraphSpec::grid({30, 40}, 9);
    spec.delete_fraction = 0.45;
    spec.permute = true;
    SCOPED_TRACE("by degree " + std::to_string(on));
    auto lcc = expect_matches(generate(rt, spec), by_degree(on == 1));
    EXPECT_GT(lcc.summary.count, 1u);
  }
}

TEST(PackedLargestComponent, DirectedGraphsKeepTheirWeakComponent) {
  Runtime& rt = Runtime::current();
  auto spec = GraphSpec::kronecker(10, 4, 7);
  spec.delete_fraction = 0.5;
  auto made = generate(rt, spec);
  LocalEdges e, all = made.local_copy();
  for (std::size_t k = 0; k < all.size(); ++k)
    if ((all.src[k] ^ all.dst[k]) & 1 ? all.src[k] < all.dst[k] : all.src[k] > all.dst[k]) e.add(all.src[k], all.dst[k]);
  for (int on = 0; on < 2; ++on)
    expect_matches(EdgeList::build(rt, made.vertices(), true, e), by_degree(on == 1));
}

// Loops in the largest component and in a smaller one: only the kept count.
TEST(PackedLargestComponent, SelfLoopsOfTheKeptVerticesAreCounted) {
  Runtime& rt = Runtime::current();
  LocalEdges e;
  if (rt.rank() == 0) {
    for (auto [u, v] : {std::pair{0, 3}, {3, 6}, {6, 9}, {9, 12}, {12, 12}, {3, 3}, {1, 4}, {4, 4}, {2, 2}}) e.add(u, v);
  }
  BuildOptions b;
  b.symmetrize = true;
  auto make = [&] { return EdgeList::build(rt, 14, false, e, b); };
  ASSERT_EQ(make().self_loops(), 4u);
  for (int on = 0; on < 2; ++on) {
    auto lcc = expect_matches(make(), by_degree(on == 1));
    EXPECT_EQ(lcc.graph.self_loops(), 2u);
    EXPECT_EQ(lcc.graph.vertices(), 5u);
    EXPECT_EQ(lcc.graph.edges(), 6u);
  }
}

// Every kept vertex on the last rank: the others keep no rows at all.
TEST(PackedLargestComponent, AComponentOnOneRankOnly) {
  Runtime& rt = Runtime::current();
  const std::uint64_t per = 12, n = per * static_cast<std::uint64_t>(rt.size());
  const std::uint64_t last = n - per;
  LocalEdges e;
  if (rt.rank() == 0) {
    for (std::uint64_t v = last; v + 1 < n - 2; ++v) e.add(v, v + 1), e.add(v, last + (v * 5) % 10);
    for (std::uint64_t v = 0; v + 2 < last; v += 3) e.add(v, v + 1), e.add(v + 1, v + 2);  // paths of 3
  }
  BuildOptions b;
  b.symmetrize = true;
  b.drop_self_loops = true;
  b.drop_duplicates = true;
  b.vertex_ranges = Distribution::weighted_block(std::vector<std::uint64_t>(static_cast<std::size_t>(rt.size()), per));
  auto lcc = expect_matches(EdgeList::build(rt, n, false, e, b), by_degree(false));
  EXPECT_EQ(lcc.graph.vertices(), per - 2);
  EXPECT_EQ(lcc.graph.local_vertices(), rt.rank() == rt.size() - 1 ? per - 2 : 0u);
  if (rt.rank() != rt.size() - 1) {
    EXPECT_EQ(lcc.graph.bytes().local().size(), 0u);
  }
  EXPECT_EQ(test::gather_all(lcc.original_ids).front(), last);
}

// Two largest components of the same size: the smaller label wins, as in
// the EdgeList's path (both in the same ids).
TEST(PackedLargestComponent, ATieGoesToTheSmallerLabel) {
  Runtime& rt = Runtime::current();
  const std::uint64_t n = 40;
  LocalEdges e;
  if (rt.rank() == 0) {
    // Odd vertices from 1 (label 1) and even ones from 4 (label 4), ten
    // each, interleaved over every rank; 0 and 2 alone.
    for (std::uint64_t v = 1; v + 2 < 21; v += 2) e.add(v, v + 2);
    for (std::uint64_t v = 4; v + 2 < 24; v += 2) e.add(v, v + 2);
  }
  BuildOptions b;
  b.symmetrize = true;
  b.drop_duplicates = true;
  auto g = EdgeList::build(rt, n, false, e, b);
  auto e_summary = summarize(g, components(g).labels);
  ASSERT_EQ(e_summary.largest_size, 10u);
  auto lcc = expect_matches(std::move(g), by_degree(false));
  EXPECT_EQ(lcc.summary.largest_label, 1u);
  EXPECT_EQ(test::gather_all(lcc.original_ids).front(), 1u);
}

// A graph that is one component comes back as it was.
TEST(PackedLargestComponent, OneComponentKeepsItsBytes) {
  Runtime& rt = Runtime::current();
  for (auto spec : {GraphSpec::grid({17, 23}), GraphSpec::kronecker(9, 16, 2)}) {
    auto g = generate(rt, spec);
    if (summarize(g, components(g).labels).count != 1) {
      // kron has isolated vertices: take its component first.
      auto labels = components(g).labels;
      g = std::move(largest_component(std::move(g), labels).graph);
    }
    auto p = PackedGraph::pack(g);
    const auto offsets = test::gather_all(p.offsets()), ids = test::gather_all(*p.original_ids());
    const auto bytes = test::gather_all(p.bytes());
    const auto ranges = p.vertex_ranges();
    const std::uint64_t loops = p.self_loops(), arcs = p.arcs();
    auto labels = components(p).labels;
    auto lcc = largest_component(std::move(p), labels);
    EXPECT_EQ(lcc.summary.count, 1u);
    EXPECT_EQ(lcc.graph.vertex_ranges(), ranges);
    EXPECT_EQ(test::gather_all(lcc.graph.offsets()), offsets);
    EXPECT_EQ(test::gather_all(lcc.graph.bytes()), bytes);
    EXPECT_EQ(test::gather_all(*lcc.graph.original_ids()), ids);
    EXPECT_EQ(lcc.graph.self_loops(), loops);
    EXPECT_EQ(lcc.graph.arcs(), arcs);
    auto identity = ids_or_identity(nullptr, lcc.graph.vertices());
    EXPECT_EQ(test::gather_all(lcc.original_ids), identity);
  }
}

// Any kept set: arcs to dropped vertices leave their rows, which shrink in
// place; the same arcs as the EdgeList's induced subgraph.
TEST(PackedSubgraph, ArcsLeavingTheSetAreDroppedInPlace) {
  Runtime& rt = Runtime::current();
  auto spec = GraphSpec::kronecker(10, 8, 3);
  for (int on = 0; on < 2; ++on)
    for (std::uint64_t mod : {3, 2, 7}) {
      SCOPED_TRACE("by degree " + std::to_string(on) + ", mod " + std::to_string(mod));
      auto e = generate(rt, spec);
      auto p = on ? PackedGraph::pack(e) : packed_as_is(e);
      const auto to_e = ids_or_identity(p.original_ids(), p.vertices());
      const auto all = test::gather_edges(p.unpacked());
      const std::uint64_t before = p.edge_array_bytes();
      // Kept: e's ids not 1 mod `mod` (a hub or two dropped too).
      DistArray<std::uint8_t> keep(p.vertex_map());
      for (std::size_t i = 0; i < keep.local().size(); ++i)
        keep.local()[i] = to_e[p.local_vertex_begin() + i] % mod != 1;
      DistArray<std::uint8_t> e_keep(e.vertex_map());
      for (std::size_t i = 0; i < e_keep.local().size(); ++i) e_keep.local()[i] = (e.local_vertex_begin() + i) % mod != 1;
      auto sub = induced_subgraph(std::move(p), keep);
      expect_canonical(sub.graph);
      EXPECT_LT(sub.graph.edge_array_bytes(), before);
      // Serially: the arcs with both ends kept, renumbered in order.
      std::vector<std::uint64_t> new_id(to_e.size(), kNoIndex), original;
      for (std::uint64_t v = 0; v < to_e.size(); ++v)
        if (to_e[v] % mod != 1) new_id[v] = original.size(), original.push_back(v);
      std::vector<Arc> want;
      for (auto& [u, v, w] : all)
        if (new_id[u] != kNoIndex && new_id[v] != kNoIndex) want.emplace_back(new_id[u], new_id[v]);
      std::sort(want.begin(), want.end());
      EXPECT_EQ(test::gather_all(sub.original_ids), original);
      EXPECT_EQ(arcs_of(sub.graph.unpacked()), want);
      EXPECT_EQ(test::gather_all(*sub.graph.original_ids()), composed(to_e, original));
      // The EdgeList's in-place subgraph, in e's ids.
      auto e_sub = induced_subgraph(std::move(e), e_keep);
      EXPECT_EQ(mapped(arcs_of(sub.graph.unpacked()), composed(to_e, original)),
                mapped(arcs_of(e_sub.graph), test::gather_all(e_sub.original_ids)));
    }
}

TEST(PackedSubgraph, LoopsOfKeptVerticesAndEmptiedRows) {
  Runtime& rt = Runtime::current();
  LocalEdges e;
  if (rt.rank() == 0)
    for (auto [u, v] : {std::pair{0, 0}, {0, 1}, {1, 1}, {2, 3}, {3, 3}, {4, 5}, {5, 6}, {6, 6}}) e.add(u, v);
  BuildOptions b;
  b.symmetrize = true;
  auto p = packed_as_is(EdgeList::build(rt, 8, false, e, b));
  ASSERT_EQ(p.self_loops(), 4u);
  DistArray<std::uint8_t> keep(p.vertex_map());
  for (std::size_t i = 0; i < keep.local().size(); ++i) {
    const auto v = p.local_vertex_begin() + i;
    keep.local()[i] = v != 0 && v != 5;  // 1 keeps its loop, 4 and 6 lose their only other neighbour
  }
  auto sub = induced_subgraph(std::move(p), keep);
  expect_canonical(sub.graph);
  EXPECT_EQ(sub.graph.vertices(), 6u);
  EXPECT_EQ(sub.graph.self_loops(), 3u);
  // 1 2 3 4 6 7 -> 0 1 2 3 4 5: loops at 0, 2, 4; the edge 2-3 is 1-2.
  EXPECT_EQ(arcs_of(sub.graph.unpacked()), (std::vector<Arc>{{0, 0}, {1, 2}, {2, 1}, {2, 2}, {4, 4}}));
  EXPECT_EQ(sub.graph.edges(), 4u);
}

TEST(PackedLargestComponent, LabelsOnOtherRangesAreRefused) {
  Runtime& rt = Runtime::current();
  auto g = generate(rt, GraphSpec::grid({6, 7}));
  {
    auto p = PackedGraph::pack(g);
    DistArray<std::uint64_t> wrong(rt, Distribution::block(p.vertices() + 1, rt.size()));
    test::expect_error<MismatchError>([&] { largest_component(std::move(p), wrong); }, "not distributed like the graph");
  }
  {
    auto p = PackedGraph::pack(g);
    DistArray<std::uint8_t> wrong(rt, Distribution::block(p.vertices() + 3, rt.size()));
    test::expect_error<MismatchError>([&] { induced_subgraph(std::move(p), wrong); }, "not distributed like the graph");
  }
  // Labels that are not components: a kept vertex's neighbour outside.
  {
    auto p = packed_as_is(g);
    DistArray<std::uint64_t> split(p.vertex_map());
    for (std::size_t i = 0; i < split.local().size(); ++i) {
      const auto v = p.local_vertex_begin() + i;
      split.local()[i] = v < 30 ? 0 : 30;
    }
    test::expect_error<MismatchError>([&] { largest_component(std::move(p), split); }, "not the graph's components");
  }
}

TEST(PackedLargestComponent, AnotherJobsArraysAreRefused) {
  Runtime& rt = Runtime::current();
  test::ScratchDir dir(rt);
  auto g = generate(rt, GraphSpec::grid({8, 9}));
  PackOptions o;
  const std::string name = test::unique_name(rt, "packed-lcc");
  o.storage = StorageOptions::shared(name, dir.path());
  o.storage.persist = true;
  std::optional<Distribution> offset_ranges, byte_ranges;
  std::uint64_t vertices = 0, loops = 0;
  {
    auto p = PackedGraph::pack(g, o);
    offset_ranges = p.offsets().distribution();
    byte_ranges = p.bytes().distribution();
    vertices = p.vertices();
    loops = p.self_loops();
  }
  barrier(rt.comm());
  {
    auto opened = PackedGraph::adopt(
        vertices, false, loops,
        DistArray<std::uint64_t>(rt, *offset_ranges, StorageOptions::existing(name + "-offsets", dir.path())),
        DistArray<std::uint8_t>(rt, *byte_ranges, StorageOptions::existing(name + "-bytes", dir.path())));
    auto labels = components(opened).labels;
    test::expect_error<MismatchError>([&] { largest_component(std::move(opened), labels); }, "another job");
  }
  barrier(rt.comm());
}
