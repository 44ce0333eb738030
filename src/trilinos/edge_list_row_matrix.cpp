#include "tessera/trilinos/edge_list_row_matrix.hpp"

#include <Teuchos_DefaultMpiComm.hpp>

#include <algorithm>
#include <cmath>

#include "tessera/runtime/collective.hpp"

namespace tessera::trilinos {

namespace {

// y[:, j] = alpha L x[:, j] + beta y[:, j] for every row, one variant per
// layout so the per-edge loop has no test it does not need.
// `xd`: X on the rows (domain), `x`: X on the columns (the same with no ghosts).
// kGrounded: some rows are grounded (identity rows); kCheckColumns: grounded
// columns must be skipped per edge (with ghosts the imported copy has them
// zeroed instead, so the inner loop reads no flag).
template <bool kGhosts, bool kGrounded, bool kCheckColumns, bool kWeighted, class XView, class YView>
void laplacian_product(const EdgeListRowMatrix& m, std::span<const std::uint8_t> grounded, const XView& xd,
                       const XView& x, const YView& y, double alpha, double beta) {
  const graph::EdgeList& g = m.graph();
  auto offsets = g.row_offsets();
  const std::uint64_t* dst = g.local_dst().data();
  const double* weight = g.local_weight().data();
  const std::uint64_t begin = g.local_vertex_begin();
  const std::size_t rows = g.local_vertices();
  for (std::size_t j = 0; j < x.extent(1); ++j) {
    for (std::size_t i = 0; i < rows; ++i) {
      const double xi = xd(i, j);
      double lx;
      if (kGrounded && grounded[i]) {  // row i's own column is i
        lx = xi;
      } else {
        double degree = 0, sum = 0;
        for (std::size_t e = offsets[i]; e < offsets[i + 1]; ++e) {
          const double w = kWeighted ? weight[e] : 1.0;
          const std::size_t c = kGhosts ? static_cast<std::size_t>(m.local_column(dst[e]))
                                        : static_cast<std::size_t>(dst[e] - begin);
          degree += w;
          // A self loop adds w x_i to both terms: it cancels, as in L = D - A.
          if (!kCheckColumns || !grounded[c]) sum += w * x(c, j);
        }
        lx = degree * xi - sum;
      }
      y(i, j) = alpha * lx + (beta == 0.0 ? 0.0 : beta * y(i, j));
    }
  }
}

template <bool kGhosts, bool kGrounded, bool kCheckColumns, class XView, class YView>
void dispatch_weighted(const EdgeListRowMatrix& m, std::span<const std::uint8_t> grounded, const XView& xd,
                       const XView& x, const YView& y, double alpha, double beta) {
  if (m.graph().weighted())
    laplacian_product<kGhosts, kGrounded, kCheckColumns, true>(m, grounded, xd, x, y, alpha, beta);
  else
    laplacian_product<kGhosts, kGrounded, kCheckColumns, false>(m, grounded, xd, x, y, alpha, beta);
}

}  // namespace

EdgeListRowMatrix::EdgeListRowMatrix(const graph::EdgeList& g, std::span<const std::uint8_t> grounded)
    : g_(g), begin_(g.local_vertex_begin()), owned_(g.local_vertices()) {
  Runtime& rt = g.runtime();
  if (g.directed())
    throw ConfigError("the Laplacian RowMatrix needs an undirected graph (a symmetric matrix): symmetrize it first");
  agree(rt.comm(), [&] {
    if (!grounded.empty() && grounded.size() != owned_)
      throw MismatchError("grounded flags cover " + std::to_string(grounded.size()) + " rows, this rank has " +
                          std::to_string(owned_));
  });
  if (owned_ > static_cast<std::size_t>(std::numeric_limits<LocalOrdinal>::max() / 2))
    throw RangeError("this rank holds " + std::to_string(owned_) +
                     " vertices, more than Tpetra's 32-bit local indices allow: use more ranks");
  GhostSet ghosts = GhostSet::remote_of(g.local_dst(), begin_, g.local_vertex_end(), g.vertices());
  ghost_count_ = ghosts.size();

  auto comm = teuchos_comm(rt);
  row_map_ = Teuchos::rcp(new TpetraMap(g.vertices(), owned_, 0, comm));
  if (all_reduce<std::uint64_t>(rt.comm(), ghost_count_, MPI_MAX) == 0) {
    column_map_ = row_map_;  // every column is owned: no import
  } else {
    // Owned vertices first, then the ghosts: O(vertices + ghosts). With the
    // owned prefix equal to the row map, the Import copies it in place
    // (Tpetra's "same" ids) and keeps lists only for the ghosts.
    ghost_words_.assign(static_cast<std::size_t>((g.vertices() + 63) / 64), GhostWord{});
    for (auto v : ghosts.ids()) ghost_words_[v >> 6].bits |= std::uint64_t{1} << (v & 63);
    std::uint64_t running = 0;
    for (auto& w : ghost_words_) {
      w.before = running;
      running += static_cast<std::uint64_t>(__builtin_popcountll(w.bits));
    }
    std::vector<GlobalOrdinal> ids;
    ids.reserve(owned_ + ghost_count_);
    for (std::uint64_t v = begin_; v < g.local_vertex_end(); ++v) ids.push_back(static_cast<GlobalOrdinal>(v));
    for (auto v : ghosts.ids()) ids.push_back(static_cast<GlobalOrdinal>(v));
    std::sort(ids.begin() + static_cast<std::ptrdiff_t>(owned_), ids.end());
    column_map_ = Teuchos::rcp(new TpetraMap(Teuchos::OrdinalTraits<Tpetra::global_size_t>::invalid(),
                                             Teuchos::ArrayView<const GlobalOrdinal>(ids), 0, comm));
    importer_ = Teuchos::rcp(new TpetraImport(row_map_, column_map_));
  }

  bool any_grounded = false;
  for (auto f : grounded) any_grounded = any_grounded || f;
  if (all_reduce<int>(rt.comm(), any_grounded ? 1 : 0, MPI_MAX)) {
    grounded_columns_.assign(owned_ + ghost_count_, 0);
    if (!importer_) {
      for (std::size_t i = 0; i < grounded.size(); ++i) grounded_columns_[i] = grounded[i] ? 1 : 0;
    } else {  // every column's flag from its owner (the owned ones included)
      TpetraVector owned_flags(row_map_), column_flags(column_map_);
      {
        auto f = owned_flags.getLocalViewHost(Tpetra::Access::OverwriteAll);
        for (std::size_t i = 0; i < owned_; ++i) f(i, 0) = !grounded.empty() && grounded[i] ? 1.0 : 0.0;
      }
      column_flags.doImport(owned_flags, *importer_, Tpetra::INSERT);
      auto f = column_flags.getLocalViewHost(Tpetra::Access::ReadOnly);
      for (std::size_t c = 0; c < grounded_columns_.size(); ++c) grounded_columns_[c] = f(c, 0) != 0.0 ? 1 : 0;
    }
  }
  for (std::size_t c = 0; c < grounded_columns_.size(); ++c)
    if (grounded_columns_[c]) grounded_list_.push_back(static_cast<LocalOrdinal>(c));

  for (std::size_t i = 0; i < owned_; ++i) {
    std::size_t n = 0;
    for_each_entry(i, [&](LocalOrdinal, double) { ++n; });
    local_entries_ += n;
    local_max_row_ = std::max(local_max_row_, n);
  }
  global_entries_ = all_reduce<std::uint64_t>(rt.comm(), local_entries_, MPI_SUM);
  global_max_row_ = all_reduce<std::uint64_t>(rt.comm(), local_max_row_, MPI_MAX);
  graph_ = Teuchos::rcp(new EdgeListRowGraph(*this));
}

EdgeListRowMatrix::~EdgeListRowMatrix() = default;

void EdgeListRowMatrix::apply(const TpetraMultiVector& x_in, TpetraMultiVector& y, Teuchos::ETransp, Scalar alpha,
                              Scalar beta) const {
  if (x_in.getNumVectors() != y.getNumVectors())
    throw MismatchError("EdgeListRowMatrix::apply: X has " + std::to_string(x_in.getNumVectors()) + " columns, Y " +
                        std::to_string(y.getNumVectors()));
  const TpetraMultiVector* x = &x_in;
  Teuchos::RCP<TpetraMultiVector> alias_copy;
  if (importer_) {
    if (x_columns_.is_null() || x_columns_->getNumVectors() != x_in.getNumVectors())
      x_columns_ = Teuchos::rcp(new TpetraMultiVector(column_map_, x_in.getNumVectors(), false));
    x_columns_->doImport(x_in, *importer_, Tpetra::INSERT);
    if (!grounded_list_.empty()) {  // a grounded column contributes nothing
      auto xc = x_columns_->getLocalViewHost(Tpetra::Access::ReadWrite);
      for (std::size_t j = 0; j < xc.extent(1); ++j)
        for (LocalOrdinal c : grounded_list_) xc(static_cast<std::size_t>(c), j) = 0.0;
    }
    x = x_columns_.get();
  } else if (&x_in == &y) {  // Y is written row by row while X is read
    alias_copy = Teuchos::rcp(new TpetraMultiVector(x_in, Teuchos::Copy));
    x = alias_copy.get();
  }
  auto xv = x->getLocalViewHost(Tpetra::Access::ReadOnly);
  auto xd = x_in.getLocalViewHost(Tpetra::Access::ReadOnly);
  const bool ghosts = !ghost_words_.empty();
  const bool grounded = !grounded_columns_.empty();
  std::span<const std::uint8_t> flags(grounded_columns_);
  auto run = [&](const auto& yv) {
    if (ghosts && grounded) dispatch_weighted<true, true, false>(*this, flags, xd, xv, yv, alpha, beta);
    else if (ghosts) dispatch_weighted<true, false, false>(*this, flags, xd, xv, yv, alpha, beta);
    else if (grounded) dispatch_weighted<false, true, true>(*this, flags, xd, xv, yv, alpha, beta);
    else dispatch_weighted<false, false, false>(*this, flags, xd, xv, yv, alpha, beta);
  };
  if (beta == 0.0) run(y.getLocalViewHost(Tpetra::Access::OverwriteAll));
  else run(y.getLocalViewHost(Tpetra::Access::ReadWrite));
}

void EdgeListRowMatrix::check_local_row(LocalOrdinal row) const {
  if (row < 0 || static_cast<std::size_t>(row) >= owned_)
    throw RangeError("local row " + std::to_string(row) + " is outside [0, " + std::to_string(owned_) + ")");
}

LocalOrdinal EdgeListRowMatrix::local_row_of(GlobalOrdinal row) const {
  if (row < 0 || !g_.vertex_map().is_local(static_cast<std::uint64_t>(row))) return -1;
  return static_cast<LocalOrdinal>(static_cast<std::uint64_t>(row) - begin_);
}

size_t EdgeListRowMatrix::getNumEntriesInLocalRow(LocalOrdinal row) const {
  if (row < 0 || static_cast<std::size_t>(row) >= owned_) return Teuchos::OrdinalTraits<size_t>::invalid();
  std::size_t n = 0;
  for_each_entry(static_cast<std::size_t>(row), [&](LocalOrdinal, double) { ++n; });
  return n;
}

size_t EdgeListRowMatrix::getNumEntriesInGlobalRow(GlobalOrdinal row) const {
  LocalOrdinal local = local_row_of(row);
  return local < 0 ? Teuchos::OrdinalTraits<size_t>::invalid() : getNumEntriesInLocalRow(local);
}

namespace {
// Copies row `row` of `m` through `put(k, local column, value)` after
// checking the caller's capacity, Tpetra's way: length = the row's length,
// std::runtime_error (a RangeError) when the buffers are shorter.
template <class Put>
void copy_row(const EdgeListRowMatrix& m, LocalOrdinal row, std::size_t capacity, size_t& length, Put&& put) {
  length = m.getNumEntriesInLocalRow(row);
  if (length > capacity)
    throw RangeError("row copy of local row " + std::to_string(row) + " needs " + std::to_string(length) +
                     " entries, the buffers hold " + std::to_string(capacity));
  std::size_t k = 0;
  m.for_each_entry(static_cast<std::size_t>(row), [&](LocalOrdinal c, double v) { put(k++, c, v); });
}
}  // namespace

void EdgeListRowMatrix::getLocalRowCopy(LocalOrdinal row, nonconst_local_inds_host_view_type& columns,
                                        nonconst_values_host_view_type& values, size_t& length) const {
  check_local_row(row);
  copy_row(*this, row, std::min(columns.extent(0), values.extent(0)), length, [&](std::size_t k, LocalOrdinal c, double v) {
    columns(k) = c;
    values(k) = v;
  });
}

void EdgeListRowMatrix::getGlobalRowCopy(GlobalOrdinal row, nonconst_global_inds_host_view_type& columns,
                                         nonconst_values_host_view_type& values, size_t& length) const {
  LocalOrdinal local = local_row_of(row);
  if (local < 0) {
    length = Teuchos::OrdinalTraits<size_t>::invalid();
    return;
  }
  copy_row(*this, local, std::min(columns.extent(0), values.extent(0)), length, [&](std::size_t k, LocalOrdinal c, double v) {
    columns(k) = column_map_->getGlobalElement(c);
    values(k) = v;
  });
}

void EdgeListRowMatrix::no_views() const {
  throw ConfigError("EdgeListRowMatrix has no row views (its values are computed from the edge arrays and its columns "
                    "are 64-bit global ids there): use getLocalRowCopy / getGlobalRowCopy (supportsRowViews() is false)");
}
void EdgeListRowMatrix::getGlobalRowView(GlobalOrdinal, global_inds_host_view_type&, values_host_view_type&) const {
  no_views();
}
void EdgeListRowMatrix::getLocalRowView(LocalOrdinal, local_inds_host_view_type&, values_host_view_type&) const {
  no_views();
}

#ifdef TPETRA_ENABLE_DEPRECATED_CODE
void EdgeListRowMatrix::getLocalRowCopy(LocalOrdinal row, const Teuchos::ArrayView<LocalOrdinal>& columns,
                                        const Teuchos::ArrayView<Scalar>& values, size_t& length) const {
  check_local_row(row);
  copy_row(*this, row, static_cast<std::size_t>(std::min(columns.size(), values.size())), length,
           [&](std::size_t k, LocalOrdinal c, double v) {
             columns[static_cast<Teuchos::Ordinal>(k)] = c;
             values[static_cast<Teuchos::Ordinal>(k)] = v;
           });
}
void EdgeListRowMatrix::getGlobalRowCopy(GlobalOrdinal row, const Teuchos::ArrayView<GlobalOrdinal>& columns,
                                         const Teuchos::ArrayView<Scalar>& values, size_t& length) const {
  LocalOrdinal local = local_row_of(row);
  if (local < 0) {
    length = Teuchos::OrdinalTraits<size_t>::invalid();
    return;
  }
  copy_row(*this, local, static_cast<std::size_t>(std::min(columns.size(), values.size())), length,
           [&](std::size_t k, LocalOrdinal c, double v) {
             columns[static_cast<Teuchos::Ordinal>(k)] = column_map_->getGlobalElement(c);
             values[static_cast<Teuchos::Ordinal>(k)] = v;
           });
}
void EdgeListRowMatrix::getGlobalRowView(GlobalOrdinal, Teuchos::ArrayView<const GlobalOrdinal>&,
                                         Teuchos::ArrayView<const Scalar>&) const {
  no_views();
}
void EdgeListRowMatrix::getLocalRowView(LocalOrdinal, Teuchos::ArrayView<const LocalOrdinal>&,
                                        Teuchos::ArrayView<const Scalar>&) const {
  no_views();
}
#endif

void EdgeListRowMatrix::getLocalDiagCopy(TpetraVector& diagonal) const {
  if (diagonal.getLocalLength() != owned_)
    throw MismatchError("getLocalDiagCopy: the vector has " + std::to_string(diagonal.getLocalLength()) +
                        " local entries, the matrix " + std::to_string(owned_) + " rows");
  auto d = diagonal.getLocalViewHost(Tpetra::Access::OverwriteAll);
  for (std::size_t i = 0; i < owned_; ++i) {
    const LocalOrdinal own = local_column(begin_ + i);
    d(i, 0) = 0.0;
    for_each_entry(i, [&](LocalOrdinal c, double v) {
      if (c == own) d(i, 0) += v;
    });
  }
}

void EdgeListRowMatrix::leftScale(const TpetraVector&) {
  throw ConfigError("EdgeListRowMatrix does not support leftScale: it reads the graph's edge arrays and never writes "
                    "them (they may be another process's read-only mapping); scale a CrsMatrix copy instead");
}
void EdgeListRowMatrix::rightScale(const TpetraVector&) {
  throw ConfigError("EdgeListRowMatrix does not support rightScale: it reads the graph's edge arrays and never writes "
                    "them (they may be another process's read-only mapping); scale a CrsMatrix copy instead");
}

EdgeListRowMatrix::mag_type EdgeListRowMatrix::getFrobeniusNorm() const {
  double sum = 0;
  for (std::size_t i = 0; i < owned_; ++i) for_each_entry(i, [&](LocalOrdinal, double v) { sum += v * v; });
  return std::sqrt(all_reduce(g_.runtime().comm(), sum, MPI_SUM));
}

std::size_t EdgeListRowMatrix::extra_memory_bytes() const {
  std::size_t columns = column_map_->TESSERA_TPETRA_LOCAL(NumElements)();
  std::size_t bytes = grounded_columns_.capacity() + grounded_list_.capacity() * sizeof(LocalOrdinal) +
                      ghost_words_.capacity() * sizeof(GhostWord);
  if (importer_) {
    // The column map's id list and the hash table of its non-contiguous
    // part (the ghosts), the importer's lists (Tpetra's own layout: an
    // estimate), the imported column vector.
    bytes += columns * sizeof(GlobalOrdinal) + ghost_count_ * 24 + importer_->getNumRemoteIDs() * 16 +
             importer_->getNumExportIDs() * 16;
    if (!x_columns_.is_null()) bytes += columns * x_columns_->getNumVectors() * sizeof(double);
  }
  return bytes;
}

// The graph: the matrix's structure, row for row.
Teuchos::RCP<const TpetraComm> EdgeListRowGraph::getComm() const { return m_.getComm(); }
Teuchos::RCP<const TpetraMap> EdgeListRowGraph::getRowMap() const { return m_.getRowMap(); }
Teuchos::RCP<const TpetraMap> EdgeListRowGraph::getColMap() const { return m_.getColMap(); }
Teuchos::RCP<const TpetraMap> EdgeListRowGraph::getDomainMap() const { return m_.getDomainMap(); }
Teuchos::RCP<const TpetraMap> EdgeListRowGraph::getRangeMap() const { return m_.getRangeMap(); }
Teuchos::RCP<const TpetraImport> EdgeListRowGraph::getImporter() const {
  return m_.importer() ? Teuchos::rcp(m_.importer(), false) : Teuchos::null;
}
Tpetra::global_size_t EdgeListRowGraph::getGlobalNumRows() const { return m_.getGlobalNumRows(); }
Tpetra::global_size_t EdgeListRowGraph::getGlobalNumCols() const { return m_.getGlobalNumCols(); }
size_t EdgeListRowGraph::TESSERA_TPETRA_LOCAL(NumRows)() const { return m_.TESSERA_TPETRA_LOCAL(NumRows)(); }
size_t EdgeListRowGraph::TESSERA_TPETRA_LOCAL(NumCols)() const { return m_.TESSERA_TPETRA_LOCAL(NumCols)(); }
Tpetra::global_size_t EdgeListRowGraph::getGlobalNumEntries() const { return m_.getGlobalNumEntries(); }
size_t EdgeListRowGraph::TESSERA_TPETRA_LOCAL(NumEntries)() const { return m_.TESSERA_TPETRA_LOCAL(NumEntries)(); }
size_t EdgeListRowGraph::getNumEntriesInGlobalRow(GlobalOrdinal row) const { return m_.getNumEntriesInGlobalRow(row); }
size_t EdgeListRowGraph::getNumEntriesInLocalRow(LocalOrdinal row) const { return m_.getNumEntriesInLocalRow(row); }
size_t EdgeListRowGraph::getGlobalMaxNumRowEntries() const { return m_.getGlobalMaxNumRowEntries(); }
size_t EdgeListRowGraph::TESSERA_TPETRA_LOCAL(MaxNumRowEntries)() const {
  return m_.TESSERA_TPETRA_LOCAL(MaxNumRowEntries)();
}

void EdgeListRowGraph::getLocalRowCopy(const LocalOrdinal row, nonconst_local_inds_host_view_type& columns,
                                       size_t& length) const {
  Kokkos::View<double*, Kokkos::HostSpace> values("values", columns.extent(0));
  nonconst_local_inds_host_view_type c = columns;
  typename TpetraRowMatrix::nonconst_values_host_view_type v = values;
  m_.getLocalRowCopy(row, c, v, length);
}
void EdgeListRowGraph::getGlobalRowCopy(const GlobalOrdinal row, nonconst_global_inds_host_view_type& columns,
                                        size_t& length) const {
  Kokkos::View<double*, Kokkos::HostSpace> values("values", columns.extent(0));
  nonconst_global_inds_host_view_type c = columns;
  typename TpetraRowMatrix::nonconst_values_host_view_type v = values;
  m_.getGlobalRowCopy(row, c, v, length);
}
void EdgeListRowGraph::getLocalRowView(const LocalOrdinal, local_inds_host_view_type&) const {
  throw ConfigError("EdgeListRowGraph has no row views: use getLocalRowCopy");
}
void EdgeListRowGraph::getGlobalRowView(const GlobalOrdinal, global_inds_host_view_type&) const {
  throw ConfigError("EdgeListRowGraph has no row views: use getGlobalRowCopy");
}
#ifdef TPETRA_ENABLE_DEPRECATED_CODE
void EdgeListRowGraph::getLocalRowCopy(LocalOrdinal row, const Teuchos::ArrayView<LocalOrdinal>& columns,
                                       size_t& length) const {
  std::vector<double> values(static_cast<std::size_t>(columns.size()));
  m_.getLocalRowCopy(row, columns, Teuchos::ArrayView<Scalar>(values), length);
}
void EdgeListRowGraph::getGlobalRowCopy(GlobalOrdinal row, const Teuchos::ArrayView<GlobalOrdinal>& columns,
                                        size_t& length) const {
  std::vector<double> values(static_cast<std::size_t>(columns.size()));
  m_.getGlobalRowCopy(row, columns, Teuchos::ArrayView<Scalar>(values), length);
}
#endif

}  // namespace tessera::trilinos
