#include "tessera/linalg/edge_list_matrix.hpp"

#include <algorithm>
#include <cmath>
#include <variant>

#include "tessera/array/ghost_slots.hpp"
#include "tessera/runtime/collective.hpp"
#include "tessera/runtime/wait.hpp"

namespace tessera::linalg {

const char* to_string(ColumnMode mode) noexcept {
  switch (mode) {
    case ColumnMode::direct: return "direct";
    case ColumnMode::dense: return "dense";
    case ColumnMode::bitmap: return "bitmap";
    case ColumnMode::hash: return "hash";
  }
  return "unknown";
}

namespace {

// The column strategies. Each offers
//   load(x)         makes every column's value readable, returns value(column);
//   accumulator(y)  returns add(column, v), adding v to the column's entry of
//                   A^T x (owned columns straight into y);
//   finish(y)       sends the remote columns' contributions home into y.
// load and finish are collective, and every strategy enters its collective
// on every rank whatever its share of rows or ghosts: a rank with nothing to
// read may still own values others read.

struct DirectColumns {
  static constexpr ColumnMode kMode = ColumnMode::direct;
  std::uint64_t base = 0;
  Import import;  // no ghosts here; it serves the ranks that read ours

  auto load(std::span<const double> x) const {
    import.gather(x, {});
    return [xl = x.data(), base = base](std::uint64_t c) { return xl[c - base]; };
  }
  auto accumulator(std::span<double> y) const {
    return [yl = y.data(), base = base](std::uint64_t c, double v) { yl[c - base] += v; };
  }
  void finish(std::span<double> y) const { import.scatter_add({}, y); }
  std::size_t memory_bytes() const { return import.memory_bytes(); }
};

struct DenseColumns {
  static constexpr ColumnMode kMode = ColumnMode::dense;
  MPI_Comm comm = MPI_COMM_NULL;
  std::uint64_t base = 0;
  std::vector<int> counts, displs;     // every rank's rows
  std::uint64_t columns = 0;
  mutable std::vector<double> values;  // every column by id; empty before the first product and between released ones

  auto load(std::span<const double> x) const {
    values.resize(columns);
    std::copy(x.begin(), x.end(), values.begin() + static_cast<std::ptrdiff_t>(base));
    all_gather_in_place<double>(comm, values, counts, displs);
    return [v = values.data()](std::uint64_t c) { return v[c]; };
  }
  auto accumulator(std::span<double>) const {
    values.assign(columns, 0.0);
    return [v = values.data()](std::uint64_t c, double x) { v[c] += x; };
  }
  void finish(std::span<double> y) const {  // each owner receives its columns' sums
    std::vector<double> mine(y.size());
    reduce_scatter_sum<double>(comm, values, mine, counts);
    for (std::size_t i = 0; i < y.size(); ++i) y[i] += mine[i];
  }
  std::size_t memory_bytes() const {
    return values.capacity() * sizeof(double) + (counts.capacity() + displs.capacity()) * sizeof(int);
  }
  void release() const { std::vector<double>().swap(values); }
};

// Owned columns straight from x (or into y); a ghost's value at its slot
// among the ghosts (GhostSlots: a bitmap with running counts over the span
// of the ghost ids, 0.25 byte per id spanned).
struct BitmapColumns {
  static constexpr ColumnMode kMode = ColumnMode::bitmap;
  GhostSlots slots;
  std::uint64_t base = 0, local = 0;   // the owned columns
  Import import;                       // ghost values in id order
  mutable std::vector<double> values;  // one per ghost, in id order

  // The owned test first: on a mesh nearly every column is owned, and a word
  // load and popcount per edge made the product slower than a CRS copy.
  auto load(std::span<const double> x) const {
    import.gather(x, values);
    return [xl = x.data(), base = base, local = local, s = slots.view(), v = values.data()](std::uint64_t c) {
      const std::uint64_t o = c - base;  // wraps for columns below base
      return o < local ? xl[o] : v[s.slot(c)];
    };
  }
  auto accumulator(std::span<double> y) const {
    std::fill(values.begin(), values.end(), 0.0);
    return [yl = y.data(), base = base, local = local, s = slots.view(), v = values.data()](std::uint64_t c, double x) {
      const std::uint64_t o = c - base;
      if (o < local)
        yl[o] += x;
      else
        v[s.slot(c)] += x;
    };
  }
  void finish(std::span<double> y) const { import.scatter_add(values, y); }
  std::size_t memory_bytes() const {
    return slots.memory_bytes() + import.memory_bytes() + values.capacity() * sizeof(double);
  }
};

struct HashColumns {
  static constexpr ColumnMode kMode = ColumnMode::hash;
  struct Slot {
    std::uint64_t column;
    double value;
  };
  static constexpr std::uint64_t kEmpty = ~0ull;
  std::uint64_t base = 0, local = 0;
  GhostSet ghosts;
  Import import;
  mutable std::vector<double> ghost_values;  // in ghosts order, as Import moves them
  mutable std::vector<Slot> table;
  std::vector<std::uint32_t> slot_of_ghost;
  unsigned shift = 63;
  std::size_t mask = 0;

  static std::size_t home(std::uint64_t column, unsigned shift) noexcept {
    return static_cast<std::size_t>((column * 0x9e3779b97f4a7c15ull) >> shift);
  }
  HashColumns(const Map& rows, GhostSet ghost_set) : base(rows.local_begin()), local(rows.local_size()) {
    import = Import(rows, ghost_set);
    ghosts = std::move(ghost_set);
    ghost_values.resize(ghosts.size());
    std::size_t slots = 2;
    unsigned bits = 1;
    while (slots < 2 * ghosts.size()) slots *= 2, ++bits;
    table.assign(slots, Slot{kEmpty, 0.0});
    shift = 64 - bits;
    mask = slots - 1;
    slot_of_ghost.resize(ghosts.size());
    for (std::size_t j = 0; j < ghosts.size(); ++j) {
      std::uint64_t c = ghosts.ids()[j];
      std::size_t h = home(c, shift);
      while (table[h].column != kEmpty) h = (h + 1) & mask;
      table[h].column = c;
      slot_of_ghost[j] = static_cast<std::uint32_t>(h);
    }
  }
  auto load(std::span<const double> x) const {
    import.gather(x, ghost_values);
    for (std::size_t j = 0; j < ghost_values.size(); ++j) table[slot_of_ghost[j]].value = ghost_values[j];
    return [xl = x.data(), base = base, local = local, t = table.data(), shift = shift, mask = mask](std::uint64_t c) {
      std::uint64_t o = c - base;  // wraps for columns below base
      return o < local ? xl[o] : probe(t, c, shift, mask);
    };
  }
  // Out of line: with the probe loop inlined, the per-edge loop of an owned
  // column (nearly every edge of a mesh) ran slower.
  [[gnu::noinline]] static double probe(const Slot* t, std::uint64_t c, unsigned shift, std::size_t mask) noexcept {
    std::size_t h = home(c, shift);
    while (t[h].column != c) h = (h + 1) & mask;
    return t[h].value;
  }
  auto accumulator(std::span<double> y) const {
    std::fill(ghost_values.begin(), ghost_values.end(), 0.0);
    return [yl = y.data(), base = base, local = local, this](std::uint64_t c, double v) {
      std::uint64_t o = c - base;
      if (o < local)
        yl[o] += v;
      else
        ghost_values[ghosts.position(c)] += v;
    };
  }
  void finish(std::span<double> y) const { import.scatter_add(ghost_values, y); }
  std::size_t memory_bytes() const {
    return ghosts.memory_bytes() + import.memory_bytes() + ghost_values.capacity() * sizeof(double) +
           table.capacity() * sizeof(Slot) + slot_of_ghost.capacity() * sizeof(std::uint32_t);
  }
};

// Only the dense array is worth freeing: the other modes hold O(ghosts).
template <class ColumnStrategy>
void release_if_asked(const ColumnStrategy& columns, ProductBuffers buffers) {
  if constexpr (requires { columns.release(); })
    if (buffers == ProductBuffers::released) columns.release();
}

void prepare_output(Vector& y, double beta) {
  if (beta == 0.0)
    y.fill(0.0);
  else if (beta != 1.0)
    y.scale(beta);
}

// y += alpha A x, row by row over the graph's row offsets: the product
// streams only the destination (and weight) array, 4 or 8 bytes per edge
// where a CRS copy streams 12. Called once per id width (with_dst), so the
// loops index the destinations at their stored width.
template <class Id, class ColumnValue>
void multiply_rows(const Id* d, const std::uint64_t* start, std::span<const double> w, std::span<double> y,
                   double alpha, ColumnValue value) {
  for (std::size_t i = 0; i < y.size(); ++i) {
    double sum = 0;
    if (w.empty())
      for (std::uint64_t k = start[i]; k < start[i + 1]; ++k) sum += value(d[k]);
    else
      for (std::uint64_t k = start[i]; k < start[i + 1]; ++k) sum += w[k] * value(d[k]);
    y[i] += alpha * sum;
  }
}

// add(column, alpha A[row][column] x[row]) for every local entry.
template <class Id, class Add>
void multiply_columns(const Id* d, const std::uint64_t* start, std::span<const double> w, std::span<const double> x,
                      double alpha, Add add) {
  for (std::size_t i = 0; i < x.size(); ++i)
    for (std::uint64_t k = start[i]; k < start[i + 1]; ++k) add(d[k], alpha * (w.empty() ? 1.0 : w[k]) * x[i]);
}

}  // namespace

struct EdgeListMatrix::Columns {
  std::variant<DirectColumns, DenseColumns, BitmapColumns, HashColumns> strategy;
};

EdgeListMatrix::EdgeListMatrix(const graph::EdgeList& graph, std::optional<ColumnMode> forced) : graph_(graph) {
  const Map& rows = graph.vertex_map();
  GhostSet ghosts = graph.with_dst([&](auto dst) {
    return GhostSet::remote_of(dst, rows.local_begin(), rows.local_end(), graph.vertices());
  });
  ghost_count_ = ghosts.size();
  const std::uint64_t n = graph.vertices(), local = rows.local_size();
  const bool dense_fits = n < (1ull << 31);  // MPI counts and displacements are int
  ColumnMode mode;
  if (forced) {
    mode = *forced;
    agree(rows.comm(), [&] {
      if (mode == ColumnMode::direct && ghost_count_ > 0)
        throw ConfigError("column mode direct: rank " + std::to_string(rows.rank()) + " reads " +
                          std::to_string(ghost_count_) + " columns owned by other ranks; use dense, bitmap or hash");
      if (mode == ColumnMode::dense && !dense_fits)
        throw ConfigError("column mode dense: " + std::to_string(n) + " columns exceed 2^31; use bitmap or hash");
    });
  } else {
    // Dense mode is collective (an allgather), so every rank must choose it.
    // Only when a rank reads at least half of the columns it does not own
    // (a Kronecker graph on a few ranks): its 8 bytes per vertex then cost
    // little more than the ghosts' own, and no lookup is needed. A mesh reads
    // few of them, and dense there adds far more memory than its ghosts need.
    int want_dense = ghost_count_ > 0 && 2 * ghost_count_ >= n - local && dense_fits;
    if (all_reduce(rows.comm(), want_dense, MPI_MIN))
      mode = ColumnMode::dense;
    else if (ghost_count_ == 0)
      mode = ColumnMode::direct;
    else if (GhostSlots::bytes_for(ghosts.ids(), rows.local_begin(), rows.local_end()) <=
             ghost_count_ * sizeof(HashColumns::Slot))
      mode = ColumnMode::bitmap;
    else
      mode = ColumnMode::hash;
  }

  columns_ = std::make_unique<Columns>();
  switch (mode) {
    case ColumnMode::direct:
      columns_->strategy = DirectColumns{rows.local_begin(), Import(rows, ghosts)};
      break;
    case ColumnMode::dense: {
      DenseColumns c;
      c.comm = rows.comm();
      c.base = rows.local_begin();
      c.columns = n;  // the array itself at the first product (or each, when released)
      const auto& r = rows.distribution();
      for (int p = 0; p < r.ranks(); ++p) {
        c.counts.push_back(static_cast<int>(r.count(p)));
        c.displs.push_back(static_cast<int>(r.begin(p)));
      }
      columns_->strategy = std::move(c);
      break;
    }
    case ColumnMode::bitmap: {
      // The ghost list is not kept: Import fills `values` in its order.
      BitmapColumns c;
      c.base = rows.local_begin();
      c.local = local;
      c.slots = GhostSlots(ghosts.ids(), c.base, c.base + local);
      c.values.resize(ghost_count_);
      c.import = Import(rows, ghosts);
      columns_->strategy = std::move(c);
      break;
    }
    case ColumnMode::hash:
      columns_->strategy = HashColumns(rows, std::move(ghosts));
      break;
  }
}

EdgeListMatrix::~EdgeListMatrix() = default;

ColumnMode EdgeListMatrix::column_mode() const noexcept {
  return std::visit([](const auto& c) { return std::decay_t<decltype(c)>::kMode; }, columns_->strategy);
}

void EdgeListMatrix::apply(const Vector& x, Vector& y, double alpha, double beta) const {
  prepare_output(y, beta);
  std::visit(
      [&](const auto& columns) {
        auto value = columns.load(x.local());
        graph_.with_dst([&](auto dst) {
          multiply_rows(dst.data(), graph_.row_offsets().data(), graph_.local_weight(), y.local(), alpha, value);
        });
        release_if_asked(columns, buffers_);
      },
      columns_->strategy);
}

void EdgeListMatrix::apply_transpose(const Vector& x, Vector& y, double alpha, double beta) const {
  prepare_output(y, beta);
  std::visit(
      [&](const auto& columns) {
        auto add = columns.accumulator(y.local());
        graph_.with_dst([&](auto dst) {
          multiply_columns(dst.data(), graph_.row_offsets().data(), graph_.local_weight(), x.local(), alpha, add);
        });
        columns.finish(y.local());
        release_if_asked(columns, buffers_);
      },
      columns_->strategy);
}

void EdgeListMatrix::diagonal(Vector& out) const {
  auto o = out.local();
  const std::uint64_t base = graph_.local_vertex_begin();
  auto offsets = graph_.row_offsets();
  auto w = graph_.local_weight();
  graph_.with_dst([&](auto dst) {
    for (std::size_t i = 0; i < o.size(); ++i) {
      // Rows are sorted: the self loops of row i are one run.
      auto first = dst.begin() + static_cast<std::ptrdiff_t>(offsets[i]);
      auto last = dst.begin() + static_cast<std::ptrdiff_t>(offsets[i + 1]);
      auto [lo, hi] = std::equal_range(first, last, base + i);
      o[i] = 0;
      for (auto k = static_cast<std::size_t>(lo - dst.begin()); k < static_cast<std::size_t>(hi - dst.begin()); ++k)
        o[i] += w.empty() ? 1.0 : w[k];
    }
  });
}

void EdgeListMatrix::row_sums(Vector& out) const {
  auto o = out.local();
  auto offsets = graph_.row_offsets();
  auto w = graph_.local_weight();
  for (std::size_t i = 0; i < o.size(); ++i) {
    if (w.empty()) {
      o[i] = static_cast<double>(offsets[i + 1] - offsets[i]);
    } else {
      double sum = 0;
      for (std::uint64_t k = offsets[i]; k < offsets[i + 1]; ++k) sum += w[k];
      o[i] = sum;
    }
  }
}

double EdgeListMatrix::frobenius_norm() const {
  double sum = 0;
  auto w = graph_.local_weight();
  if (w.empty())
    sum = static_cast<double>(graph_.local_arcs());
  else
    for (double v : w) sum += v * v;
  return std::sqrt(all_reduce(row_map().comm(), sum, MPI_SUM));
}

std::size_t EdgeListMatrix::copy_row(std::uint64_t local_row, std::span<std::uint64_t> columns,
                                     std::span<double> values) const {
  if (local_row >= graph_.local_vertices())
    throw RangeError("local row " + std::to_string(local_row) + " is outside [0, " +
                     std::to_string(graph_.local_vertices()) + ")");
  auto offsets = graph_.row_offsets();
  const auto first = static_cast<std::size_t>(offsets[local_row]);
  const auto length = static_cast<std::size_t>(offsets[local_row + 1]) - first;
  check_row_buffers(length, columns, values);
  // Widened to 64-bit global ids whatever the graph's id width.
  graph_.with_dst([&](auto dst) {
    auto row = dst.subspan(first, length);
    std::copy(row.begin(), row.end(), columns.begin());
  });
  auto w = graph_.local_weight();
  if (w.empty())
    std::fill_n(values.begin(), length, 1.0);
  else
    std::copy_n(w.begin() + static_cast<std::ptrdiff_t>(first), length, values.begin());
  return length;
}

// The graph's row offsets belong to the graph, not to the matrix.
std::size_t EdgeListMatrix::extra_memory_bytes() const {
  return std::visit([](const auto& c) { return c.memory_bytes(); }, columns_->strategy);
}

}  // namespace tessera::linalg
