#include "tessera/linalg/laplacian.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <utility>

#include "tessera/runtime/collective.hpp"

namespace tessera::linalg {

std::string InvalidWeight::describe() const {
  char w[32];
  std::snprintf(w, sizeof(w), "%.10g", weight);
  return "vertex " + std::to_string(row) + " has an edge to vertex " + std::to_string(column) + " with weight " + w +
         ": the graph Laplacian (hitting times) needs finite positive edge weights; fix or drop that edge, or "
         "ignore the weights";
}

namespace {

bool usable(double weight) { return std::isfinite(weight) && weight > 0; }

// Every rank's first invalid entry (or none) -> the one with the smallest row,
// on every rank. Rows are owned by one rank each: that row names its rank.
std::optional<InvalidWeight> first_invalid(const Map& rows, const std::optional<InvalidWeight>& mine) {
  auto first = all_argmin<std::uint64_t>(rows.comm(), mine ? mine->row : kNoIndex,
                                         mine ? static_cast<std::uint64_t>(rows.rank()) : kNoIndex);
  if (!first.found()) return std::nullopt;
  InvalidWeight bad = mine.value_or(InvalidWeight{});
  return broadcast(rows.comm(), bad, static_cast<int>(first.index));
}

}  // namespace

std::optional<InvalidWeight> find_invalid_weight(const RowMatrix& a) {
  const Map& rows = a.row_map();
  std::optional<InvalidWeight> mine;
  std::vector<std::uint64_t> columns(a.max_row_length());
  std::vector<double> values(columns.size());
  for (std::uint64_t i = 0; i < a.local_rows() && !mine; ++i) {
    std::size_t n = a.copy_row(i, columns, values);
    for (std::size_t k = 0; k < n; ++k)
      if (!usable(values[k])) {
        mine = InvalidWeight{rows.local_begin() + i, columns[k], values[k]};
        break;
      }
  }
  return first_invalid(rows, mine);
}

std::optional<InvalidWeight> find_invalid_weight(const graph::EdgeList& g) {
  std::optional<InvalidWeight> mine;
  auto w = g.local_weight();  // empty: every weight is 1
  for (std::size_t k = 0; k < w.size(); ++k)
    if (!usable(w[k])) {
      // Arcs are sorted by row: the first bad one. Its row is the last one
      // starting at or before k (no source array to read it from).
      auto rows = g.row_offsets();
      auto row = std::upper_bound(rows.begin(), rows.end(), std::uint64_t{k}) - rows.begin() - 1;
      std::uint64_t column = g.with_dst([&](auto dst) { return std::uint64_t{dst[k]}; });
      mine = InvalidWeight{g.local_vertex_begin() + static_cast<std::uint64_t>(row), column, w[k]};
      break;
    }
  return first_invalid(g.vertex_map(), mine);
}

Laplacian::Laplacian(const RowMatrix& a, std::vector<std::uint8_t> grounded, ProductBuffers buffers)
    : a_(a), grounded_(std::move(grounded)), degree_(a.row_map()), buffers_(buffers) {
  if (auto bad = find_invalid_weight(a)) throw RangeError(bad->describe());
  agree(a.row_map().comm(), [&] {  // a mismatch on one rank fails every rank
    if (!grounded_.empty() && grounded_.size() != degree_.local().size())
      throw MismatchError("grounded flags cover " + std::to_string(grounded_.size()) + " rows, this rank has " +
                          std::to_string(degree_.local().size()));
  });
  any_grounded_ = all_reduce<int>(a.row_map().comm(), grounded_.empty() ? 0 : 1, MPI_MAX) != 0;
  a.row_sums(degree_);
  auto degrees = degree_.local();
  for (std::size_t i = 0; i < degrees.size(); ++i)
    if (!grounded_.empty() && grounded_[i]) degrees[i] = 0;
  // |L_ii| + sum_j |L_ij| = 2 (d_i - a_ii) for positive weights; a grounded
  // row is an identity row. The diagonal of A is not kept (a vector less
  // while a solver runs): diagonal() reads it again.
  Vector self(a.row_map());
  a.diagonal(self);
  auto d = degree_.local();
  auto s = std::as_const(self).local();
  double largest = 0;
  for (std::size_t i = 0; i < d.size(); ++i)
    largest = std::max(largest, !grounded_.empty() && grounded_[i] ? 1.0 : 2.0 * (d[i] - s[i]));
  norm_inf_ = all_reduce(a.row_map().comm(), largest, MPI_MAX);
}

void Laplacian::apply(const Vector& x, Vector& y, double alpha, double beta) const {
  // y = alpha (D x - A x') + beta y, x' = x without the grounded columns, the
  // product accumulated into y (no vector for A x'). A grounded row is
  // alpha x + beta y: A x' adds to it too, so it is written afterwards (its
  // old value saved first when beta asks for it).
  auto ys = y.local();
  std::span<const double> xs = x.local(), d = degree_.local();
  std::vector<double> grounded_old;
  for (std::size_t i = 0; i < ys.size(); ++i) {
    const double old = beta == 0.0 ? 0.0 : beta * ys[i];
    if (!grounded(i))
      ys[i] = alpha * d[i] * xs[i] + old;
    else if (beta != 0.0)
      grounded_old.push_back(old);
  }
  const Vector* in = &x;
  if (any_grounded_) {  // on every rank: making a vector is collective (co-locale storage)
    if (!masked_) masked_.emplace(a_.row_map());
    auto m = masked_->local();
    for (std::size_t i = 0; i < m.size(); ++i) m[i] = grounded(i) ? 0.0 : xs[i];
    in = &*masked_;
  }
  a_.apply(*in, y, -alpha, 1.0);
  for (std::size_t i = 0, k = 0; i < ys.size() && !grounded_.empty(); ++i)
    if (grounded_[i]) ys[i] = alpha * xs[i] + (beta == 0.0 ? 0.0 : grounded_old[k++]);
  if (buffers_ == ProductBuffers::released) masked_.reset();
}

void Laplacian::diagonal(Vector& out) const {
  a_.diagonal(out);  // a_ii, then d_i - a_ii in place
  auto o = out.local();
  auto d = degree_.local();
  for (std::size_t i = 0; i < o.size(); ++i) o[i] = grounded(i) ? 1.0 : d[i] - o[i];
}

}  // namespace tessera::linalg
