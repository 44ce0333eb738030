// Belos + Ifpack2 (one translation unit: they are the expensive headers),
// the CrsMatrix copy, and hitting times through them.
#include <BelosLinearProblem.hpp>
#include <BelosPseudoBlockCGSolMgr.hpp>
#include <BelosTpetraAdapter.hpp>
#include <Ifpack2_Diagonal.hpp>
#include <Ifpack2_Relaxation.hpp>
#include <Tpetra_CrsMatrix.hpp>

#include <chrono>
#include <optional>

#include "tessera/linalg/edge_list_matrix.hpp"
#include "tessera/linalg/laplacian.hpp"
#include "tessera/runtime/collective.hpp"
#include "tessera/runtime/memory.hpp"
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

BelosResult belos_cg(const Teuchos::RCP<const TpetraRowMatrix>& a, const TpetraMultiVector& b, TpetraMultiVector& x,
                     double tolerance, int max_iterations, Preconditioner preconditioner) {
  using OP = TpetraOperator;
  using MV = TpetraMultiVector;
  BelosResult out;
  std::vector<double> b_norm(b.getNumVectors());
  b.norm2(Teuchos::ArrayView<double>(b_norm));
  double largest_b = *std::max_element(b_norm.begin(), b_norm.end());
  if (largest_b == 0.0) {  // nothing to solve (every vertex grounded): x = 0 exactly
    x.putScalar(0.0);
    out.converged = true;
    return out;
  }

  // Jacobi, M^-1 = diag(A)^-1 either way (one sweep from zero, damping 1).
  Teuchos::RCP<Ifpack2::Preconditioner<Scalar, LocalOrdinal, GlobalOrdinal, Node>> jacobi;
  if (preconditioner == Preconditioner::relaxation) {
    auto relaxation = Teuchos::rcp(new Ifpack2::Relaxation<TpetraRowMatrix>(a));
    Teuchos::ParameterList params;
    params.set("relaxation: type", "Jacobi");
    params.set("relaxation: sweeps", 1);
    relaxation->setParameters(params);
    jacobi = relaxation;
  } else {
    jacobi = Teuchos::rcp(new Ifpack2::Diagonal<TpetraRowMatrix>(a));
  }
  jacobi->initialize();
  jacobi->compute();

  auto problem = Teuchos::rcp(new Belos::LinearProblem<Scalar, MV, OP>(a, Teuchos::rcp(&x, false), Teuchos::rcp(&b, false)));
  problem->setLeftPrec(jacobi);
  MV r(b.getMap(), b.getNumVectors(), false);
  auto true_residual = [&] {
    a->apply(x, r);
    r.update(1.0, b, -1.0);  // r = b - A x
    std::vector<double> norms(b.getNumVectors());
    r.norm2(Teuchos::ArrayView<double>(norms));
    double worst = 0;
    for (std::size_t j = 0; j < norms.size(); ++j) worst = std::max(worst, b_norm[j] > 0 ? norms[j] / b_norm[j] : norms[j]);
    return worst;
  };
  // Belos stops on its own (recursive) residual; the true one can lag it.
  // Restart from x while the true residual is above the tolerance and the
  // iteration budget lasts (a few rounds at most).
  for (int round = 0; round < 4 && out.iterations < max_iterations; ++round) {
    // Timed from setProblem (its initial residual is one product), as
    // Tessera's CG times its own initial residual: per-iteration times compare.
    auto t0 = std::chrono::steady_clock::now();
    problem->setProblem();
    auto params = Teuchos::rcp(new Teuchos::ParameterList);
    params->set("Convergence Tolerance", tolerance);
    params->set("Maximum Iterations", max_iterations - out.iterations);
    params->set("Verbosity", static_cast<int>(Belos::Errors));
    // ||r|| / ||b|| as Tessera's CG; a restart then only closes the gap.
    params->set("Implicit Residual Scaling", std::string("Norm of RHS"));
    Belos::PseudoBlockCGSolMgr<Scalar, MV, OP> solver(problem, params);
    solver.solve();
    out.seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    out.iterations += solver.getNumIters();
    ++out.solves;
    out.true_relative_residual = true_residual();
    out.converged = out.true_relative_residual <= tolerance;
    if (out.converged || solver.getNumIters() == 0) break;
  }
  return out;
}

namespace {

// Tessera's vector <-> a single-column Tpetra vector on the same rows.
void copy_in(const linalg::Vector& from, TpetraMultiVector& to) {
  auto v = to.getLocalViewHost(Tpetra::Access::OverwriteAll);
  auto f = from.local();
  for (std::size_t i = 0; i < f.size(); ++i) v(i, 0) = f[i];
}
void copy_out(const TpetraMultiVector& from, linalg::Vector& to) {
  auto v = from.getLocalViewHost(Tpetra::Access::ReadOnly);
  auto t = to.local();
  for (std::size_t i = 0; i < t.size(); ++i) t[i] = v(i, 0);
}

}  // namespace

BelosHittingTimes belos_hitting_times(const graph::EdgeList& g, std::span<const std::uint64_t> targets,
                                      const BelosHittingOptions& options) {
  if (!Session::active())
    throw ConfigError("Belos needs Kokkos and Tpetra running: create a tessera::trilinos::Session after the Runtime");
  std::uint64_t matrix_extra_bytes = 0, matrix_measured_bytes = 0;
  int belos_solves = 0;
  linalg::HittingOptions o = options.hitting;
  o.solver = [&](const linalg::Laplacian&, std::span<const std::uint8_t> grounded, const linalg::Vector& b,
                 linalg::Vector& x) {
    Runtime& rt = g.runtime();
    // Every Tpetra object lives in this scope: gone before the Session ends.
    // The vectors exist before the memory meter starts: only the operator
    // (its construction and its first apply) is measured.
    auto rows = Teuchos::rcp(new TpetraMap(g.vertices(), g.local_vertices(), 0, teuchos_comm(rt)));
    TpetraMultiVector tb(rows, 1, false), tx(rows, 1, false), scratch(rows, 1, false);
    scratch.putScalar(0.0);  // its pages touched before the meter starts
    copy_in(b, tb);
    copy_in(x, tx);
    std::optional<AnonymousMemoryMeter> meter(std::in_place, rt.comm());
    Teuchos::RCP<const TpetraRowMatrix> op;
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
    meter.reset();
    auto r = belos_cg(op, tb, tx, options.hitting.cg.tolerance, options.hitting.cg.max_iterations,
                      options.preconditioner);
    copy_out(tx, x);
    matrix_extra_bytes = all_reduce<std::uint64_t>(rt.comm(), accounted, MPI_SUM);
    belos_solves = r.solves;
    linalg::CgResult c;
    c.iterations = r.iterations;
    c.converged = r.converged;
    c.relative_residual = r.true_relative_residual;
    c.seconds = r.seconds;
    return c;
  };
  return {linalg::hitting_times(g, linalg::EdgeListMatrix(g), targets, o), matrix_extra_bytes, belos_solves,
          matrix_measured_bytes};
}

}  // namespace tessera::trilinos
