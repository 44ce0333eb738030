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
#include "row_blocks.hpp"

namespace tessera::graph {

StorageOptions array_storage(const StorageOptions& graph, const std::string& suffix) {
  StorageOptions o = graph;
  if (o.kind == StorageKind::shared && !o.name.empty()) o.name += "-" + suffix;
  return o;
}

namespace {

// Frees a vector's storage (`v = {}` would only clear it: the braces pick
// the initializer-list assignment, which keeps the capacity).
template <class T>
void release(std::vector<T>& v) {
  std::vector<T>().swap(v);
}

// Vertex ranges that give every rank about E/P arcs, from the arcs out of
// each vertex (`degree`, any distribution): boundary k is placed after the
// vertex holding arc number ceil(k E / P) in source order.
Distribution balanced_vertex_ranges(Runtime& rt, const DistArray<std::uint64_t>& degree) {
  const int P = rt.size();
  const std::uint64_t n = degree.size();
  auto local = degree.local();
  std::uint64_t mine = 0;
  for (auto d : local) mine += d;
  std::uint64_t total = all_reduce<std::uint64_t>(rt.comm(), mine, MPI_SUM);
  if (total == 0) return Distribution::block(n, P);
  std::uint64_t before = exclusive_prefix_sum(rt.comm(), mine);

  std::vector<std::uint64_t> bounds(static_cast<std::size_t>(P) + 1, n);
  bounds[0] = 0;
  int k = 1;
  auto target = [&](int kk) {
    return static_cast<std::uint64_t>((static_cast<unsigned __int128>(kk) * total + P - 1) / P);
  };
  while (k < P && target(k) <= before) ++k;  // crossed on an earlier rank
  std::uint64_t cum = before;
  for (std::size_t i = 0; i < local.size() && k < P; ++i) {
    std::uint64_t hi = cum + local[i];
    while (k < P && target(k) <= hi) bounds[static_cast<std::size_t>(k++)] = degree.local_begin() + i + 1;
    cum = hi;
  }
  all_reduce(rt.comm(), bounds.data(), P + 1, MPI_MIN);
  // The runtime may ask for boundaries on multiples of an alignment (whole
  // pages per rank for an outside process's view): the nearest multiple.
  const std::uint64_t align = rt.range_alignment();
  std::vector<std::uint64_t> sizes(static_cast<std::size_t>(P));
  for (int r = 0; r < P; ++r) {
    auto ur = static_cast<std::size_t>(r);
    if (align > 1 && ur + 1 < static_cast<std::size_t>(P))
      bounds[ur + 1] = std::min(n, (bounds[ur + 1] + align / 2) / align * align);
    bounds[ur + 1] = std::max(bounds[ur + 1], bounds[ur]);
    sizes[ur] = bounds[ur + 1] - bounds[ur];
  }
  return Distribution::weighted_block(sizes);
}

// This rank's part of `a` as it would be under distribution `to` (both cover
// the same indices in order): one all-to-all of contiguous pieces.
std::vector<std::uint64_t> moved_to(Runtime& rt, const DistArray<std::uint64_t>& a, const Distribution& to) {
  const auto P = static_cast<std::size_t>(rt.size());
  const std::uint64_t lo = a.local_begin(), hi = a.local_end();
  std::vector<std::uint64_t> counts(P, 0);
  for (std::size_t r = 0; r < P; ++r) {
    const std::uint64_t b = std::max(lo, to.begin(static_cast<int>(r))), e = std::min(hi, to.end(static_cast<int>(r)));
    counts[r] = e > b ? e - b : 0;
  }
  std::vector<std::uint64_t> received;
  return comm::exchange<std::uint64_t>(rt.comm(), a.local(), counts, received);
}

// Runs one pass of `source` and the collectives that end it, on every rank
// even when the source or `take` throws on some; then rethrows that error on
// every rank (agree), so a bad edge on one rank never leaves the others
// waiting in a flush.
template <class Aggregator, class Take>
void run_pass(Runtime& rt, const EdgeSource& source, std::optional<Aggregator>& aggregator, Take&& take) {
  std::exception_ptr failed;
  CancellationNotice cancel;  // a session's Ctrl-C stops the pass within a batch
  try {
    source([&](const EdgeBatch& b) {
      if (b.dst.size() != b.src.size() || (!b.weight.empty() && b.weight.size() != b.src.size()))
        throw MismatchError("an edge batch has " + std::to_string(b.src.size()) + " sources, " +
                            std::to_string(b.dst.size()) + " destinations and " + std::to_string(b.weight.size()) +
                            " weights");
      cancel.poll();
      take(b);
    });
  } catch (...) {
    failed = std::current_exception();
  }
  aggregator.reset();  // flushed here: collective, whatever happened above
  agree(rt.comm(), [&] {
    cancel.finish();
    if (failed) std::rethrow_exception(failed);
  });
}

// Sorts each row by (destination, weight), drops what `opt` drops, and
// compacts the rows to the front of the arrays; the offsets are rewritten.
// Returns the arcs kept; counts the repeated arcs (dropped or not) into
// `repeats` ({u != v, loops}).
// `release`: the arrays are on disk; pages both the reading and the writing
// position have passed leave the resident set as the pass goes.
template <class Id>
std::uint64_t clean_rows(std::span<std::uint64_t> row, std::span<Id> dst, std::span<double> weight, std::uint64_t lo,
                         bool drop_loops, bool dedupe, bool release, std::uint64_t (&repeats)[2]) {
  const bool weighted = !weight.empty();
  std::vector<std::pair<Id, double>> scratch;
  std::uint64_t kept = 0, first = row[0], released = 0;
  constexpr std::uint64_t kReleaseArcs = std::uint64_t{16} << 20;
  for (std::size_t i = 0; i + 1 < row.size(); ++i) {
    if (release && kept - released >= kReleaseArcs) {
      release_file_pages(dst.data(), released, kept);
      if (weighted)
        release_file_pages(weight.data(), released, kept);
      released = kept;
    }
    const std::uint64_t last = row[i + 1];
    if (weighted) {
      scratch.clear();
      for (std::uint64_t k = first; k < last; ++k) scratch.emplace_back(dst[k], weight[k]);
      std::sort(scratch.begin(), scratch.end());
      for (std::uint64_t k = first; k < last; ++k) dst[k] = scratch[k - first].first, weight[k] = scratch[k - first].second;
    } else {
      std::sort(dst.begin() + static_cast<std::ptrdiff_t>(first), dst.begin() + static_cast<std::ptrdiff_t>(last));
    }
    const std::uint64_t row_start = kept;
    for (std::uint64_t k = first; k < last; ++k) {
      const Id v = dst[k];
      if (drop_loops && v == lo + i) continue;
      if (kept > row_start && dst[kept - 1] == v) {
        ++repeats[v == lo + i];
        if (dedupe) continue;  // the smallest weight stays
      }
      dst[kept] = v;
      if (weighted) weight[kept] = weight[k];
      ++kept;
    }
    row[i] = row_start;
    first = last;  // row[i + 1] is rewritten next round: its old value is kept here
  }
  row[row.size() - 1] = kept;
  return kept;
}

// Where the fill pass's windows of local rows start and end (local vertex
// indices, first 0, last the vertex count): one window of all rows in
// memory; on disk, windows of at most `window_arcs` arcs (a row longer than
// that is a window of its own), each placed in anonymous memory and copied
// to the file once.
std::vector<std::size_t> fill_windows(std::span<const std::uint64_t> row, std::uint64_t window_arcs) {
  const std::size_t n = row.size() - 1;
  std::vector<std::size_t> cuts{0};
  for (std::size_t i = 0; i < n; ++i)
    if (row[i + 1] - row[cuts.back()] > window_arcs && i > cuts.back()) cuts.push_back(i);
  cuts.push_back(n);
  return cuts;
}

// Arcs a disk-tier fill window holds: half the memory available, shared by
// the node's ranks (the other half for the page cache the window is copied
// through); TESSERA_FILL_WINDOW_BYTES sets the bytes (tests make many
// windows of a small graph with it). Every window is a pass that generates
// or reads the whole source again, so the windows are as large as memory allows.
std::uint64_t fill_window_arcs(const Runtime& rt, std::size_t arc_bytes) {
  std::uint64_t bytes = available_memory_bytes() / 2 / std::max<std::size_t>(1, rt.node().world_ranks.size());
  if (const char* set = std::getenv("TESSERA_FILL_WINDOW_BYTES"); set && *set)
    bytes = parse_bytes(set, "TESSERA_FILL_WINDOW_BYTES", std::uint64_t{1} << 50);
  return std::max<std::uint64_t>(1, bytes / arc_bytes);
}

// An arc on its way to its source's owner in a build's fill pass: ids at
// the graph's width, and the weight when the graph has weights.
template <class Id, bool Weighted>
struct FillArc {
  Id u, v;
  double w;
};
template <class Id>
struct FillArc<Id, false> {
  Id u, v;
};

// Arcs held by block of rows until a block's buffer is full, then written
// together. A fill that writes each arc as it arrives misses the cache
// twice an arc (its row's cursor, its slot) once the arrays outgrow the
// cache; a block's cursors and slots span about kBlockBytes, so its writes
// stay in cache. Rows [0, rows) are local rows counted from the window's
// first; `write(arc)` puts one arc in place.
template <class Arc, class Write>
class StagedFill {
 public:
  StagedFill(std::size_t rows, std::uint64_t arcs, std::size_t arc_bytes, Write write) : write_(std::move(write)) {
    const double bytes_per_row = static_cast<double>(arcs * arc_bytes) / static_cast<double>(std::max<std::size_t>(1, rows)) + 16;
    std::size_t per_block = std::bit_floor(std::max<std::size_t>(1, static_cast<std::size_t>(kBlockBytes / bytes_per_row)));
    while (rows / per_block > kMaxBlocks) per_block *= 2;
    shift_ = static_cast<unsigned>(std::countr_zero(per_block));
    const std::size_t blocks = (rows + per_block - 1) / per_block;
    if (blocks > 1) {  // one block: its writes are in cache already
      held_.assign(blocks, 0);
      buffer_.resize(blocks * kHeld);
    }
  }
  void add(std::size_t row, const Arc& a) {
    if (held_.empty()) return write_(a);
    const std::size_t b = row >> shift_;
    buffer_[b * kHeld + held_[b]] = a;
    if (++held_[b] == kHeld) drain(b);
  }
  void drain_all() {
    for (std::size_t b = 0; b < held_.size(); ++b) drain(b);
  }

 private:
  static constexpr double kBlockBytes = 512 << 10;
  static constexpr std::size_t kMaxBlocks = 8192, kHeld = 256;
  void drain(std::size_t b) {
    for (std::size_t k = 0; k < held_[b]; ++k) write_(buffer_[b * kHeld + k]);
    held_[b] = 0;
  }
  Write write_;
  unsigned shift_ = 0;
  std::vector<std::uint32_t> held_;
  std::vector<Arc> buffer_;
};

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
  std::optional<DistArray<std::uint64_t>> degree;
  degree.emplace(rt, n, StorageOptions::heap());
  int with_weights = 0, without_weights = 0;
  std::uint64_t loops_seen = 0;
  {
    std::optional<CountAggregator<std::uint64_t>> count;
    count.emplace(*degree);
    run_pass(rt, source, count, [&](const EdgeBatch& b) {
      if (b.src.empty()) return;
      (b.weight.empty() ? without_weights : with_weights) = 1;
      for (std::size_t k = 0; k < b.src.size(); ++k) {
        const std::uint64_t u = b.src[k], v = b.dst[k];
        if (u >= n || v >= n)
          throw RangeError("edge (" + std::to_string(u) + ", " + std::to_string(v) + ") names a vertex outside [0, " +
                           std::to_string(n) + ")");
        if (u == v) {
          ++loops_seen;
          if (!drop_loops) count->count(u);
        } else {
          count->count(u);
          if (sym) count->count(v);
        }
      }
    });
  }
  with_weights = all_reduce(rt.comm(), with_weights, MPI_MAX);
  without_weights = all_reduce(rt.comm(), without_weights, MPI_MAX);
  if (with_weights && without_weights) throw MismatchError("some edges came with weights and others without");
  const bool weighted = with_weights != 0;

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
        fill_windows(row, disk ? fill_window_arcs(rt, sizeof(Id) + (weighted ? sizeof(double) : 0)) : ~std::uint64_t{0});
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
      auto taken = [&](int owner, std::uint64_t u) {
        const auto& at = windows[static_cast<std::size_t>(owner)];
        return u >= at[0] && u < at[1];
      };
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
        StagedFill<Arc, decltype(write)> staged(window_rows, row[first_row + window_rows] - row[first_row],
                                                sizeof(Id) + (Weighted ? sizeof(double) : 0), write);
        std::optional<MessageAggregator<Arc>> place;
        place.emplace(rt, [&](int, const Arc& a) { staged.add(a.u - lo - first_row, a); });
        auto arc = [](Id u, Id v, const EdgeBatch& b, std::size_t k) {
          if constexpr (Weighted)
            return Arc{u, v, b.weight[k]};
          else
            return Arc{u, v};
        };
        run_pass(rt, source, place, [&](const EdgeBatch& b) {
          for (std::size_t k = 0; k < b.src.size(); ++k) {
            const auto u = static_cast<Id>(b.src[k]), v = static_cast<Id>(b.dst[k]);
            if (u == v && drop_loops) continue;
            if (int o = ranges.owner(u); taken(o, u)) place->send(o, arc(u, v, b, k));
            if (sym && u != v)
              if (int o = ranges.owner(v); taken(o, v)) place->send(o, arc(v, u, b, k));
          }
        });
        staged.drain_all();
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
    agree(rt.comm(), [&] {
      std::string what = overflow ? std::to_string(overflow) + " arcs more than counted" : "";
      for (std::size_t i = 0; i < local_n && what.empty(); ++i)
        if (cursor[i] != row[i + 1])
          what = "vertex " + std::to_string(lo + i) + " " + std::to_string(cursor[i] - row[i]) + " arcs, not " +
                 std::to_string(row[i + 1] - row[i]);
      if (!what.empty())
        throw MismatchError("the edge source gave other edges on its second pass than on its first (" + what +
                            "): it must give the same edges twice");
    });
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

// A source over a graph's own arcs, reversed or not, in batches.
EdgeSource source_of(const EdgeList& g, bool reversed) {
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

}  // namespace

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
