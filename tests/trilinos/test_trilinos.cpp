// The trilinos/ layer against independent references at 1-4 ranks:
// EdgeListRowMatrix against linalg::Laplacian (Tessera's own operator) and
// against its Tpetra::CrsMatrix copy; Belos/Ifpack2 hitting times against
// Tessera's CG and against the closed form on a path; the memory each path
// adds; and the clear errors.
#include <Tpetra_CrsMatrix.hpp>
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <optional>
#include <string>

#include "../graph/graph_test_util.hpp"
#include "../test_util.hpp"
#include "tessera/graph/generators.hpp"
#include "tessera/linalg/edge_list_matrix.hpp"
#include "tessera/linalg/hitting_summary.hpp"
#include "tessera/linalg/hitting_times.hpp"
#include "tessera/linalg/laplacian.hpp"
#include "tessera/runtime/collective.hpp"
#include "tessera/runtime/memory.hpp"
#include "tessera/trilinos/belos.hpp"
#include "tessera/trilinos/hitting.hpp"

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

std::vector<double> gather(Runtime& rt, std::span<const double> local) {
  return test::gather_all<double>(rt, local);
}

std::vector<double> gather(Runtime& rt, const TpetraMultiVector& v) {
  auto view = v.getLocalViewHost(Tpetra::Access::ReadOnly);
  std::vector<double> local(view.extent(0));
  for (std::size_t i = 0; i < local.size(); ++i) local[i] = view(i, 0);
  return gather(rt, local);
}

// An undirected weighted graph with self loops and duplicate edges.
EdgeList weighted_graph(Runtime& rt) {
  test::SplitMix64 rng(7);
  LocalEdges e;
  const std::uint64_t n = 120;
  for (std::uint64_t k = 0; k < 900; ++k) {
    std::uint64_t u = rng.below(n), v = k % 50 == 0 ? u : rng.below(n);
    double w = 0.5 + static_cast<double>(rng.below(100)) / 25.0;
    if (k % static_cast<std::uint64_t>(rt.size()) == static_cast<std::uint64_t>(rt.rank())) e.add(u, v, w);
  }
  BuildOptions o;
  o.symmetrize = true;
  return EdgeList::build(rt, n, false, std::move(e), o);
}

// This rank's ghost vertices: the columns it reads and does not own (used
// by the memory tests only, which the sanitizer build leaves out).
[[maybe_unused]] std::uint64_t ghost_count(const EdgeList& g) {
  return g.with_dst([&](auto dst) {
    return std::uint64_t{
        GhostSet::remote_of(dst, g.local_vertex_begin(), g.local_vertex_end(), g.vertices()).size()};
  });
}

std::vector<std::uint8_t> grounded_every(const EdgeList& g, std::uint64_t stride) {
  std::vector<std::uint8_t> f(g.local_vertices());
  for (std::size_t i = 0; i < f.size(); ++i) f[i] = (g.local_vertex_begin() + i) % stride == 0;
  return f;
}

TEST(Trilinos, SessionAndMapsFollowTheRuntime) {
  Runtime& rt = Runtime::current();
  ASSERT_TRUE(available());
  EXPECT_TRUE(Session::active());
  EXPECT_THROW(Session second(rt), ConfigError);
  auto g = weighted_graph(rt);
  EdgeListRowMatrix m(g);
  EXPECT_EQ(m.getRowMap()->getGlobalNumElements(), g.vertices());
  EXPECT_EQ(m.getRowMap()->TESSERA_TPETRA_LOCAL(NumElements)(), g.local_vertices());
  EXPECT_EQ(m.getComm()->getSize(), rt.size());
  EXPECT_EQ(m.getComm()->getRank(), rt.rank());
  EXPECT_TRUE(m.getDomainMap()->isSameAs(*m.getRowMap()));
  // Dense layout: the column map is every vertex on every rank (local column = id).
  const std::size_t columns = m.column_layout() == EdgeListRowMatrix::ColumnLayout::dense ? g.vertices()
                                                                                         : g.local_vertices() + m.ghost_count();
  EXPECT_EQ(m.getColMap()->TESSERA_TPETRA_LOCAL(NumElements)(), columns);
  for (std::uint64_t v = g.local_vertex_begin(); v < g.local_vertex_end(); ++v)
    EXPECT_EQ(m.getColMap()->getGlobalElement(m.local_column(v)), static_cast<GlobalOrdinal>(v));
  EXPECT_EQ(m.getGraph()->getImporter().is_null(), all_reduce<std::uint64_t>(rt.comm(), m.ghost_count(), MPI_MAX) == 0);
}

// Tessera's own grounded Laplacian is the reference operator, in each
// column layout: a small weighted random graph (every rank reads most
// columns: dense, or owned at one rank) and a long grid (few ghosts: compact).
void expect_apply_matches_laplacian(const EdgeList& g, EdgeListRowMatrix::ColumnLayout layout) {
  Runtime& rt = g.runtime();
  for (std::uint64_t stride : {0ull, 5ull}) {
    auto flags = stride ? grounded_every(g, stride) : std::vector<std::uint8_t>{};
    linalg::EdgeListMatrix a(g);
    linalg::Laplacian lap(a, flags);
    EdgeListRowMatrix m(g, flags);
    EXPECT_EQ(m.column_layout(), rt.size() == 1 ? EdgeListRowMatrix::ColumnLayout::owned : layout);

    linalg::Vector x(g.vertex_map()), y(g.vertex_map()), d(g.vertex_map());
    auto xs = x.local();
    for (std::size_t i = 0; i < xs.size(); ++i) xs[i] = value_at(g.local_vertex_begin() + i);
    lap.apply(x, y, 2.0);
    lap.diagonal(d);

    TpetraMultiVector tx(m.getDomainMap(), 2), ty(m.getRangeMap(), 2);
    {
      auto v = tx.getLocalViewHost(Tpetra::Access::OverwriteAll);
      auto w = ty.getLocalViewHost(Tpetra::Access::OverwriteAll);
      for (std::size_t i = 0; i < xs.size(); ++i) {
        v(i, 0) = v(i, 1) = xs[i];
        w(i, 0) = 1.0;
        w(i, 1) = std::numeric_limits<double>::quiet_NaN();  // beta = 0 ignores it
      }
    }
    // Column 0: 2 L x + 0.5 * 1, column 1: 2 L x; via two applies.
    TpetraMultiVector t0(*ty.getVector(0), Teuchos::Copy);
    m.apply(*tx.getVector(0), t0, Teuchos::NO_TRANS, 2.0, 0.5);
    TpetraMultiVector t1(*ty.getVector(1), Teuchos::Copy);
    m.apply(*tx.getVector(1), t1, Teuchos::TRANS, 2.0, 0.0);
    auto want = gather(rt, y.local());
    auto got0 = gather(rt, t0), got1 = gather(rt, t1);
    for (auto& w : got0) w -= 0.5;
    test::expect_values_near(got0, want, 1e-12, "alpha L x + beta y");
    test::expect_values_near(got1, want, 1e-12, "alpha L x, beta 0");
    // Two columns at once.
    m.apply(tx, ty, Teuchos::NO_TRANS, 2.0, 0.0);
    test::expect_values_near(gather(rt, *ty.getVector(1)), want, 1e-12, "two-column apply");
    test::expect_values_near(gather(rt, *ty.getVector(0)), want, 1e-12, "two-column apply, column 0");
    // Two columns in place with beta = 1 (the dense layout's block product
    // reads both columns of X before it writes Y): 2 L x + x in each.
    TpetraMultiVector both(tx, Teuchos::Copy);
    m.apply(both, both, Teuchos::NO_TRANS, 2.0, 1.0);
    auto plus = want;
    auto xg = gather(rt, x.local());
    for (std::size_t i = 0; i < plus.size(); ++i) plus[i] += xg[i];
    test::expect_values_near(gather(rt, *both.getVector(0)), plus, 1e-12, "two columns in place, beta 1, column 0");
    test::expect_values_near(gather(rt, *both.getVector(1)), plus, 1e-12, "two columns in place, beta 1, column 1");
    // In place (X and Y the same vector): the product reads X while it
    // writes Y, so it must read a copy.
    TpetraMultiVector same(*tx.getVector(0), Teuchos::Copy);
    m.apply(same, same, Teuchos::NO_TRANS, 2.0, 0.0);
    test::expect_values_near(gather(rt, same), want, 1e-12, "apply with X and Y the same vector");

    TpetraVector td(m.getRowMap());
    m.getLocalDiagCopy(td);
    test::expect_values_near(gather(rt, td), gather(rt, d.local()), 1e-14, "diagonal");
  }
}

TEST(Trilinos, ApplyAndDiagonalMatchTesserasLaplacian) {
  Runtime& rt = Runtime::current();
  expect_apply_matches_laplacian(weighted_graph(rt), EdgeListRowMatrix::ColumnLayout::dense);
  expect_apply_matches_laplacian(generate(rt, GraphSpec::grid({40, 6})), EdgeListRowMatrix::ColumnLayout::compact);
}

// Without Tpetra's column Map and Import (what Ifpack2's Diagonal path
// builds) the matrix is the same operator with the same local columns; what
// it no longer has says so, and Relaxation, which asks for the Import at 2+
// ranks, is refused with that message.
void expect_omitted_columns_same_operator(const EdgeList& g) {
  Runtime& rt = g.runtime();
  auto flags = grounded_every(g, 5);
  EdgeListRowMatrix built(g, flags), lean(g, flags, TpetraColumns::omitted);
  EXPECT_EQ(lean.tpetra_columns(), TpetraColumns::omitted);
  EXPECT_EQ(lean.column_layout(), built.column_layout());
  EXPECT_EQ(lean.TESSERA_TPETRA_LOCAL(NumCols)(), built.getColMap()->TESSERA_TPETRA_LOCAL(NumElements)());
  // Local columns: Tpetra's numbering, computed without its map.
  for (std::uint64_t v = 0; v < g.vertices(); ++v)
    ASSERT_EQ(lean.local_column(v), built.getColMap()->getLocalElement(static_cast<GlobalOrdinal>(v))) << "vertex " << v;
  EXPECT_EQ(lean.local_column(g.vertices() + 3), -1);
  const std::size_t max = built.TESSERA_TPETRA_LOCAL(MaxNumRowEntries)();
  TpetraRowMatrix::nonconst_local_inds_host_view_type c1("c1", max), c2("c2", max);
  TpetraRowMatrix::nonconst_values_host_view_type v1("v1", max), v2("v2", max);
  for (LocalOrdinal i = 0; i < static_cast<LocalOrdinal>(g.local_vertices()); ++i) {
    size_t n1 = 0, n2 = 0;
    built.getLocalRowCopy(i, c1, v1, n1);
    lean.getLocalRowCopy(i, c2, v2, n2);
    ASSERT_EQ(n1, n2) << "row " << i;
    for (size_t k = 0; k < n1; ++k) {
      EXPECT_EQ(c1(k), c2(k)) << "row " << i;
      EXPECT_EQ(v1(k), v2(k)) << "row " << i;
    }
  }
  TpetraMultiVector x(built.getDomainMap(), 1), y1(built.getRangeMap(), 1), y2(built.getRangeMap(), 1);
  {
    auto v = x.getLocalViewHost(Tpetra::Access::OverwriteAll);
    for (std::size_t i = 0; i < g.local_vertices(); ++i) v(i, 0) = value_at(g.local_vertex_begin() + i);
  }
  built.apply(x, y1);
  lean.apply(x, y2);
  test::expect_values_near(gather(rt, y2), gather(rt, y1), 0, "apply without Tpetra's columns");

  // A consumer that asks hasColMap() first, as Tpetra intends, must never be
  // handed an exception: the answer is truthful for the matrix and its graph.
  auto local_columns = [](const TpetraRowMatrix& m) -> std::int64_t {
    if (!m.hasColMap()) return -1;
    return static_cast<std::int64_t>(m.getColMap()->TESSERA_TPETRA_LOCAL(NumElements)());
  };
  auto graph_local_columns = [](const TpetraRowGraph& m) -> std::int64_t {
    if (!m.hasColMap()) return -1;
    return static_cast<std::int64_t>(m.getColMap()->TESSERA_TPETRA_LOCAL(NumElements)());
  };
  EXPECT_TRUE(built.hasColMap());
  EXPECT_TRUE(built.getGraph()->hasColMap());
  EXPECT_EQ(local_columns(built), static_cast<std::int64_t>(built.TESSERA_TPETRA_LOCAL(NumCols)()));
  const bool lean_has = lean.column_layout() == EdgeListRowMatrix::ColumnLayout::owned;
  EXPECT_EQ(lean.hasColMap(), lean_has);
  EXPECT_EQ(lean.getGraph()->hasColMap(), lean_has);
  EXPECT_NO_THROW(local_columns(lean));
  EXPECT_NO_THROW(graph_local_columns(*lean.getGraph()));
  EXPECT_EQ(local_columns(lean), lean_has ? local_columns(built) : -1);

  auto lean_rcp = Teuchos::rcp(new EdgeListRowMatrix(g, flags, TpetraColumns::omitted));
  TpetraMultiVector b(lean_rcp->getRangeMap(), 1), sol(lean_rcp->getDomainMap(), 1);
  b.putScalar(1.0);
  if (lean.column_layout() == EdgeListRowMatrix::ColumnLayout::owned) {  // one rank: the row map, no Import
    EXPECT_EQ(lean.getColMap().get(), lean.getRowMap().get());
    EXPECT_TRUE(lean.getGraph()->getImporter().is_null());
    return;
  }
  auto expect_says_omitted = [](auto&& call, const char* what) {
    try {
      call();
      ADD_FAILURE() << what << ": no error";
    } catch (const ConfigError& e) {
      EXPECT_NE(std::string(e.what()).find("TpetraColumns::omitted"), std::string::npos) << e.what();
    }
  };
  expect_says_omitted([&] { lean.getColMap(); }, "getColMap");
  expect_says_omitted([&] { lean.getGraph()->getColMap(); }, "graph getColMap");
  expect_says_omitted([&] { lean.getGraph()->getImporter(); }, "graph getImporter");
  expect_says_omitted(
      [&] {
        BelosCg belos(lean_rcp, Preconditioner::relaxation);
        belos.solve(b, sol, 1e-8, 100);
      },
      "Relaxation");
}

TEST(Trilinos, OmittedTpetraColumnsSameOperator) {
  Runtime& rt = Runtime::current();
  expect_omitted_columns_same_operator(weighted_graph(rt));                      // dense at 2+ ranks
  expect_omitted_columns_same_operator(generate(rt, GraphSpec::grid({40, 6})));  // compact
}

// Row copies define the CrsMatrix; the copy must be the same operator, and
// the row access itself is checked against the edge arrays.
TEST(Trilinos, RowsNormAndCrsCopyAgree) {
  Runtime& rt = Runtime::current();
  auto g = weighted_graph(rt);
  auto flags = grounded_every(g, 7);
  EdgeListRowMatrix m(g, flags);
  auto crs = crs_copy(m);
  EXPECT_EQ(crs->getGlobalNumEntries(), m.getGlobalNumEntries());
  EXPECT_NEAR(crs->getFrobeniusNorm(), m.getFrobeniusNorm(), 1e-12 * m.getFrobeniusNorm());

  // Row sums of a Laplacian without grounding are zero: check through copies.
  EdgeListRowMatrix plain(g);
  const std::size_t max = plain.TESSERA_TPETRA_LOCAL(MaxNumRowEntries)();
  TpetraRowMatrix::nonconst_local_inds_host_view_type cols("cols", max);
  TpetraRowMatrix::nonconst_values_host_view_type vals("vals", max);
  TpetraRowMatrix::nonconst_global_inds_host_view_type gcols("gcols", max);
  for (LocalOrdinal i = 0; i < static_cast<LocalOrdinal>(g.local_vertices()); ++i) {
    size_t n = 0;
    plain.getLocalRowCopy(i, cols, vals, n);
    ASSERT_EQ(n, plain.getNumEntriesInLocalRow(i));
    double sum = 0;
    for (size_t k = 0; k < n; ++k) sum += vals(k);
    EXPECT_NEAR(sum, 0.0, 1e-12) << "row " << i;
    plain.getGlobalRowCopy(static_cast<GlobalOrdinal>(g.local_vertex_begin()) + i, gcols, vals, n);
    for (size_t k = 1; k < n; ++k) EXPECT_LT(gcols(k - 1), gcols(k)) << "row " << i;  // increasing, diagonal in place
    std::vector<LocalOrdinal> acols(max);
    std::vector<double> avals(max);
    size_t n2 = 0;
    plain.getLocalRowCopy(i, Teuchos::ArrayView<LocalOrdinal>(acols), Teuchos::ArrayView<double>(avals), n2);
    EXPECT_EQ(n2, n);
  }
  size_t n = 0;
  plain.getGlobalRowCopy(-1, gcols, vals, n);
  EXPECT_EQ(n, Teuchos::OrdinalTraits<size_t>::invalid());
  if (g.local_vertices() > 0 && max > 1) {
    TpetraRowMatrix::nonconst_local_inds_host_view_type small("small", 0);
    EXPECT_THROW(plain.getLocalRowCopy(0, small, vals, n), RangeError);
  }

  TpetraMultiVector x(m.getDomainMap(), 1), y1(m.getRangeMap(), 1), y2(m.getRangeMap(), 1);
  {
    auto v = x.getLocalViewHost(Tpetra::Access::OverwriteAll);
    for (std::size_t i = 0; i < g.local_vertices(); ++i) v(i, 0) = value_at(g.local_vertex_begin() + i);
  }
  m.apply(x, y1);
  crs->apply(x, y2);
  test::expect_values_near(gather(rt, y1), gather(rt, y2), 1e-12, "CrsMatrix copy");
}

TEST(Trilinos, UnsupportedOperationsSaySo) {
  Runtime& rt = Runtime::current();
  auto g = weighted_graph(rt);
  EdgeListRowMatrix m(g);
  EXPECT_FALSE(m.supportsRowViews());
  TpetraVector s(m.getRowMap());
  EXPECT_THROW(m.leftScale(s), ConfigError);
  EXPECT_THROW(m.rightScale(s), ConfigError);
  TpetraRowMatrix::local_inds_host_view_type c;
  TpetraRowMatrix::values_host_view_type v;
  if (g.local_vertices() > 0) {
    EXPECT_THROW(m.getLocalRowView(0, c, v), ConfigError);
  }
  // Wrong-length flags fail on every rank; a directed graph is refused.
  std::vector<std::uint8_t> wrong(rt.rank() == 0 ? g.local_vertices() + 1 : g.local_vertices(), 0);
  EXPECT_THROW(EdgeListRowMatrix(g, wrong), MismatchError);
  LocalEdges e;
  if (rt.rank() == 0) e.add(0, 1);
  auto directed = EdgeList::build(rt, 2, true, std::move(e));
  EXPECT_THROW(EdgeListRowMatrix{directed}, ConfigError);
}

// Belos (on the RowMatrix and on the CrsMatrix) against Tessera's own CG.
void expect_same_hitting_times(const EdgeList& g, std::vector<std::uint64_t> targets, const char* what) {
  Runtime& rt = g.runtime();
  linalg::HittingOptions o;
  o.cg.tolerance = 1e-12;
  linalg::EdgeListMatrix a(g);
  auto tessera_cg = linalg::hitting_times(g, a, targets, o);
  ASSERT_TRUE(tessera_cg.solve.converged) << what;
  auto want = gather(rt, tessera_cg.times.local());
  std::optional<int> diagonal_iterations;
  for (MatrixKind kind : {MatrixKind::edge_list, MatrixKind::crs})
    for (Preconditioner pre : {Preconditioner::diagonal, Preconditioner::relaxation}) {
      BelosHittingOptions b;
      b.hitting = o;
      b.matrix = kind;
      b.preconditioner = pre;
      auto belos = belos_hitting_times(g, targets, b);
      const std::string how = std::string(what) + " " + to_string(kind) + " " + to_string(pre);
      EXPECT_TRUE(belos.result.solve.converged) << how;
      EXPECT_LE(belos.result.solve.relative_residual, 1e-12) << how;
      EXPECT_EQ(belos.result.unreachable, tessera_cg.unreachable) << how;
      test::expect_values_near(gather(rt, belos.result.times.local()), want, 1e-8, how.c_str());
      // Same preconditioned CG: the iteration counts agree closely.
      EXPECT_NEAR(belos.result.solve.iterations, tessera_cg.solve.iterations, 3 + tessera_cg.solve.iterations / 10)
          << how;
      // Both Jacobi preconditioners are M = diag(A): the same iterates.
      if (kind == MatrixKind::edge_list && pre == Preconditioner::diagonal) diagonal_iterations = belos.result.solve.iterations;
      if (kind == MatrixKind::edge_list && pre == Preconditioner::relaxation) {
        EXPECT_EQ(belos.result.solve.iterations, *diagonal_iterations) << how;
      }
    }
}

TEST(Trilinos, BelosHittingTimesOnKron) {
  auto g = generate(Runtime::current(), GraphSpec::kronecker(9, 8, 3));
  expect_same_hitting_times(g, {linalg::highest_degree_vertex(g)}, "kron 9");  // isolated vertices: unreachable
}

TEST(Trilinos, BelosHittingTimesOnGrid) {
  auto g = generate(Runtime::current(), GraphSpec::grid({17, 23}));
  expect_same_hitting_times(g, {0, 200}, "grid 17x23");
}

TEST(Trilinos, BelosHittingTimesOnWeightedGraph) {
  auto g = weighted_graph(Runtime::current());
  expect_same_hitting_times(g, {3}, "weighted random");
}

// The 3-vertex path 0-1-2 with target 0 (ranks without rows at 3-4 ranks):
// h(1) = 3, h(2) = 4 worked by hand (h1 = 1 + h2/2, h2 = 1 + h1).
TEST(Trilinos, BelosOnTinyPath) {
  Runtime& rt = Runtime::current();
  LocalEdges e;
  if (rt.rank() == 0) {
    e.add(0, 1);
    e.add(1, 2);
  }
  BuildOptions o;
  o.symmetrize = true;
  auto g = EdgeList::build(rt, 3, false, std::move(e), o);
  std::vector<std::uint64_t> target{0};
  for (MatrixKind kind : {MatrixKind::edge_list, MatrixKind::crs}) {
    BelosHittingOptions b;
    b.matrix = kind;
    auto h = belos_hitting_times(g, target, b);
    test::expect_values_near(gather(rt, h.result.times.local()), {0.0, 3.0, 4.0}, 1e-10, "path");
  }
  expect_same_hitting_times(g, target, "path");
  // Every vertex a target: nothing to solve.
  std::vector<std::uint64_t> all{0, 1, 2};
  auto h = belos_hitting_times(g, all, {});
  test::expect_values_near(gather(rt, h.result.times.local()), {0.0, 0.0, 0.0}, 0, "all targets");
}

// The proof of "no copy": anonymous memory the operator adds, against a
// yardstick of 16 bytes per stored arc (the edge arrays when they held 8-byte
// sources and destinations; the graph's own arrays are smaller now, 4-byte
// destinations and row offsets, so the bounds keep their old meaning), summed
// over the ranks. The CrsMatrix stores 12 bytes per entry (int column, double
// value) plus its row offsets.
// Not in the sanitizer build: AddressSanitizer's redzones and quarantine
// inflate every allocation; memory is measured in the normal build.
#if !defined(__SANITIZE_ADDRESS__)
TEST(Trilinos, RowMatrixAddsLittleMemoryCrsCopiesTheEdges) {
  Runtime& rt = Runtime::current();
  auto g = generate(rt, GraphSpec::kronecker(15, 16, 5));
  const double edge_bytes = static_cast<double>(g.arcs()) * 16.0;
  auto flags = grounded_every(g, 1000);
  std::uint64_t row_matrix_growth = 0, crs_growth = 0, lean_growth = 0;
  {
    // The vectors are the solver's, not the operator's: made before the meters.
    auto rows = Teuchos::rcp(new TpetraMap(g.vertices(), g.local_vertices(), 0, teuchos_comm(rt)));
    TpetraMultiVector x(rows, 1), y(rows, 1);
    AnonymousMemoryMeter meter(rt.comm());
    EdgeListRowMatrix m(g, flags);
    m.apply(x, y);  // whatever a product allocates counts
    row_matrix_growth = meter.growth_bytes();
    {
      AnonymousMemoryMeter lean_meter(rt.comm());
      EdgeListRowMatrix lean(g, flags, TpetraColumns::omitted);
      lean.apply(x, y);
      lean_growth = lean_meter.growth_bytes();
    }
    AnonymousMemoryMeter crs_meter(rt.comm());
    auto crs = crs_copy(m);
    crs->apply(x, y);
    crs_growth = crs_meter.growth_bytes();
  }
  if (rt.rank() == 0)
    std::printf("memory: 16 bytes per arc %.1f MiB (the graph's arrays %.1f MiB); EdgeListRowMatrix added %.2f MiB "
                "(%.1f%%), CrsMatrix copy added %.1f MiB (%.0f%%)\n",
                edge_bytes / 1048576.0, static_cast<double>(g.edge_array_bytes() + g.offset_array_bytes()) / 1048576.0,
                static_cast<double>(row_matrix_growth) / 1048576.0,
                100.0 * static_cast<double>(row_matrix_growth) / edge_bytes, static_cast<double>(crs_growth) / 1048576.0,
                100.0 * static_cast<double>(crs_growth) / edge_bytes);
  if (rt.rank() == 0)
    std::printf("memory: without Tpetra's column Map and Import (Ifpack2 Diagonal's path) %.2f MiB (%.1f%%)\n",
                static_cast<double>(lean_growth) / 1048576.0, 100.0 * static_cast<double>(lean_growth) / edge_bytes);
  // The zero-copy target, at every rank count, for the path Belos + Ifpack2
  // Diagonal takes: no Tpetra structure per column, the product's own only.
  EXPECT_LT(static_cast<double>(lean_growth), 0.10 * edge_bytes);
  // No per-edge term: what the RowMatrix adds is bounded by its columns
  // (owned vertices and ghosts: Tpetra's column map and Import, the
  // product's column values, flags). At one rank that is < 10% of the edge
  // arrays; at P ranks a Kronecker graph this small makes ~40% of the
  // vertices ghosts on every rank and Tpetra's Import alone costs ~40 bytes
  // per column not owned (10-20% of these edge arrays), so the bound is per
  // column (the CrsMatrix pays a column map and Import on top of its copy).
  const double columns = static_cast<double>(
      all_reduce<std::uint64_t>(rt.comm(), g.local_vertices() + ghost_count(g), MPI_SUM));
  if (rt.rank() == 0) std::printf("memory: %.0f bytes per column (owned + ghost)\n", static_cast<double>(row_matrix_growth) / columns);
  if (rt.size() == 1) {
    EXPECT_LT(static_cast<double>(row_matrix_growth), 0.10 * edge_bytes);
  }
  EXPECT_LT(static_cast<double>(row_matrix_growth), 128.0 * columns + 0.02 * edge_bytes);
  EXPECT_GT(static_cast<double>(crs_growth), 0.6 * edge_bytes);
}
#endif

// Tpetra's part on a mesh (compact columns): its column Map's id list (8
// bytes per column) plus per-ghost structures (hash table, Import lists),
// and nothing per owned vertex beyond that. An Import built from two maps
// would also cache the row map's ids (8 more per owned vertex, ~0.9 MiB here
// summed over the ranks): the bound leaves no room for it.
// Not in the sanitizer build: AddressSanitizer's redzones and quarantine
// inflate every allocation; memory is measured in the normal build.
#if !defined(__SANITIZE_ADDRESS__)
TEST(Trilinos, CompactColumnsCostTpetraOneIdPerColumn) {
  Runtime& rt = Runtime::current();
  auto g = generate(rt, GraphSpec::grid({48, 48, 48}));
  const RowMatrixMemory mem = row_matrix_memory(g);
  const std::uint64_t ghosts = all_reduce<std::uint64_t>(rt.comm(), ghost_count(g), MPI_SUM);
  if (rt.rank() == 0)
    std::printf("grid 48^3: Tpetra's column Map + Import %.0f KiB for %llu ghosts (%s layout); whole matrix %.0f KiB\n",
                static_cast<double>(mem.tpetra_bytes) / 1024.0, static_cast<unsigned long long>(ghosts),
                mem.layout.c_str(), static_cast<double>(mem.total_bytes) / 1024.0);
  if (rt.size() == 1) {
    EXPECT_EQ(mem.layout, "owned");
    EXPECT_LT(mem.tpetra_bytes, 64u * 1024);  // no column Map, no Import
    return;
  }
  EXPECT_EQ(mem.layout, "compact");
  const std::uint64_t columns = g.vertices() + ghosts;
  const std::uint64_t slack = 64u * 1024 * static_cast<std::uint64_t>(rt.size());  // page rounding, Kokkos headers
  EXPECT_LT(mem.tpetra_bytes, 8 * columns + 32 * ghosts + slack);  // measured: 16-22 per ghost
  EXPECT_GT(mem.tpetra_bytes, 8 * columns);  // the id list is really there: the meter sees it
}
#endif

}  // namespace
