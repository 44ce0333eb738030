// Belos CG with an Ifpack2 Jacobi preconditioner (Diagonal or Relaxation)
// on any Tpetra RowMatrix, and the conventional CrsMatrix copy of an EdgeListRowMatrix
// (the comparison). Trilinos-facing: for tests and the layer itself; the CLI
// uses hitting.hpp. Belos and Ifpack2 live in one translation unit
// (belos_hitting.cpp: ~11 s and ~0.5 GB to compile).
#pragma once
#include <Tpetra_CrsMatrix_fwd.hpp>

#include "tessera/trilinos/edge_list_row_matrix.hpp"
#include "tessera/trilinos/hitting.hpp"

namespace tessera::trilinos {

using TpetraCrsMatrix = Tpetra::CrsMatrix<Scalar, LocalOrdinal, GlobalOrdinal, Node>;

// Collective. The same operator as `m` (rows, columns, values), copied into
// a fill-complete CrsMatrix on m's row, column, domain and range maps.
Teuchos::RCP<TpetraCrsMatrix> crs_copy(const EdgeListRowMatrix& m);
// Bytes a CrsMatrix holds for its entries and row offsets on this rank.
std::size_t crs_bytes(const TpetraCrsMatrix& crs);

struct BelosResult {
  int iterations = 0;   // over every Belos solve
  int solves = 0;       // Belos solves run (more than one when its estimate stopped too early)
  bool converged = false;
  double true_relative_residual = 0;  // ||b - A x|| / ||b||, computed after Belos
  double seconds = 0;   // setProblem (the initial residual) and solve(), not the preconditioner setup
};

// Collective. Solves A x = b from x (Belos pseudo-block CG, Ifpack2 Jacobi:
// Diagonal, or Relaxation with one sweep, which needs A's graph to have its
// Import at 2+ ranks), until the true relative residual is <= tolerance or
// max_iterations in all; A must be symmetric positive definite.
BelosResult belos_cg(const Teuchos::RCP<const TpetraRowMatrix>& a, const TpetraMultiVector& b, TpetraMultiVector& x,
                     double tolerance, int max_iterations, Preconditioner preconditioner = Preconditioner::diagonal);

}  // namespace tessera::trilinos
