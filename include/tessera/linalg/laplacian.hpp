// The graph Laplacian L = D - A of a RowMatrix A (D = row sums, the weighted
// degrees), optionally grounded: the rows and columns of a vertex set G are
// removed. To keep one vector layout, grounded rows become identity rows and
// grounded columns are dropped, so on the other vertices the operator is
// exactly L_UU, and a right-hand side that is zero on G keeps x zero there.
#pragma once
#include <cstdint>
#include <vector>

#include "tessera/linalg/row_matrix.hpp"

namespace tessera::linalg {

class Laplacian final : public LinearOperator {
 public:
  // Collective. `grounded` is empty, or one flag per local row (1 = grounded).
  explicit Laplacian(const RowMatrix& a, std::vector<std::uint8_t> grounded = {});

  const Map& row_map() const override { return a_.row_map(); }
  void apply(const Vector& x, Vector& y, double alpha = 1.0, double beta = 0.0) const override;
  void diagonal(Vector& d) const override;
  const Vector& degrees() const noexcept { return degree_; }
  bool grounded(std::uint64_t local_row) const { return !grounded_.empty() && grounded_[local_row]; }

 private:
  const RowMatrix& a_;
  std::vector<std::uint8_t> grounded_;
  Vector degree_, self_;  // row sums and the diagonal of A
  mutable Vector masked_, ax_;
};

}  // namespace tessera::linalg
