// Belos + Ifpack2 (one translation unit: they are the expensive headers),
// the CrsMatrix copy, and hitting times through them.
#include <BelosLinearProblem.hpp>
#include <BelosPseudoBlockCGSolMgr.hpp>
#include <BelosTpetraAdapter.hpp>
#include <Ifpack2_Diagonal.hpp>
#include <Ifpack2_Relaxation.hpp>
#include <Tpetra_CrsMatrix.hpp>

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

Teuchos::RCP<TpetraCrsMatrix> crs_copy(const EdgeListRowMatrix& m) {
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

}  // namespace

BelosHittingTimes belos_hitting_times(const graph::EdgeList& g, std::span<const std::uint64_t> targets,
                                      const BelosHittingOptions& options) {
  if (!Session::active())
    throw ConfigError("Belos needs Kokkos and Tpetra running: create a tessera::trilinos::Session after the Runtime");
  std::uint64_t matrix_extra_bytes = 0, matrix_measured_bytes = 0;
  int belos_solves = 0;
  linalg::HittingOptions o = options.hitting;
  // Tessera's Laplacian checks Belos' answer between rounds only: its
  // buffers (and the adjacency matrix's) go while Belos iterates.
  o.laplacian_buffers = linalg::ProductBuffers::released;
  o.solver = [&](const linalg::Laplacian& laplacian, std::span<const std::uint8_t> grounded, const linalg::Vector& b,
                 linalg::Vector& x) {
    Runtime& rt = g.runtime();
    // Every Tpetra object lives in this scope: gone before the Session ends.
    // The vectors exist before the memory meter starts: only the operator
    // (its construction and its first apply) is measured.
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
        auto crs = crs_copy(EdgeListRowMatrix(g, grounded));
        accounted = crs_bytes(*crs);
        op = crs;
      } else {
        // Tpetra's column Map and Import only when the preconditioner asks.
        auto lap = Teuchos::rcp(new EdgeListRowMatrix(
            g, grounded,
            options.preconditioner == Preconditioner::relaxation ? TpetraColumns::built : TpetraColumns::omitted));
        accounted = lap->extra_memory_bytes();
        op = lap;
      }
      op->apply(tx, scratch);  // what a product allocates (a CrsMatrix: its import buffers) counts
      matrix_measured_bytes = meter->growth_bytes();
      matrix_extra_bytes = all_reduce<std::uint64_t>(rt.comm(), accounted, MPI_SUM);
    }  // the scratch vector goes before Belos allocates its own
    // Belos iterates; Tessera's Laplacian (the same operator) judges the
    // answer, so both solvers meet one convergence test.
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
    auto c = linalg::solve_to_tolerance(laplacian, b, x, options.hitting.cg, round, "Belos");
    belos_solves = c.rounds;
    return c;
  };
  linalg::EdgeListMatrix adjacency(g);
  adjacency.set_product_buffers(linalg::ProductBuffers::released);
  return {linalg::hitting_times(g, adjacency, targets, o), matrix_extra_bytes, belos_solves, matrix_measured_bytes};
}

}  // namespace tessera::trilinos
