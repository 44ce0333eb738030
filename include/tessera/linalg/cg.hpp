// Conjugate gradient with Jacobi (diagonal) preconditioning, for symmetric
// positive definite operators (Hestenes and Stiefel, 1952).
#pragma once
#include <functional>
#include <vector>

#include "tessera/linalg/row_matrix.hpp"

namespace tessera::linalg {

struct CgOptions {
  double tolerance = 1e-10;  // stop when ||r|| <= tolerance * ||b||
  int max_iterations = 20000;
  // Called on every rank after each iteration: iteration, relative residual, seconds.
  std::function<void(int, double, double)> on_iteration;
};

struct CgResult {
  int iterations = 0;
  bool converged = false;
  double relative_residual = 0;
  std::vector<double> residuals;  // relative residual after each iteration (index 0: start)
  double seconds = 0;
  double seconds_per_iteration() const { return iterations ? seconds / iterations : 0.0; }
};

// Solves A x = b starting from x. Collective.
CgResult conjugate_gradient(const LinearOperator& a, const Vector& b, Vector& x, const CgOptions& options = {});

}  // namespace tessera::linalg
