// The linear-algebra layer against serial references every rank recomputes:
// matrix products from the gathered edge list, hitting times from a dense
// direct solve (Gaussian elimination) and from the closed form on a path.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <limits>
#include <memory>
#include <optional>

#include "../graph/graph_test_util.hpp"
#include "../test_util.hpp"
#include "tessera/graph/generators.hpp"
#include "tessera/linalg/crs_matrix.hpp"
#include "tessera/linalg/edge_list_matrix.hpp"
#include "tessera/linalg/hitting_times.hpp"
#include "tessera/linalg/laplacian.hpp"
#include "tessera/runtime/collective.hpp"

using namespace tessera;
using namespace tessera::graph;
using namespace tessera::linalg;
using tessera::test::EdgeTuple;

namespace {

double value_at(std::uint64_t i) { return std::sin(0.37 * static_cast<double>(i)) + 0.1 * static_cast<double>(i % 7); }

void fill(Vector& v) {
  auto l = v.local();
  for (std::size_t i = 0; i < l.size(); ++i) l[i] = value_at(v.distribution().begin(Runtime::current().rank()) + i);
}

std::vector<double> gathered(const Vector& v) { return test::gather_all(v.array()); }

EdgeList weighted_random_graph(Runtime& rt) {
  test::SplitMix64 rng(99);
  LocalEdges e;
  const std::uint64_t n = 300;
  for (std::uint64_t k = 0; k < 3000; ++k) {
    std::uint64_t u = rng.below(n), v = rng.below(n);
    double w = 0.5 + static_cast<double>(rng.below(1000)) / 100.0;
    if (k % static_cast<std::uint64_t>(rt.size()) == static_cast<std::uint64_t>(rt.rank())) e.add(u, v, w);
  }
  BuildOptions o;
  o.drop_duplicates = true;
  return EdgeList::build(rt, n, true, std::move(e), o);
}

// Hitting times by Gaussian elimination on L_UU, with NaN where no target is reachable.
std::vector<double> dense_hitting_times(std::uint64_t n, const std::vector<EdgeTuple>& edges,
                                        const std::vector<std::uint64_t>& targets) {
  auto labels = test::union_find_labels(n, edges);
  std::vector<char> is_target(n, 0), reach(n, 0);
  for (auto t : targets) is_target[t] = 1;
  for (std::uint64_t v = 0; v < n; ++v)
    for (auto t : targets)
      if (labels[v] == labels[t]) reach[v] = 1;
  std::vector<std::uint64_t> free;
  std::vector<std::int64_t> index(n, -1);
  for (std::uint64_t v = 0; v < n; ++v)
    if (reach[v] && !is_target[v]) index[v] = static_cast<std::int64_t>(free.size()), free.push_back(v);
  const std::size_t m = free.size();
  std::vector<double> A(m * m, 0.0), b(m, 0.0);
  for (auto& [u, v, w] : edges) {
    if (index[u] < 0) continue;
    auto i = static_cast<std::size_t>(index[u]);
    A[i * m + i] += w;
    b[i] += w;
    if (index[v] >= 0) A[i * m + static_cast<std::size_t>(index[v])] -= w;
  }
  for (std::size_t c = 0; c < m; ++c) {  // partial pivoting
    std::size_t p = c;
    for (std::size_t r = c + 1; r < m; ++r)
      if (std::fabs(A[r * m + c]) > std::fabs(A[p * m + c])) p = r;
    for (std::size_t k = 0; k < m; ++k) std::swap(A[c * m + k], A[p * m + k]);
    std::swap(b[c], b[p]);
    for (std::size_t r = c + 1; r < m; ++r) {
      double f = A[r * m + c] / A[c * m + c];
      if (f == 0) continue;
      for (std::size_t k = c; k < m; ++k) A[r * m + k] -= f * A[c * m + k];
      b[r] -= f * b[c];
    }
  }
  std::vector<double> x(m);
  for (std::size_t c = m; c-- > 0;) {
    double s = b[c];
    for (std::size_t k = c + 1; k < m; ++k) s -= A[c * m + k] * x[k];
    x[c] = s / A[c * m + c];
  }
  std::vector<double> h(n, 0.0);
  for (std::uint64_t v = 0; v < n; ++v)
    h[v] = !reach[v] ? std::nan("") : is_target[v] ? 0.0 : x[static_cast<std::size_t>(index[v])];
  return h;
}

}  // namespace

TEST(Vector, ReductionsMatchSerial) {
  Runtime& rt = Runtime::current();
  Vector x(rt, Distribution::block(1001, rt.size())), y(rt, x.distribution());
  fill(x);
  y.fill(2.0);
  double dot = 0, sq = 0, mx = 0;
  for (std::uint64_t i = 0; i < 1001; ++i) dot += 2 * value_at(i), sq += value_at(i) * value_at(i), mx = std::max(mx, std::fabs(value_at(i)));
  EXPECT_NEAR(x.dot(y), dot, 1e-10);
  EXPECT_NEAR(x.norm2(), std::sqrt(sq), 1e-10);
  EXPECT_DOUBLE_EQ(x.norm_inf(), mx);
  y.axpy(0.5, x);
  auto all = gathered(y);
  for (std::uint64_t i = 0; i < 1001; ++i) EXPECT_DOUBLE_EQ(all[i], 2.0 + 0.5 * value_at(i));
  Vector other(rt, Distribution::block(1000, rt.size()));
  EXPECT_THROW(x.dot(other), MismatchError);
}

TEST(Matrices, EdgeListAndCrsMatchSerialProducts) {
  Runtime& rt = Runtime::current();
  auto g = weighted_random_graph(rt);
  auto edges = test::gather_edges(g);
  const std::uint64_t n = g.vertices();
  EdgeListMatrix el(g);
  if (rt.size() > 1) {
    EXPECT_EQ(el.column_mode(), ColumnMode::dense);  // 3000 random edges on 300 vertices
  }
  CrsMatrix crs(el);
  std::vector<double> ax(n, 0), atx(n, 0), diag(n, 0), sums(n, 0);
  double frob = 0;
  for (auto& [u, v, w] : edges) {
    ax[u] += w * value_at(v);
    atx[v] += w * value_at(u);
    if (u == v) diag[u] += w;
    sums[u] += w;
    frob += w * w;
  }
  for (const RowMatrix* a : {static_cast<const RowMatrix*>(&el), static_cast<const RowMatrix*>(&crs)}) {
    EXPECT_EQ(a->global_entries(), edges.size());
    EXPECT_EQ(a->global_rows(), n);
    Vector x(rt, a->row_distribution()), y(rt, a->row_distribution());
    fill(x);
    y.fill(1.0);
    a->apply(x, y, 2.0, -3.0);  // y = 2 A x - 3
    std::vector<double> want(n);
    for (std::uint64_t i = 0; i < n; ++i) want[i] = 2 * ax[i] - 3;
    test::expect_values_near(gathered(y), want, 1e-12, "apply");
    y.fill(std::nan(""));
    a->apply_transpose(x, y);  // beta = 0 ignores NaN
    test::expect_values_near(gathered(y), atx, 1e-12, "apply_transpose");
    a->diagonal(y);
    test::expect_values_near(gathered(y), diag, 1e-12, "diagonal");
    a->row_sums(y);
    test::expect_values_near(gathered(y), sums, 1e-12, "row_sums");
    EXPECT_NEAR(a->frobenius_norm(), std::sqrt(frob), 1e-9);
    // Row access gives the same entries as the edge list.
    std::uint64_t base = a->row_distribution().begin(rt.rank()), seen = 0;
    std::vector<std::uint64_t> columns(a->max_row_length());
    std::vector<double> values(columns.size());
    for (std::uint64_t i = 0; i < a->local_rows(); ++i) {
      std::size_t n = a->copy_row(i, columns, values);
      EXPECT_EQ(n, a->row_length(i));
      for (std::size_t k = 0; k < n; ++k) {
        EXPECT_TRUE(std::binary_search(edges.begin(), edges.end(), EdgeTuple{base + i, columns[k], values[k]}));
        if (k > 0) {
          EXPECT_LE(columns[k - 1], columns[k]);
        }
        ++seen;
      }
      if (n > 0) {
        EXPECT_THROW(a->copy_row(i, std::span(columns).first(n - 1), values), RangeError);
      }
    }
    EXPECT_EQ(seen, a->local_entries());
  }
  // The edge-list matrix allocates only for ghosts, far less than a copy.
  EXPECT_LT(el.extra_memory_bytes(), crs.extra_memory_bytes());
  // Buffers released after each product: the same products, and the dense
  // column array gone in between.
  el.set_product_buffers(ProductBuffers::released);
  for (int round = 0; round < 2; ++round) {
    Vector x(rt, g.vertex_ranges()), y(rt, g.vertex_ranges());
    fill(x);
    y.fill(1.0);
    el.apply(x, y, 2.0, -3.0);
    std::vector<double> want(n);
    for (std::uint64_t i = 0; i < n; ++i) want[i] = 2 * ax[i] - 3;
    test::expect_values_near(gathered(y), want, 1e-12, "apply, buffers released");
    el.apply_transpose(x, y);
    test::expect_values_near(gathered(y), atx, 1e-12, "apply_transpose, buffers released");
    EXPECT_LT(el.extra_memory_bytes(), n * sizeof(double));
  }
}

TEST(Laplacian, GroundedRowsAreIdentity) {
  Runtime& rt = Runtime::current();
  auto g = generate(rt, GraphSpec::grid({4, 5}));
  EdgeListMatrix a(g);
  std::vector<std::uint8_t> grounded(g.local_vertices(), 0);
  if (g.vertex_ranges().owner(7) == rt.rank()) grounded[7 - g.local_vertex_begin()] = 1;
  Laplacian lap(a, grounded);
  Vector x(rt, g.vertex_ranges()), y(rt, g.vertex_ranges());
  fill(x);
  lap.apply(x, y);
  auto edges = test::gather_edges(g);
  std::vector<double> want(20, 0);
  for (auto& [u, v, w] : edges)
    if (u != 7) want[u] += value_at(u) - (v == 7 ? 0 : value_at(v));
  want[7] = value_at(7);
  test::expect_values_near(gathered(y), want, 1e-12, "grounded laplacian");
  // Degrees: the right-hand side of hitting times, 0 at the grounded vertex.
  std::vector<double> degrees(20, 0);
  for (auto& [u, v, w] : edges) degrees[u] += u == 7 ? 0.0 : w;
  test::expect_values_near(gathered(lap.degrees()), degrees, 0.0, "degrees");
  // y = alpha L x + beta y, grounded row included, with the masked vector
  // kept or freed between products.
  for (auto buffers : {ProductBuffers::kept, ProductBuffers::released}) {
    Laplacian scaled(a, grounded, buffers);
    for (int round = 0; round < 2; ++round) {
      y.fill(1.0);
      scaled.apply(x, y, 2.0, -3.0);
      std::vector<double> want_scaled(20);
      for (std::size_t i = 0; i < want.size(); ++i) want_scaled[i] = 2 * want[i] - 3;
      test::expect_values_near(gathered(y), want_scaled, 1e-12, "grounded laplacian, alpha 2 and beta -3");
      y.fill(std::nan(""));
      scaled.apply(x, y);  // beta = 0 ignores NaN
      test::expect_values_near(gathered(y), want, 1e-12, "grounded laplacian over NaN");
    }
  }
}

// Hitting times to vertex 0 against their closed form `want`, and the
// product (both ways) against the CRS copy's.
void expect_closed_form(const EdgeList& g, const EdgeListMatrix& a, const std::vector<double>& want,
                        const std::string& what) {
  Runtime& rt = g.runtime();
  std::vector<std::uint64_t> target{0};
  HittingOptions o;
  o.cg.tolerance = 1e-13;
  auto h = hitting_times(g, a, target, o);
  EXPECT_TRUE(h.solve.converged) << what;
  test::expect_values_near(gathered(h.times), want, 1e-9, what.c_str());
  EXPECT_EQ(h.unreachable, 0u);
  CrsMatrix crs(a);  // the same product through the copy
  Vector x(rt, g.vertex_ranges()), y1(rt, g.vertex_ranges()), y2(rt, g.vertex_ranges());
  fill(x);
  a.apply(x, y1);
  crs.apply(x, y2);
  EXPECT_EQ(gathered(y1), gathered(y2)) << what;
  a.apply_transpose(x, y1);
  crs.apply_transpose(x, y2);
  test::expect_values_near(gathered(y1), gathered(y2), 1e-14, "transpose");
}

class PathOf : public ::testing::TestWithParam<std::uint64_t> {};

// A path: h(k) = k (2L - k). A rank's ghosts are its neighbours in the path,
// next to its owned range, so GhostSlots spans two ids: bitmap at any length.
TEST_P(PathOf, HittingTimesHaveTheClosedForm) {
  Runtime& rt = Runtime::current();
  const std::uint64_t n = GetParam(), L = n - 1;
  auto g = generate(rt, GraphSpec::grid({1, n}));
  EdgeListMatrix a(g);
  std::string mode = to_string(a.column_mode());
  EXPECT_EQ(mode, rt.size() == 1 ? "direct" : "bitmap");
  std::vector<double> want(n);
  for (std::uint64_t k = 0; k < n; ++k) want[k] = static_cast<double>(k * (2 * L - k));
  expect_closed_form(g, a, want, "path, " + mode);
}

class RingOf : public ::testing::TestWithParam<std::uint64_t> {};

// A ring: h(k) = k (n - k). The edge from n - 1 back to 0 makes the first and
// last ranks' two ghosts lie far apart: on a long ring their bitmap would
// span most ids, so they take the hash table; the middle ranks' ghosts are
// next to their range (bitmap).
TEST_P(RingOf, HittingTimesHaveTheClosedForm) {
  Runtime& rt = Runtime::current();
  const std::uint64_t n = GetParam();
  LocalEdges e;
  for (std::uint64_t k = 0; k < n; ++k)
    if (k % static_cast<std::uint64_t>(rt.size()) == static_cast<std::uint64_t>(rt.rank())) e.add(k, (k + 1) % n, 1.0);
  auto g = EdgeList::build(rt, n, true, std::move(e)).symmetrized();
  EdgeListMatrix a(g);
  std::string mode = to_string(a.column_mode());
  const bool end_rank = rt.rank() == 0 || rt.rank() == rt.size() - 1;
  EXPECT_EQ(mode, rt.size() == 1 ? "direct" : end_rank && n > 1000 ? "hash" : "bitmap") << "rank " << rt.rank();
  std::vector<double> want(n);
  for (std::uint64_t k = 0; k < n; ++k) want[k] = static_cast<double>(k * (n - k));
  expect_closed_form(g, a, want, "ring, " + mode);
}

INSTANTIATE_TEST_SUITE_P(Lengths, RingOf, ::testing::Values(40, 3000));
INSTANTIATE_TEST_SUITE_P(Lengths, PathOf, ::testing::Values(40, 3000));

class HittingOn : public ::testing::TestWithParam<int> {};

TEST_P(HittingOn, MatchesDenseSolve) {
  Runtime& rt = Runtime::current();
  EdgeList g = [&] {
    switch (GetParam()) {
      case 0: { auto s = GraphSpec::grid({12, 15}, 3); s.delete_fraction = 0.3; return generate(rt, s); }
      case 1: return generate(rt, GraphSpec::kronecker(7, 4, 5));
      default: {  // weighted, symmetric
        auto d = weighted_random_graph(rt);
        return d.symmetrized();
      }
    }
  }();
  auto edges = test::gather_edges(g);
  std::vector<std::uint64_t> targets{3, 17, 3};
  auto want = dense_hitting_times(g.vertices(), edges, {3, 17});
  HittingOptions o;
  o.cg.tolerance = 1e-13;
  for (int kind = 0; kind < 2; ++kind) {
    EdgeListMatrix el(g);
    CrsMatrix crs(el);
    const RowMatrix& a = kind == 0 ? static_cast<const RowMatrix&>(el) : crs;
    auto h = hitting_times(g, a, targets, o);
    // 1e-13 is at the edge of double precision here: the answer either meets
    // it or is limited by rounding, never a failure.
    EXPECT_TRUE(h.solve.succeeded()) << h.solve.reason;
    if (h.solve.converged) EXPECT_LE(h.solve.relative_residual, 1e-13);
    else EXPECT_LE(h.solve.backward_error, kRoundingBackwardError);
    EXPECT_EQ(h.targets, 2u);
    test::expect_values_near(gathered(h.times), want, 1e-9, kind == 0 ? "edge list" : "crs");
    std::uint64_t nan = 0;
    for (double v : want) nan += std::isnan(v);
    EXPECT_EQ(h.unreachable, nan);
    EXPECT_EQ(h.solve.residuals.size(), static_cast<std::size_t>(h.solve.iterations) + 1);
  }
}

INSTANTIATE_TEST_SUITE_P(Graphs, HittingOn, ::testing::Values(0, 1, 2));

TEST(HittingTimes, RejectsBadRequests) {
  Runtime& rt = Runtime::current();
  auto g = generate(rt, GraphSpec::grid({3, 3}));
  EdgeListMatrix a(g);
  std::vector<std::uint64_t> none, outside{9};
  EXPECT_THROW(hitting_times(g, a, none), ConfigError);
  EXPECT_THROW(hitting_times(g, a, outside), RangeError);
  LocalEdges e;
  if (rt.rank() == 0) e.add(0, 1);
  auto directed = EdgeList::build(rt, 2, true, std::move(e));
  EdgeListMatrix ad(directed);
  std::vector<std::uint64_t> zero{0};
  EXPECT_THROW(hitting_times(directed, ad, zero), ConfigError);
  CgOptions capped;
  capped.max_iterations = 2;
  auto path = generate(rt, GraphSpec::grid({1, 50}));
  EdgeListMatrix ap(path);
  HittingOptions o;
  o.cg = capped;
  auto h = hitting_times(path, ap, zero, o);
  EXPECT_FALSE(h.solve.converged);
  EXPECT_EQ(h.solve.iterations, 2);
}

// The convergence test shared by every solver (solve_to_tolerance): the
// residual it reports is the answer's, recomputed here serially from the
// gathered edges; it tells "limited by rounding" from failure.
namespace {

struct GroundedGrid {
  EdgeList g;
  std::vector<std::uint8_t> grounded;  // local rows; vertex 0 grounded
};

GroundedGrid grounded_grid(Runtime& rt, std::uint64_t side) {
  auto g = generate(rt, GraphSpec::grid({side, side}));
  std::vector<std::uint8_t> flags(g.local_vertices(), 0);
  if (g.local_vertex_begin() == 0 && !flags.empty()) flags[0] = 1;
  return {std::move(g), std::move(flags)};
}

// ||b - L x|| / ||b|| of the grounded grid Laplacian, serially from the edges.
double serial_relative_residual(const EdgeList& g, const std::vector<double>& x) {
  auto edges = test::gather_edges(g);
  const std::size_t n = g.vertices();
  std::vector<double> deg(n, 0.0), ax(n, 0.0);
  for (const auto& [u, v, w] : edges) deg[u] += w;
  for (const auto& [u, v, w] : edges)
    if (v != 0) ax[u] += w * x[v];
  double r2 = 0, b2 = 0;
  for (std::size_t i = 1; i < n; ++i) {
    const double r = deg[i] - (deg[i] * x[i] - ax[i]);
    r2 += r * r;
    b2 += deg[i] * deg[i];
  }
  return std::sqrt(r2 / b2);
}

// The hitting-time system of a 30x30 grid grounded at vertex 0, x = 0.
struct GridSystem {
  GroundedGrid grid;
  EdgeListMatrix a;
  Laplacian lap;
  Vector b, x;
  explicit GridSystem(Runtime& rt)
      : grid(grounded_grid(rt, 30)), a(grid.g), lap(a, grid.grounded), b(a.row_map()), x(a.row_map()) {
    b.assign(lap.degrees());  // 0 on the grounded vertices
    x.fill(0.0);
  }
};

}  // namespace

TEST(Convergence, ReportsTheAnswersTrueResidual) {
  GridSystem sys(Runtime::current());
  auto& [grid, a, lap, b, x] = sys;
  auto r = conjugate_gradient(lap, b, x);
  EXPECT_EQ(r.status, SolveStatus::converged);
  EXPECT_TRUE(r.converged && r.succeeded());
  EXPECT_TRUE(r.reason.empty()) << r.reason;
  EXPECT_EQ(r.rounds, 1);
  const double serial = serial_relative_residual(grid.g, gathered(x));
  EXPECT_LE(serial, 1e-10);
  EXPECT_NEAR(r.relative_residual, serial, 0.05 * serial + 1e-16);
  EXPECT_GT(r.backward_error, 0.0);
  EXPECT_LT(r.backward_error, r.relative_residual);  // ||A|| ||x|| >> ||b|| for hitting times
  // ||L||_inf of a grid: interior rows 4 + 4.
  EXPECT_DOUBLE_EQ(lap.norm_inf(), 8.0);
}

TEST(Convergence, UnreachableToleranceIsLimitedByRounding) {
  GridSystem sys(Runtime::current());
  auto& [grid, a, lap, b, x] = sys;
  CgOptions o;
  o.tolerance = 1e-30;  // below what double precision can deliver
  auto r = conjugate_gradient(lap, b, x, o);
  EXPECT_EQ(r.status, SolveStatus::rounding_limited) << r.reason;
  EXPECT_TRUE(r.succeeded());
  EXPECT_FALSE(r.converged);
  EXPECT_GE(r.rounds, 2);  // a restart was tried before calling it rounding
  EXPECT_LE(r.backward_error, kRoundingBackwardError);
  EXPECT_NE(r.reason.find("limited by rounding"), std::string::npos) << r.reason;
  EXPECT_NEAR(r.relative_residual, serial_relative_residual(grid.g, gathered(x)), 0.5 * r.relative_residual);
}

TEST(Convergence, SolverThatDoesNotMoveFails) {
  Runtime& rt = Runtime::current();
  auto grid = grounded_grid(rt, 10);
  EdgeListMatrix a(grid.g);
  Laplacian lap(a, grid.grounded);
  Vector b(a.row_map()), x(a.row_map());
  b.fill(1.0);
  x.fill(0.0);
  // A round that leaves x alone: the true residual stays 1, far above rounding.
  auto r = solve_to_tolerance(lap, b, x, {}, [](Vector&, const Vector&, double, int) { return 0; }, "the test solver");
  EXPECT_EQ(r.status, SolveStatus::not_converged);
  EXPECT_FALSE(r.succeeded());
  EXPECT_DOUBLE_EQ(r.relative_residual, 1.0);
  EXPECT_NE(r.reason.find("the test solver stagnated"), std::string::npos) << r.reason;
  // Each round is handed b - A x of the x it starts from.
  int rounds = 0;
  solve_to_tolerance(
      lap, b, x, {},
      [&](Vector& v, const Vector& residual, double, int) {
        Vector want(a.row_map());
        lap.apply(v, want);
        want.xpay(b, -1.0);
        test::expect_values_near(gathered(residual), gathered(want), 1e-12, "the residual a round is handed");
        // Moves x part of the way: the next round starts from a new x.
        CgOptions part;
        part.tolerance = std::pow(10.0, -3.0 * ++rounds);
        return conjugate_gradient(lap, b, v, part).iterations;
      },
      "the test solver");
  EXPECT_GE(rounds, 3);
  x.fill(0.0);
  // A round that moves x the wrong way is no better.
  auto worse = solve_to_tolerance(lap, b, x, {}, [](Vector& v, const Vector&, double, int) { v.fill(1e6); return 5; }, "the test solver");
  EXPECT_EQ(worse.status, SolveStatus::not_converged);
}

TEST(Convergence, IterationLimitSaysWhatToTry) {
  GridSystem sys(Runtime::current());
  auto& [grid, a, lap, b, x] = sys;
  CgOptions o;
  o.max_iterations = 7;
  auto r = conjugate_gradient(lap, b, x, o);
  EXPECT_EQ(r.status, SolveStatus::not_converged);
  EXPECT_EQ(r.iterations, 7);
  EXPECT_NE(r.reason.find("iteration limit"), std::string::npos) << r.reason;
  EXPECT_NE(r.reason.find("--max-iterations"), std::string::npos) << r.reason;
  EXPECT_NEAR(r.relative_residual, serial_relative_residual(grid.g, gathered(x)), 1e-9);
}

// Tiny and hub-shaped graphs leave ranks with no ghosts or no rows at 3-4
// ranks; every collective must still be entered by every rank (issue 8.2:
// a 3-vertex path at 3 ranks and a 10-leaf star at 4 ranks hung in CG).
namespace {

EdgeList undirected_from(Runtime& rt, std::uint64_t n, const std::vector<std::pair<std::uint64_t, std::uint64_t>>& edges) {
  LocalEdges e;
  if (rt.rank() == 0)
    for (auto [u, v] : edges) e.add(u, v);
  BuildOptions o;
  o.symmetrize = true;
  return EdgeList::build(rt, n, false, std::move(e), o);
}

struct TinyGraph {
  const char* name;
  std::uint64_t n;
  std::vector<std::pair<std::uint64_t, std::uint64_t>> edges;
  std::uint64_t target;
};

std::vector<TinyGraph> tiny_graphs() {
  std::vector<std::pair<std::uint64_t, std::uint64_t>> star;
  for (std::uint64_t leaf = 1; leaf <= 10; ++leaf) star.push_back({0, leaf});
  return {{"path3 to an end", 3, {{0, 1}, {1, 2}}, 0},
          {"path3 to the middle", 3, {{0, 1}, {1, 2}}, 1},
          {"star10 to the hub", 11, star, 0},
          {"star10 to a leaf", 11, star, 4},
          {"one edge", 2, {{0, 1}}, 1}};
}

}  // namespace

TEST(TinyGraphs, HittingTimesMatchDenseSolveOnEveryRankCount) {
  Runtime& rt = Runtime::current();
  for (const auto& t : tiny_graphs()) {
    auto g = undirected_from(rt, t.n, t.edges);
    auto want = dense_hitting_times(t.n, test::gather_edges(g), {t.target});
    // Closed forms: path 0-1-2 to 0 gives (0, 3, 4); a star to its hub gives 1 per leaf.
    if (std::string(t.name) == "path3 to an end") {
      EXPECT_EQ(want, (std::vector<double>{0, 3, 4}));
    }
    if (std::string(t.name) == "star10 to the hub") {
      for (std::uint64_t v = 1; v < t.n; ++v) EXPECT_NEAR(want[v], 1.0, 1e-12);
    }
    HittingOptions o;
    o.cg.tolerance = 1e-13;
    std::vector<std::uint64_t> target{t.target};
    EdgeListMatrix el(g);
    CrsMatrix crs(el);
    for (const RowMatrix* a : {static_cast<const RowMatrix*>(&el), static_cast<const RowMatrix*>(&crs)}) {
      auto h = hitting_times(g, *a, target, o);
      EXPECT_TRUE(h.solve.converged) << t.name;
      test::expect_values_near(gathered(h.times), want, 1e-9, t.name);
    }
  }
}

TEST(TinyGraphs, OperatorsWorkWithEmptyRanks) {
  Runtime& rt = Runtime::current();
  for (const auto& t : tiny_graphs()) {
    auto g = undirected_from(rt, t.n, t.edges);
    auto edges = test::gather_edges(g);
    std::vector<double> ax(t.n, 0), atx(t.n, 0), diag(t.n, 0), sums(t.n, 0);
    for (auto& [u, v, w] : edges) {
      ax[u] += w * value_at(v);
      atx[v] += w * value_at(u);
      if (u == v) diag[u] += w;
      sums[u] += w;
    }
    EdgeListMatrix el(g);
    CrsMatrix crs(el);
    for (const RowMatrix* a : {static_cast<const RowMatrix*>(&el), static_cast<const RowMatrix*>(&crs)}) {
      Vector x(rt, a->row_distribution()), y(rt, a->row_distribution());
      fill(x);
      a->apply(x, y);
      test::expect_values_near(gathered(y), ax, 1e-12, t.name);
      a->apply_transpose(x, y);
      test::expect_values_near(gathered(y), atx, 1e-12, t.name);
      a->diagonal(y);
      test::expect_values_near(gathered(y), diag, 1e-12, t.name);
      a->row_sums(y);
      test::expect_values_near(gathered(y), sums, 1e-12, t.name);
    }
  }
  // A graph with no edges at all: every rank is empty of entries.
  auto empty = undirected_from(rt, 4, {});
  EdgeListMatrix a(empty);
  Vector x(rt, a.row_distribution()), y(rt, a.row_distribution());
  fill(x);
  a.apply(x, y);
  test::expect_values_near(gathered(y), std::vector<double>(4, 0.0), 0, "empty apply");
  a.apply_transpose(x, y);
  test::expect_values_near(gathered(y), std::vector<double>(4, 0.0), 0, "empty apply_transpose");
}

TEST(TinyGraphs, ConjugateGradientWithEmptyRanks) {
  Runtime& rt = Runtime::current();
  // Grounded path 0-1-2 (target 0): L_UU = [[2,-1],[-1,1]], d_U = (2,1) -> h = (3, 4).
  auto g = undirected_from(rt, 3, {{0, 1}, {1, 2}});
  EdgeListMatrix el(g);
  std::vector<std::uint64_t> target{0};
  HittingOptions o;
  o.cg.tolerance = 1e-14;
  auto h = hitting_times(g, el, target, o);
  EXPECT_TRUE(h.solve.converged);
  EXPECT_LE(h.solve.iterations, 3);
  test::expect_values_near(gathered(h.times), {0, 3, 4}, 1e-10, "cg on path3");
}

// Issue 7.6: row offsets, out-neighbour rows and the column strategies.
namespace {

// `g` redistributed so rank r owns `vertex_counts[r]` vertices (zeros give
// ranks with no rows at all), built through EdgeList::adopt as a loader would.
EdgeList with_vertex_counts(Runtime& rt, const EdgeList& g, const std::vector<std::uint64_t>& vertex_counts) {
  auto edges = test::gather_edges(g);
  auto ranges = Distribution::weighted_block(vertex_counts);
  std::vector<std::uint64_t> edge_counts(static_cast<std::size_t>(rt.size()), 0);
  for (auto& [u, v, w] : edges) ++edge_counts[static_cast<std::size_t>(ranges.owner(u))];
  auto edge_ranges = Distribution::weighted_block(edge_counts);
  // Row offsets: local vertices + 1 per rank, counted from the sorted arcs.
  std::vector<std::uint64_t> offset_counts(vertex_counts.size());
  for (std::size_t r = 0; r < vertex_counts.size(); ++r) offset_counts[r] = vertex_counts[r] + 1;
  DistArray<std::uint64_t> offsets(rt, Distribution::weighted_block(offset_counts));
  auto rows = offsets.local();
  std::fill(rows.begin(), rows.end(), 0);
  const std::uint64_t first_vertex = ranges.begin(rt.rank());
  std::optional<DistArray<double>> weight;
  if (g.weighted()) weight.emplace(rt, edge_ranges);
  // Destinations at the graph's own id width.
  IdArray dst = with_id_type(g.id_width(), [&](auto zero) -> IdArray {
    using Id = decltype(zero);
    DistArray<Id> d(rt, edge_ranges);
    std::size_t k = 0;
    for (auto& [u, v, w] : edges) {
      if (ranges.owner(u) != rt.rank()) continue;
      ++rows[u - first_vertex + 1];
      d.local()[k] = static_cast<Id>(v);
      if (weight) weight->local()[k] = w;
      ++k;
    }
    return d;
  });
  for (std::size_t i = 1; i < rows.size(); ++i) rows[i] += rows[i - 1];
  return EdgeList::adopt(g.vertices(), g.directed(), ranges, std::move(offsets), std::move(dst), std::move(weight));
}

// Vertex counts for n vertices that leave rank 0 (and every rank but the
// last few) empty: one vertex per rank from the back, the rest on the last.
std::vector<std::uint64_t> counts_from_the_back(Runtime& rt, std::uint64_t n) {
  std::vector<std::uint64_t> c(static_cast<std::size_t>(rt.size()), 0);
  std::uint64_t left = n;
  for (int r = rt.size() - 1; r >= 1 && left > 1; --r) c[static_cast<std::size_t>(r)] = 1, --left;
  c.back() += left;
  if (rt.size() == 1) c[0] = n;
  return c;
}

// A against the serial products of `edges` (apply, transpose, diagonal, row sums).
void expect_operator_matches(Runtime& rt, const RowMatrix& a, std::uint64_t n, const std::vector<EdgeTuple>& edges,
                             const std::string& what) {
  std::vector<double> ax(n, 0), atx(n, 0), diag(n, 0), sums(n, 0);
  for (auto& [u, v, w] : edges) {
    ax[u] += w * value_at(v);
    atx[v] += w * value_at(u);
    if (u == v) diag[u] += w;
    sums[u] += w;
  }
  Vector x(a.row_map()), y(a.row_map());
  ASSERT_EQ(&x.runtime(), &rt);
  fill(x);
  y.fill(1.0);
  a.apply(x, y, 2.0, 1.0);  // y = 2 A x + 1
  std::vector<double> want(n);
  for (std::uint64_t i = 0; i < n; ++i) want[i] = 2 * ax[i] + 1;
  test::expect_values_near(gathered(y), want, 1e-12, (what + " apply").c_str());
  y.fill(std::nan(""));
  a.apply_transpose(x, y);
  test::expect_values_near(gathered(y), atx, 1e-12, (what + " apply_transpose").c_str());
  a.diagonal(y);
  test::expect_values_near(gathered(y), diag, 1e-12, (what + " diagonal").c_str());
  a.row_sums(y);
  test::expect_values_near(gathered(y), sums, 1e-12, (what + " row_sums").c_str());
}

const ColumnMode kModes[] = {ColumnMode::direct, ColumnMode::dense, ColumnMode::bitmap, ColumnMode::hash};

}  // namespace

TEST(EdgeListRows, OutNeighboursAreEachVertexsSortedDestinations) {
  Runtime& rt = Runtime::current();
  auto random = weighted_random_graph(rt);
  auto path = undirected_from(rt, 3, {{0, 1}, {1, 2}});
  auto moved = with_vertex_counts(rt, random, counts_from_the_back(rt, random.vertices()));
  for (const EdgeList* g : {&random, &path, &moved}) {
    auto edges = test::gather_edges(*g);
    auto offsets = g->row_offsets();
    ASSERT_EQ(offsets.size(), g->local_vertices() + 1);
    EXPECT_EQ(offsets.front(), 0u);
    EXPECT_EQ(offsets.back(), g->local_arcs());
    auto degrees = g->out_degrees();
    EdgeListMatrix a(*g);  // collective: outside the per-vertex loop
    for (std::uint64_t v = g->local_vertex_begin(); v < g->local_vertex_end(); ++v) {
      std::vector<std::uint64_t> want;
      std::vector<double> want_w;
      for (auto& [u, d, w] : edges)
        if (u == v) want.push_back(d), want_w.push_back(w);
      auto got = g->out_neighbours(v);
      EXPECT_EQ(got, want) << "vertex " << v;
      // The same row read in place from the destination array at its width.
      const auto row = g->out_edges(v);
      g->with_dst([&](auto dst) {
        EXPECT_EQ(std::vector<std::uint64_t>(dst.begin() + static_cast<std::ptrdiff_t>(row.first),
                                             dst.begin() + static_cast<std::ptrdiff_t>(row.second)),
                  want)
            << "vertex " << v;
      });
      EXPECT_EQ(g->out_degree(v), want.size());
      EXPECT_EQ(degrees.at(v), want.size());
      auto w = g->out_weights(v);
      if (g->weighted()) {
        EXPECT_EQ(std::vector<double>(w.begin(), w.end()), want_w) << "vertex " << v;
      } else {
        EXPECT_TRUE(w.empty());
      }
      // The matrix's row is the same row: its columns, and its values (1
      // for an unweighted graph).
      const std::uint64_t i = v - g->local_vertex_begin();
      EXPECT_EQ(a.row_length(i), want.size());
      std::vector<std::uint64_t> columns(want.size());
      std::vector<double> values(want.size());
      EXPECT_EQ(a.copy_row(i, columns, values), want.size());
      EXPECT_EQ(columns, want) << "vertex " << v;
      EXPECT_EQ(values, g->weighted() ? want_w : std::vector<double>(want.size(), 1.0)) << "vertex " << v;
    }
    // A vertex this rank does not own is an error naming the range.
    for (std::uint64_t v : {std::uint64_t{0}, g->vertices() - 1})
      if (!g->vertex_map().is_local(v)) {
        EXPECT_THROW(g->out_neighbours(v), RangeError);
      }
  }
}

// Every column strategy forced on every rank gives the serial products, on
// balanced ranges and on ranges that leave ranks without rows.
TEST(EdgeListRows, EveryColumnModeMatchesSerialProducts) {
  Runtime& rt = Runtime::current();
  auto random = weighted_random_graph(rt);
  auto grid = generate(rt, GraphSpec::grid({1, 3000}));
  auto star = undirected_from(rt, 11, {{0, 1}, {0, 2}, {0, 3}, {0, 4}, {0, 5}, {0, 6}, {0, 7}, {0, 8}, {0, 9}, {0, 10}});
  auto star_back = with_vertex_counts(rt, star, counts_from_the_back(rt, 11));
  for (const EdgeList* g : {&random, &grid, &star, &star_back}) {
    auto edges = test::gather_edges(*g);
    EdgeListMatrix automatic(*g);
    std::uint64_t ghosts = all_reduce<std::uint64_t>(rt.comm(), automatic.ghost_count(), MPI_SUM);
    for (ColumnMode mode : kModes) {
      std::string what = std::string(to_string(mode)) + " on " + std::to_string(g->vertices()) + " vertices";
      if (mode == ColumnMode::direct && ghosts > 0) {  // every rank refuses, together
        EXPECT_THROW(EdgeListMatrix(*g, mode), ConfigError) << what;
        continue;
      }
      EdgeListMatrix a(*g, mode);
      EXPECT_EQ(a.column_mode(), mode);
      expect_operator_matches(rt, a, g->vertices(), edges, what);
      EXPECT_NEAR(a.frobenius_norm(), automatic.frobenius_norm(), 1e-9);
    }
  }
}

// Issue 8.2: every collective entered by every rank, whatever its share. The
// tiny and hub-shaped graphs again, on layouts that leave ranks (rank 0
// among them) without a single row, through every column strategy and the
// CRS copy, against the dense solve.
TEST(TinyGraphs, HittingTimesWithRanksThatOwnNoRows) {
  Runtime& rt = Runtime::current();
  HittingOptions o;
  o.cg.tolerance = 1e-13;
  for (const auto& t : tiny_graphs()) {
    auto balanced = undirected_from(rt, t.n, t.edges);
    auto from_back = with_vertex_counts(rt, balanced, counts_from_the_back(rt, t.n));
    auto want = dense_hitting_times(t.n, test::gather_edges(balanced), {t.target});
    std::vector<std::uint64_t> target{t.target};
    for (const EdgeList* g : {&balanced, &from_back}) {
      std::uint64_t fewest_rows = all_reduce<std::uint64_t>(rt.comm(), g->local_vertices(), MPI_MIN);
      if (g == &from_back && rt.size() > 1) {
        EXPECT_EQ(fewest_rows, 0u) << t.name;
      }
      EdgeListMatrix automatic(*g);
      std::uint64_t ghosts = all_reduce<std::uint64_t>(rt.comm(), automatic.ghost_count(), MPI_SUM);
      std::string layout = std::string(t.name) + (g == &from_back ? ", rows from the back" : ", balanced");
      // The automatic choice mixes strategies across ranks (a rank without
      // rows reads no ghosts: direct, beside bitmap or hash elsewhere).
      std::vector<std::unique_ptr<EdgeListMatrix>> forced;
      for (ColumnMode mode : kModes)
        if (mode != ColumnMode::direct || ghosts == 0) forced.push_back(std::make_unique<EdgeListMatrix>(*g, mode));
      std::vector<const EdgeListMatrix*> matrices{&automatic};
      for (auto& m : forced) matrices.push_back(m.get());
      for (const EdgeListMatrix* a : matrices) {
        std::string what = layout + " " + to_string(a->column_mode()) + (a == &automatic ? " (automatic)" : "");
        auto h = hitting_times(*g, *a, target, o);
        EXPECT_TRUE(h.solve.converged) << what;
        test::expect_values_near(gathered(h.times), want, 1e-9, what.c_str());
      }
      CrsMatrix crs(automatic);
      auto h = hitting_times(*g, crs, target, o);
      test::expect_values_near(gathered(h.times), want, 1e-9, (layout + " crs").c_str());
    }
  }
}

// Issue 8.4: weights that make no Laplacian are refused with the vertex and
// the weight named, on every rank, instead of a wrong "converged" answer.
class InvalidWeights : public ::testing::TestWithParam<double> {};

TEST_P(InvalidWeights, AreRejectedNamingTheVertexAndWeight) {
  Runtime& rt = Runtime::current();
  const double bad = GetParam();
  char text[32];
  std::snprintf(text, sizeof(text), "%.10g", bad);
  LocalEdges e;
  if (rt.rank() == 0) {  // a triangle, edge {1, 2} bad
    e.add(0, 1, 1.0);
    e.add(1, 2, bad);
    e.add(2, 0, 2.0);
  }
  BuildOptions o;
  o.symmetrize = true;
  auto balanced = EdgeList::build(rt, 3, false, std::move(e), o);
  auto from_back = with_vertex_counts(rt, balanced, counts_from_the_back(rt, 3));
  std::vector<std::uint64_t> target{0};
  for (const EdgeList* g : {&balanced, &from_back}) {
    EdgeListMatrix el(*g);
    CrsMatrix crs(el);
    for (const RowMatrix* a : {static_cast<const RowMatrix*>(&el), static_cast<const RowMatrix*>(&crs)}) {
      auto found = find_invalid_weight(*a);
      ASSERT_TRUE(found.has_value());
      EXPECT_EQ(found->row, 1u);  // arcs (1, 2) and (2, 1): the smallest row
      EXPECT_EQ(found->column, 2u);
      if (std::isnan(bad)) {
        EXPECT_TRUE(std::isnan(found->weight));
      } else {
        EXPECT_EQ(found->weight, bad);
      }
      try {
        hitting_times(*g, *a, target);
        ADD_FAILURE() << "weight " << text << " was accepted";
      } catch (const RangeError& err) {
        std::string msg = err.what();
        EXPECT_NE(msg.find("vertex 1 has an edge to vertex 2 with weight " + std::string(text)), std::string::npos)
            << msg;
      }
      EXPECT_THROW(Laplacian{*a}, RangeError);
    }
  }
  // The same triangle with usable weights solves.
  LocalEdges ok;
  if (rt.rank() == 0) {
    ok.add(0, 1, 1.0);
    ok.add(1, 2, 0.5);
    ok.add(2, 0, 2.0);
  }
  auto good = EdgeList::build(rt, 3, false, std::move(ok), o);
  EdgeListMatrix a(good);
  EXPECT_FALSE(find_invalid_weight(a).has_value());
  auto h = hitting_times(good, a, target);
  test::expect_values_near(gathered(h.times), dense_hitting_times(3, test::gather_edges(good), target), 1e-9, "good triangle");
}

INSTANTIATE_TEST_SUITE_P(Weights, InvalidWeights,
                         ::testing::Values(-0.4, -0.5, std::numeric_limits<double>::quiet_NaN(),
                                           std::numeric_limits<double>::infinity(), 0.0),
                         [](const auto& info) {
                           double w = info.param;
                           return std::isnan(w) ? std::string("NaN") : std::isinf(w) ? std::string("Inf")
                                  : w == 0 ? std::string("Zero") : w == -0.4 ? std::string("Minus04")
                                  : std::string("Minus05");
                         });
