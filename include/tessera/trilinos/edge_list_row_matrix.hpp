// LaplacianRowMatrix<Graph>: a Tpetra::RowMatrix read straight from a
// graph's own arrays as they are (Heap or Shared storage), the way Grafiki
// replaced Tpetra::CrsMatrix with a RowMatrix over Chapel's edge lists. One
// implementation for both graph forms, written against the rows view of
// graph/packed_graph.hpp (degree, for_each in increasing neighbour order):
// - EdgeListRowMatrix = LaplacianRowMatrix<graph::EdgeList>: the CSR arrays
//   through PlainRows<Id> (the id width chosen once per sweep by with_rows),
//   whose loops inline to the ones written on the arrays directly; weighted
//   or not (a weight is read by the arc's position, row offset + rank in
//   the row).
// - PackedRowMatrix = LaplacianRowMatrix<graph::PackedGraph>: the byte-coded
//   rows decoded as they are read (PackedRows), never expanded into an id
//   array; unweighted (weight 1 per arc).
// Both are compiled once, in edge_list_row_matrix.cpp (the explicit
// instantiations declared at the end of this header).
//
// It is the grounded graph Laplacian L = D - A of an undirected graph (D =
// weighted degrees): grounded rows are identity rows and grounded columns are dropped,
// exactly as linalg::Laplacian, so Ifpack2 and Belos see the operator they
// precondition and solve. With no grounded vertex it is the plain Laplacian.
//
// What it builds: row / domain / range Map (contiguous, O(1)); a column
// Map and the Import from domain to column map, which the RowMatrix
// interface requires (Ifpack2's Relaxation asks for the importer) but the
// product does not use, unless told to omit them (below); the grounded vertices' ids (few); the product's column values for
// the columns it does not read from x itself. Never anything per edge. The
// column layout is chosen collectively, the one whose structures are smaller
// summed over the ranks:
// - owned: no rank reads a column it does not own (one rank): the column
//   map is the row map, no import, and the product reads x alone.
// - dense: when ranks read most columns anyway (a Kronecker graph on a few
//   ranks): the column map is the whole vertex range replicated on every
//   rank (Tpetra stores it as a range, O(1); a local column is its global
//   id), and the product gathers every column's value with one all-gather
//   into one array indexed by the vertex id: no lookup in the per-edge loop.
// - compact: few ghosts (a mesh). The column map lists the owned vertices,
//   then the ghosts in increasing id (Tpetra's convention); the product reads
//   owned columns from x and keeps the ghosts' values in id order, found
//   through GhostSlots (a bitmap with a running count every 64 ids, 0.25
//   byte per id from the lowest to the highest ghost, the owned range cut
//   out), filled by Tessera's linalg::Import.
//   The compact Import is built from the ghosts' owners (Tpetra's
//   constructor that makes the column map itself), so Tpetra never lists
//   the row map's ids; the two-map constructors cache them (8 bytes per
//   owned vertex) for as long as the map lives.
// What Tpetra holds for the column Map and Import dominates the matrix's
// memory (`tessera bench hitting` measures it). A Tpetra 13.2 Map that is not
// a plain range keeps an id per column (8 bytes), so at 2+ ranks any
// RowMatrix with a column Map adds at least 8 bytes per owned vertex,
// 1/(2 x average degree) of 16-byte edge arrays; with the replicated column
// map (dense) the Import also caches the range's ids on every rank.
// Every exchange of the product goes through runtime/collective.hpp
// (non-blocking, yielding waits: ranks may share cores). The ghost columns
// are found by reading every local row once (for_each) into a bitmap of the
// vertex range, never by listing the arcs.
// Row i of L: the out-edges of vertex begin + i in destination order,
// minus self loops and grounded columns, with value -w, and the diagonal
// d - (self-loop weight) in its sorted place; a grounded row is just (i, 1).
//
// Row access copies (getLocalRowCopy / getGlobalRowCopy): the values are
// computed (-w, the diagonal) and the columns are global ids in the arrays
// (4 or 8 bytes), so no view of LO indices and Scalars exists:
// supportsRowViews() is false and the view methods throw std::runtime_error,
// as Tpetra documents for matrices without views. leftScale / rightScale
// throw too: the matrix never writes the edge arrays (they may be another
// process's read-only mapping). Ifpack2 Relaxation (Jacobi) and Chebyshev and
// every Belos solver use only apply, the maps, the diagonal and the graph's
// importer.
//
// Tpetra's column Map and Import can be left out (TpetraColumns::omitted):
// Belos and Ifpack2's Diagonal (Jacobi) read only the row, domain and range
// maps, apply and the diagonal, and the Import is most of what the matrix
// adds at 2+ ranks. getColMap() and the graph's getColMap() / getImporter()
// then throw ConfigError (with one rank's owned layout they exist: the row
// map, no Import); local column indices keep the numbering the map would
// have.
//
// Requires a live trilinos::Session. The graph must outlive the matrix.
// A PackedGraph's matrix is in the packed graph's numbering (its rows,
// columns and vectors by packed vertex id; original_ids() maps back).
#pragma once
#include <Tpetra_Core.hpp>
#include <Tpetra_Import.hpp>
#include <Tpetra_Map.hpp>
#include <Tpetra_MultiVector.hpp>
#include <Tpetra_RowGraph.hpp>
#include <Tpetra_RowMatrix.hpp>
#include <Tpetra_Vector.hpp>
#include <Trilinos_version.h>

#include <algorithm>
#include <cstdint>
#include <span>
#include <type_traits>
#include <vector>

#include "tessera/array/ghost_set.hpp"
#include "tessera/array/ghost_slots.hpp"
#include "tessera/graph/edge_list.hpp"
#include "tessera/graph/packed_graph.hpp"
#include "tessera/linalg/row_matrix.hpp"

// 13.2 names the per-process sizes getNode*; 13.4 renamed them getLocal*.
#if TRILINOS_MAJOR_MINOR_VERSION >= 130400
#define TESSERA_TPETRA_LOCAL(name) getLocal##name
#else
#define TESSERA_TPETRA_LOCAL(name) getNode##name
#endif

namespace tessera::trilinos {

using Scalar = double;
using LocalOrdinal = int;
using GlobalOrdinal = long long;
using Node = Tpetra::Map<>::node_type;
using TpetraMap = Tpetra::Map<LocalOrdinal, GlobalOrdinal, Node>;
using TpetraImport = Tpetra::Import<LocalOrdinal, GlobalOrdinal, Node>;
using TpetraExport = Tpetra::Export<LocalOrdinal, GlobalOrdinal, Node>;
using TpetraMultiVector = Tpetra::MultiVector<Scalar, LocalOrdinal, GlobalOrdinal, Node>;
using TpetraVector = Tpetra::Vector<Scalar, LocalOrdinal, GlobalOrdinal, Node>;
using TpetraRowMatrix = Tpetra::RowMatrix<Scalar, LocalOrdinal, GlobalOrdinal, Node>;
using TpetraRowGraph = Tpetra::RowGraph<LocalOrdinal, GlobalOrdinal, Node>;
using TpetraOperator = Tpetra::Operator<Scalar, LocalOrdinal, GlobalOrdinal, Node>;
using TpetraComm = Teuchos::Comm<int>;

// The Teuchos communicator of a Tessera runtime (its communicator, not a
// copy: Tpetra's messages use their own tags).
Teuchos::RCP<const TpetraComm> teuchos_comm(Runtime& rt);

template <class Graph>
class LaplacianRowMatrix;

// Whether a LaplacianRowMatrix builds Tpetra's column Map and Import.
enum class TpetraColumns {
  built,    // as any RowMatrix: what Ifpack2's Relaxation asks for at 2+ ranks
  omitted,  // not built (no Tpetra memory per column): for Belos with Ifpack2's Diagonal
};

// How the product holds the columns it does not read from x (header comment).
enum class ColumnLayout { owned, dense, compact };

namespace detail {
// The graph forms a LaplacianRowMatrix reads. Only an EdgeList carries
// weights, found by an arc's position in the rank's arrays (its row's
// offset plus its rank in the row); a PackedGraph has none, so its
// instantiation compiles no weighted loop at all.
template <class Graph>
inline constexpr bool kMayBeWeighted = std::is_same_v<Graph, graph::EdgeList>;
inline std::span<const double> local_weights(const graph::EdgeList& g) noexcept { return g.local_weight(); }
inline std::span<const double> local_weights(const graph::PackedGraph&) noexcept { return {}; }
inline std::span<const std::uint64_t> arc_offsets(const graph::EdgeList& g) noexcept { return g.row_offsets(); }
}  // namespace detail

// The sparsity of a LaplacianRowMatrix, for Ifpack2 (which asks for its
// importer at 2+ ranks) and anything else reading structure only.
template <class Graph>
class LaplacianRowGraph final : public TpetraRowGraph {
 public:
  explicit LaplacianRowGraph(const LaplacianRowMatrix<Graph>& matrix) : m_(matrix) {}

  Teuchos::RCP<const TpetraComm> getComm() const override;
  Teuchos::RCP<const TpetraMap> getRowMap() const override;
  Teuchos::RCP<const TpetraMap> getColMap() const override;
  Teuchos::RCP<const TpetraMap> getDomainMap() const override;
  Teuchos::RCP<const TpetraMap> getRangeMap() const override;
  Teuchos::RCP<const TpetraImport> getImporter() const override;
  Teuchos::RCP<const TpetraExport> getExporter() const override { return Teuchos::null; }
  Tpetra::global_size_t getGlobalNumRows() const override;
  Tpetra::global_size_t getGlobalNumCols() const override;
  size_t TESSERA_TPETRA_LOCAL(NumRows)() const override;
  size_t TESSERA_TPETRA_LOCAL(NumCols)() const override;
  GlobalOrdinal getIndexBase() const override { return 0; }
  Tpetra::global_size_t getGlobalNumEntries() const override;
  size_t TESSERA_TPETRA_LOCAL(NumEntries)() const override;
  size_t getNumEntriesInGlobalRow(GlobalOrdinal row) const override;
  size_t getNumEntriesInLocalRow(LocalOrdinal row) const override;
  size_t getGlobalMaxNumRowEntries() const override;
  size_t TESSERA_TPETRA_LOCAL(MaxNumRowEntries)() const override;
  bool hasColMap() const override;
  bool isLocallyIndexed() const override { return true; }
  bool isGloballyIndexed() const override { return false; }
  bool isFillComplete() const override { return true; }

  void getGlobalRowCopy(const GlobalOrdinal row, nonconst_global_inds_host_view_type& columns,
                        size_t& length) const override;
  void getLocalRowCopy(const LocalOrdinal row, nonconst_local_inds_host_view_type& columns,
                       size_t& length) const override;
  void getLocalRowView(const LocalOrdinal row, local_inds_host_view_type& columns) const override;
  void getGlobalRowView(const GlobalOrdinal row, global_inds_host_view_type& columns) const override;
#ifdef TPETRA_ENABLE_DEPRECATED_CODE
  void getGlobalRowCopy(GlobalOrdinal row, const Teuchos::ArrayView<GlobalOrdinal>& columns,
                        size_t& length) const override;
  void getLocalRowCopy(LocalOrdinal row, const Teuchos::ArrayView<LocalOrdinal>& columns,
                       size_t& length) const override;
#endif

 private:
  const LaplacianRowMatrix<Graph>& m_;
};

template <class Graph>
class LaplacianRowMatrix final : public TpetraRowMatrix {
 public:
  // Collective. `grounded` is empty (the plain Laplacian) or one flag per
  // local vertex (1 = grounded). ConfigError for a directed graph,
  // MismatchError for flags of the wrong length (on every rank).
  explicit LaplacianRowMatrix(const Graph& g, std::span<const std::uint8_t> grounded = {},
                              TpetraColumns columns = TpetraColumns::built);
  ~LaplacianRowMatrix() override;

  // Operator
  Teuchos::RCP<const TpetraMap> getDomainMap() const override { return row_map_; }
  Teuchos::RCP<const TpetraMap> getRangeMap() const override { return row_map_; }
  // Y = alpha L X + beta Y (beta == 0 ignores Y's contents); L is symmetric,
  // so every mode is the same product.
  void apply(const TpetraMultiVector& x, TpetraMultiVector& y, Teuchos::ETransp mode = Teuchos::NO_TRANS,
             Scalar alpha = 1.0, Scalar beta = 0.0) const override;
  bool hasTransposeApply() const override { return true; }

  // RowMatrix: structure
  Teuchos::RCP<const TpetraComm> getComm() const override { return row_map_->getComm(); }
  Teuchos::RCP<const TpetraMap> getRowMap() const override { return row_map_; }
  Teuchos::RCP<const TpetraMap> getColMap() const override;
  Teuchos::RCP<const TpetraRowGraph> getGraph() const override { return graph_; }
  Tpetra::global_size_t getGlobalNumRows() const override { return g_.vertices(); }
  Tpetra::global_size_t getGlobalNumCols() const override { return g_.vertices(); }
  size_t TESSERA_TPETRA_LOCAL(NumRows)() const override { return g_.local_vertices(); }
  size_t TESSERA_TPETRA_LOCAL(NumCols)() const override;
  GlobalOrdinal getIndexBase() const override { return 0; }
  Tpetra::global_size_t getGlobalNumEntries() const override { return global_entries_; }
  size_t TESSERA_TPETRA_LOCAL(NumEntries)() const override { return local_entries_; }
  size_t getNumEntriesInGlobalRow(GlobalOrdinal row) const override;
  size_t getNumEntriesInLocalRow(LocalOrdinal row) const override;
  size_t getGlobalMaxNumRowEntries() const override { return global_max_row_; }
  size_t TESSERA_TPETRA_LOCAL(MaxNumRowEntries)() const override { return local_max_row_; }
  // False when the column Map was omitted: Tpetra's way to say getColMap() has none.
  bool hasColMap() const override { return columns_ == TpetraColumns::built || layout_ == ColumnLayout::owned; }
  bool isLocallyIndexed() const override { return true; }
  bool isGloballyIndexed() const override { return false; }
  bool isFillComplete() const override { return true; }
  bool supportsRowViews() const override { return false; }

  // RowMatrix: rows (copies; see the header comment for the views)
  void getGlobalRowCopy(GlobalOrdinal row, nonconst_global_inds_host_view_type& columns,
                        nonconst_values_host_view_type& values, size_t& length) const override;
  void getLocalRowCopy(LocalOrdinal row, nonconst_local_inds_host_view_type& columns,
                       nonconst_values_host_view_type& values, size_t& length) const override;
  void getGlobalRowView(GlobalOrdinal row, global_inds_host_view_type& columns,
                        values_host_view_type& values) const override;
  void getLocalRowView(LocalOrdinal row, local_inds_host_view_type& columns,
                       values_host_view_type& values) const override;
#ifdef TPETRA_ENABLE_DEPRECATED_CODE
  void getGlobalRowCopy(GlobalOrdinal row, const Teuchos::ArrayView<GlobalOrdinal>& columns,
                        const Teuchos::ArrayView<Scalar>& values, size_t& length) const override;
  void getLocalRowCopy(LocalOrdinal row, const Teuchos::ArrayView<LocalOrdinal>& columns,
                       const Teuchos::ArrayView<Scalar>& values, size_t& length) const override;
  void getGlobalRowView(GlobalOrdinal row, Teuchos::ArrayView<const GlobalOrdinal>& columns,
                        Teuchos::ArrayView<const Scalar>& values) const override;
  void getLocalRowView(LocalOrdinal row, Teuchos::ArrayView<const LocalOrdinal>& columns,
                       Teuchos::ArrayView<const Scalar>& values) const override;
#endif

  // RowMatrix: values
  void getLocalDiagCopy(TpetraVector& diagonal) const override;
  void leftScale(const TpetraVector& x) override;
  void rightScale(const TpetraVector& x) override;
  mag_type getFrobeniusNorm() const override;

  // Tessera side.
  using ColumnLayout = trilinos::ColumnLayout;
  ColumnLayout column_layout() const noexcept { return layout_; }
  const Graph& graph() const noexcept { return g_; }
  std::size_t ghost_count() const noexcept { return ghost_count_; }
  TpetraColumns tpetra_columns() const noexcept { return columns_; }
  // Whether some vertex is grounded (on any rank: the same on every rank).
  bool grounded_anywhere() const noexcept { return !grounded_columns_.empty(); }
  // Tpetra's Import from the domain to the column map: null when every
  // column is owned; ConfigError when it was omitted.
  Teuchos::RCP<const TpetraImport> importer() const;
  // Bytes this rank allocated for the matrix (maps, importer, flags, the
  // product's column values and exchange plan), excluding the graph it
  // reads. Tpetra's own structures are estimated from their sizes.
  std::size_t extra_memory_bytes() const;
  // The local column (getColMap()'s numbering, built or not) of global
  // vertex v, owned or a ghost of this rank; -1 (invalid) otherwise.
  LocalOrdinal local_column(std::uint64_t v) const;
  // Calls f(global column, value) for every entry of local row `row`, in
  // increasing column id order (the diagonal in its place).
  template <class F>
  void for_each_entry(std::size_t row, F&& f) const {
    graph::with_rows(g_, [&](const auto& rows) { for_each_entry(rows, row, f); });
  }
  // The same with this rank's rows view already in hand (graph::with_rows):
  // loops over many rows choose the EdgeList's id width once.
  template <class Rows, class F>
  void for_each_entry(const Rows& rows, std::size_t row, F&& f) const;

 private:
  void check_local_row(LocalOrdinal row) const;
  LocalOrdinal local_row_of(GlobalOrdinal row) const;
  [[noreturn]] void no_views() const;
  // ConfigError: the column Map / Import was omitted (`what` names it).
  void require_columns(const char* what) const;
  bool row_grounded(std::size_t row) const noexcept {
    return std::binary_search(grounded_rows_.begin(), grounded_rows_.end(), row);
  }
  bool column_grounded(std::uint64_t v) const noexcept {
    return std::binary_search(grounded_columns_.begin(), grounded_columns_.end(), v);
  }
  // Fills values_ with column j of x for every column the product does not
  // read from x itself (dense: every column; compact: the ghosts), with the
  // grounded ones zeroed.
  template <class XView>
  void load_columns(const XView& x, std::size_t j) const;

  const Graph& g_;
  std::uint64_t begin_ = 0;
  std::size_t owned_ = 0;
  ColumnLayout layout_ = ColumnLayout::owned;
  TpetraColumns columns_ = TpetraColumns::built;
  std::size_t ghost_count_ = 0;
  // The product reads owned columns from x itself (owned and compact
  // layouts). values_: dense, every vertex's value by id (one all-gather);
  // compact, the ghosts' values in id order; owned, nothing.
  mutable std::vector<double> values_;
  GhostSlots slots_;                 // compact: each ghost's slot in values_
  linalg::Import import_;            // compact: fills values_ with the ghosts'
  std::vector<int> counts_, displs_;  // dense: every rank's rows (the all-gather)
  // Grounding (all empty: nothing grounded anywhere): the grounded vertices
  // of the whole graph (sorted; few, the targets), this rank's grounded rows
  // (sorted), the slots of values_ to zero, and the entries (row, owned
  // column, weight) the product must take back for grounded owned columns,
  // which it reads from x.
  std::vector<std::uint64_t> grounded_columns_;
  std::vector<std::size_t> grounded_rows_;
  std::vector<std::size_t> grounded_slots_;
  struct GroundedEntry {
    std::size_t row, column;
    double weight;
  };
  std::vector<GroundedEntry> owned_grounded_entries_;
  Teuchos::RCP<const TpetraMap> row_map_, column_map_;
  Teuchos::RCP<const TpetraImport> importer_;
  Teuchos::RCP<const LaplacianRowGraph<Graph>> graph_;
  std::size_t local_entries_ = 0, local_max_row_ = 0, global_max_row_ = 0;
  Tpetra::global_size_t global_entries_ = 0;
};

template <class Graph>
template <class Rows, class F>
void LaplacianRowMatrix<Graph>::for_each_entry(const Rows& rows, std::size_t row, F&& f) const {
  const std::uint64_t u = begin_ + row;
  if (row_grounded(row)) {
    f(u, 1.0);
    return;
  }
  // Rows are sorted, so a self loop (u, u) comes before every column above
  // u, where the diagonal goes: unweighted, one pass (the degree is the
  // row's length, the self loops counted on the way); weighted, the weighted
  // degree needs a pass of its own first.
  bool diagonal_done = false;
  double degree = static_cast<double>(rows.degree(row)), self = 0;
  auto emit = [&](std::uint64_t v, double w) {
    if (v == u) return;
    if (v > u && !diagonal_done) {
      f(u, degree - self);
      diagonal_done = true;
    }
    if (!column_grounded(v)) f(v, -w);
  };
  std::span<const double> weight;
  if constexpr (detail::kMayBeWeighted<Graph>) weight = detail::local_weights(g_);
  if (weight.empty()) {
    rows.for_each(row, [&](std::uint64_t v) {
      self += v == u ? 1.0 : 0.0;
      emit(v, 1.0);
    });
  } else {
    if constexpr (detail::kMayBeWeighted<Graph>) {
      const std::uint64_t first = detail::arc_offsets(g_)[row];
      degree = 0;
      std::uint64_t e = first;
      rows.for_each(row, [&](std::uint64_t v) {
        degree += weight[e];
        if (v == u) self += weight[e];
        ++e;
      });
      e = first;
      rows.for_each(row, [&](std::uint64_t v) { emit(v, weight[e++]); });
    }
  }
  if (!diagonal_done) f(u, degree - self);
}

// The two forms, compiled once in edge_list_row_matrix.cpp.
extern template class LaplacianRowMatrix<graph::EdgeList>;
extern template class LaplacianRowMatrix<graph::PackedGraph>;
extern template class LaplacianRowGraph<graph::EdgeList>;
extern template class LaplacianRowGraph<graph::PackedGraph>;
using EdgeListRowMatrix = LaplacianRowMatrix<graph::EdgeList>;
using EdgeListRowGraph = LaplacianRowGraph<graph::EdgeList>;
using PackedRowMatrix = LaplacianRowMatrix<graph::PackedGraph>;
using PackedRowGraph = LaplacianRowGraph<graph::PackedGraph>;

// Collective. Which local vertices of m's graph a walk from `seeds` (global
// ids, the same on every rank) reaches: 1 per reached local vertex. `m`
// must be ungrounded (grounded rows and columns would stop the walk there):
// ConfigError otherwise. Breadth-first through m's own products (x the seeds'
// indicator, then every vertex with a reached neighbour, by (diag(L) - L) x),
// so it needs no other structure and works on both graph forms; one product
// per level, as many as the seeds' eccentricity + 1, fewer than the CG
// iterations of a solve on the same graph need to carry information as far.
template <class Graph>
std::vector<std::uint8_t> reached_from(const LaplacianRowMatrix<Graph>& m, std::span<const std::uint64_t> seeds);

}  // namespace tessera::trilinos
