// Belos CG with an Ifpack2 Jacobi preconditioner (Diagonal or Relaxation)
// on any Tpetra RowMatrix, and the conventional CrsMatrix copy of a
// LaplacianRowMatrix (the comparison). Trilinos-facing: for tests and the layer itself; the CLI
// uses hitting.hpp. Belos and Ifpack2 live in one translation unit
// (belos_hitting.cpp, the slowest file to compile).
#pragma once
#include <Tpetra_CrsMatrix_fwd.hpp>

#include <functional>
#include <memory>

#include "tessera/trilinos/edge_list_row_matrix.hpp"
#include "tessera/trilinos/hitting.hpp"

namespace tessera::trilinos {

using TpetraCrsMatrix = Tpetra::CrsMatrix<Scalar, LocalOrdinal, GlobalOrdinal, Node>;

// Collective. The same operator as `m` (rows, columns, values), copied into
// a fill-complete CrsMatrix on m's row, domain and range maps (Tpetra makes
// its own column map). Either graph form (EdgeListRowMatrix, PackedRowMatrix).
template <class Graph>
Teuchos::RCP<TpetraCrsMatrix> crs_copy(const LaplacianRowMatrix<Graph>& m);
extern template Teuchos::RCP<TpetraCrsMatrix> crs_copy(const LaplacianRowMatrix<graph::EdgeList>&);
extern template Teuchos::RCP<TpetraCrsMatrix> crs_copy(const LaplacianRowMatrix<graph::PackedGraph>&);
// Bytes a CrsMatrix holds for its entries and row offsets on this rank.
std::size_t crs_bytes(const TpetraCrsMatrix& crs);

// Belos pseudo-block CG with an Ifpack2 Jacobi preconditioner (Diagonal, or
// Relaxation with one sweep, which needs A's graph to have its Import at 2+
// ranks) on a symmetric positive definite A. The preconditioner is set up
// once; each solve() is one round of linalg::solve_to_tolerance: Belos
// iterates from x on its own residual estimate.
class BelosCg {
 public:
  // Collective.
  BelosCg(const Teuchos::RCP<const TpetraRowMatrix>& a, Preconditioner preconditioner = Preconditioner::diagonal);
  ~BelosCg();
  BelosCg(const BelosCg&) = delete;
  BelosCg& operator=(const BelosCg&) = delete;
  // Collective. Iterates from x until Belos' residual estimate
  // ||r|| / ||b|| <= tolerance or max_iterations; returns the iterations.
  // `residual`, when given, is b - A x (Belos then computes none).
  int solve(const TpetraMultiVector& b, TpetraMultiVector& x, double tolerance, int max_iterations,
            const TpetraMultiVector* residual = nullptr);
  double seconds() const noexcept { return seconds_; }  // setProblem and solve() over every call
  // Called on every rank after each product Belos asks of A, which in CG is
  // one an iteration: Belos reports nothing while it iterates, and a solve
  // on a huge graph takes minutes.
  void on_product(std::function<void()> f);

 private:
  struct State;
  std::unique_ptr<State> state_;
  double seconds_ = 0;
};

}  // namespace tessera::trilinos
