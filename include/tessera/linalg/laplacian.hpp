// The graph Laplacian L = D - A of a RowMatrix A (D = row sums, the weighted
// degrees), optionally grounded: the rows and columns of a vertex set G are
// removed. To keep one vector layout, grounded rows become identity rows and
// grounded columns are dropped, so on the other vertices the operator is
// exactly L_UU, and a right-hand side that is zero on G keeps x zero there.
//
// Only finite positive weights make L a Laplacian (a negative weight can make
// it indefinite or singular, zero or NaN ones break the walk): the
// constructor rejects any other entry with a RangeError naming the vertex.
#pragma once
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "tessera/graph/edge_list.hpp"
#include "tessera/linalg/row_matrix.hpp"

namespace tessera::linalg {

// An entry a graph Laplacian cannot use: A[row][column] = weight is not
// finite or not positive. Indices are the matrix's (the graph's internal
// vertex ids); a program that relabelled its input maps them back.
struct InvalidWeight {
  std::uint64_t row = 0, column = 0;
  double weight = 0;
  std::string describe() const;  // "vertex 5 has an edge to vertex 7 with weight -0.4: ..."
};

// Collective. The invalid entry with the smallest row (the first in that
// row), the same on every rank, or nothing when every weight is usable.
std::optional<InvalidWeight> find_invalid_weight(const RowMatrix& a);
// The same straight from a graph's arcs (its adjacency matrix's entries),
// without building a matrix: for checking right after reading.
std::optional<InvalidWeight> find_invalid_weight(const graph::EdgeList& g);

class Laplacian final : public LinearOperator {
 public:
  // Collective. `grounded` is empty, or one flag per local row (1 = grounded).
  // RangeError (on every rank) when `a` holds an invalid weight. With
  // grounded rows a product needs x with their columns zeroed: `buffers` says
  // whether that vector is kept between products.
  explicit Laplacian(const RowMatrix& a, std::vector<std::uint8_t> grounded = {},
                     ProductBuffers buffers = ProductBuffers::kept);

  const Map& row_map() const override { return a_.row_map(); }
  void apply(const Vector& x, Vector& y, double alpha = 1.0, double beta = 0.0) const override;
  void diagonal(Vector& d) const override;
  // 2 max_i (d_i - a_ii) over the rows that are not grounded (1 when every
  // row is): exact unless a row has grounded neighbours, an upper bound then.
  double norm_inf() const override { return norm_inf_; }
  // The weighted degrees of the rows that are not grounded, 0 on grounded
  // rows: the right-hand side of hitting times, as it stands.
  const Vector& degrees() const noexcept { return degree_; }
  bool grounded(std::uint64_t local_row) const { return !grounded_.empty() && grounded_[local_row]; }
  std::span<const std::uint8_t> grounded_flags() const noexcept { return grounded_; }  // empty: none grounded

 private:
  const RowMatrix& a_;
  std::vector<std::uint8_t> grounded_;
  Vector degree_;  // row sums of A, 0 on grounded rows
  ProductBuffers buffers_;
  bool any_grounded_ = false;             // some rank has grounded flags (a rank may own no row)
  mutable std::optional<Vector> masked_;  // x without the grounded columns
  double norm_inf_ = 0;
};

}  // namespace tessera::linalg
