// EdgeListMatrix: the adjacency matrix of an EdgeList, A[u][v] = weight of
// edge (u, v) (1 when unweighted), read straight from the edge arrays as
// they are — Heap or Shared storage, mapped from another process or a file.
// It builds only O(ghost vertices) structures: the set of remote columns it
// reads and their exchange plan. Never a copy of the edges.
#pragma once
#include "tessera/graph/edge_list.hpp"
#include "tessera/linalg/row_matrix.hpp"

namespace tessera::linalg {

class EdgeListMatrix final : public RowMatrix {
 public:
  // Collective. The graph must outlive the matrix.
  explicit EdgeListMatrix(const graph::EdgeList& graph);

  const Distribution& row_distribution() const override { return graph_.vertex_ranges(); }
  std::uint64_t global_entries() const override { return graph_.edges(); }
  std::uint64_t local_entries() const override { return graph_.local_src().size(); }
  void apply(const Vector& x, Vector& y, double alpha = 1.0, double beta = 0.0) const override;
  void apply_transpose(const Vector& x, Vector& y, double alpha = 1.0, double beta = 0.0) const override;
  void diagonal(Vector& d) const override;
  void row_sums(Vector& s) const override;
  double frobenius_norm() const override;
  void for_each_in_row(std::uint64_t local_row, const std::function<void(std::uint64_t, double)>& f) const override;
  std::size_t extra_memory_bytes() const override;

  const graph::EdgeList& graph() const noexcept { return graph_; }
  std::size_t ghost_count() const noexcept { return ghosts_.size(); }

 private:
  const graph::EdgeList& graph_;
  GhostSet ghosts_;
  Import import_;
  mutable std::vector<double> ghost_values_;
};

}  // namespace tessera::linalg
