#include "tessera/linalg/crs_matrix.hpp"

#include <cmath>

#include "tessera/runtime/collective.hpp"

namespace tessera::linalg {

CrsMatrix::CrsMatrix(const RowMatrix& source) : rows_(source.row_map()) {
  base_ = rows_.local_begin();
  local_rows_ = rows_.local_size();
  global_entries_ = source.global_entries();
  // Local work that may fail on one rank only; then the collective exchange plan.
  agree(rows_.comm(), [&] { copy_entries(source); });
  import_ = Import(rows_, ghosts_);
  column_values_.resize(local_rows_ + ghosts_.size());
}

void CrsMatrix::copy_entries(const RowMatrix& source) {
  if (local_rows_ >= (1ull << 31)) throw ConfigError("CrsMatrix: more than 2^31 local rows; use more ranks");
  row_offsets_.assign(local_rows_ + 1, 0);
  for (std::uint64_t i = 0; i < local_rows_; ++i) row_offsets_[i + 1] = row_offsets_[i] + source.row_length(i);
  // Two passes over the source, as the ghost positions are known only after
  // the first: the remote columns, then the entries in place.
  std::vector<std::uint64_t> remote, row(source.max_row_length());
  std::vector<double> row_values(row.size());
  for (std::uint64_t i = 0; i < local_rows_; ++i) {
    std::size_t n = source.copy_row(i, row, row_values);
    for (std::size_t k = 0; k < n; ++k)
      if (row[k] - base_ >= local_rows_) remote.push_back(row[k]);  // wraps for columns below base
  }
  ghosts_ = GhostSet(std::move(remote), rows_.size());
  if (local_rows_ + ghosts_.size() >= (1ull << 32)) throw ConfigError("CrsMatrix: too many columns for 32-bit indices");
  columns_.resize(row_offsets_.back());
  values_.resize(row_offsets_.back());
  for (std::uint64_t i = 0; i < local_rows_; ++i) {
    const std::uint64_t first = row_offsets_[i];
    std::size_t n = source.copy_row(i, row, std::span<double>(values_).subspan(first));
    for (std::size_t k = 0; k < n; ++k) {
      std::uint64_t local = row[k] - base_;
      columns_[first + k] = static_cast<std::uint32_t>(local < local_rows_ ? local : local_rows_ + ghosts_.position(row[k]));
    }
  }
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

std::size_t CrsMatrix::copy_row(std::uint64_t local_row, std::span<std::uint64_t> columns,
                               std::span<double> values) const {
  const std::uint64_t first = row_offsets_[local_row];
  const std::size_t n = row_length(local_row);
  check_row_buffers(n, columns, values);
  for (std::size_t k = 0; k < n; ++k) {
    columns[k] = global_column(columns_[first + k]);
    values[k] = values_[first + k];
  }
  return n;
}

std::size_t CrsMatrix::extra_memory_bytes() const {
  return row_offsets_.capacity() * sizeof(std::uint64_t) + columns_.capacity() * sizeof(std::uint32_t) +
         values_.capacity() * sizeof(double) + ghosts_.memory_bytes() + import_.memory_bytes() +
         column_values_.capacity() * sizeof(double);
}

}  // namespace tessera::linalg
