// EdgeListMatrix: the adjacency matrix of an EdgeList, A[u][v] = weight of
// edge (u, v) (1 when unweighted), read straight from the edge arrays as
// they are — Heap or Shared storage, mapped from another process or a file.
// Rows are the graph's row offsets over its destination array, at either id
// width (copy_row widens a row to 64-bit ids); the matrix builds only
// O(ghost vertices) structures: how it finds the remote columns it reads and
// their exchange plan. Never a copy of the edges.
#pragma once
#include <memory>
#include <optional>

#include "tessera/graph/edge_list.hpp"
#include "tessera/linalg/row_matrix.hpp"

namespace tessera::linalg {

// How a rank finds the value of a column its rows read (one strategy per
// matrix and rank; the product's inner loop is compiled once per strategy).
enum class ColumnMode {
  // No ghost columns: every column is owned and read from x in place.
  direct,
  // Every column's value in one array indexed by the column itself, filled by
  // one allgather straight from x (and emptied, for the transpose, by one
  // reduce-scatter). No ghost list, no lookup; chosen when every rank reads
  // at least half of the columns it does not own (2 ghosts >= n - owned),
  // where its 8 bytes per column cost little more than the ghosts' own.
  // Collective: every rank or none.
  dense,
  // Owned columns read from x in place (tested first: on a mesh nearly all
  // of them); ghost values in one array in column order, found through
  // GhostSlots (a bitmap with a running count every 64 columns, 0.25 byte per
  // column from the lowest to the highest ghost, the owned range cut out).
  // Chosen when the bitmap is no larger than a hash table of the ghosts.
  bitmap,
  // Owned columns read from x in place, ghost values in an open-addressing
  // table holding key and value side by side: few ghosts in a large space.
  hash,
};
const char* to_string(ColumnMode mode) noexcept;

class EdgeListMatrix final : public RowMatrix {
 public:
  // Collective. The graph must outlive the matrix. Each rank picks its column
  // mode from its ghosts (dense only when every rank would).
  explicit EdgeListMatrix(const graph::EdgeList& graph) : EdgeListMatrix(graph, std::nullopt) {}
  // Collective, every rank passing the same mode: use `mode` on every rank
  // (ConfigError, on every rank, for direct when some rank has ghosts or for
  // dense beyond 2^31 vertices).
  EdgeListMatrix(const graph::EdgeList& graph, ColumnMode mode) : EdgeListMatrix(graph, std::optional(mode)) {}
  ~EdgeListMatrix() override;

  const Map& row_map() const override { return graph_.vertex_map(); }
  // Stored arcs: an undirected edge is two entries (a self loop one).
  std::uint64_t global_entries() const override { return graph_.arcs(); }
  std::uint64_t local_entries() const override { return graph_.local_arcs(); }
  void apply(const Vector& x, Vector& y, double alpha = 1.0, double beta = 0.0) const override;
  void apply_transpose(const Vector& x, Vector& y, double alpha = 1.0, double beta = 0.0) const override;
  void diagonal(Vector& d) const override;
  void row_sums(Vector& s) const override;
  double frobenius_norm() const override;
  std::size_t row_length(std::uint64_t local_row) const override {
    auto offsets = graph_.row_offsets();
    return static_cast<std::size_t>(offsets[local_row + 1] - offsets[local_row]);
  }
  std::size_t copy_row(std::uint64_t local_row, std::span<std::uint64_t> columns,
                       std::span<double> values) const override;
  std::size_t extra_memory_bytes() const override;

  // The dense column mode's array (8 bytes a column) is the large one: with
  // `released` it lives only during a product. Not collective.
  void set_product_buffers(ProductBuffers buffers) noexcept { buffers_ = buffers; }

  const graph::EdgeList& graph() const noexcept { return graph_; }
  std::size_t ghost_count() const noexcept { return ghost_count_; }
  ColumnMode column_mode() const noexcept;

 private:
  struct Columns;  // the chosen strategy and its buffers (edge_list_matrix.cpp)
  EdgeListMatrix(const graph::EdgeList& graph, std::optional<ColumnMode> forced);

  const graph::EdgeList& graph_;
  std::size_t ghost_count_ = 0;
  ProductBuffers buffers_ = ProductBuffers::kept;
  std::unique_ptr<Columns> columns_;
};

}  // namespace tessera::linalg
