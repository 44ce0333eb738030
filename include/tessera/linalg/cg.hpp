// Conjugate gradient with Jacobi (diagonal) preconditioning, for symmetric
// positive definite operators (Hestenes and Stiefel, 1952), and the
// convergence test every solver of this project shares.
//
// The test is on the answer, not on a solver's own estimate: a Krylov
// solver's recursive residual keeps falling below what double precision can
// deliver, so the true residual ||b - A x|| / ||b|| of x is computed after
// each round of the inner solver. Below the tolerance: converged. Above it,
// the inner solver restarts from x (residual replacement) while a round at
// least halves the true residual. When a round no longer does, the answer
// is as accurate as the arithmetic allows if its normwise backward error
// ||b - A x|| / (||A|| ||x|| + ||b||) is at rounding level (a backward-stable
// direct solve does no better): "limited by rounding", a success. Otherwise,
// or when the iteration budget is spent, it did not converge.
#pragma once
#include <functional>
#include <string>
#include <vector>

#include "tessera/linalg/row_matrix.hpp"

namespace tessera::linalg {

// A backward error at or below this is what rounding leaves (about 4,500
// units of roundoff in double precision).
inline constexpr double kRoundingBackwardError = 1e-12;

enum class SolveStatus {
  converged,         // true relative residual <= tolerance
  rounding_limited,  // stagnated above the tolerance with a backward error at rounding level
  not_converged,     // iteration budget spent, or stagnated with a larger backward error
};
const char* to_string(SolveStatus s) noexcept;  // "converged", "limited_by_rounding", "not_converged"

struct CgOptions {
  double tolerance = 1e-10;  // on the true relative residual ||b - A x|| / ||b|| of the answer
  int max_iterations = 20000;
  // Called on every rank after each iteration: iteration, the solver's own
  // (recursive) relative residual estimate, seconds.
  std::function<void(int, double, double)> on_iteration;
};

struct CgResult {
  int iterations = 0;  // over every round
  int rounds = 0;      // inner solves: 1, or more when restarted from the answer
  SolveStatus status = SolveStatus::not_converged;
  bool converged = false;        // status == converged
  double relative_residual = 0;  // true ||b - A x|| / ||b|| of the answer
  double backward_error = 0;     // ||b - A x|| / (||A||_inf ||x|| + ||b||)
  std::string reason;            // why it stopped, and what to try when it failed; empty when converged
  std::vector<double> residuals;  // the inner solver's relative residual after each iteration (index 0: start)
  double seconds = 0;
  bool succeeded() const noexcept { return status != SolveStatus::not_converged; }
  double seconds_per_iteration() const { return iterations ? seconds / iterations : 0.0; }
};

// One round of an inner iterative solver: improves x in place, iterating on
// its own residual estimate until it falls to tolerance * ||b|| or
// max_iterations are spent; returns the iterations done. Collective.
// `residual` holds b - A x on entry (the test has just computed it): a
// solver starts from it instead of a product and a vector of its own.
using SolverRound = std::function<int(Vector& x, const Vector& residual, double tolerance, int max_iterations)>;

// The convergence test above around any inner solver of A x = b. Collective.
// `solver` names it in `reason` ("Belos", "CG").
CgResult solve_to_tolerance(const LinearOperator& a, const Vector& b, Vector& x, const CgOptions& options,
                            const SolverRound& round, const std::string& solver);

// Solves A x = b starting from x by Jacobi-preconditioned CG under that
// test. Collective.
CgResult conjugate_gradient(const LinearOperator& a, const Vector& b, Vector& x, const CgOptions& options = {});

}  // namespace tessera::linalg
