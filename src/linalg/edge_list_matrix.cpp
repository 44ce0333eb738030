#include "tessera/linalg/edge_list_matrix.hpp"

#include <algorithm>
#include <bit>
#include <cmath>

#include "tessera/runtime/collective.hpp"
#include "tessera/runtime/wait.hpp"

namespace tessera::linalg {

namespace {
void prepare_output(Vector& y, double beta) {
  if (beta == 0.0)
    y.fill(0.0);
  else if (beta != 1.0)
    y.scale(beta);
}
}  // namespace

EdgeListMatrix::EdgeListMatrix(const graph::EdgeList& graph) : graph_(graph) {
  row_start_.assign(graph.local_vertices() + 1, 0);
  for (auto u : graph.local_src()) ++row_start_[u - graph.local_vertex_begin() + 1];
  for (std::size_t i = 1; i < row_start_.size(); ++i) row_start_[i] += row_start_[i - 1];
  GhostSet ghosts = GhostSet::remote_of(graph.local_dst(), graph.local_vertex_begin(), graph.local_vertex_end(),
                                        graph.vertices());
  ghost_count_ = ghosts.size();
  const std::uint64_t words = (graph.vertices() + 63) / 64, local = graph.local_vertices();
  // Dense mode is collective (an allgather), so every rank must choose it.
  int want_dense = ghost_count_ > 0 && graph.vertices() <= 2 * (ghost_count_ + local) && graph.vertices() < (1ull << 31);
  if (all_reduce(graph.runtime().comm(), want_dense, MPI_MIN)) {
    dense_ = true;
    comm_ = graph.runtime().comm();
    column_values_.resize(graph.vertices());
    const auto& r = graph.vertex_ranges();
    for (int p = 0; p < r.ranks(); ++p) {
      dense_counts_.push_back(static_cast<int>(r.count(p)));
      dense_displs_.push_back(static_cast<int>(r.begin(p)));
    }
    return;
  }
  if (ghost_count_ > 0 && words * sizeof(BitWord) <= ghost_count_ * sizeof(Slot)) {
    // Bitmap mode: the ghost list is not kept; Import fills column_values_.
    bitmap_.assign(words, BitWord{0, 0});
    for (auto c : ghosts.ids()) bitmap_[c >> 6].bits |= 1ull << (c & 63);
    for (std::uint64_t c = graph.local_vertex_begin(); c < graph.local_vertex_end(); ++c)
      bitmap_[c >> 6].bits |= 1ull << (c & 63);
    std::uint64_t before = 0;
    for (auto& w : bitmap_) w.before = before, before += static_cast<std::uint64_t>(std::popcount(w.bits));
    auto ids = ghosts.ids();
    ghosts_below_ = static_cast<std::uint64_t>(std::lower_bound(ids.begin(), ids.end(), graph.local_vertex_begin()) -
                                               ids.begin());
    column_values_.resize(ghost_count_ + local);
    import_ = Import(graph.vertex_map(), ghosts, local);
    return;
  }
  import_ = Import(graph.vertex_map(), ghosts);
  ghosts_ = std::move(ghosts);
  ghost_values_.resize(ghost_count_);
  std::size_t slots = 2;
  unsigned bits = 1;
  while (slots < 2 * ghost_count_) slots *= 2, ++bits;
  table_.assign(slots, Slot{kEmpty, 0.0});
  shift_ = 64 - bits;
  mask_ = slots - 1;
  slot_of_ghost_.resize(ghost_count_);
  for (std::size_t j = 0; j < ghost_count_; ++j) {
    std::uint64_t c = ghosts_.ids()[j];
    std::size_t h = static_cast<std::size_t>((c * 0x9e3779b97f4a7c15ull) >> shift_);
    while (table_[h].column != kEmpty) h = (h + 1) & mask_;
    table_[h].column = c;
    slot_of_ghost_[j] = static_cast<std::uint32_t>(h);
  }
}

void EdgeListMatrix::apply(const Vector& x, Vector& y, double alpha, double beta) const {
  prepare_output(y, beta);
  if (ghost_count_ == 0 && !dense_) {
    // No ghosts here, but other ranks may read this rank's values: the
    // exchange is collective, so it is entered all the same.
    import_.gather(x.local(), ghost_values_);
    const double* xl = x.local().data();
    const std::uint64_t base = graph_.local_vertex_begin();
    multiply_all(y, alpha, [xl, base](std::uint64_t c) { return xl[c - base]; });
  } else if (dense_) {
    auto xs = x.local();
    std::copy(xs.begin(), xs.end(), column_values_.begin() + static_cast<std::ptrdiff_t>(graph_.local_vertex_begin()));
    MPI_Request req;
    TESSERA_MPI(MPI_Iallgatherv(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, column_values_.data(), dense_counts_.data(),
                                dense_displs_.data(), MPI_DOUBLE, comm_, &req));
    wait(req);
    const double* values = column_values_.data();
    multiply_all(y, alpha, [values](std::uint64_t c) { return values[c]; });
  } else if (!bitmap_.empty()) {
    // Columns in global order: lower ghosts, owned, upper ghosts.
    import_.gather(x.local(), column_values_);
    auto xs = x.local();
    std::copy(xs.begin(), xs.end(), column_values_.begin() + static_cast<std::ptrdiff_t>(ghosts_below_));
    const BitWord* bits = bitmap_.data();
    const double* values = column_values_.data();
    multiply_all(y, alpha, [bits, values](std::uint64_t c) {
      const BitWord& w = bits[c >> 6];
      return values[w.before + static_cast<std::uint64_t>(std::popcount(w.bits & ((1ull << (c & 63)) - 1)))];
    });
  } else {
    import_.gather(x.local(), ghost_values_);
    for (std::size_t j = 0; j < ghost_values_.size(); ++j) table_[slot_of_ghost_[j]].value = ghost_values_[j];
    multiply(x, y, alpha, [this](std::uint64_t c) { return table_[slot_index(c)].value; });
  }
}

// Every column through one lookup (bitmap mode).
template <class ColumnValue>
void EdgeListMatrix::multiply_all(Vector& y, double alpha, ColumnValue value) const {
  const std::uint64_t* d = graph_.local_dst().data();
  auto w = graph_.local_weight();
  auto ys = y.local();
  const std::uint64_t* start = row_start_.data();
  for (std::size_t i = 0; i < ys.size(); ++i) {
    double sum = 0;
    if (w.empty())
      for (std::uint64_t k = start[i]; k < start[i + 1]; ++k) sum += value(d[k]);
    else
      for (std::uint64_t k = start[i]; k < start[i + 1]; ++k) sum += w[k] * value(d[k]);
    ys[i] += alpha * sum;
  }
}

// Local columns directly, remote ones through `ghost` (hash mode).
template <class GhostValue>
void EdgeListMatrix::multiply(const Vector& x, Vector& y, double alpha, GhostValue ghost) const {
  const std::uint64_t base = graph_.local_vertex_begin(), n = graph_.local_vertices();
  const std::uint64_t* d = graph_.local_dst().data();
  auto w = graph_.local_weight();
  const double* xl = x.local().data();
  auto ys = y.local();
  const std::uint64_t* start = row_start_.data();
  for (std::size_t i = 0; i < ys.size(); ++i) {
    double sum = 0;
    for (std::uint64_t k = start[i]; k < start[i + 1]; ++k) {
      std::uint64_t c = d[k] - base;  // wraps for columns below base
      double v = c < n ? xl[c] : ghost(d[k]);
      sum += w.empty() ? v : w[k] * v;
    }
    ys[i] += alpha * sum;
  }
}

void EdgeListMatrix::apply_transpose(const Vector& x, Vector& y, double alpha, double beta) const {
  prepare_output(y, beta);
  const std::uint64_t base = graph_.local_vertex_begin(), n = graph_.local_vertices();
  auto s = graph_.local_src(), d = graph_.local_dst();
  auto w = graph_.local_weight();
  auto xs = x.local();
  auto ys = y.local();
  if (dense_) {  // every column's sum, then each owner receives its own
    std::fill(column_values_.begin(), column_values_.end(), 0.0);
    for (std::size_t k = 0; k < s.size(); ++k) column_values_[d[k]] += alpha * (w.empty() ? 1.0 : w[k]) * xs[s[k] - base];
    std::vector<double> mine(ys.size());
    MPI_Request req;
    TESSERA_MPI(MPI_Ireduce_scatter(column_values_.data(), mine.data(), dense_counts_.data(), MPI_DOUBLE, MPI_SUM,
                                    comm_, &req));
    wait(req);
    for (std::size_t i = 0; i < ys.size(); ++i) ys[i] += mine[i];
    return;
  }
  // Contributions to remote columns collect in the ghost buffer, then go home.
  std::vector<double>& acc = bitmap_.empty() ? ghost_values_ : column_values_;  // hash/dense: ghost order
  std::fill(acc.begin(), acc.end(), 0.0);
  for (std::size_t k = 0; k < s.size(); ++k) {
    double v = alpha * (w.empty() ? 1.0 : w[k]) * xs[s[k] - base];
    std::uint64_t c = d[k] - base;
    if (c < n) {
      ys[c] += v;
    } else if (bitmap_.empty()) {
      acc[ghosts_.position(d[k])] += v;
    } else {
      const BitWord& bw = bitmap_[d[k] >> 6];
      acc[bw.before + static_cast<std::uint64_t>(std::popcount(bw.bits & ((1ull << (d[k] & 63)) - 1)))] += v;
    }
  }
  import_.scatter_add(acc, ys);
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
  return row_start_.capacity() * sizeof(std::uint64_t) + ghosts_.memory_bytes() + import_.memory_bytes() + ghost_values_.capacity() * sizeof(double) +
         table_.capacity() * sizeof(Slot) + slot_of_ghost_.capacity() * sizeof(std::uint32_t) +
         bitmap_.capacity() * sizeof(BitWord) + column_values_.capacity() * sizeof(double);
}

}  // namespace tessera::linalg
