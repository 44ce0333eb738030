#include "tessera/linalg/vector.hpp"

#include <cmath>

#include "tessera/runtime/collective.hpp"

namespace tessera::linalg {

void Vector::check_same(const Vector& x) const {
  if (!(x.map() == map()))
    throw MismatchError("vectors of " + std::to_string(x.size()) + " and " + std::to_string(size()) +
                        " elements are distributed differently (or over different runtimes)");
}

void Vector::fill(double value) {
  for (auto& v : local()) v = value;
}
void Vector::assign(const Vector& x) {
  check_same(x);
  std::copy(x.local().begin(), x.local().end(), local().begin());
}
void Vector::scale(double a) {
  for (auto& v : local()) v *= a;
}
void Vector::axpy(double a, const Vector& x) {
  check_same(x);
  auto y = local();
  auto xs = x.local();
  for (std::size_t i = 0; i < y.size(); ++i) y[i] += a * xs[i];
}
void Vector::xpay(const Vector& x, double a) {
  check_same(x);
  auto y = local();
  auto xs = x.local();
  for (std::size_t i = 0; i < y.size(); ++i) y[i] = xs[i] + a * y[i];
}
double Vector::dot(const Vector& x) const {
  check_same(x);
  auto y = local();
  auto xs = x.local();
  double s = 0;
  for (std::size_t i = 0; i < y.size(); ++i) s += y[i] * xs[i];
  return all_reduce(runtime().comm(), s, MPI_SUM);
}
double Vector::norm2() const { return std::sqrt(dot(*this)); }
double Vector::norm_inf() const {
  double m = 0;
  for (double v : local()) m = std::max(m, std::fabs(v));
  return all_reduce(runtime().comm(), m, MPI_MAX);
}

}  // namespace tessera::linalg
