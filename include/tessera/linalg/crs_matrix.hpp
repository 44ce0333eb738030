// CrsMatrix: the conventional compressed-row copy (row offsets, 32-bit local
// column indices, values), with owned and ghost columns in one column
// vector as Tpetra lays them out. Tessera keeps it as the comparison for
// EdgeListMatrix and for users who want it; it copies every entry.
#pragma once
#include "tessera/linalg/row_matrix.hpp"

namespace tessera::linalg {

class CrsMatrix final : public RowMatrix {
 public:
  // Collective. Copies every entry of `source`.
  explicit CrsMatrix(const RowMatrix& source);

  const Map& row_map() const override { return rows_; }
  std::uint64_t global_entries() const override { return global_entries_; }
  std::uint64_t local_entries() const override { return values_.size(); }
  void apply(const Vector& x, Vector& y, double alpha = 1.0, double beta = 0.0) const override;
  void apply_transpose(const Vector& x, Vector& y, double alpha = 1.0, double beta = 0.0) const override;
  void diagonal(Vector& d) const override;
  void row_sums(Vector& s) const override;
  double frobenius_norm() const override;
  std::size_t row_length(std::uint64_t local_row) const override {
    return static_cast<std::size_t>(row_offsets_[local_row + 1] - row_offsets_[local_row]);
  }
  std::size_t copy_row(std::uint64_t local_row, std::span<std::uint64_t> columns,
                       std::span<double> values) const override;
  std::size_t extra_memory_bytes() const override;

 private:
  void copy_entries(const RowMatrix& source);
  std::uint64_t global_column(std::uint32_t c) const {
    return c < local_rows_ ? base_ + c : ghosts_.ids()[c - local_rows_];
  }
  Map rows_;
  std::uint64_t base_ = 0, local_rows_ = 0, global_entries_ = 0;
  std::vector<std::uint64_t> row_offsets_;
  std::vector<std::uint32_t> columns_;
  std::vector<double> values_;
  GhostSet ghosts_;
  Import import_;
  mutable std::vector<double> column_values_;  // owned columns, then ghosts
};

}  // namespace tessera::linalg
