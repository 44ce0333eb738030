#include "tessera/linalg/crs_matrix.hpp"

#include <cmath>

#include "tessera/runtime/collective.hpp"

namespace tessera::linalg {

CrsMatrix::CrsMatrix(const RowMatrix& source) : rows_(source.row_map()) {
  base_ = rows_.local_begin();
  local_rows_ = rows_.local_size();
  global_entries_ = source.global_entries();
  if (local_rows_ >= (1ull << 31)) throw ConfigError("CrsMatrix: more than 2^31 local rows; use more ranks");
  std::vector<std::uint64_t> remote;
  row_offsets_.assign(local_rows_ + 1, 0);
  for (std::uint64_t i = 0; i < local_rows_; ++i) {
    source.for_each_in_row(i, [&](std::uint64_t c, double) {
      if (c - base_ >= local_rows_) remote.push_back(c);
      ++row_offsets_[i + 1];
    });
    row_offsets_[i + 1] += row_offsets_[i];
  }
  ghosts_ = GhostSet(std::move(remote), rows_.size());
  if (local_rows_ + ghosts_.size() >= (1ull << 32)) throw ConfigError("CrsMatrix: too many columns for 32-bit indices");
  import_ = Import(rows_, ghosts_);
  columns_.resize(row_offsets_.back());
  values_.resize(row_offsets_.back());
  for (std::uint64_t i = 0; i < local_rows_; ++i) {
    std::uint64_t k = row_offsets_[i];
    source.for_each_in_row(i, [&](std::uint64_t c, double v) {
      std::uint64_t local = c - base_;
      columns_[k] = static_cast<std::uint32_t>(local < local_rows_ ? local : local_rows_ + ghosts_.position(c));
      values_[k++] = v;
    });
  }
  column_values_.resize(local_rows_ + ghosts_.size());
}

void CrsMatrix::apply(const Vector& x, Vector& y, double alpha, double beta) const {
  auto xs = x.local();
  std::copy(xs.begin(), xs.end(), column_values_.begin());
  import_.gather(xs, std::span<double>(column_values_).subspan(local_rows_));
  auto ys = y.local();
  const double* xc = column_values_.data();
  for (std::uint64_t i = 0; i < local_rows_; ++i) {
    double sum = 0;
    for (std::uint64_t k = row_offsets_[i]; k < row_offsets_[i + 1]; ++k) sum += values_[k] * xc[columns_[k]];
    ys[i] = alpha * sum + (beta == 0.0 ? 0.0 : beta * ys[i]);
  }
}

void CrsMatrix::apply_transpose(const Vector& x, Vector& y, double alpha, double beta) const {
  std::fill(column_values_.begin(), column_values_.end(), 0.0);
  auto xs = x.local();
  for (std::uint64_t i = 0; i < local_rows_; ++i)
    for (std::uint64_t k = row_offsets_[i]; k < row_offsets_[i + 1]; ++k)
      column_values_[columns_[k]] += alpha * values_[k] * xs[i];
  auto ys = y.local();
  for (std::uint64_t i = 0; i < local_rows_; ++i) ys[i] = column_values_[i] + (beta == 0.0 ? 0.0 : beta * ys[i]);
  import_.scatter_add(std::span<const double>(column_values_).subspan(local_rows_), ys);
}

void CrsMatrix::diagonal(Vector& d) const {
  auto ds = d.local();
  for (std::uint64_t i = 0; i < local_rows_; ++i) {
    ds[i] = 0;
    for (std::uint64_t k = row_offsets_[i]; k < row_offsets_[i + 1]; ++k)
      if (columns_[k] == i) ds[i] += values_[k];
  }
}

void CrsMatrix::row_sums(Vector& s) const {
  auto ss = s.local();
  for (std::uint64_t i = 0; i < local_rows_; ++i) {
    ss[i] = 0;
    for (std::uint64_t k = row_offsets_[i]; k < row_offsets_[i + 1]; ++k) ss[i] += values_[k];
  }
}

double CrsMatrix::frobenius_norm() const {
  double sum = 0;
  for (double v : values_) sum += v * v;
  return std::sqrt(all_reduce(rows_.comm(), sum, MPI_SUM));
}

void CrsMatrix::for_each_in_row(std::uint64_t local_row, const std::function<void(std::uint64_t, double)>& f) const {
  for (std::uint64_t k = row_offsets_[local_row]; k < row_offsets_[local_row + 1]; ++k)
    f(global_column(columns_[k]), values_[k]);
}

std::size_t CrsMatrix::extra_memory_bytes() const {
  return row_offsets_.capacity() * sizeof(std::uint64_t) + columns_.capacity() * sizeof(std::uint32_t) +
         values_.capacity() * sizeof(double) + ghosts_.memory_bytes() + import_.memory_bytes() +
         column_values_.capacity() * sizeof(double);
}

}  // namespace tessera::linalg
