#include "tessera/linalg/laplacian.hpp"

namespace tessera::linalg {

Laplacian::Laplacian(const RowMatrix& a, std::vector<std::uint8_t> grounded)
    : a_(a),
      grounded_(std::move(grounded)),
      degree_(a.row_map()),
      self_(a.row_map()),
      masked_(a.row_map()),
      ax_(a.row_map()) {
  if (!grounded_.empty() && grounded_.size() != degree_.local().size())
    throw MismatchError("grounded flags cover " + std::to_string(grounded_.size()) + " rows, this rank has " +
                        std::to_string(degree_.local().size()));
  a.row_sums(degree_);
  a.diagonal(self_);
}

void Laplacian::apply(const Vector& x, Vector& y, double alpha, double beta) const {
  const Vector* in = &x;
  if (!grounded_.empty()) {  // drop grounded columns
    auto m = masked_.local();
    auto xin = x.local();
    for (std::size_t i = 0; i < m.size(); ++i) m[i] = grounded_[i] ? 0.0 : xin[i];
    in = &masked_;
  }
  a_.apply(*in, ax_);
  auto ys = y.local();
  std::span<const double> xs = x.local(), d = degree_.local(), ax = ax_.local();
  for (std::size_t i = 0; i < ys.size(); ++i) {
    double lx = grounded(i) ? xs[i] : d[i] * xs[i] - ax[i];
    ys[i] = alpha * lx + (beta == 0.0 ? 0.0 : beta * ys[i]);
  }
}

void Laplacian::diagonal(Vector& out) const {
  auto o = out.local();
  auto d = degree_.local(), s = self_.local();
  for (std::size_t i = 0; i < o.size(); ++i) o[i] = grounded(i) ? 1.0 : d[i] - s[i];
}

}  // namespace tessera::linalg
