#include "tessera/linalg/edge_list_matrix.hpp"

#include <cmath>

#include "tessera/runtime/collective.hpp"

namespace tessera::linalg {

namespace {
std::vector<std::uint64_t> remote_columns(const graph::EdgeList& g) {
  std::vector<std::uint64_t> out;
  const std::uint64_t lo = g.local_vertex_begin(), hi = g.local_vertex_end();
  for (auto v : g.local_dst())
    if (v < lo || v >= hi) out.push_back(v);
  return out;
}

void prepare_output(Vector& y, double beta) {
  if (beta == 0.0)
    y.fill(0.0);
  else if (beta != 1.0)
    y.scale(beta);
}
}  // namespace

EdgeListMatrix::EdgeListMatrix(const graph::EdgeList& graph)
    : graph_(graph),
      ghosts_(remote_columns(graph), graph.vertices()),
      import_(graph.runtime(), graph.vertex_ranges(), ghosts_),
      ghost_values_(ghosts_.size()) {}

void EdgeListMatrix::apply(const Vector& x, Vector& y, double alpha, double beta) const {
  import_.gather(x.local(), ghost_values_);
  prepare_output(y, beta);
  const std::uint64_t base = graph_.local_vertex_begin(), n = graph_.local_vertices();
  auto s = graph_.local_src(), d = graph_.local_dst();
  auto w = graph_.local_weight();
  auto xs = x.local();
  auto ys = y.local();
  const double* xl = xs.data();
  const double* xg = ghost_values_.data();
  // Rows are runs of equal sources; sum a run, then add it once.
  std::size_t k = 0;
  const std::size_t m = s.size();
  while (k < m) {
    const std::uint64_t row = s[k];
    double sum = 0;
    if (w.empty()) {
      for (; k < m && s[k] == row; ++k) {
        std::uint64_t c = d[k] - base;  // wraps for columns below base
        sum += c < n ? xl[c] : xg[ghosts_.position(d[k])];
      }
    } else {
      for (; k < m && s[k] == row; ++k) {
        std::uint64_t c = d[k] - base;
        sum += w[k] * (c < n ? xl[c] : xg[ghosts_.position(d[k])]);
      }
    }
    ys[row - base] += alpha * sum;
  }
}

void EdgeListMatrix::apply_transpose(const Vector& x, Vector& y, double alpha, double beta) const {
  prepare_output(y, beta);
  std::fill(ghost_values_.begin(), ghost_values_.end(), 0.0);
  const std::uint64_t base = graph_.local_vertex_begin(), n = graph_.local_vertices();
  auto s = graph_.local_src(), d = graph_.local_dst();
  auto w = graph_.local_weight();
  auto xs = x.local();
  auto ys = y.local();
  for (std::size_t k = 0; k < s.size(); ++k) {
    double v = alpha * (w.empty() ? 1.0 : w[k]) * xs[s[k] - base];
    std::uint64_t c = d[k] - base;
    if (c < n)
      ys[c] += v;
    else
      ghost_values_[ghosts_.position(d[k])] += v;
  }
  import_.scatter_add(ghost_values_, ys);
}

void EdgeListMatrix::diagonal(Vector& out) const {
  out.fill(0.0);
  const std::uint64_t base = graph_.local_vertex_begin();
  auto s = graph_.local_src(), d = graph_.local_dst();
  auto w = graph_.local_weight();
  for (std::size_t k = 0; k < s.size(); ++k)
    if (s[k] == d[k]) out.local()[s[k] - base] += w.empty() ? 1.0 : w[k];
}

void EdgeListMatrix::row_sums(Vector& out) const {
  out.fill(0.0);
  const std::uint64_t base = graph_.local_vertex_begin();
  auto s = graph_.local_src();
  auto w = graph_.local_weight();
  for (std::size_t k = 0; k < s.size(); ++k) out.local()[s[k] - base] += w.empty() ? 1.0 : w[k];
}

double EdgeListMatrix::frobenius_norm() const {
  double sum = 0;
  auto w = graph_.local_weight();
  if (w.empty())
    sum = static_cast<double>(graph_.local_src().size());
  else
    for (double v : w) sum += v * v;
  return std::sqrt(all_reduce(graph_.runtime().comm(), sum, MPI_SUM));
}

void EdgeListMatrix::for_each_in_row(std::uint64_t local_row,
                                     const std::function<void(std::uint64_t, double)>& f) const {
  auto [first, last] = graph_.out_edges(graph_.local_vertex_begin() + local_row);
  auto d = graph_.local_dst();
  auto w = graph_.local_weight();
  for (std::size_t k = first; k < last; ++k) f(d[k], w.empty() ? 1.0 : w[k]);
}

std::size_t EdgeListMatrix::extra_memory_bytes() const {
  return ghosts_.memory_bytes() + import_.memory_bytes() + ghost_values_.capacity() * sizeof(double);
}

}  // namespace tessera::linalg
