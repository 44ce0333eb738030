// Spectral analysis of a graph by Anasazi on the graph's own edge arrays
// (EdgeListRowMatrix, no CrsMatrix copy):
// - the Fiedler vector and λ₂ of the graph Laplacian L = D - A (Fiedler,
//   "Algebraic connectivity of graphs", Czech. Math. J. 23, 1973), the
//   constant vector deflated, and spectral bisection from it;
// - eigenvector centrality, the Perron vector of the adjacency A.
// Both by Anasazi: LOBPCG (Knyazev, "Toward the optimal preconditioned
// eigensolver: locally optimal block preconditioned conjugate gradient
// method", SIAM J. Sci. Comput. 23(2), 2001), the default, or Block
// Krylov–Schur (Stewart, "A Krylov–Schur algorithm for large
// eigenproblems", SIAM J. Matrix Anal. Appl. 23(3), 2001).
// Tessera types only: what the CLI includes; no Trilinos header is reached
// from here. Built without Trilinos, spectral() throws a ConfigError saying
// so (bisect() needs no Trilinos).
#pragma once
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "tessera/graph/edge_list.hpp"
#include "tessera/trilinos/hitting.hpp"

namespace tessera::trilinos {

enum class SpectralWhat {
  fiedler,     // smallest nonzero eigenvalue of L and its vector
  centrality,  // largest eigenvalue of A and its (nonnegative) vector
};
inline const char* to_string(SpectralWhat w) noexcept { return w == SpectralWhat::fiedler ? "fiedler" : "centrality"; }

// Anasazi's eigensolver.
enum class EigenMethod {
  krylov_schur,  // Block Krylov–Schur, block size 1 (Stewart 2001)
  // LOBPCG (Knyazev, "Toward the optimal preconditioned eigensolver",
  // SIAM J. Sci. Comput. 23(2), 2001), block of 4, Jacobi-preconditioned
  // (L's diagonal) for Fiedler. Graphs too small for its block (under 13
  // vertices) get Krylov–Schur.
  lobpcg,
};
inline const char* to_string(EigenMethod m) noexcept { return m == EigenMethod::lobpcg ? "lobpcg" : "krylov-schur"; }

struct SpectralOptions {
  SpectralWhat what = SpectralWhat::fiedler;
  // LOBPCG: Krylov–Schur needs far more products for λ₂ of a Kronecker
  // graph (small, clustered at the low end), and may not reach it at all.
  EigenMethod method = EigenMethod::lobpcg;
  int max_iterations = 20000;  // LOBPCG's cap
  // Anasazi's Ritz residual ||Ax - λx|| / |λ| to stop at; the true residual
  // of the answer is computed apart and reported.
  double tolerance = 1e-10;
  int max_restarts = 1000;  // Krylov–Schur's cap
  int subspace = 40;  // Krylov basis size ("Num Blocks", block size 1); capped by the graph's size
  // The operator Anasazi applies: the edge arrays themselves, or (the
  // conventional path, for comparison) a Tpetra::CrsMatrix copied from them.
  MatrixKind matrix = MatrixKind::edge_list;
};

struct SpectralResult {
  SpectralWhat what = SpectralWhat::fiedler;
  double lambda = 0;  // λ₂ of L (fiedler) or λ_max of A (centrality)
  // The next eigenvalue in the same direction (λ₃ of L; A's second largest),
  // NaN when the graph is too small to have one. Close to `lambda`: the
  // vector is not unique (only its eigenspace is).
  double next_lambda = 0;
  double residual = 0;  // true ||Mx - λx|| / |λ|, x of unit norm (M = L or A)
  int iterations = 0;   // Krylov–Schur steps (one product each) or LOBPCG iterations (one block product each)
  EigenMethod method = EigenMethod::krylov_schur;  // the one that ran (0 iterations: solved densely, at most 4 vertices)
  bool converged = false;
  double seconds = 0;  // the eigensolver alone (Anasazi's setup and iterations)
  // Of those: the operator's products inside the eigensolver, one per
  // vector (a block of 4 counts 4), and the seconds spent in them (slowest
  // rank); the rest is Anasazi's own work (orthogonalization, Rayleigh-Ritz).
  std::uint64_t operator_products = 0;
  double operator_seconds = 0;
  // This rank's entries of the unit-norm vector, in vertex order. Sign:
  // centrality nonnegative in sum; Fiedler's first entry (smallest vertex
  // id) of magnitude above 1e-6 of the largest is positive, so every rank
  // count gives the same vector.
  std::vector<double> vector;
  std::uint64_t matrix_extra_bytes = 0;  // summed over ranks: what the operator allocated beyond the edge arrays
  // Summed over ranks: anonymous memory the operator's construction and
  // first product added, measured from /proc (the CrsMatrix path: its copy
  // and what building it kept); Anasazi's basis vectors are not in it.
  std::uint64_t matrix_measured_bytes = 0;
};

// Collective; needs a live Session; `g` undirected with nonnegative weights.
// Fiedler: ConfigError when the graph has fewer than 2 vertices or several
// components (λ₂ = 0), naming how many and suggesting `tessera lcc`.
SpectralResult spectral(const graph::EdgeList& g, const SpectralOptions& options = {});
// The same on a PackedGraph read in place (PackedRowMatrix), in its
// numbering: `vector` is by packed vertex id (original_ids() maps back), and
// the start vector and sign rule follow those ids, so the vector may differ
// from the EdgeList's in sign. Fiedler: connectivity is checked by a
// breadth-first walk from vertex 0 through the matrix's own products
// (ConfigError naming the vertices not reached).
SpectralResult spectral(const graph::PackedGraph& g, const SpectralOptions& options = {});

// Spectral bisection from a vertex vector (the Fiedler vector): part 1 =
// the vertices whose value is above the split, part 0 the others.
enum class SplitRule {
  median,  // the median value: halves (ties at the median go to part 0)
  sign,    // zero
};
inline const char* to_string(SplitRule r) noexcept { return r == SplitRule::median ? "median" : "sign"; }
struct Bisection {
  std::vector<std::uint8_t> part;  // this rank's vertices
  std::uint64_t sizes[2] = {0, 0};
  std::uint64_t cut_edges = 0;  // undirected edges between the parts (weights not counted)
  double threshold = 0;
};
// Collective (no Trilinos needed). `local_values`: this rank's vertices of
// `g`; `g` undirected. Reads the ghosts' parts through the aggregation engine.
Bisection bisect(const graph::EdgeList& g, std::span<const double> local_values, SplitRule rule = SplitRule::median);

}  // namespace tessera::trilinos
