// Preconditioned conjugate gradient (Hestenes and Stiefel, "Methods of
// Conjugate Gradients for Solving Linear Systems", J. Res. NBS 49, 1952),
// with the Jacobi preconditioner M = diag(A), restarted from the answer
// while its true residual is above the tolerance (residual replacement: van
// der Vorst and Ye, "Residual Replacement Strategies for Krylov Subspace
// Iterative Methods", SIAM J. Sci. Comput. 22, 2000). The backward error is
// Rigal and Gaches' normwise one (J. ACM 14, 1967).
#include "tessera/linalg/cg.hpp"

#include <chrono>
#include <cmath>
#include <cstdio>

#include "tessera/runtime/cancellation.hpp"
#include "tessera/runtime/collective.hpp"
#include "tessera/runtime/trace.hpp"

namespace tessera::linalg {

const char* to_string(SolveStatus s) noexcept {
  switch (s) {
    case SolveStatus::converged: return "converged";
    case SolveStatus::rounding_limited: return "limited_by_rounding";
    case SolveStatus::not_converged: break;
  }
  return "not_converged";
}

namespace {

using Clock = std::chrono::steady_clock;

std::string sci(double v) {
  char text[32];
  std::snprintf(text, sizeof(text), "%.3g", v);
  return text;
}

// One round of Jacobi-preconditioned CG from x, stopping on its recursive
// residual. The vectors live across rounds.
class JacobiCg {
 public:
  JacobiCg(const LinearOperator& a, const Vector& b, const CgOptions& options)
      : a_(a), b_(b), options_(options), r_(a.row_map()), z_(a.row_map()), p_(a.row_map()),
        q_(a.row_map()), inv_diag_(a.row_map()) {
    a.diagonal(inv_diag_);
    for (auto& v : inv_diag_.local()) {
      if (!(v > 0)) throw Error("conjugate gradient needs a positive diagonal (found " + std::to_string(v) + ")");
      v = 1.0 / v;
    }
    bnorm_ = b.norm2();
    if (bnorm_ == 0) bnorm_ = 1;
  }

  int operator()(Vector& x, const Vector& residual, double tolerance, int max_iterations) {
    Runtime& rt = b_.runtime();
    r_.assign(residual);  // b - A x
    double rel = r_.norm2() / bnorm_;
    if (residuals_.empty()) residuals_.push_back(rel);
    precondition();
    p_.assign(z_);
    double rz = r_.dot(z_);
    int done = 0;
    while (rel > tolerance && done < max_iterations) {
      trace::Span traced(trace::Category::round, "CG iteration");
      traced.arg("iteration", total_ + 1);
      a_.apply(p_, q_);
      const double pq = p_.dot(q_);
      if (!(pq > 0))
        throw Error("conjugate gradient broke down: the operator is not positive definite (p.Ap = " +
                    std::to_string(pq) + ")");
      const double alpha = rz / pq;
      x.axpy(alpha, p_);
      r_.axpy(-alpha, q_);
      precondition();
      // One reduction for both ||r|| and r.z.
      double pair[2] = {0, 0};
      auto rs = r_.local(), zs = z_.local();
      for (std::size_t i = 0; i < rs.size(); ++i) pair[0] += rs[i] * rs[i], pair[1] += rs[i] * zs[i];
      all_reduce(rt.comm(), pair, 2, MPI_SUM);
      rel = std::sqrt(pair[0]) / bnorm_;
      const double rz_next = pair[1];
      p_.xpay(z_, rz_next / rz);  // p = z + beta p
      rz = rz_next;
      ++done;
      ++total_;
      residuals_.push_back(rel);
      if (options_.on_iteration)
        options_.on_iteration(total_, rel, std::chrono::duration<double>(Clock::now() - t0_).count());
      cancellation_point(rt.comm());
    }
    return done;
  }

  std::vector<double>& residuals() noexcept { return residuals_; }

 private:
  void precondition() {
    auto zs = z_.local();
    auto rs = r_.local(), m = inv_diag_.local();
    for (std::size_t i = 0; i < zs.size(); ++i) zs[i] = m[i] * rs[i];
  }

  const LinearOperator& a_;
  const Vector& b_;
  const CgOptions& options_;
  Vector r_, z_, p_, q_, inv_diag_;
  double bnorm_ = 1;
  int total_ = 0;
  std::vector<double> residuals_;
  Clock::time_point t0_ = Clock::now();
};

}  // namespace

CgResult solve_to_tolerance(const LinearOperator& a, const Vector& b, Vector& x, const CgOptions& options,
                            const SolverRound& round, const std::string& solver) {
  const auto t0 = Clock::now();
  CgResult out;
  Vector r(a.row_map());
  const double bnorm = b.norm2();
  const double anorm = a.norm_inf();
  // The true residual of x, relative to ||b||, and its backward error.
  auto measure = [&] {
    a.apply(x, r);
    r.xpay(b, -1.0);
    const double rnorm = r.norm2(), xnorm = x.norm2();
    out.relative_residual = bnorm > 0 ? rnorm / bnorm : rnorm;
    const double scale = anorm * xnorm + bnorm;
    out.backward_error = scale > 0 ? rnorm / scale : 0.0;
  };
  measure();
  double before = out.relative_residual;
  while (true) {
    if (out.relative_residual <= options.tolerance) {
      out.status = SolveStatus::converged;
      break;
    }
    const int budget = options.max_iterations - out.iterations;
    if (budget <= 0) {
      out.reason = "the iteration limit (" + std::to_string(options.max_iterations) +
                   ", --max-iterations) was reached at true relative residual " + sci(out.relative_residual) +
                   " above the tolerance " + sci(options.tolerance) +
                   ": raise --max-iterations, loosen --tolerance, or try the other --solver";
      break;
    }
    const int done = round(x, r, options.tolerance, budget);
    out.iterations += done;
    ++out.rounds;
    measure();
    if (out.relative_residual <= options.tolerance) continue;  // converged: said at the top
    // A round that ran out of budget is not stagnation: the limit says so.
    if (out.iterations >= options.max_iterations) continue;
    if (done == 0 || out.relative_residual > 0.5 * before) {
      if (out.backward_error <= kRoundingBackwardError) {
        out.status = SolveStatus::rounding_limited;
        out.reason = "limited by rounding at true relative residual " + sci(out.relative_residual) +
                     " (backward error " + sci(out.backward_error) +
                     "): a restart no longer reduces it, and a direct solve does no better";
      } else {
        out.reason = solver + " stagnated at true relative residual " + sci(out.relative_residual) +
                     " with backward error " + sci(out.backward_error) +
                     ", far above rounding: the system may be singular or badly scaled (check the weights), or "
                     "try the other --solver";
      }
      break;
    }
    before = out.relative_residual;
  }
  out.converged = out.status == SolveStatus::converged;
  out.seconds = std::chrono::duration<double>(Clock::now() - t0).count();
  return out;
}

CgResult conjugate_gradient(const LinearOperator& a, const Vector& b, Vector& x, const CgOptions& options) {
  JacobiCg cg(a, b, options);
  auto result = solve_to_tolerance(
      a, b, x, options,
      [&](Vector& v, const Vector& residual, double tolerance, int budget) { return cg(v, residual, tolerance, budget); },
      "CG");
  result.residuals = std::move(cg.residuals());
  return result;
}

}  // namespace tessera::linalg
