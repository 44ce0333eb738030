// Belos + Ifpack2 (one translation unit: they are the expensive headers),
// the CrsMatrix copy, and hitting times through them.
#include <BelosLinearProblem.hpp>
#include <BelosPseudoBlockCGSolMgr.hpp>
#include <BelosTpetraAdapter.hpp>
#include <Ifpack2_Diagonal.hpp>
#include <Ifpack2_Relaxation.hpp>
#include <Tpetra_CrsMatrix.hpp>

#include <algorithm>
#include <chrono>
#include <limits>
#include <optional>

#include "tessera/linalg/edge_list_matrix.hpp"
#include "tessera/linalg/laplacian.hpp"
#include "tessera/runtime/collective.hpp"
#include "tessera/runtime/memory.hpp"
#include "tessera/runtime/trace.hpp"
#include "tessera/trilinos/belos.hpp"
#include "tessera/trilinos/hitting.hpp"

namespace tessera::trilinos {

template <class Graph>
Teuchos::RCP<TpetraCrsMatrix> crs_copy(const LaplacianRowMatrix<Graph>& m) {
  // Built the conventional way, from global column ids: fillComplete makes
  // Tpetra's own column map (owned, then ghosts by owner) and Import, as for
  // any CrsMatrix, whatever column layout the RowMatrix chose.
  const std::size_t rows = m.TESSERA_TPETRA_LOCAL(NumRows)();
  std::vector<size_t> lengths(rows);
  for (std::size_t i = 0; i < rows; ++i) lengths[i] = m.getNumEntriesInLocalRow(static_cast<LocalOrdinal>(i));
  auto crs = Teuchos::rcp(new TpetraCrsMatrix(m.getRowMap(), Teuchos::ArrayView<const size_t>(lengths), Tpetra::StaticProfile));
  std::vector<GlobalOrdinal> columns(m.TESSERA_TPETRA_LOCAL(MaxNumRowEntries)());
  std::vector<Scalar> values(columns.size());
  const auto first_row = static_cast<GlobalOrdinal>(m.graph().local_vertex_begin());
  for (std::size_t i = 0; i < rows; ++i) {
    std::size_t n = 0;
    m.for_each_entry(i, [&](std::uint64_t c, double v) {
      columns[n] = static_cast<GlobalOrdinal>(c);
      values[n++] = v;
    });
    crs->insertGlobalValues(first_row + static_cast<GlobalOrdinal>(i), Teuchos::ArrayView<const GlobalOrdinal>(columns.data(), n),
                            Teuchos::ArrayView<const Scalar>(values.data(), n));
  }
  crs->fillComplete(m.getDomainMap(), m.getRangeMap());
  return crs;
}
template Teuchos::RCP<TpetraCrsMatrix> crs_copy(const LaplacianRowMatrix<graph::EdgeList>&);
template Teuchos::RCP<TpetraCrsMatrix> crs_copy(const LaplacianRowMatrix<graph::PackedGraph>&);

std::size_t crs_bytes(const TpetraCrsMatrix& crs) {
  return crs.TESSERA_TPETRA_LOCAL(NumEntries)() * (sizeof(LocalOrdinal) + sizeof(Scalar)) +
         (crs.TESSERA_TPETRA_LOCAL(NumRows)() + 1) * sizeof(size_t);
}

namespace {
// A as Belos sees it: each product, then the caller's callback (progress).
// Ifpack2 takes the RowMatrix itself.
class ReportingOperator : public TpetraOperator {
 public:
  explicit ReportingOperator(Teuchos::RCP<const TpetraRowMatrix> a) : a_(std::move(a)) {}
  Teuchos::RCP<const TpetraMap> getDomainMap() const override { return a_->getDomainMap(); }
  Teuchos::RCP<const TpetraMap> getRangeMap() const override { return a_->getRangeMap(); }
  bool hasTransposeApply() const override { return a_->hasTransposeApply(); }
  void apply(const TpetraMultiVector& x, TpetraMultiVector& y, Teuchos::ETransp mode, Scalar alpha,
             Scalar beta) const override {
    a_->apply(x, y, mode, alpha, beta);
    // CG makes one product an iteration: a trace's rounds run product to product.
    iterations_.done({{"iteration", ++products_}});
    if (after_) after_();
  }
  std::function<void()> after_;

 private:
  mutable trace::RoundClock iterations_{"Belos iteration"};
  mutable std::int64_t products_ = 0;
  Teuchos::RCP<const TpetraRowMatrix> a_;
};
}  // namespace

struct BelosCg::State {
  using OP = TpetraOperator;
  using MV = TpetraMultiVector;
  Teuchos::RCP<const TpetraRowMatrix> a;
  Teuchos::RCP<ReportingOperator> reporting;  // a, for Belos
  Teuchos::RCP<Ifpack2::Preconditioner<Scalar, LocalOrdinal, GlobalOrdinal, Node>> jacobi;
};

void BelosCg::on_product(std::function<void()> f) { state_->reporting->after_ = std::move(f); }

BelosCg::BelosCg(const Teuchos::RCP<const TpetraRowMatrix>& a, Preconditioner preconditioner)
    : state_(std::make_unique<State>()) {
  state_->a = a;
  state_->reporting = Teuchos::rcp(new ReportingOperator(a));
  // Jacobi, M^-1 = diag(A)^-1 either way (one sweep from zero, damping 1).
  if (preconditioner == Preconditioner::relaxation) {
    auto relaxation = Teuchos::rcp(new Ifpack2::Relaxation<TpetraRowMatrix>(a));
    Teuchos::ParameterList params;
    params.set("relaxation: type", "Jacobi");
    params.set("relaxation: sweeps", 1);
    relaxation->setParameters(params);
    state_->jacobi = relaxation;
  } else {
    state_->jacobi = Teuchos::rcp(new Ifpack2::Diagonal<TpetraRowMatrix>(a));
  }
  state_->jacobi->initialize();
  state_->jacobi->compute();
}

BelosCg::~BelosCg() = default;

int BelosCg::solve(const TpetraMultiVector& b, TpetraMultiVector& x, double tolerance, int max_iterations,
                   const TpetraMultiVector* residual) {
  using MV = State::MV;
  using OP = State::OP;
  if (max_iterations <= 0) return 0;
  // Timed from setProblem (its initial residual is one product), as
  // Tessera's CG times its own initial residual: per-iteration times compare.
  auto t0 = std::chrono::steady_clock::now();
  auto problem = Teuchos::rcp(new Belos::LinearProblem<Scalar, MV, OP>(state_->reporting, Teuchos::rcp(&x, false),
                                                                        Teuchos::rcp(&b, false)));
  // As the right preconditioner: CG applies it the same way (z = M^-1 r), and
  // the problem keeps no preconditioned copy of the initial residual, which
  // it does for a left one: a vector less.
  problem->setRightPrec(state_->jacobi);
  if (residual) problem->setInitResVec(Teuchos::rcp(residual, false));  // no product, no vector
  problem->setProblem();
  auto params = Teuchos::rcp(new Teuchos::ParameterList);
  params->set("Convergence Tolerance", tolerance);
  params->set("Maximum Iterations", max_iterations);
  params->set("Verbosity", static_cast<int>(Belos::Errors));
  // ||r|| / ||b||, the scaling of Tessera's CG and of the true-residual test.
  params->set("Implicit Residual Scaling", std::string("Norm of RHS"));
  Belos::PseudoBlockCGSolMgr<Scalar, MV, OP> solver(problem, params);
  solver.solve();
  seconds_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return solver.getNumIters();
}

namespace {

// A single-column Tpetra vector over Tessera's vector's own memory (an
// unmanaged Kokkos view): Belos reads the right-hand side and updates the
// solution where Tessera keeps them, with no copy in or out. (Kokkos wraps
// non-const data only; Belos takes the right-hand side as const.)
TpetraMultiVector view_of(const Teuchos::RCP<const TpetraMap>& rows, const linalg::Vector& v) {
  auto data = const_cast<double*>(v.local().data());
  typename TpetraMultiVector::dual_view_type::t_dev local(data, v.local().size(), 1);
  return TpetraMultiVector(rows, local);
}

// A grounded Laplacian in Tpetra form as linalg sees an operator: what
// linalg::solve_to_tolerance needs to judge Belos' answers (products, and
// ||A||_inf bounded as linalg::Laplacian bounds it: 2 (d_i - a_ii) = twice
// the diagonal on a row that is not grounded, 1 on a grounded one). The
// PackedGraph path's judge: linalg's own Laplacian needs an EdgeList, and
// this one costs no second matrix.
class TpetraJudge final : public linalg::LinearOperator {
 public:
  TpetraJudge(const Map& rows, Teuchos::RCP<const TpetraRowMatrix> a, std::span<const std::uint8_t> grounded)
      : rows_(rows), a_(std::move(a)) {
    TpetraVector d(a_->getRowMap());
    a_->getLocalDiagCopy(d);
    auto dv = d.getLocalViewHost(Tpetra::Access::ReadOnly);
    double largest = 0;
    for (std::size_t i = 0; i < dv.extent(0); ++i)
      largest = std::max(largest, !grounded.empty() && grounded[i] ? 1.0 : 2.0 * dv(i, 0));
    norm_inf_ = all_reduce(rows.comm(), largest, MPI_MAX);
  }
  const Map& row_map() const override { return rows_; }
  void apply(const linalg::Vector& x, linalg::Vector& y, double alpha, double beta) const override {
    const TpetraMultiVector tx = view_of(a_->getDomainMap(), x);
    TpetraMultiVector ty = view_of(a_->getRangeMap(), y);
    a_->apply(tx, ty, Teuchos::NO_TRANS, alpha, beta);
  }
  void diagonal(linalg::Vector& d) const override {
    TpetraVector t(a_->getRowMap());
    a_->getLocalDiagCopy(t);
    auto tv = t.getLocalViewHost(Tpetra::Access::ReadOnly);
    auto ds = d.local();
    for (std::size_t i = 0; i < ds.size(); ++i) ds[i] = tv(i, 0);
  }
  double norm_inf() const override { return norm_inf_; }

 private:
  const Map& rows_;
  Teuchos::RCP<const TpetraRowMatrix> a_;
  double norm_inf_ = 0;
};

// What a Belos solve reports besides its answer (BelosHittingTimes' fields).
struct SolveCost {
  std::uint64_t extra_bytes = 0, measured_bytes = 0;
  int belos_solves = 0;
};

// The grounded system L x = b of hitting times, solved by Belos CG with
// Ifpack2 Jacobi on g's LaplacianRowMatrix (or its CrsMatrix copy) from x,
// round after round until `judge`'s true residual meets the test
// (linalg::solve_to_tolerance); no judge: the operator Belos iterates on
// judges itself. One implementation for both graph forms.
template <class Graph>
linalg::CgResult belos_grounded_solve(const Graph& g, std::span<const std::uint8_t> grounded, const linalg::Vector& b,
                                      linalg::Vector& x, const BelosHittingOptions& options,
                                      const linalg::LinearOperator* judge, SolveCost& cost) {
  Runtime& rt = g.runtime();
  // Every Tpetra object lives in this scope: gone before the Session ends.
  Teuchos::RCP<const TpetraMap> rows = Teuchos::rcp(new TpetraMap(g.vertices(), g.local_vertices(), 0, teuchos_comm(rt)));
  const TpetraMultiVector tb = view_of(rows, b);
  Teuchos::RCP<const TpetraRowMatrix> op;
  {
    // The product's output exists before the memory meter starts: only
    // the operator (its construction and its first apply) is measured.
    TpetraMultiVector scratch(rows, 1, false);
    scratch.putScalar(0.0);
    const TpetraMultiVector tx = view_of(rows, x);
    std::optional<AnonymousMemoryMeter> meter(std::in_place, rt.comm());
    std::size_t accounted = 0;
    if (options.matrix == MatrixKind::crs) {  // the conventional path holds the copy only
      auto crs = crs_copy(LaplacianRowMatrix<Graph>(g, grounded));
      accounted = crs_bytes(*crs);
      op = crs;
    } else {
      // Tpetra's column Map and Import only when the preconditioner asks.
      auto lap = Teuchos::rcp(new LaplacianRowMatrix<Graph>(
          g, grounded,
          options.preconditioner == Preconditioner::relaxation ? TpetraColumns::built : TpetraColumns::omitted));
      accounted = lap->extra_memory_bytes();
      op = lap;
    }
    op->apply(tx, scratch);  // what a product allocates (a CrsMatrix: its import buffers) counts
    cost.measured_bytes = meter->growth_bytes();
    cost.extra_bytes = all_reduce<std::uint64_t>(rt.comm(), accounted, MPI_SUM);
  }  // the scratch vector goes before Belos allocates its own
  std::optional<TpetraJudge> own_judge;
  if (!judge) judge = &own_judge.emplace(g.vertex_map(), op, grounded);
  BelosCg belos(op, options.preconditioner);
  if (const auto& report = options.hitting.cg.on_iteration) {
    // Belos' own residual estimate is not reachable while it iterates:
    // the progress says the iteration and the time (NaN residual).
    const auto start = std::chrono::steady_clock::now();
    belos.on_product([&report, start, products = 0]() mutable {
      report(++products, std::numeric_limits<double>::quiet_NaN(),
             std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
    });
  }
  auto round = [&](linalg::Vector& v, const linalg::Vector& residual, double tolerance, int budget) {
    TpetraMultiVector tv = view_of(rows, v);
    const TpetraMultiVector tr = view_of(rows, residual);
    return belos.solve(tb, tv, tolerance, budget, &tr);
  };
  auto c = linalg::solve_to_tolerance(*judge, b, x, options.hitting.cg, round, "Belos");
  cost.belos_solves = c.rounds;
  return c;
}

void require_session() {
  if (!Session::active())
    throw ConfigError("Belos needs Kokkos and Tpetra running: create a tessera::trilinos::Session after the Runtime");
}

}  // namespace

BelosHittingTimes belos_hitting_times(const graph::EdgeList& g, std::span<const std::uint64_t> targets,
                                      const BelosHittingOptions& options) {
  require_session();
  SolveCost cost;
  linalg::HittingOptions o = options.hitting;
  // Tessera's Laplacian checks Belos' answer between rounds only: its
  // buffers (and the adjacency matrix's) go while Belos iterates.
  o.laplacian_buffers = linalg::ProductBuffers::released;
  o.solver = [&](const linalg::Laplacian& laplacian, std::span<const std::uint8_t> grounded, const linalg::Vector& b,
                 linalg::Vector& x) {
    // Belos iterates; Tessera's Laplacian (the same operator) judges the
    // answer, so both solvers meet one convergence test.
    return belos_grounded_solve(g, grounded, b, x, options, &laplacian, cost);
  };
  linalg::EdgeListMatrix adjacency(g);
  adjacency.set_product_buffers(linalg::ProductBuffers::released);
  return {linalg::hitting_times(g, adjacency, targets, o), cost.extra_bytes, cost.belos_solves, cost.measured_bytes};
}

// linalg::hitting_times' steps on a PackedGraph, with what needs its rows
// done through PackedRowMatrix: reachability (reached_from instead of
// FastSV) and the judge of the answer.
BelosHittingTimes belos_hitting_times(const graph::PackedGraph& g, std::span<const std::uint64_t> targets,
                                      const BelosHittingOptions& options) {
  require_session();
  const auto t0 = std::chrono::steady_clock::now();
  Runtime& rt = g.runtime();
  if (g.directed())
    throw ConfigError("hitting times need an undirected graph: symmetrize it before packing (--undirected)");
  const std::vector<std::uint64_t> t = linalg::checked_targets(targets, g.vertices());

  const std::uint64_t base = g.local_vertex_begin();
  const std::size_t local = g.local_vertices();
  std::vector<std::uint8_t> grounded(local, 0), unreachable(local, 0);
  std::uint64_t lost = 0;
  if (!options.hitting.connected) {
    // A vertex never arrives when no target is in its component: grounded
    // (nothing to solve there) and reported NaN, as linalg::hitting_times does.
    const PackedRowMatrix plain(g, {}, TpetraColumns::omitted);
    const auto reached = reached_from(plain, t);
    for (std::size_t i = 0; i < local; ++i)
      if (!reached[i]) unreachable[i] = grounded[i] = 1, ++lost;
  }
  for (auto v : t)
    if (v - base < local) grounded[static_cast<std::size_t>(v - base)] = 1;
  // The right-hand side d_U: the degrees (A's row sums, self loops in) on
  // the rows not grounded, 0 on the grounded ones.
  linalg::Vector b(rt, g.vertex_ranges());
  {
    auto bs = b.local();
    const auto rows = g.rows();
    for (std::size_t i = 0; i < local; ++i) bs[i] = grounded[i] ? 0.0 : static_cast<double>(rows.degree(i));
  }
  linalg::HittingTimes out{linalg::Vector(rt, g.vertex_ranges()), all_reduce(rt.comm(), lost, MPI_SUM), t.size(), {}, 0};
  out.times.fill(0.0);
  out.setup_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  SolveCost cost;
  out.solve = belos_grounded_solve(g, grounded, b, out.times, options, nullptr, cost);
  auto h = out.times.local();
  for (std::size_t i = 0; i < h.size(); ++i)
    if (unreachable[i]) h[i] = std::numeric_limits<double>::quiet_NaN();
  return {std::move(out), cost.extra_bytes, cost.belos_solves, cost.measured_bytes};
}

}  // namespace tessera::trilinos
