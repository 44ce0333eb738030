#include "tessera/trilinos/edge_list_row_matrix.hpp"

#include <Teuchos_DefaultMpiComm.hpp>

#include <algorithm>
#include <bit>
#include <cmath>
#include <limits>
#include <optional>
#include <vector>

#include "tessera/runtime/cancellation.hpp"
#include "tessera/runtime/collective.hpp"
#include "tessera/runtime/memory.hpp"
#include "tessera/trilinos/hitting.hpp"

namespace tessera::trilinos {

namespace {

// The rows of g as the product reads them: f(rows, weight, arc offsets),
// the weights and offsets empty for an unweighted graph (every PackedGraph).
// EdgeList: with_rows picks the id width once (PlainRows<Id>); weighted
// graphs read a weight by its arc's position, row offset + rank in the row.
template <class Graph, class F>
decltype(auto) with_weighted_rows(const Graph& g, F&& f) {
  return graph::with_rows(g, [&](const auto& rows) {
    if constexpr (detail::kMayBeWeighted<Graph>)
      return f(rows, detail::local_weights(g), detail::arc_offsets(g));
    else
      return f(rows, std::span<const double>{}, std::span<const std::uint64_t>{});
  });
}

// y[i] = alpha (L x)[i] + beta y[i] for every local row, with column v's
// value from value(v) (x itself for owned columns) and x_i from x. L x = d x - A x
// row by row: a self loop adds w x_i to both terms and cancels. Grounded
// rows (sorted local rows) are identity rows; grounded ghost columns read 0
// from value(), grounded owned columns are taken back out by the caller.
// One instantiation per graph form, layout, weighting and id width (the
// width chosen once, by with_rows), so the per-edge loop holds one load
// and one add (two for weights) and no test: PlainRows::for_each inlines
// to the loop over the destination array, PackedRows::for_each to the
// decoding loop.
template <bool kWeighted, class Rows, class Value>
void laplacian_rows(const Rows& rows, std::span<const double> weights, std::span<const std::uint64_t> offsets,
                    const double* x, Value value, std::span<const std::size_t> grounded_rows, double* y, double alpha,
                    double beta) {
  const std::size_t n = rows.size();
  const double* weight = weights.data();
  std::size_t next_grounded = 0;
  for (std::size_t i = 0; i < n; ++i) {
    double lx;
    if (next_grounded < grounded_rows.size() && grounded_rows[next_grounded] == i) {
      lx = x[i];
      ++next_grounded;
    } else {
      double sum = 0;
      if constexpr (kWeighted) {
        double degree = 0;
        std::uint64_t e = offsets[i];
        rows.for_each(i, [&](std::uint64_t v) {
          degree += weight[e];
          sum += weight[e] * value(v);
          ++e;
        });
        lx = degree * x[i] - sum;
      } else {
        rows.for_each(i, [&](std::uint64_t v) { sum += value(v); });
        lx = static_cast<double>(rows.degree(i)) * x[i] - sum;
      }
    }
    y[i] = alpha * lx + (beta == 0.0 ? 0.0 : beta * y[i]);
  }
}

// The product of a block of k columns in one sweep: `block` holds the k
// values of every vertex from `base` on side by side (vertex v's at
// (v - base) * k), so an edge reads its column's k values from one place.
// y(i, j) for this rank's rows through `at` (the view's element access).
template <bool kWeighted, class Rows, class YAt>
void laplacian_rows_block(const Rows& rows, std::span<const double> weights, std::span<const std::uint64_t> offsets,
                          const double* block, std::uint64_t base, std::size_t k, std::uint64_t begin, YAt at,
                          double alpha, double beta) {
  constexpr std::size_t kMax = 16;
  const std::size_t n = rows.size();
  const double* weight = weights.data();
  double sum[kMax];
  for (std::size_t i = 0; i < n; ++i) {
    std::fill(sum, sum + k, 0.0);
    double degree = 0;
    if constexpr (kWeighted) {
      std::uint64_t e = offsets[i];
      rows.for_each(i, [&](std::uint64_t v) {
        const double* xv = block + (v - base) * k;
        degree += weight[e];
        for (std::size_t j = 0; j < k; ++j) sum[j] += weight[e] * xv[j];
        ++e;
      });
    } else {
      degree = static_cast<double>(rows.degree(i));
      rows.for_each(i, [&](std::uint64_t v) {
        const double* xv = block + (v - base) * k;
        for (std::size_t j = 0; j < k; ++j) sum[j] += xv[j];
      });
    }
    const double* xi = block + (begin - base + i) * k;
    for (std::size_t j = 0; j < k; ++j) {
      double& yij = at(i, j);
      yij = alpha * (degree * xi[j] - sum[j]) + (beta == 0.0 ? 0.0 : beta * yij);
    }
  }
}

// The distinct columns of this rank's rows outside [begin, end): every row
// read once through the view into a bitmap of the vertex range (n bits,
// transient), as GhostSet::remote_of reads an id array, so neither form
// lists its arcs.
template <class Rows>
GhostSet remote_columns(const Rows& rows, std::uint64_t begin, std::uint64_t end, std::uint64_t n) {
  std::vector<std::uint64_t> bits((n + 63) / 64, 0);
  std::size_t count = 0;
  for (std::size_t i = 0; i < rows.size(); ++i)
    rows.for_each(i, [&](std::uint64_t v) {
      if (v - begin < end - begin) return;  // owned (wraps below begin)
      if (v >= n) throw RangeError("column " + std::to_string(v) + " is outside [0, " + std::to_string(n) + ")");
      std::uint64_t& word = bits[v >> 6];
      const std::uint64_t bit = 1ull << (v & 63);
      count += (word & bit) == 0;
      word |= bit;
    });
  std::vector<std::uint64_t> ids;
  ids.reserve(count);
  for (std::size_t w = 0; w < bits.size(); ++w)
    for (std::uint64_t b = bits[w]; b; b &= b - 1) ids.push_back(w * 64 + static_cast<std::uint64_t>(std::countr_zero(b)));
  bits = {};
  return GhostSet(std::move(ids), n);
}

// The Import from the row map to the column map "owned vertices, then
// `ghosts` (sorted ids)", built from the ghosts' owners. Tpetra's constructor
// for known owners makes the column map itself and neither lists the row
// map's ids (which every other constructor caches in the row map, 8 bytes per
// owned vertex for as long as it lives) nor asks a directory for the owners.
Teuchos::RCP<const TpetraImport> import_to_ghosts(const Teuchos::RCP<const TpetraMap>& rows,
                                                  std::span<const std::uint64_t> ghosts, const Map& vertices) {
  std::vector<GlobalOrdinal> ids(ghosts.begin(), ghosts.end());
  std::vector<int> owners;
  owners.reserve(ghosts.size());
  for (auto v : ghosts) owners.push_back(vertices.owner(v));
  return Teuchos::rcp(new TpetraImport(rows, ids.data(), owners.data(), static_cast<LocalOrdinal>(ids.size()),
                                       /*mayReorderTargetMapIndicesLocally=*/false));
}

}  // namespace

template <class Graph>
LaplacianRowMatrix<Graph>::LaplacianRowMatrix(const Graph& g, std::span<const std::uint8_t> grounded,
                                              TpetraColumns columns)
    : g_(g), begin_(g.local_vertex_begin()), owned_(g.local_vertices()), columns_(columns) {
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
  const Map& rows = g.vertex_map();
  const std::uint64_t n = g.vertices();
  GhostSet ghosts = graph::with_rows(g, [&](const auto& r) { return remote_columns(r, begin_, g.local_vertex_end(), n); });
  ghost_count_ = ghosts.size();
  agree(rt.comm(), [&] {
    if (owned_ + ghost_count_ > static_cast<std::size_t>(std::numeric_limits<LocalOrdinal>::max()))
      throw RangeError("this rank reads " + std::to_string(owned_ + ghost_count_) +
                       " distinct columns, more than Tpetra's 32-bit local indices allow: use more ranks");
  });

  // The layout, on every rank alike: the one whose structures are smaller
  // summed over the ranks (bytes, as measured with Trilinos 13.2 on Kronecker
  // graphs and grids). Dense: the all-gathered values (8 per vertex) and
  // Tpetra's Import to the replicated map (~40 per column not owned here).
  // Compact: Tpetra's id list of the column map (8 per owned column), per
  // ghost ~70 in Tpetra (the id list, its hash table, the Import) and ~20 in
  // the product (its value, Tessera's Import), and the slots' bitmap (0.25
  // per id spanned). When every rank reads most columns (Kronecker graphs on
  // a few ranks) dense wins and the product needs no lookup; on meshes
  // compact wins. Without Tpetra's column Map and Import only the
  // product's own structures count.
  const bool tpetra = columns_ == TpetraColumns::built;
  const std::uint64_t dense_bytes = 8 * n + (tpetra ? 40 * (n - owned_) : 0);
  const std::uint64_t compact_bytes = (tpetra ? 8 * owned_ + 70 * ghost_count_ : 0) + 20 * ghost_count_ +
                                      GhostSlots::bytes_for(ghosts.ids(), begin_, g.local_vertex_end());
  const bool any_ghosts = all_reduce<std::uint64_t>(rt.comm(), ghost_count_, MPI_MAX) > 0;
  std::uint64_t sums[2] = {dense_bytes, compact_bytes};
  all_reduce(rt.comm(), sums, 2, MPI_SUM);
  layout_ = !any_ghosts                                          ? ColumnLayout::owned
            : sums[0] <= sums[1] && n < (std::uint64_t{1} << 31) ? ColumnLayout::dense
                                                                 : ColumnLayout::compact;

  auto comm = teuchos_comm(rt);
  row_map_ = Teuchos::rcp(new TpetraMap(n, owned_, 0, comm));
  switch (layout_) {
    case ColumnLayout::owned:
      column_map_ = row_map_;  // every column is owned: no import, and the product reads x itself
      break;
    case ColumnLayout::dense: {
      if (tpetra) {
        column_map_ = Teuchos::rcp(new TpetraMap(n, 0, comm, Tpetra::LocallyReplicated));
        importer_ = Teuchos::rcp(new TpetraImport(row_map_, column_map_));
      }
      values_.resize(n);
      const Distribution& d = rows.distribution();
      for (int p = 0; p < d.ranks(); ++p) {
        counts_.push_back(static_cast<int>(d.count(p)));
        displs_.push_back(static_cast<int>(d.begin(p)));
      }
      break;
    }
    case ColumnLayout::compact: {
      // Tpetra's column map: the owned vertices first (equal to the row
      // map, so the Import copies them in place and lists only the ghosts),
      // then the ghosts. O(vertices + ghosts).
      if (tpetra) {
        importer_ = import_to_ghosts(row_map_, ghosts.ids(), rows);
        column_map_ = importer_->getTargetMap();
      }
      // The product's ghost values, in id order, found through the bitmap.
      slots_ = GhostSlots(ghosts.ids(), begin_, g.local_vertex_end());
      values_.resize(ghost_count_);
      import_ = linalg::Import(rows, ghosts);
      break;
    }
  }

  // Grounding: the grounded vertices' ids on every rank (few: the targets).
  std::vector<std::uint64_t> mine;
  for (std::size_t i = 0; i < grounded.size(); ++i)
    if (grounded[i]) {
      mine.push_back(begin_ + i);
      grounded_rows_.push_back(i);
    }
  {
    auto counts = all_gather<int>(rt.comm(), static_cast<int>(mine.size()));
    std::vector<int> displs(counts.size(), 0);
    for (std::size_t p = 1; p < counts.size(); ++p) displs[p] = displs[p - 1] + counts[p - 1];
    grounded_columns_.resize(static_cast<std::size_t>(displs.back() + counts.back()));
    std::copy(mine.begin(), mine.end(), grounded_columns_.begin() + displs[static_cast<std::size_t>(rt.rank())]);
    all_gather_in_place<std::uint64_t>(rt.comm(), grounded_columns_, counts, displs);  // ascending: rank order
  }
  for (auto v : grounded_columns_) {
    if (layout_ == ColumnLayout::dense) grounded_slots_.push_back(static_cast<std::size_t>(v));
    if (layout_ == ColumnLayout::compact && slots_.contains(v)) grounded_slots_.push_back(slots_.slot(v));
  }
  // A grounded owned column is read from x in the product like any owned
  // one; these entries take it back out (the edges into it from this rank's
  // other rows).
  if (!grounded_rows_.empty() && layout_ != ColumnLayout::dense) {
    with_weighted_rows(g, [&](const auto& r, std::span<const double> weight, std::span<const std::uint64_t> offsets) {
      for (std::size_t i = 0; i < owned_; ++i) {
        if (row_grounded(i)) continue;
        std::uint64_t e = weight.empty() ? 0 : offsets[i];
        r.for_each(i, [&](std::uint64_t v) {
          const std::uint64_t o = v - begin_;
          if (o < owned_ && o != i && row_grounded(static_cast<std::size_t>(o)))
            owned_grounded_entries_.push_back({i, static_cast<std::size_t>(o), weight.empty() ? 1.0 : weight[e]});
          ++e;
        });
      }
    });
  }

  graph::with_rows(g, [&](const auto& r) {
    for (std::size_t i = 0; i < owned_; ++i) {
      std::size_t entries = 0;
      for_each_entry(r, i, [&](std::uint64_t, double) { ++entries; });
      local_entries_ += entries;
      local_max_row_ = std::max(local_max_row_, entries);
    }
  });
  global_entries_ = all_reduce<std::uint64_t>(rt.comm(), local_entries_, MPI_SUM);
  global_max_row_ = all_reduce<std::uint64_t>(rt.comm(), local_max_row_, MPI_MAX);
  graph_ = Teuchos::rcp(new LaplacianRowGraph<Graph>(*this));
}

template <class Graph>
LaplacianRowMatrix<Graph>::~LaplacianRowMatrix() = default;

template <class Graph>
template <class XView>
void LaplacianRowMatrix<Graph>::load_columns(const XView& x, std::size_t j) const {
  std::span<const double> own(owned_ ? &x(0, j) : nullptr, owned_);
  switch (layout_) {
    case ColumnLayout::owned:
      break;  // the product reads x itself
    case ColumnLayout::dense:
      std::copy(own.begin(), own.end(), values_.begin() + static_cast<std::ptrdiff_t>(begin_));
      all_gather_in_place<double>(g_.runtime().comm(), values_, counts_, displs_);
      break;
    case ColumnLayout::compact:
      import_.gather(own, values_);
      break;
  }
  for (std::size_t s : grounded_slots_) values_[s] = 0.0;  // a grounded column contributes nothing
}

template <class Graph>
void LaplacianRowMatrix<Graph>::apply(const TpetraMultiVector& x, TpetraMultiVector& y, Teuchos::ETransp,
                                      Scalar alpha, Scalar beta) const {
  if (x.getNumVectors() != y.getNumVectors())
    throw MismatchError("LaplacianRowMatrix::apply: X has " + std::to_string(x.getNumVectors()) + " columns, Y " +
                        std::to_string(y.getNumVectors()));
  if (x.getLocalLength() != owned_ || y.getLocalLength() != owned_)
    throw MismatchError("LaplacianRowMatrix::apply: X has " + std::to_string(x.getLocalLength()) + " rows, Y " +
                        std::to_string(y.getLocalLength()) + ", the matrix " + std::to_string(owned_) + " on this rank");
  // Every rank applies the matrix in step: the solvers' iterations stop here
  // when a session's client cancels (Belos and Anasazi pass the error on).
  cancellation_point(g_.runtime().comm());
  // Several columns, nothing grounded, every column owned or all gathered
  // (owned, dense): one sweep over the edges for the whole block (a block
  // eigensolver multiplies blocks of 4), and for dense one all-gather,
  // instead of one of each per column. The block is transient: k values
  // per vertex it reads, for the duration of the product.
  const std::size_t k = x.getNumVectors();
  const bool dense = layout_ == ColumnLayout::dense;
  const std::uint64_t base = dense ? 0 : begin_, span = dense ? g_.vertices() : owned_;
  if ((dense || layout_ == ColumnLayout::owned) && k > 1 && k <= 16 && grounded_columns_.empty() &&
      span * k < static_cast<std::uint64_t>(std::numeric_limits<int>::max())) {
    std::vector<double> block(span * k);
    {  // X's view ends before Y's begins (they may alias): every read below is from the block
      auto xv = x.getLocalViewHost(Tpetra::Access::ReadOnly);
      for (std::size_t i = 0; i < owned_; ++i)
        for (std::size_t j = 0; j < k; ++j) block[(begin_ - base + i) * k + j] = xv(i, j);
    }
    if (dense) {
      std::vector<int> counts(counts_), displs(displs_);
      for (auto& c : counts) c *= static_cast<int>(k);
      for (auto& d : displs) d *= static_cast<int>(k);
      all_gather_in_place<double>(g_.runtime().comm(), block, counts, displs);
    }
    auto multiply = [&](const auto& yv) {
      auto at = [&yv](std::size_t i, std::size_t j) -> double& { return yv(i, j); };
      with_weighted_rows(g_, [&](const auto& r, std::span<const double> weight, std::span<const std::uint64_t> offsets) {
        if constexpr (detail::kMayBeWeighted<Graph>)
          if (!weight.empty()) return laplacian_rows_block<true>(r, weight, offsets, block.data(), base, k, begin_, at, alpha, beta);
        laplacian_rows_block<false>(r, weight, offsets, block.data(), base, k, begin_, at, alpha, beta);
      });
    };
    if (beta == 0.0) multiply(y.getLocalViewHost(Tpetra::Access::OverwriteAll));
    else multiply(y.getLocalViewHost(Tpetra::Access::ReadWrite));
    return;
  }
  const bool aliased = x.aliases(y);
  for (std::size_t j = 0; j < x.getNumVectors(); ++j) {
    // The product reads X's owned values in place while it writes Y; when X
    // and Y are the same vector it reads a copy (and X's view ends first).
    std::optional<decltype(x.getLocalViewHost(Tpetra::Access::ReadOnly))> xv(x.getLocalViewHost(Tpetra::Access::ReadOnly));
    load_columns(*xv, j);
    const double* xj = owned_ ? &(*xv)(0, j) : nullptr;
    std::vector<double> x_copy;
    if (aliased) {
      x_copy.assign(xj, xj + owned_);
      xj = x_copy.data();
      xv.reset();
    }
    auto multiply = [&](const auto& yv) {
      double* yj = owned_ ? &yv(0, j) : nullptr;
      auto run = [&](auto value) {
        with_weighted_rows(g_, [&](const auto& r, std::span<const double> weight, std::span<const std::uint64_t> offsets) {
          if constexpr (detail::kMayBeWeighted<Graph>)
            if (!weight.empty()) return laplacian_rows<true>(r, weight, offsets, xj, value, grounded_rows_, yj, alpha, beta);
          laplacian_rows<false>(r, weight, offsets, xj, value, grounded_rows_, yj, alpha, beta);
        });
      };
      switch (layout_) {
        case ColumnLayout::owned:
          run([xj, begin = begin_](std::uint64_t v) { return xj[v - begin]; });
          break;
        case ColumnLayout::dense:
          run([v0 = values_.data()](std::uint64_t v) { return v0[v]; });
          break;
        case ColumnLayout::compact:
          // Owned columns from x, without the bitmap (on a mesh nearly all).
          run([s = slots_.view(), v0 = values_.data(), xj, begin = begin_, owned = owned_](std::uint64_t v) {
            const std::uint64_t o = v - begin;  // wraps for columns below begin
            return o < owned ? xj[o] : v0[s.slot(v)];
          });
          break;
      }
      // (L x)_i counted w x_g for a grounded owned column g: give it back.
      for (const auto& e : owned_grounded_entries_) yj[e.row] += alpha * e.weight * xj[e.column];
    };
    if (beta == 0.0) multiply(y.getLocalViewHost(Tpetra::Access::OverwriteAll));
    else multiply(y.getLocalViewHost(Tpetra::Access::ReadWrite));
  }
}

template <class Graph>
void LaplacianRowMatrix<Graph>::require_columns(const char* what) const {
  if (!hasColMap())
    throw ConfigError(std::string("this Laplacian RowMatrix was built without Tpetra's column Map and Import "
                                  "(TpetraColumns::omitted), so it has no ") +
                      what +
                      ": build it with TpetraColumns::built for code that asks for them (Ifpack2's Relaxation asks "
                      "for the Import at 2+ ranks; Belos and Ifpack2's Diagonal do not)");
}

template <class Graph>
Teuchos::RCP<const TpetraMap> LaplacianRowMatrix<Graph>::getColMap() const {
  require_columns("column Map");
  return column_map_;
}

template <class Graph>
Teuchos::RCP<const TpetraImport> LaplacianRowMatrix<Graph>::importer() const {
  require_columns("Import");
  return importer_;
}

template <class Graph>
size_t LaplacianRowMatrix<Graph>::TESSERA_TPETRA_LOCAL(NumCols)() const {
  switch (layout_) {
    case ColumnLayout::owned:
      return owned_;
    case ColumnLayout::dense:
      return g_.vertices();
    case ColumnLayout::compact:
      break;
  }
  return owned_ + ghost_count_;
}

template <class Graph>
LocalOrdinal LaplacianRowMatrix<Graph>::local_column(std::uint64_t v) const {
  const std::uint64_t o = v - begin_;  // wraps for columns below begin
  switch (layout_) {
    case ColumnLayout::owned:
      break;
    case ColumnLayout::dense:  // the replicated range: a column is its id
      return v < g_.vertices() ? static_cast<LocalOrdinal>(v) : -1;
    case ColumnLayout::compact:  // owned, then the ghosts in id order
      if (o >= owned_) return slots_.contains(v) ? static_cast<LocalOrdinal>(owned_ + slots_.slot(v)) : -1;
      break;
  }
  return o < owned_ ? static_cast<LocalOrdinal>(o) : -1;
}

template <class Graph>
void LaplacianRowMatrix<Graph>::check_local_row(LocalOrdinal row) const {
  if (row < 0 || static_cast<std::size_t>(row) >= owned_)
    throw RangeError("local row " + std::to_string(row) + " is outside [0, " + std::to_string(owned_) + ")");
}

template <class Graph>
LocalOrdinal LaplacianRowMatrix<Graph>::local_row_of(GlobalOrdinal row) const {
  if (row < 0 || !g_.vertex_map().is_local(static_cast<std::uint64_t>(row))) return -1;
  return static_cast<LocalOrdinal>(static_cast<std::uint64_t>(row) - begin_);
}

template <class Graph>
size_t LaplacianRowMatrix<Graph>::getNumEntriesInLocalRow(LocalOrdinal row) const {
  if (row < 0 || static_cast<std::size_t>(row) >= owned_) return Teuchos::OrdinalTraits<size_t>::invalid();
  std::size_t n = 0;
  for_each_entry(static_cast<std::size_t>(row), [&](std::uint64_t, double) { ++n; });
  return n;
}

template <class Graph>
size_t LaplacianRowMatrix<Graph>::getNumEntriesInGlobalRow(GlobalOrdinal row) const {
  LocalOrdinal local = local_row_of(row);
  return local < 0 ? Teuchos::OrdinalTraits<size_t>::invalid() : getNumEntriesInLocalRow(local);
}

namespace {
// Copies row `row` of `m` through `put(k, global column, value)` after
// checking the caller's capacity, Tpetra's way: length = the row's length,
// std::runtime_error (a RangeError) when the buffers are shorter.
template <class Graph, class Put>
void copy_row(const LaplacianRowMatrix<Graph>& m, LocalOrdinal row, std::size_t capacity, size_t& length, Put&& put) {
  length = m.getNumEntriesInLocalRow(row);
  if (length > capacity)
    throw RangeError("row copy of local row " + std::to_string(row) + " needs " + std::to_string(length) +
                     " entries, the buffers hold " + std::to_string(capacity));
  std::size_t k = 0;
  m.for_each_entry(static_cast<std::size_t>(row), [&](std::uint64_t c, double v) { put(k++, c, v); });
}
}  // namespace

template <class Graph>
void LaplacianRowMatrix<Graph>::getLocalRowCopy(LocalOrdinal row, nonconst_local_inds_host_view_type& columns,
                                        nonconst_values_host_view_type& values, size_t& length) const {
  check_local_row(row);
  copy_row(*this, row, std::min(columns.extent(0), values.extent(0)), length, [&](std::size_t k, std::uint64_t c, double v) {
    columns(k) = local_column(c);
    values(k) = v;
  });
}

template <class Graph>
void LaplacianRowMatrix<Graph>::getGlobalRowCopy(GlobalOrdinal row, nonconst_global_inds_host_view_type& columns,
                                         nonconst_values_host_view_type& values, size_t& length) const {
  LocalOrdinal local = local_row_of(row);
  if (local < 0) {
    length = Teuchos::OrdinalTraits<size_t>::invalid();
    return;
  }
  copy_row(*this, local, std::min(columns.extent(0), values.extent(0)), length, [&](std::size_t k, std::uint64_t c, double v) {
    columns(k) = static_cast<GlobalOrdinal>(c);
    values(k) = v;
  });
}

template <class Graph>
void LaplacianRowMatrix<Graph>::no_views() const {
  throw ConfigError("the Laplacian RowMatrix has no row views (its values are computed from the graph's arrays and its columns "
                    "are global ids there, 4 or 8 bytes wide): use getLocalRowCopy / getGlobalRowCopy (supportsRowViews() is false)");
}
template <class Graph>
void LaplacianRowMatrix<Graph>::getGlobalRowView(GlobalOrdinal, global_inds_host_view_type&, values_host_view_type&) const {
  no_views();
}
template <class Graph>
void LaplacianRowMatrix<Graph>::getLocalRowView(LocalOrdinal, local_inds_host_view_type&, values_host_view_type&) const {
  no_views();
}

#ifdef TPETRA_ENABLE_DEPRECATED_CODE
template <class Graph>
void LaplacianRowMatrix<Graph>::getLocalRowCopy(LocalOrdinal row, const Teuchos::ArrayView<LocalOrdinal>& columns,
                                        const Teuchos::ArrayView<Scalar>& values, size_t& length) const {
  check_local_row(row);
  copy_row(*this, row, static_cast<std::size_t>(std::min(columns.size(), values.size())), length,
           [&](std::size_t k, std::uint64_t c, double v) {
             columns[static_cast<Teuchos::Ordinal>(k)] = local_column(c);
             values[static_cast<Teuchos::Ordinal>(k)] = v;
           });
}
template <class Graph>
void LaplacianRowMatrix<Graph>::getGlobalRowCopy(GlobalOrdinal row, const Teuchos::ArrayView<GlobalOrdinal>& columns,
                                         const Teuchos::ArrayView<Scalar>& values, size_t& length) const {
  LocalOrdinal local = local_row_of(row);
  if (local < 0) {
    length = Teuchos::OrdinalTraits<size_t>::invalid();
    return;
  }
  copy_row(*this, local, static_cast<std::size_t>(std::min(columns.size(), values.size())), length,
           [&](std::size_t k, std::uint64_t c, double v) {
             columns[static_cast<Teuchos::Ordinal>(k)] = static_cast<GlobalOrdinal>(c);
             values[static_cast<Teuchos::Ordinal>(k)] = v;
           });
}
template <class Graph>
void LaplacianRowMatrix<Graph>::getGlobalRowView(GlobalOrdinal, Teuchos::ArrayView<const GlobalOrdinal>&,
                                         Teuchos::ArrayView<const Scalar>&) const {
  no_views();
}
template <class Graph>
void LaplacianRowMatrix<Graph>::getLocalRowView(LocalOrdinal, Teuchos::ArrayView<const LocalOrdinal>&,
                                        Teuchos::ArrayView<const Scalar>&) const {
  no_views();
}
#endif

template <class Graph>
void LaplacianRowMatrix<Graph>::getLocalDiagCopy(TpetraVector& diagonal) const {
  if (diagonal.getLocalLength() != owned_)
    throw MismatchError("getLocalDiagCopy: the vector has " + std::to_string(diagonal.getLocalLength()) +
                        " local entries, the matrix " + std::to_string(owned_) + " rows");
  auto d = diagonal.getLocalViewHost(Tpetra::Access::OverwriteAll);
  graph::with_rows(g_, [&](const auto& r) {
    for (std::size_t i = 0; i < owned_; ++i) {
      d(i, 0) = 0.0;
      for_each_entry(r, i, [&](std::uint64_t c, double v) {
        if (c == begin_ + i) d(i, 0) += v;
      });
    }
  });
}

template <class Graph>
void LaplacianRowMatrix<Graph>::leftScale(const TpetraVector&) {
  throw ConfigError("the Laplacian RowMatrix does not support leftScale: it reads the graph's arrays and never writes "
                    "them (they may be another process's read-only mapping); scale a CrsMatrix copy instead");
}
template <class Graph>
void LaplacianRowMatrix<Graph>::rightScale(const TpetraVector&) {
  throw ConfigError("the Laplacian RowMatrix does not support rightScale: it reads the graph's arrays and never writes "
                    "them (they may be another process's read-only mapping); scale a CrsMatrix copy instead");
}

template <class Graph>
typename LaplacianRowMatrix<Graph>::mag_type LaplacianRowMatrix<Graph>::getFrobeniusNorm() const {
  double sum = 0;
  graph::with_rows(g_, [&](const auto& r) {
    for (std::size_t i = 0; i < owned_; ++i) for_each_entry(r, i, [&](std::uint64_t, double v) { sum += v * v; });
  });
  return std::sqrt(all_reduce(g_.runtime().comm(), sum, MPI_SUM));
}

template <class Graph>
std::size_t LaplacianRowMatrix<Graph>::extra_memory_bytes() const {
  std::size_t bytes = values_.capacity() * sizeof(double) + slots_.memory_bytes() +
                      import_.memory_bytes() + (counts_.capacity() + displs_.capacity()) * sizeof(int) +
                      grounded_columns_.capacity() * sizeof(std::uint64_t) +
                      (grounded_slots_.capacity() + grounded_rows_.capacity()) * sizeof(std::size_t) +
                      owned_grounded_entries_.capacity() * sizeof(GroundedEntry);
  // Tpetra's id list and the hash table of the ghost part (its layout: an
  // estimate), when the column map was built.
  if (layout_ == ColumnLayout::compact && !column_map_.is_null())
    bytes += (owned_ + ghost_count_) * sizeof(GlobalOrdinal) + ghost_count_ * 32;
  if (importer_)  // the Import's lists: remote and export local ids, export ranks, permutations
    bytes += (importer_->getNumRemoteIDs() + 2 * importer_->getNumExportIDs()) * sizeof(LocalOrdinal) +
             2 * importer_->getNumPermuteIDs() * sizeof(LocalOrdinal);
  return bytes;
}

RowMatrixMemory row_matrix_memory(const graph::EdgeList& g) {
  if (!Session::active())
    throw ConfigError("row_matrix_memory needs Kokkos and Tpetra running: create a tessera::trilinos::Session first");
  Runtime& rt = g.runtime();
  auto comm = teuchos_comm(rt);
  const auto n = static_cast<Tpetra::global_size_t>(g.vertices());
  auto rows = Teuchos::rcp(new TpetraMap(n, g.local_vertices(), 0, comm));
  TpetraMultiVector x(rows, 1, false), y(rows, 1, false);  // before the meter: not the matrix's
  x.putScalar(1.0);
  y.putScalar(0.0);  // its pages touched now: the meter must not count them
  RowMatrixMemory out;
  std::optional<AnonymousMemoryMeter> meter(std::in_place, rt.comm());
  EdgeListRowMatrix m(g);
  m.apply(x, y);
  out.total_bytes = meter->growth_bytes();
  const auto layout = m.column_layout();
  out.layout = layout == EdgeListRowMatrix::ColumnLayout::owned   ? "owned"
               : layout == EdgeListRowMatrix::ColumnLayout::dense ? "dense"
                                                                   : "compact";
  // Tpetra's part, built again the same way from fresh maps: the column Map
  // and the Import to it.
  std::vector<std::uint64_t> ghosts;
  if (layout == EdgeListRowMatrix::ColumnLayout::compact) {
    auto list = m.getColMap()->TESSERA_TPETRA_LOCAL(ElementList)();  // an ArrayView in 13.2, a View from 13.4
    for (auto k = static_cast<std::size_t>(g.local_vertices()); k < static_cast<std::size_t>(list.size()); ++k)
      ghosts.push_back(static_cast<std::uint64_t>(list[k]));
  }
  meter.emplace(rt.comm());
  {
    auto row_map = Teuchos::rcp(new TpetraMap(n, g.local_vertices(), 0, comm));
    Teuchos::RCP<const TpetraImport> import;
    if (layout == EdgeListRowMatrix::ColumnLayout::dense)
      import = Teuchos::rcp(
          new TpetraImport(row_map, Teuchos::rcp(new TpetraMap(n, 0, comm, Tpetra::LocallyReplicated))));
    else if (layout == EdgeListRowMatrix::ColumnLayout::compact)
      import = import_to_ghosts(row_map, ghosts, g.vertex_map());
    out.tpetra_bytes = meter->growth_bytes();
  }
  meter.emplace(rt.comm());
  {
    EdgeListRowMatrix lean(g, {}, TpetraColumns::omitted);
    lean.apply(x, y);
    out.omitted_total_bytes = meter->growth_bytes();
  }
  return out;
}

// The graph: the matrix's structure, row for row.
template <class Graph>
Teuchos::RCP<const TpetraComm> LaplacianRowGraph<Graph>::getComm() const { return m_.getComm(); }
template <class Graph>
Teuchos::RCP<const TpetraMap> LaplacianRowGraph<Graph>::getRowMap() const { return m_.getRowMap(); }
template <class Graph>
Teuchos::RCP<const TpetraMap> LaplacianRowGraph<Graph>::getColMap() const { return m_.getColMap(); }
template <class Graph>
bool LaplacianRowGraph<Graph>::hasColMap() const { return m_.hasColMap(); }
template <class Graph>
Teuchos::RCP<const TpetraMap> LaplacianRowGraph<Graph>::getDomainMap() const { return m_.getDomainMap(); }
template <class Graph>
Teuchos::RCP<const TpetraMap> LaplacianRowGraph<Graph>::getRangeMap() const { return m_.getRangeMap(); }
template <class Graph>
Teuchos::RCP<const TpetraImport> LaplacianRowGraph<Graph>::getImporter() const { return m_.importer(); }
template <class Graph>
Tpetra::global_size_t LaplacianRowGraph<Graph>::getGlobalNumRows() const { return m_.getGlobalNumRows(); }
template <class Graph>
Tpetra::global_size_t LaplacianRowGraph<Graph>::getGlobalNumCols() const { return m_.getGlobalNumCols(); }
template <class Graph>
size_t LaplacianRowGraph<Graph>::TESSERA_TPETRA_LOCAL(NumRows)() const { return m_.TESSERA_TPETRA_LOCAL(NumRows)(); }
template <class Graph>
size_t LaplacianRowGraph<Graph>::TESSERA_TPETRA_LOCAL(NumCols)() const { return m_.TESSERA_TPETRA_LOCAL(NumCols)(); }
template <class Graph>
Tpetra::global_size_t LaplacianRowGraph<Graph>::getGlobalNumEntries() const { return m_.getGlobalNumEntries(); }
template <class Graph>
size_t LaplacianRowGraph<Graph>::TESSERA_TPETRA_LOCAL(NumEntries)() const { return m_.TESSERA_TPETRA_LOCAL(NumEntries)(); }
template <class Graph>
size_t LaplacianRowGraph<Graph>::getNumEntriesInGlobalRow(GlobalOrdinal row) const { return m_.getNumEntriesInGlobalRow(row); }
template <class Graph>
size_t LaplacianRowGraph<Graph>::getNumEntriesInLocalRow(LocalOrdinal row) const { return m_.getNumEntriesInLocalRow(row); }
template <class Graph>
size_t LaplacianRowGraph<Graph>::getGlobalMaxNumRowEntries() const { return m_.getGlobalMaxNumRowEntries(); }
template <class Graph>
size_t LaplacianRowGraph<Graph>::TESSERA_TPETRA_LOCAL(MaxNumRowEntries)() const {
  return m_.TESSERA_TPETRA_LOCAL(MaxNumRowEntries)();
}

template <class Graph>
void LaplacianRowGraph<Graph>::getLocalRowCopy(const LocalOrdinal row, nonconst_local_inds_host_view_type& columns,
                                       size_t& length) const {
  Kokkos::View<double*, Kokkos::HostSpace> values("values", columns.extent(0));
  nonconst_local_inds_host_view_type c = columns;
  typename TpetraRowMatrix::nonconst_values_host_view_type v = values;
  m_.getLocalRowCopy(row, c, v, length);
}
template <class Graph>
void LaplacianRowGraph<Graph>::getGlobalRowCopy(const GlobalOrdinal row, nonconst_global_inds_host_view_type& columns,
                                        size_t& length) const {
  Kokkos::View<double*, Kokkos::HostSpace> values("values", columns.extent(0));
  nonconst_global_inds_host_view_type c = columns;
  typename TpetraRowMatrix::nonconst_values_host_view_type v = values;
  m_.getGlobalRowCopy(row, c, v, length);
}
template <class Graph>
void LaplacianRowGraph<Graph>::getLocalRowView(const LocalOrdinal, local_inds_host_view_type&) const {
  throw ConfigError("the Laplacian RowGraph has no row views: use getLocalRowCopy");
}
template <class Graph>
void LaplacianRowGraph<Graph>::getGlobalRowView(const GlobalOrdinal, global_inds_host_view_type&) const {
  throw ConfigError("the Laplacian RowGraph has no row views: use getGlobalRowCopy");
}
#ifdef TPETRA_ENABLE_DEPRECATED_CODE
template <class Graph>
void LaplacianRowGraph<Graph>::getLocalRowCopy(LocalOrdinal row, const Teuchos::ArrayView<LocalOrdinal>& columns,
                                       size_t& length) const {
  std::vector<double> values(static_cast<std::size_t>(columns.size()));
  m_.getLocalRowCopy(row, columns, Teuchos::ArrayView<Scalar>(values), length);
}
template <class Graph>
void LaplacianRowGraph<Graph>::getGlobalRowCopy(GlobalOrdinal row, const Teuchos::ArrayView<GlobalOrdinal>& columns,
                                        size_t& length) const {
  std::vector<double> values(static_cast<std::size_t>(columns.size()));
  m_.getGlobalRowCopy(row, columns, Teuchos::ArrayView<Scalar>(values), length);
}
#endif

template <class Graph>
std::vector<std::uint8_t> reached_from(const LaplacianRowMatrix<Graph>& m, std::span<const std::uint64_t> seeds) {
  const Graph& g = m.graph();
  MPI_Comm comm = g.runtime().comm();
  if (m.grounded_anywhere())  // the same list on every rank: every rank throws
    throw ConfigError("reached_from needs an ungrounded Laplacian: grounded rows and columns stop the walk");
  const std::uint64_t begin = g.local_vertex_begin();
  const std::size_t local = g.local_vertices();
  std::vector<std::uint8_t> reached(local, 0);
  for (auto s : seeds)
    if (s - begin < local) reached[static_cast<std::size_t>(s - begin)] = 1;
  TpetraMultiVector x(m.getDomainMap(), 1, false), y(m.getRangeMap(), 1, false);
  for (;;) {
    {
      auto xv = x.getLocalViewHost(Tpetra::Access::OverwriteAll);
      for (std::size_t i = 0; i < local; ++i) xv(i, 0) = reached[i];
    }
    m.apply(x, y);
    // An unreached row reads y_i = -(sum of its reached neighbours' weights):
    // positive weights and zeros only, so it is negative exactly when some
    // neighbour is reached (no rounding question).
    std::uint64_t added = 0;
    {
      auto yv = y.getLocalViewHost(Tpetra::Access::ReadOnly);
      for (std::size_t i = 0; i < local; ++i)
        if (!reached[i] && yv(i, 0) < 0) reached[i] = 1, ++added;
    }
    if (all_reduce<std::uint64_t>(comm, added, MPI_SUM) == 0) return reached;
  }
}

// The two graph forms, compiled here once (the header declares them extern).
template class LaplacianRowMatrix<graph::EdgeList>;
template class LaplacianRowMatrix<graph::PackedGraph>;
template class LaplacianRowGraph<graph::EdgeList>;
template class LaplacianRowGraph<graph::PackedGraph>;
template std::vector<std::uint8_t> reached_from(const LaplacianRowMatrix<graph::EdgeList>&,
                                                std::span<const std::uint64_t>);
template std::vector<std::uint8_t> reached_from(const LaplacianRowMatrix<graph::PackedGraph>&,
                                                std::span<const std::uint64_t>);

}  // namespace tessera::trilinos
