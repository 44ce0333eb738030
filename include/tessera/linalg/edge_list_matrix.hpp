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

  const Map& row_map() const override { return graph_.vertex_map(); }
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
  std::size_t ghost_count() const noexcept { return ghost_count_; }
  // How remote columns are found: "direct" (no ghosts), "dense", "bitmap" or "hash".
  const char* column_mode() const noexcept {
    return dense_ ? "dense" : ghost_count_ == 0 ? "direct" : !bitmap_.empty() ? "bitmap" : "hash";
  }

 private:
  // Where a remote column's value is, in one of two O(ghosts) indexes:
  //  * a bitmap over the column space marking owned and ghost columns, with
  //    a running count every 64 bits (0.25 byte per column), used when it is
  //    no larger than the ghost list itself. A column's value sits at
  //    count + popcount in one array of owned and ghost values, so the inner
  //    loop has no branch (local and remote columns interleave at random);
  //  * otherwise an open-addressing table holding key and value side by side.
  // (With no ghosts, or in dense mode below, columns index values directly.)
  struct BitWord {
    std::uint64_t bits;
    std::uint64_t before;  // ghosts in earlier words
  };
  struct Slot {
    std::uint64_t column;
    double value;
  };
  static constexpr std::uint64_t kEmpty = ~0ull;
  std::size_t slot_index(std::uint64_t column) const noexcept {
    std::size_t h = static_cast<std::size_t>((column * 0x9e3779b97f4a7c15ull) >> shift_);
    while (table_[h].column != column) h = (h + 1) & mask_;
    return h;
  }
  template <class GhostValue>
  void multiply(const Vector& x, Vector& y, double alpha, GhostValue ghost) const;
  template <class ColumnValue>
  void multiply_all(Vector& y, double alpha, ColumnValue value) const;

  const graph::EdgeList& graph_;
  // Where each local row's edges start: O(local vertices), so the product
  // streams only the destination array (8 bytes per edge; a CRS copy streams
  // 12) instead of testing the source of every edge.
  std::vector<std::uint64_t> row_start_;
  std::size_t ghost_count_ = 0;
  GhostSet ghosts_;  // hash mode only
  Import import_;
  mutable std::vector<double> ghost_values_;   // hash mode: in ghosts_ order, as Import moves them
  mutable std::vector<double> column_values_;  // bitmap mode: columns in global order (Import fills the ghosts)
  std::uint64_t ghosts_below_ = 0;             // ghosts with a smaller id than the owned ones
  std::vector<BitWord> bitmap_;
  // Dense mode, when this rank reads at least half of all columns anyway
  // (n <= 2 (owned + ghosts)): every column's value, indexed by the column
  // itself, filled by one allgather straight from x and emptied (transpose)
  // by one reduce-scatter. No ghost list, no lookup, no send buffers: at most
  // twice the compact array, and usually less memory than it once the
  // exchange buffers are counted.
  bool dense_ = false;
  std::vector<int> dense_counts_, dense_displs_;
  MPI_Comm comm_ = MPI_COMM_NULL;
  mutable std::vector<Slot> table_;
  std::vector<std::uint32_t> slot_of_ghost_;
  unsigned shift_ = 63;
  std::size_t mask_ = 0;
};

}  // namespace tessera::linalg
