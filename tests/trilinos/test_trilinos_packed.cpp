// PackedRowMatrix (the Laplacian read in place from a PackedGraph's
// byte-coded rows) against EdgeListRowMatrix on the graph it was packed
// from, at 1-4 ranks: the rows as Ifpack2 copies them, the diagonal and the
// products, hitting times by Belos + Ifpack2 and the Fiedler pair by
// Anasazi. PackedGraph::pack numbers vertices by degree, so every packed
// result is mapped back through original_ids() before it is compared.
#include <Tpetra_CrsMatrix.hpp>
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <tuple>
#include <vector>

#include "../graph/graph_test_util.hpp"
#include "../test_util.hpp"
#include "tessera/graph/components.hpp"
#include "tessera/graph/generators.hpp"
#include "tessera/graph/packed_graph.hpp"
#include "tessera/runtime/collective.hpp"
#include "tessera/trilinos/belos.hpp"
#include "tessera/trilinos/hitting.hpp"
#include "tessera/trilinos/spectral.hpp"

using namespace tessera;
using namespace tessera::graph;
using namespace tessera::trilinos;

namespace {

// Kokkos and Tpetra for the whole run: after main's Runtime, before its end.
class TpetraEnvironment : public testing::Environment {
 public:
  void SetUp() override { session_ = std::make_unique<Session>(Runtime::current()); }
  void TearDown() override { session_.reset(); }

 private:
  std::unique_ptr<Session> session_;
};
const auto* const kEnvironment = testing::AddGlobalTestEnvironment(new TpetraEnvironment);

double value_at(std::uint64_t i) { return std::sin(0.37 * static_cast<double>(i)) + 0.1 * static_cast<double>(i % 7); }

// A graph packed by degree, with its numbering both ways on every rank.
struct Packed {
  PackedGraph p;
  std::vector<std::uint64_t> original;  // packed id -> the EdgeList's id
  std::vector<std::uint64_t> packed;    // the EdgeList's id -> packed id
};

Packed pack(const EdgeList& g) {
  Packed k{PackedGraph::pack(g), {}, {}};
  EXPECT_NE(k.p.original_ids(), nullptr);  // by_degree, the default: a renumbering to undo
  k.original = test::gather_all(*k.p.original_ids());
  EXPECT_EQ(k.original.size(), g.vertices());
  k.packed.assign(k.original.size(), 0);
  for (std::uint64_t v = 0; v < k.original.size(); ++v) k.packed[k.original[v]] = v;
  return k;
}

// Every rank's values in global order (packed ids for a packed graph).
std::vector<double> gather(Runtime& rt, std::span<const double> local) { return test::gather_all<double>(rt, local); }

// Packed-order values in the EdgeList's order.
std::vector<double> to_original(const Packed& k, const std::vector<double>& by_packed) {
  std::vector<double> out(by_packed.size());
  for (std::size_t v = 0; v < by_packed.size(); ++v) out[k.original[v]] = by_packed[v];
  return out;
}

// Local flags of the vertices `ids` (global ids of the graph at hand).
template <class Graph>
std::vector<std::uint8_t> flags_of(const Graph& g, const std::vector<std::uint64_t>& ids) {
  std::vector<std::uint8_t> f(g.local_vertices(), 0);
  for (auto v : ids)
    if (v - g.local_vertex_begin() < g.local_vertices()) f[v - g.local_vertex_begin()] = 1;
  return f;
}

// The largest component of a Kronecker graph (connected: hitting times
// reach every vertex and λ₂ > 0), and a rectangular grid (connected, λ₂
// simple: the Fiedler vector is unique up to sign).
EdgeList kron_lcc(Runtime& rt, int scale, int edge_factor, std::uint64_t seed) {
  auto g = generate(rt, GraphSpec::kronecker(scale, edge_factor, seed));
  auto c = afforest(g);
  return std::move(largest_component(std::move(g), c.labels).graph);
}

// Every entry (row, column, value) of a matrix over all ranks, sorted, read
// through getLocalRowCopy (local columns through the column Map to global
// ids) and renamed by `rename` (packed -> original) when given.
using Entry = std::tuple<std::uint64_t, std::uint64_t, double>;
template <class Graph>
std::vector<Entry> all_entries(const LaplacianRowMatrix<Graph>& m, const std::vector<std::uint64_t>* rename) {
  const Graph& g = m.graph();
  Runtime& rt = g.runtime();
  const std::size_t max = m.TESSERA_TPETRA_LOCAL(MaxNumRowEntries)();
  TpetraRowMatrix::nonconst_local_inds_host_view_type cols("cols", max);
  TpetraRowMatrix::nonconst_values_host_view_type vals("vals", max);
  std::vector<std::uint64_t> rows, columns;
  std::vector<double> values;
  auto col_map = m.getColMap();
  for (LocalOrdinal i = 0; i < static_cast<LocalOrdinal>(g.local_vertices()); ++i) {
    size_t n = 0;
    m.getLocalRowCopy(i, cols, vals, n);
    EXPECT_EQ(n, m.getNumEntriesInLocalRow(i));
    for (size_t k = 0; k < n; ++k) {
      rows.push_back(g.local_vertex_begin() + static_cast<std::uint64_t>(i));
      columns.push_back(static_cast<std::uint64_t>(col_map->getGlobalElement(cols(k))));
      values.push_back(vals(k));
    }
  }
  auto r = test::gather_all<std::uint64_t>(rt, rows), c = test::gather_all<std::uint64_t>(rt, columns);
  auto v = test::gather_all<double>(rt, values);
  std::vector<Entry> out;
  for (std::size_t k = 0; k < r.size(); ++k)
    out.emplace_back(rename ? (*rename)[r[k]] : r[k], rename ? (*rename)[c[k]] : c[k], v[k]);
  std::sort(out.begin(), out.end());
  return out;
}

// The same operator, entry for entry, with and without grounding; the same
// diagonal, norm, sizes, and products (a block and one column) after
// renumbering.
void expect_same_matrix(const EdgeList& g, const std::vector<std::uint64_t>& grounded, const char* what) {
  Runtime& rt = g.runtime();
  const Packed k = pack(g);
  std::vector<std::uint64_t> packed_grounded;
  for (auto v : grounded) packed_grounded.push_back(k.packed[v]);
  const auto ef = flags_of(g, grounded), pf = flags_of(k.p, packed_grounded);
  const EdgeListRowMatrix m(g, ef);
  const PackedRowMatrix pm(k.p, pf);
  const std::string how = std::string(what) + (grounded.empty() ? "" : " grounded");
  EXPECT_EQ(pm.getGlobalNumEntries(), m.getGlobalNumEntries()) << how;
  EXPECT_EQ(pm.getGlobalMaxNumRowEntries(), m.getGlobalMaxNumRowEntries()) << how;
  EXPECT_NEAR(pm.getFrobeniusNorm(), m.getFrobeniusNorm(), 1e-12 * m.getFrobeniusNorm()) << how;
  EXPECT_EQ(pm.grounded_anywhere(), !grounded.empty()) << how;
  const auto want = all_entries(m, nullptr), got = all_entries(pm, &k.original);
  ASSERT_EQ(got.size(), want.size()) << how;
  for (std::size_t e = 0; e < want.size(); ++e) ASSERT_EQ(got[e], want[e]) << how << " entry " << e;  // exact: integers

  TpetraVector d(m.getRowMap()), pd(pm.getRowMap());
  m.getLocalDiagCopy(d);
  pm.getLocalDiagCopy(pd);
  auto dv = d.getLocalViewHost(Tpetra::Access::ReadOnly), pdv = pd.getLocalViewHost(Tpetra::Access::ReadOnly);
  std::vector<double> dl(dv.data(), dv.data() + g.local_vertices()), pdl(pdv.data(), pdv.data() + k.p.local_vertices());
  EXPECT_EQ(to_original(k, gather(rt, pdl)), gather(rt, dl)) << how;

  // Products: 3 columns at once (the block path when nothing is grounded and
  // the layout is owned or dense) and column by column otherwise.
  for (std::size_t columns : {std::size_t{1}, std::size_t{3}}) {
    TpetraMultiVector x(m.getDomainMap(), columns), y(m.getRangeMap(), columns);
    TpetraMultiVector px(pm.getDomainMap(), columns), py(pm.getRangeMap(), columns);
    {
      auto xv = x.getLocalViewHost(Tpetra::Access::OverwriteAll);
      auto pxv = px.getLocalViewHost(Tpetra::Access::OverwriteAll);
      for (std::size_t j = 0; j < columns; ++j) {
        for (std::size_t i = 0; i < g.local_vertices(); ++i) xv(i, j) = value_at(g.local_vertex_begin() + i + 1000 * j);
        for (std::size_t i = 0; i < k.p.local_vertices(); ++i)
          pxv(i, j) = value_at(k.original[k.p.local_vertex_begin() + i] + 1000 * j);
      }
    }
    m.apply(x, y, Teuchos::NO_TRANS, 2.0);
    pm.apply(px, py, Teuchos::NO_TRANS, 2.0);
    for (std::size_t j = 0; j < columns; ++j) {
      auto yv = y.getLocalViewHost(Tpetra::Access::ReadOnly);
      auto pyv = py.getLocalViewHost(Tpetra::Access::ReadOnly);
      std::vector<double> yl(g.local_vertices()), pyl(k.p.local_vertices());
      for (std::size_t i = 0; i < yl.size(); ++i) yl[i] = yv(i, j);
      for (std::size_t i = 0; i < pyl.size(); ++i) pyl[i] = pyv(i, j);
      // The same sums in another order (rows renumbered): rounding apart.
      test::expect_values_near(to_original(k, gather(rt, pyl)), gather(rt, yl), 1e-12, how.c_str());
    }
  }
}

TEST(TrilinosPacked, RowsDiagonalAndProductsMatchTheEdgeList) {
  Runtime& rt = Runtime::current();
  const auto kron = kron_lcc(rt, 10, 8, 3);
  const auto grid = generate(rt, GraphSpec::grid({40, 6}));
  for (const EdgeList* g : {&kron, &grid}) {
    const char* what = g == &kron ? "kron-10 LCC" : "grid 40x6";
    expect_same_matrix(*g, {}, what);
    expect_same_matrix(*g, {0, g->vertices() / 3, g->vertices() - 1}, what);
  }
  // The layouts a packed graph gets: a Kronecker graph's ranks read most
  // columns (dense), a long grid's few (compact); one rank owns them all.
  const Packed kk = pack(kron), gk = pack(grid);
  const PackedRowMatrix km(kk.p), gm(gk.p);
  if (rt.size() == 1) {
    EXPECT_EQ(km.column_layout(), ColumnLayout::owned);
    EXPECT_EQ(gm.column_layout(), ColumnLayout::owned);
  } else {
    EXPECT_EQ(km.column_layout(), ColumnLayout::dense);
    EXPECT_EQ(gm.column_layout(), ColumnLayout::compact);
  }
  // The CrsMatrix copy of the packed matrix is the same operator.
  auto crs = crs_copy(km);
  EXPECT_EQ(crs->getGlobalNumEntries(), km.getGlobalNumEntries());
  TpetraMultiVector x(km.getDomainMap(), 1), y1(km.getRangeMap(), 1), y2(km.getRangeMap(), 1);
  x.randomize();
  km.apply(x, y1);
  crs->apply(x, y2);
  y1.update(-1.0, y2, 1.0);
  EXPECT_LE(y1.getVector(0)->norm2(), 1e-12 * std::max(1.0, y2.getVector(0)->norm2()));
}

// Hitting times on the EdgeList and on its packing, each matrix kind and
// preconditioner on the packed side, compared per vertex.
void expect_same_hitting_times(const EdgeList& g, const std::vector<std::uint64_t>& targets, bool connected,
                               const char* what) {
  Runtime& rt = g.runtime();
  const Packed k = pack(g);
  std::vector<std::uint64_t> packed_targets;
  for (auto v : targets) packed_targets.push_back(k.packed[v]);
  BelosHittingOptions o;
  o.hitting.cg.tolerance = 1e-11;  // kron's hitting times reach ~1e-12 before rounding stops them
  o.hitting.connected = connected;
  const auto want = belos_hitting_times(g, targets, o);
  ASSERT_TRUE(want.result.solve.converged) << what << ": " << linalg::to_string(want.result.solve.status) << " "
                                           << want.result.solve.relative_residual << " " << want.result.solve.reason;
  const auto want_times = gather(rt, want.result.times.local());
  for (MatrixKind kind : {MatrixKind::edge_list, MatrixKind::crs})
    for (Preconditioner pre : {Preconditioner::diagonal, Preconditioner::relaxation}) {
      BelosHittingOptions po = o;
      po.matrix = kind;
      po.preconditioner = pre;
      const auto got = belos_hitting_times(k.p, packed_targets, po);
      const std::string how = std::string(what) + " packed " + to_string(kind) + " " + to_string(pre);
      EXPECT_TRUE(got.result.solve.converged) << how;
      EXPECT_LE(got.result.solve.relative_residual, 1e-11) << how;
      EXPECT_EQ(got.result.unreachable, want.result.unreachable) << how;
      EXPECT_EQ(got.result.targets, want.result.targets) << how;
      // Both solved to 1e-11 relative residual: per vertex within 1e-8.
      test::expect_values_near(to_original(k, gather(rt, got.result.times.local())), want_times, 1e-8, how.c_str());
      // Preconditioned CG on the same operator, renumbered: the iteration
      // counts agree closely.
      EXPECT_NEAR(got.result.solve.iterations, want.result.solve.iterations, 3 + want.result.solve.iterations / 10)
          << how;
    }
}

TEST(TrilinosPacked, HittingTimesOnKronLcc) {
  Runtime& rt = Runtime::current();
  const auto g = kron_lcc(rt, 10, 8, 3);
  expect_same_hitting_times(g, {0}, true, "kron-10 LCC");
  expect_same_hitting_times(g, {1, g.vertices() / 2}, false, "kron-10 LCC (reachability checked)");
}

TEST(TrilinosPacked, HittingTimesOnGrid) {
  const auto g = generate(Runtime::current(), GraphSpec::grid({17, 23}));
  expect_same_hitting_times(g, {0, 200}, true, "grid 17x23");
}

// A whole Kronecker graph (isolated vertices, small components): the packed
// path finds the unreachable vertices through its own products
// (reached_from) and must agree with FastSV's on the EdgeList.
TEST(TrilinosPacked, HittingTimesUnreachableVerticesAreNaN) {
  Runtime& rt = Runtime::current();
  const auto g = generate(rt, GraphSpec::kronecker(9, 8, 3));
  std::uint64_t hub = 0, best = 0;
  {
    auto d = test::gather_all(g.out_degrees());
    for (std::uint64_t v = 0; v < d.size(); ++v)
      if (d[v] > best) best = d[v], hub = v;
  }
  const Packed k = pack(g);
  BelosHittingOptions o;
  o.hitting.cg.tolerance = 1e-11;
  const std::vector<std::uint64_t> t{hub}, pt{k.packed[hub]};
  const auto want = belos_hitting_times(g, t, o);
  const auto got = belos_hitting_times(k.p, pt, o);
  EXPECT_GT(want.result.unreachable, 0u);
  EXPECT_EQ(got.result.unreachable, want.result.unreachable);
  test::expect_values_near(to_original(k, gather(rt, got.result.times.local())),
                           gather(rt, want.result.times.local()), 1e-8, "kron-9 whole");
  // Every vertex a target: nothing to solve, every time 0.
  std::vector<std::uint64_t> all(k.p.vertices());
  for (std::uint64_t v = 0; v < all.size(); ++v) all[v] = v;
  const auto zero = belos_hitting_times(k.p, all, o);
  for (double h : zero.result.times.local()) EXPECT_EQ(h, 0.0);
  // Refusals, on every rank.
  EXPECT_THROW(belos_hitting_times(k.p, std::vector<std::uint64_t>{}, o), ConfigError);
  EXPECT_THROW(belos_hitting_times(k.p, std::vector<std::uint64_t>{k.p.vertices()}, o), RangeError);
}

// λ₂ equal and the Fiedler vector equal up to sign (the packed start vector
// and sign rule follow the packed ids).
void expect_same_fiedler(const EdgeList& g, const char* what) {
  Runtime& rt = g.runtime();
  const Packed k = pack(g);
  SpectralOptions o;
  const auto want = spectral(g, o);
  const auto got = spectral(k.p, o);
  ASSERT_TRUE(want.converged) << what;
  ASSERT_TRUE(got.converged) << what;
  EXPECT_NEAR(got.lambda, want.lambda, 1e-8 * want.lambda) << what;
  EXPECT_LE(got.residual, 1e-8) << what;
  // A unique vector (up to sign) only when λ₂ is simple: the graphs here
  // have a clear gap to λ₃ (checked, so a failure says which it was).
  ASSERT_GT(want.next_lambda - want.lambda, 1e-3 * want.lambda) << what << ": λ₂ is (nearly) repeated";
  const auto a = gather(rt, want.vector), b = to_original(k, gather(rt, got.vector));
  ASSERT_EQ(a.size(), b.size());
  double dot = 0;
  for (std::size_t v = 0; v < a.size(); ++v) dot += a[v] * b[v];
  const double sign = dot < 0 ? -1.0 : 1.0;
  EXPECT_NEAR(std::abs(dot), 1.0, 1e-8) << what;  // both unit vectors
  double worst = 0;
  for (std::size_t v = 0; v < a.size(); ++v) worst = std::max(worst, std::abs(a[v] - sign * b[v]));
  EXPECT_LE(worst, 1e-6) << what;
}

TEST(TrilinosPacked, FiedlerOnKronLccAndGrid) {
  Runtime& rt = Runtime::current();
  expect_same_fiedler(kron_lcc(rt, 10, 8, 3), "kron-10 LCC");
  expect_same_fiedler(generate(rt, GraphSpec::grid({23, 17})), "grid 23x17");
  // The CrsMatrix copy of the packed graph's Laplacian gives the same λ₂.
  const auto g = generate(rt, GraphSpec::grid({23, 17}));
  const Packed k = pack(g);
  SpectralOptions o;
  const auto lean = spectral(k.p, o);
  o.matrix = MatrixKind::crs;
  const auto crs = spectral(k.p, o);
  EXPECT_NEAR(crs.lambda, lean.lambda, 1e-8 * lean.lambda);
  // Eigenvector centrality reads the packed degrees: the same λ_max.
  SpectralOptions c;
  c.what = SpectralWhat::centrality;
  const double want_max = spectral(g, c).lambda;
  EXPECT_NEAR(spectral(k.p, c).lambda, want_max, 1e-8 * want_max);
}

TEST(TrilinosPacked, DisconnectedGraphRefusedForFiedler) {
  const auto g = generate(Runtime::current(), GraphSpec::kronecker(9, 8, 3));  // isolated vertices
  const Packed k = pack(g);
  EXPECT_THROW(spectral(k.p, {}), ConfigError);
}

// The timing the design asks about: Belos hitting times on a Kronecker LCC
// read from the EdgeList and from its packing, in one run (printed; the
// results compared). TESSERA_PACKED_TIMING_SCALE sets the scale (default
// 12 to keep the suite quick; 16 for the measurement).
TEST(TrilinosPacked, TimingKronLcc) {
  Runtime& rt = Runtime::current();
  const char* env = std::getenv("TESSERA_PACKED_TIMING_SCALE");
  const int scale = env ? std::atoi(env) : 12;
  const auto g = kron_lcc(rt, scale, 16, 1);
  const Packed k = pack(g);
  std::uint64_t hub = 0;  // the packed id 0: the highest degree
  const std::vector<std::uint64_t> t{k.original[hub]}, pt{hub};
  BelosHittingOptions o;
  o.hitting.connected = true;
  o.hitting.cg.tolerance = 1e-10;
  auto time = [&](auto&& f) {
    MPI_Barrier(rt.comm());
    const auto t0 = std::chrono::steady_clock::now();
    auto r = f();
    MPI_Barrier(rt.comm());
    return std::make_pair(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), std::move(r));
  };
  auto [el_seconds, el] = time([&] { return belos_hitting_times(g, t, o); });
  auto [pk_seconds, pk] = time([&] { return belos_hitting_times(k.p, pt, o); });
  auto [el2_seconds, el2] = time([&] { return belos_hitting_times(g, t, o); });
  auto [pk2_seconds, pk2] = time([&] { return belos_hitting_times(k.p, pt, o); });
  ASSERT_TRUE(el.result.solve.converged);
  ASSERT_TRUE(pk.result.solve.converged);
  test::expect_values_near(to_original(k, gather(rt, pk.result.times.local())), gather(rt, el.result.times.local()),
                           1e-6, "timing run");
  if (rt.rank() == 0) {
    const double el_ms = 1e3 * std::min(el.result.solve.seconds_per_iteration(), el2.result.solve.seconds_per_iteration());
    const double pk_ms = 1e3 * std::min(pk.result.solve.seconds_per_iteration(), pk2.result.solve.seconds_per_iteration());
    std::printf(
        "kron-%d LCC (%llu vertices, %llu edges), %d ranks: hitting times (Belos CG + Ifpack2 Diagonal)\n"
        "  EdgeList     %.3f s total (best of 2), %d iterations, %.3f ms/iteration; %llu bytes of rows\n"
        "  PackedGraph  %.3f s total (best of 2), %d iterations, %.3f ms/iteration; %llu bytes of rows (%.2f per edge)\n",
        scale, static_cast<unsigned long long>(g.vertices()), static_cast<unsigned long long>(g.edges()), rt.size(),
        std::min(el_seconds, el2_seconds), el.result.solve.iterations, el_ms,
        static_cast<unsigned long long>(g.arcs() * (g.id_width() == IdWidth::narrow ? 4 : 8)),
        std::min(pk_seconds, pk2_seconds), pk.result.solve.iterations, pk_ms,
        static_cast<unsigned long long>(k.p.edge_array_bytes()), k.p.bytes_per_edge());
  }
}

}  // namespace
