#include "tessera/graph/edge_list.hpp"

#include <algorithm>
#include <array>
#include <bit>
#include <cstdlib>
#include <exception>
#include <limits>
#include <type_traits>

#include "tessera/comm/aggregators.hpp"
#include "tessera/comm/bulk_exchange.hpp"
#include "tessera/graph/arc_hash.hpp"
#include "tessera/runtime/cancellation.hpp"
#include "tessera/runtime/collective.hpp"
#include "tessera/runtime/memory.hpp"
#include "tessera/runtime/vector_clones.hpp"
#include "tessera/storage/disk_tier.hpp"
#include "build_parts.hpp"
#include "row_blocks.hpp"

namespace tessera::graph {

StorageOptions array_storage(const StorageOptions& graph, const std::string& suffix) {
  StorageOptions o = graph;
  if (o.kind == StorageKind::shared && !o.name.empty()) o.name += "-" + suffix;
  return o;
}

namespace {

using namespace build_parts;

// The build, in the final arrays: a first pass over the source counts the
// arcs out of every vertex (a degree array, 8 bytes a vertex); the vertex
// ranges and row offsets follow from the counts; the destination (and
// weight) arrays are allocated at that size, at the graph's id width; a
// second pass sends every arc to its source's owner, which writes it in
// place; the rows are then sorted, cleaned and compacted in place, and the
// arrays shrunk to what was kept. Beyond the final arrays a build holds the
// arcs that cleaning drops (until the shrink), O(vertices) of counts and
// cursors, and the aggregation buffers: never a list of the edges.
EdgeList build_from(Runtime& rt, std::uint64_t n, bool directed, const EdgeSource& source, const BuildOptions& opt) {
  const bool sym = opt.symmetrize, drop_loops = opt.drop_self_loops;
  const IdWidth width = opt.id_width ? *opt.id_width : id_width_for(n);
  if (width == IdWidth::narrow && n > (std::uint64_t{1} << 32))
    throw RangeError("a graph of " + std::to_string(n) + " vertices needs 64-bit vertex ids, not 32-bit");
  if (opt.vertex_ranges && (opt.vertex_ranges->size() != n || opt.vertex_ranges->ranks() != rt.size()))
    throw MismatchError("the vertex ranges asked for cover " + std::to_string(opt.vertex_ranges->size()) +
                        " vertices on " + std::to_string(opt.vertex_ranges->ranks()) + " ranks, not " +
                        std::to_string(n) + " on " + std::to_string(rt.size()));

  // Pass 1: arcs out of each vertex; ids checked; weightedness seen.
  if (opt.on_phase) opt.on_phase("counting the arcs of every vertex (a pass over the source)");
  auto counted_arcs = count_arcs(rt, n, source, sym, drop_loops);
  std::optional<DistArray<std::uint64_t>> degree(std::move(counted_arcs.degree));
  const bool weighted = counted_arcs.weighted;
  const std::uint64_t loops_seen = counted_arcs.loops_seen;

  // Ranges, row offsets, and the arrays at the counted size.
  Distribution ranges = opt.vertex_ranges ? *opt.vertex_ranges : balanced_vertex_ranges(rt, *degree);
  std::vector<std::uint64_t> cursor = moved_to(rt, *degree, ranges);
  degree.reset();
  const std::uint64_t lo = ranges.begin(rt.rank());
  const std::size_t local_n = cursor.size();
  DistArray<std::uint64_t> offsets(rt, Distribution::weighted_block(all_gather(rt.comm(), std::uint64_t{local_n + 1})),
                                   array_storage(opt.storage, "offsets"));
  auto row = offsets.local();
  row[0] = 0;
  for (std::size_t i = 0; i < local_n; ++i) {
    row[i + 1] = row[i] + cursor[i];
    cursor[i] = row[i];
  }
  auto counted = Distribution::weighted_block(all_gather(rt.comm(), std::uint64_t{row[local_n]}));
  std::optional<DistArray<double>> weight_array;
  if (weighted) weight_array.emplace(rt, counted, array_storage(opt.storage, "weight"));

  IdArray dst_array = with_id_type(width, [&](auto zero) -> IdArray {
    using Id = decltype(zero);
    DistArray<Id> dst(rt, counted, array_storage(opt.storage, "dst"));
    auto out = dst.local();
    auto w = weight_array ? weight_array->local() : std::span<double>{};
    std::uint64_t overflow = 0;
    // Pass 2: every arc to its source's owner, written at its row's cursor.
    // Ids travel at the graph's width (8 bytes an arc at 32-bit ids). On
    // disk, one pass per window of rows: a rank takes the arcs of its
    // current window only, and senders know every rank's window. A window's
    // arcs land in anonymous memory and reach the file in one sequential
    // copy: written at random into the file's pages, each page would be
    // dirtied again and again while the kernel writes it back.
    const bool disk = on_disk(rt, array_storage(opt.storage, "dst"));
    const auto cuts =
        fill_windows(row, disk ? fill_window_arcs(rt, sizeof(Id) + (weighted ? sizeof(double) : 0), 0.5) : ~std::uint64_t{0});
    const auto passes = all_reduce<std::uint64_t>(rt.comm(), cuts.size() - 1, MPI_MAX);
    std::vector<Id> window_dst;
    std::vector<double> window_weight;
    if (disk) {
      std::uint64_t largest = 0;
      for (std::size_t k = 0; k + 1 < cuts.size(); ++k) largest = std::max(largest, row[cuts[k + 1]] - row[cuts[k]]);
      window_dst.resize(largest);
      if (weighted) window_weight.resize(largest);
    }
    for (std::uint64_t pass = 0; pass < passes; ++pass) {
      if (opt.on_phase)
        opt.on_phase(passes > 1 ? "placing the arcs: window " + std::to_string(pass + 1) + " of " +
                                      std::to_string(passes) + " (each a pass over the source)"
                                : std::string("placing the arcs"));
      std::array<std::uint64_t, 2> window{0, 0};  // global ids [from, to) of this rank's rows filled in this pass
      if (pass + 1 < cuts.size()) window = {lo + cuts[pass], lo + cuts[pass + 1]};
      const auto windows = all_gather(rt.comm(), window);
      // One fill for both kinds of arc: a weight travels with its arc when
      // the graph has weights, and adds nothing to a message when not.
      auto fill = [&]<bool Weighted>(std::bool_constant<Weighted>) {
        using Arc = FillArc<Id, Weighted>;
        const std::size_t first_row = pass + 1 < cuts.size() ? cuts[pass] : local_n;
        const std::size_t window_rows = pass + 1 < cuts.size() ? cuts[pass + 1] - first_row : 0;
        // Where this window's arcs go: the arrays, or (on disk) the window's
        // buffers, `shift` arcs before the arrays' positions.
        const std::uint64_t shift = disk ? row[first_row] : 0;
        Id* const to_dst = disk ? window_dst.data() : out.data();
        double* const to_weight = disk ? window_weight.data() : w.data();
        auto write = [&](const Arc& a) {
          const std::size_t i = a.u - lo;
          if (cursor[i] == row[i + 1]) return void(++overflow);  // more than counted: reported below
          const std::uint64_t at = cursor[i]++ - shift;
          to_dst[at] = a.v;
          if constexpr (Weighted) to_weight[at] = a.w;
        };
        place_arcs<Id, Weighted>(rt, source, ranges, windows, lo + first_row, window_rows,
                                 row[first_row + window_rows] - row[first_row], sym, drop_loops,
                                 [](std::uint64_t v) { return static_cast<Id>(v); }, write);
      };
      if (weighted)
        fill(std::true_type{});
      else
        fill(std::false_type{});
      if (disk && pass + 1 < cuts.size()) {
        // Copied once, a piece at a time, each piece's pages given back to
        // the page cache as it goes: the window and its file pages are
        // never resident together.
        constexpr std::uint64_t kPieceArcs = std::uint64_t{8} << 20;
        const std::uint64_t from = row[cuts[pass]], to = row[cuts[pass + 1]];
        for (std::uint64_t at = from; at < to; at += kPieceArcs) {
          const std::uint64_t stop = std::min(to, at + kPieceArcs);
          auto piece = [&](const auto& window, auto array) {
            std::copy(window.begin() + static_cast<std::ptrdiff_t>(at - from),
                      window.begin() + static_cast<std::ptrdiff_t>(stop - from),
                      array.begin() + static_cast<std::ptrdiff_t>(at));
            release_file_pages(array.data(), at, stop);
          };
          piece(window_dst, out);
          if (weighted) piece(window_weight, w);
        }
      }
    }
    release(window_dst);
    release(window_weight);
    check_filled(rt.comm(), overflow, cursor, row, lo, 0, local_n, "its second pass", "the same edges twice");
    release(cursor);
    if (opt.on_phase) opt.on_phase("sorting and cleaning the rows");
    std::uint64_t repeats[2] = {0, 0};
    const std::uint64_t kept = clean_rows<Id>(row, out, w, lo, drop_loops,
                                              opt.drop_duplicates || (sym && !opt.keep_duplicates), disk, repeats);
    if (opt.counts) {
      std::uint64_t totals[3] = {loops_seen, repeats[0], repeats[1]};
      all_reduce(rt.comm(), totals, 3, MPI_SUM);
      *opt.counts = {totals[0], totals[1], totals[2]};
    }
    auto final_ranges = Distribution::weighted_block(all_gather(rt.comm(), kept));
    dst.shrink(final_ranges);
    if (weight_array) weight_array->shrink(final_ranges);
    return dst;
  });
  return EdgeList::adopt(n, sym ? false : directed, std::move(ranges), std::move(offsets), std::move(dst_array),
                         std::move(weight_array));
}

// A source over vectors held by this rank: one batch.
EdgeSource source_of(const LocalEdges& e) {
  return [&e](const EdgeSink& take) { take(EdgeBatch{e.src, e.dst, e.weight}); };
}

}  // namespace

// A source over a graph's own arcs, reversed or not, in batches.
EdgeSource build_parts::source_of(const EdgeList& g, bool reversed) {
  return [&g, reversed](const EdgeSink& take) {
    constexpr std::size_t kBatch = 1 << 16;
    std::vector<std::uint64_t> src, dst;
    std::vector<double> weight;
    src.reserve(kBatch), dst.reserve(kBatch);
    auto w = g.local_weight();
    auto flush = [&] {
      take(EdgeBatch{src, dst, weight});
      src.clear(), dst.clear(), weight.clear();
    };
    g.for_each_arc([&](std::uint64_t u, std::uint64_t v, std::size_t k) {
      src.push_back(reversed ? v : u);
      dst.push_back(reversed ? u : v);
      if (!w.empty()) weight.push_back(w[k]);
      if (src.size() == kBatch) flush();
    });
    if (!src.empty()) flush();
  };
}


EdgeList EdgeList::build(Runtime& rt, std::uint64_t vertices, bool directed, LocalEdges edges,
                         const BuildOptions& options) {
  return build_from(rt, vertices, directed, source_of(edges), options);
}

EdgeList EdgeList::build(Runtime& rt, std::uint64_t vertices, bool directed, const EdgeSource& source,
                         const BuildOptions& options) {
  return build_from(rt, vertices, directed, source, options);
}

EdgeList EdgeList::adopt(std::uint64_t vertices, bool directed, Distribution vertex_ranges,
                         DistArray<std::uint64_t> offsets, IdArray dst, std::optional<DistArray<double>> weight,
                         bool* symmetric) {
  return EdgeList(vertices, directed, std::move(vertex_ranges), std::move(offsets), std::move(dst), std::move(weight),
                  symmetric);
}

namespace {

// Every graph a program maps passes here (rows already in bounds): one
// pass with no branch per arc, {self loops, some destination outside the
// graph or out of order}. A row's loop is a reduction at the ids' width
// (the maximum, descents or-ed, loops counted), which GCC vectorises; a
// row too long for a 32-bit count is counted at 64 bits.
template <class Id>
TESSERA_INLINE std::pair<std::uint64_t, bool> scan_rows_of(std::span<const std::uint64_t> rows, const Id* d,
                                                          std::uint64_t lo, std::uint64_t vertices) {
  std::uint64_t loops = 0;
  bool bad = false;
  for (std::size_t i = 0; i + 1 < rows.size(); ++i) {
    const std::uint64_t first = rows[i], last = rows[i + 1];
    if (first == last) continue;
    const std::uint64_t u = lo + i;
    if (last - first > std::numeric_limits<Id>::max() / 2) {
      for (std::uint64_t k = first; k < last; ++k) {
        bad |= static_cast<std::uint64_t>(d[k]) >= vertices || (k > first && d[k] < d[k - 1]);
        loops += static_cast<std::uint64_t>(d[k]) == u;
      }
      continue;
    }
    const Id narrow_u = static_cast<Id>(u);  // a u wider than Id has no loop at this width
    Id top = d[first], descents = 0, row_loops = d[first] == narrow_u;
    for (std::uint64_t k = first + 1; k < last; ++k) {
      top = d[k] > top ? d[k] : top;
      descents |= d[k] < d[k - 1];
      row_loops += d[k] == narrow_u;
    }
    loops += narrow_u == u ? row_loops : 0;
    bad |= static_cast<std::uint64_t>(top) >= vertices || descents != 0;
  }
  return {loops, bad};
}
TESSERA_VECTOR_CLONES std::pair<std::uint64_t, bool> scan_rows(std::span<const std::uint64_t> rows,
                                                               const std::uint32_t* d, std::uint64_t lo,
                                                               std::uint64_t vertices) {
  return scan_rows_of(rows, d, lo, vertices);
}
TESSERA_VECTOR_CLONES std::pair<std::uint64_t, bool> scan_rows(std::span<const std::uint64_t> rows,
                                                               const std::uint64_t* d, std::uint64_t lo,
                                                               std::uint64_t vertices) {
  return scan_rows_of(rows, d, lo, vertices);
}

// The checks a mapped or adopted graph needs before any kernel indexes with
// it, the offsets first and then one pass over a rank's arcs: row offsets
// from 0 to the arc count, never decreasing; every destination inside the
// graph; each row sorted.
// Returns the rank's self loops. Throws naming the first bad arc.
// With `symmetry`, adds the arcs' symmetry sums, a block of rows at a time
// while its arcs are in cache.
template <class Id>
std::uint64_t check_rows(std::span<const std::uint64_t> rows, std::span<const Id> dst, std::uint64_t lo,
                         std::uint64_t vertices, std::uint64_t first_arc, std::span<const double> weight,
                         SymmetrySums* symmetry) {
  const Id* d = dst.data();
  for (std::size_t i = 0; i + 1 < rows.size(); ++i)
    if (rows[i + 1] < rows[i] || rows[i + 1] > dst.size())
      throw MismatchError("row offsets of vertex " + std::to_string(lo + i) + " run from " + std::to_string(rows[i]) +
                          " to " + std::to_string(rows[i + 1]) + ", outside this rank's " + std::to_string(dst.size()) +
                          " arcs or backwards");
  std::uint64_t loops = 0;
  bool bad = false;
  constexpr std::uint64_t kBlockArcs = 1 << 14;
  const std::size_t n = rows.size() - 1;
  for (std::size_t i = 0; i < n;) {
    const std::size_t j = symmetry ? row_block_end(rows, i, kBlockArcs) : n;
    const auto block = rows.subspan(i, j - i + 1);
    const auto [block_loops, block_bad] = scan_rows(block, d, lo + i, vertices);
    loops += block_loops;
    bad |= block_bad;
    if (symmetry && !bad) *symmetry += symmetry_sums(block, dst, weight, lo + i);
    i = j;
  }
  if (!bad) return loops;
  for (std::size_t i = 0; i + 1 < rows.size(); ++i) {
    const std::uint64_t u = lo + i;
    for (std::uint64_t k = rows[i]; k < rows[i + 1]; ++k) {
      const std::uint64_t v = d[k];
      if (v >= vertices)
        throw RangeError("arc " + std::to_string(first_arc + k) + " (" + std::to_string(u) + ", " + std::to_string(v) +
                         ") has a destination outside [0, " + std::to_string(vertices) + ")");
      if (k > rows[i] && d[k] < d[k - 1])
        throw MismatchError("arcs are not sorted by (source, destination) at arc " + std::to_string(first_arc + k));
    }
  }
  throw MismatchError("check_rows found a bad arc it cannot name");  // unreachable: the second look names it
}

}  // namespace

EdgeList::EdgeList(std::uint64_t vertices, bool directed, Distribution vertex_ranges, DistArray<std::uint64_t> offsets,
                   IdArray dst, std::optional<DistArray<double>> weight, bool* symmetric)
    : vertices_(vertices),
      directed_(directed),
      vertex_map_(offsets.runtime(), std::move(vertex_ranges)),
      edge_ranges_(std::visit([](const auto& a) { return a.distribution(); }, dst)),
      offsets_(std::move(offsets)),
      dst_(std::move(dst)),
      weight_(std::move(weight)) {
  Runtime& rt = runtime();
  arcs_ = edge_ranges_.size();
  std::uint64_t loops = 0;
  SymmetrySums sums;
  agree(rt.comm(), [&] {
    if (vertex_map_.size() != vertices_)
      throw MismatchError("vertex ranges cover " + std::to_string(vertex_map_.size()) + " vertices, expected " +
                          std::to_string(vertices_));
    if (id_width() == IdWidth::narrow && vertices_ > (std::uint64_t{1} << 32))
      throw MismatchError("a graph of " + std::to_string(vertices_) + " vertices cannot hold 32-bit vertex ids");
    if (weight_ && !(weight_->distribution() == edge_ranges_))
      throw MismatchError("destination and weight arrays are distributed differently");
    auto rows = offsets_.local();
    if (rows.size() != local_vertices() + 1)
      throw MismatchError("rank " + std::to_string(rt.rank()) + " holds " + std::to_string(rows.size()) +
                          " row offsets for " + std::to_string(local_vertices()) + " vertices (expected one more)");
    if (rows.front() != 0 || rows.back() != local_arcs())
      throw MismatchError("rank " + std::to_string(rt.rank()) + "'s row offsets run from " +
                          std::to_string(rows.front()) + " to " + std::to_string(rows.back()) + ", not from 0 to its " +
                          std::to_string(local_arcs()) + " arcs");
    loops = with_dst([&](auto d) {
      return check_rows(rows, d, local_vertex_begin(), vertices_, edge_ranges_.begin(rt.rank()), local_weight(),
                        symmetric ? &sums : nullptr);
    });
  });
  std::uint64_t totals[3] = {loops, sums.forward, sums.backward};
  all_reduce(rt.comm(), totals, symmetric ? 3 : 1, MPI_SUM);
  self_loops_ = totals[0];
  if (symmetric) {
    *symmetric = totals[1] == totals[2];
    arc_hash_ = totals[1];  // the arc hash is the forward sum (arc_hash.hpp): no pass of its own
  }
}

IdWidth id_width_for(std::uint64_t vertices) {
  if (const char* bits = std::getenv("TESSERA_ID_BITS"); bits && *bits) {
    const std::string b = bits;
    if (b == "64") return IdWidth::wide;
    if (b != "32")
      throw ConfigError("TESSERA_ID_BITS is \"" + b + "\": set it to 32 (ids as narrow as the graph allows) or 64");
  }
  return vertices <= (std::uint64_t{1} << 32) ? IdWidth::narrow : IdWidth::wide;
}

std::string id_width_name(IdWidth w) { return w == IdWidth::narrow ? "uint32" : "uint64"; }

void EdgeList::throw_not_local(std::uint64_t v) const {
  throw RangeError("vertex " + std::to_string(v) + " is not local: rank " + std::to_string(runtime().rank()) +
                   " owns vertices [" + std::to_string(local_vertex_begin()) + ", " +
                   std::to_string(local_vertex_end()) + ")");
}

void EdgeList::throw_wrong_width(std::size_t asked) const {
  throw MismatchError("the graph's vertex ids are " + std::to_string(id_bytes() * 8) + "-bit, not " +
                      std::to_string(asked * 8) + "-bit");
}

std::vector<std::uint64_t> EdgeList::out_neighbours(std::uint64_t v) const {
  auto [first, last] = out_edges(v);
  return with_dst([&](auto dst) { return std::vector<std::uint64_t>(dst.begin() + static_cast<std::ptrdiff_t>(first),
                                                                   dst.begin() + static_cast<std::ptrdiff_t>(last)); });
}

LocalEdges EdgeList::local_copy() const {
  LocalEdges e;
  e.src.reserve(local_arcs());
  e.dst.reserve(local_arcs());
  for_each_arc([&](std::uint64_t u, std::uint64_t v, std::size_t) { e.add(u, v); });
  e.weight.assign(local_weight().begin(), local_weight().end());
  return e;
}

EdgeList EdgeList::rebuilt(const BuildOptions& options, bool keep_ranges, bool reversed) const {
  BuildOptions o = options;
  if (keep_ranges) o.vertex_ranges = vertex_ranges();
  return build_from(runtime(), vertices_, directed_, source_of(*this, reversed), o);
}

namespace {
// Build options that only set `flag` (or nothing) and the storage.
BuildOptions with_flag(const StorageOptions& storage, bool BuildOptions::*flag, IdWidth width) {
  BuildOptions o;
  o.storage = storage;
  o.id_width = width;
  if (flag) o.*flag = true;
  return o;
}
}  // namespace

EdgeList EdgeList::symmetrized(const StorageOptions& storage, bool keep_ranges) const {
  return rebuilt(with_flag(storage, &BuildOptions::symmetrize, id_width()), keep_ranges);
}
EdgeList EdgeList::transposed(const StorageOptions& storage, bool keep_ranges) const {
  return rebuilt(with_flag(storage, nullptr, id_width()), keep_ranges, true);
}
// Dropping edges keeps every source on its owner: the ranges stay.
EdgeList EdgeList::without_self_loops(const StorageOptions& storage) const {
  return rebuilt(with_flag(storage, &BuildOptions::drop_self_loops, id_width()), true);
}
EdgeList EdgeList::without_duplicates(const StorageOptions& storage) const {
  return rebuilt(with_flag(storage, &BuildOptions::drop_duplicates, id_width()), true);
}
EdgeList EdgeList::rebalanced(const StorageOptions& storage) const { return rebuilt(with_flag(storage, nullptr, id_width()), false); }
EdgeList EdgeList::with_id_width(IdWidth width, const StorageOptions& storage) const {
  return rebuilt(with_flag(storage, nullptr, width), true);
}

DistArray<std::uint64_t> EdgeList::out_degrees() const {
  DistArray<std::uint64_t> deg(vertex_map_);
  auto d = deg.local();
  auto rows = row_offsets();
  for (std::size_t i = 0; i < d.size(); ++i) d[i] = rows[i + 1] - rows[i];
  return deg;
}

DistArray<std::uint64_t> EdgeList::in_degrees() const {
  DistArray<std::uint64_t> deg(vertex_map_);
  {
    UpdateAggregator<std::uint64_t, ops::Add> add(deg);
    with_dst([&](auto dst) {
      for (auto v : dst) add.update(v, 1);
    });
  }  // flushed here, once
  return deg;
}

double EdgeList::edge_imbalance() const {
  std::uint64_t mine = local_arcs();
  std::uint64_t most = all_reduce(runtime().comm(), mine, MPI_MAX);
  double mean = static_cast<double>(arcs()) / runtime().size();
  return mean > 0 ? static_cast<double>(most) / mean : 1.0;
}

}  // namespace tessera::graph
