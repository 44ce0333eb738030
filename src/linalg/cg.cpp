// Preconditioned conjugate gradient (Hestenes and Stiefel, "Methods of
// Conjugate Gradients for Solving Linear Systems", J. Res. NBS 49, 1952),
// with the Jacobi preconditioner M = diag(A).
#include "tessera/linalg/cg.hpp"

#include <chrono>
#include <cmath>

#include "tessera/runtime/collective.hpp"

namespace tessera::linalg {

CgResult conjugate_gradient(const LinearOperator& a, const Vector& b, Vector& x, const CgOptions& options) {
  using Clock = std::chrono::steady_clock;
  auto t0 = Clock::now();
  Runtime& rt = b.runtime();
  const auto& rows = a.row_distribution();
  Vector r(rt, rows), z(rt, rows), p(rt, rows), q(rt, rows), inv_diag(rt, rows);
  a.diagonal(inv_diag);
  for (auto& v : inv_diag.local()) {
    if (!(v > 0)) throw Error("conjugate gradient needs a positive diagonal (found " + std::to_string(v) + ")");
    v = 1.0 / v;
  }
  auto precondition = [&] {
    auto zs = z.local();
    auto rs = r.local(), m = inv_diag.local();
    for (std::size_t i = 0; i < zs.size(); ++i) zs[i] = m[i] * rs[i];
  };

  CgResult out;
  a.apply(x, r);
  r.xpay(b, -1.0);  // r = b - A x
  double bnorm = b.norm2();
  if (bnorm == 0) bnorm = 1;
  double rel = r.norm2() / bnorm;
  out.residuals.push_back(rel);
  precondition();
  p.assign(z);
  double rz = r.dot(z);
  while (rel > options.tolerance && out.iterations < options.max_iterations) {
    a.apply(p, q);
    double pq = p.dot(q);
    if (!(pq > 0)) throw Error("conjugate gradient broke down: the operator is not positive definite (p.Ap = " +
                               std::to_string(pq) + ")");
    double alpha = rz / pq;
    x.axpy(alpha, p);
    r.axpy(-alpha, q);
    precondition();
    // One reduction for both ||r|| and r.z.
    double pair[2] = {0, 0};
    auto rs = r.local(), zs = z.local();
    for (std::size_t i = 0; i < rs.size(); ++i) pair[0] += rs[i] * rs[i], pair[1] += rs[i] * zs[i];
    all_reduce(rt.comm(), pair, 2, MPI_SUM);
    rel = std::sqrt(pair[0]) / bnorm;
    double rz_next = pair[1];
    p.xpay(z, rz_next / rz);  // p = z + beta p
    rz = rz_next;
    ++out.iterations;
    out.residuals.push_back(rel);
    if (options.on_iteration)
      options.on_iteration(out.iterations, rel, std::chrono::duration<double>(Clock::now() - t0).count());
  }
  out.relative_residual = rel;
  out.converged = rel <= options.tolerance;
  out.seconds = std::chrono::duration<double>(Clock::now() - t0).count();
  return out;
}

}  // namespace tessera::linalg
