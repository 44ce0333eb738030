// The pieces of a build from an EdgeSource that EdgeList::build and
// PackedGraph::build share: the counting pass, the windows of rows, placing
// a window's arcs at their source's owner, and sorting and cleaning rows.
// Internal to src/graph.
#pragma once
#include <algorithm>
#include <array>
#include <bit>
#include <cstdint>
#include <cstdlib>
#include <exception>
#include <optional>
#include <span>
#include <string>
#include <type_traits>
#include <vector>

#include "tessera/comm/aggregators.hpp"
#include "tessera/comm/bulk_exchange.hpp"
#include "tessera/graph/edge_list.hpp"
#include "tessera/runtime/cancellation.hpp"
#include "tessera/runtime/collective.hpp"
#include "tessera/runtime/memory.hpp"
#include "tessera/storage/disk_tier.hpp"

namespace tessera::graph::build_parts {

// Frees a vector's storage (`v = {}` would only clear it: the braces pick
// the initializer-list assignment, which keeps the capacity).
template <class T>
void release(std::vector<T>& v) {
  std::vector<T>().swap(v);
}

// Vertex ranges that give every rank about E/P arcs, from the arcs out of
// each vertex (`degree`, any distribution): boundary k is placed after the
// vertex holding arc number ceil(k E / P) in source order.
inline Distribution balanced_vertex_ranges(Runtime& rt, const DistArray<std::uint64_t>& degree) {
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
inline std::vector<std::uint64_t> moved_to(Runtime& rt, const DistArray<std::uint64_t>& a, const Distribution& to) {
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
inline std::vector<std::size_t> fill_windows(std::span<const std::uint64_t> row, std::uint64_t window_arcs) {
  const std::size_t n = row.size() - 1;
  std::vector<std::size_t> cuts{0};
  for (std::size_t i = 0; i < n; ++i)
    if (row[i + 1] - row[cuts.back()] > window_arcs && i > cuts.back()) cuts.push_back(i);
  cuts.push_back(n);
  return cuts;
}

// Arcs a fill window holds: `share` of the memory available (a disk-tier
// build: half, the other half for the page cache the window is copied
// through; a packed build: half of what is left as each window starts,
// beside the rows packed so far), shared
// by the node's ranks; TESSERA_FILL_WINDOW_BYTES sets the bytes (tests make
// many windows of a small graph with it). Every window is a pass that
// generates or reads the whole source again, so the windows are as large as
// memory allows.
inline std::uint64_t fill_window_arcs(const Runtime& rt, std::size_t arc_bytes, double share) {
  std::uint64_t bytes = static_cast<std::uint64_t>(static_cast<double>(available_memory_bytes()) * share) /
                        std::max<std::size_t>(1, rt.node().world_ranks.size());
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
  StagedFill(std::size_t rows, std::uint64_t arcs, std::size_t arc_bytes, Write write) : write_(std::forward<Write>(write)) {
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

// After a fill pass: every local row in [first, last) got exactly the arcs
// the count gave it (its cursor at its end, none sent over): otherwise the
// source gave other edges on `pass` than on its first. Collective.
inline void check_filled(MPI_Comm comm, std::uint64_t overflow, std::span<const std::uint64_t> cursor,
                         std::span<const std::uint64_t> row, std::uint64_t lo, std::size_t first, std::size_t last,
                         const std::string& pass, const std::string& rule) {
  agree(comm, [&] {
    std::string what = overflow ? std::to_string(overflow) + " arcs more than counted" : "";
    for (std::size_t i = first; i < last && what.empty(); ++i)
      if (cursor[i] != row[i + 1])
        what = "vertex " + std::to_string(lo + i) + " " + std::to_string(cursor[i] - row[i]) + " arcs, not " +
               std::to_string(row[i + 1] - row[i]);
    if (!what.empty())
      throw MismatchError("the edge source gave other edges on " + pass + " than on its first (" + what +
                          "): it must give " + rule);
  });
}

// A source over a graph's own arcs, reversed or not, in batches (edge_list.cpp).
EdgeSource source_of(const EdgeList& g, bool reversed);

// What the counting pass found: the arcs out of each vertex (block
// distribution, 8 bytes a vertex) as the source gave them, before cleaning.
struct ArcCounts {
  DistArray<std::uint64_t> degree;
  bool weighted = false;
  std::uint64_t loops_seen = 0;  // this rank's arcs (u, u)
};

// The first pass of a build: every arc counted at its source (and its
// reverse with `symmetrize`; loops not at all with `drop_loops`), every id
// checked against n, weightedness agreed. Collective.
inline ArcCounts count_arcs(Runtime& rt, std::uint64_t n, const EdgeSource& source, bool symmetrize, bool drop_loops) {
  ArcCounts c{DistArray<std::uint64_t>(rt, n, StorageOptions::heap())};
  int with_weights = 0, without_weights = 0;
  {
    std::optional<CountAggregator<std::uint64_t>> count;
    count.emplace(c.degree);
    run_pass(rt, source, count, [&](const EdgeBatch& b) {
      if (b.src.empty()) return;
      (b.weight.empty() ? without_weights : with_weights) = 1;
      for (std::size_t k = 0; k < b.src.size(); ++k) {
        const std::uint64_t u = b.src[k], v = b.dst[k];
        if (u >= n || v >= n)
          throw RangeError("edge (" + std::to_string(u) + ", " + std::to_string(v) + ") names a vertex outside [0, " +
                           std::to_string(n) + ")");
        if (u == v) {
          ++c.loops_seen;
          if (!drop_loops) count->count(u);
        } else {
          count->count(u);
          if (symmetrize) count->count(v);
        }
      }
    });
  }
  with_weights = all_reduce(rt.comm(), with_weights, MPI_MAX);
  without_weights = all_reduce(rt.comm(), without_weights, MPI_MAX);
  if (with_weights && without_weights) throw MismatchError("some edges came with weights and others without");
  c.weighted = with_weights != 0;
  return c;
}

// A fill pass: the source once, every arc (and its reverse with
// `symmetrize`) renamed by `rename(id) -> Id` and sent to its source's
// owner under `ranges` when the owner fills that row in this pass
// (windows[r]: the global rows [from, to) rank r fills), where
// write(const FillArc&) puts it; the arcs are staged by block of the
// window's `window_rows` rows (`window_arcs` of them) starting at global
// row `first`. Collective.
template <class Id, bool Weighted, class Rename, class Write>
void place_arcs(Runtime& rt, const EdgeSource& source, const Distribution& ranges,
                const std::vector<std::array<std::uint64_t, 2>>& windows, std::uint64_t first, std::size_t window_rows,
                std::uint64_t window_arcs, bool symmetrize, bool drop_loops, Rename&& rename, Write& write) {
  using Arc = FillArc<Id, Weighted>;
  auto taken = [&](int owner, std::uint64_t u) {
    const auto& at = windows[static_cast<std::size_t>(owner)];
    return u >= at[0] && u < at[1];
  };
  StagedFill<Arc, Write&> staged(window_rows, window_arcs, sizeof(Id) + (Weighted ? sizeof(double) : 0), write);
  std::optional<MessageAggregator<Arc>> place;
  place.emplace(rt, [&](int, const Arc& a) { staged.add(a.u - first, a); });
  auto arc = [](Id u, Id v, const EdgeBatch& b, std::size_t k) {
    if constexpr (Weighted)
      return Arc{u, v, b.weight[k]};
    else
      return Arc{u, v};
  };
  std::vector<Id> us, vs;
  run_pass(rt, source, place, [&](const EdgeBatch& b) {
    // Renamed first, in a loop of its own: a numbering lookup misses the
    // cache, and with nothing else in the loop the core overlaps the misses.
    us.resize(b.src.size());
    vs.resize(b.src.size());
    for (std::size_t k = 0; k < b.src.size(); ++k) {
      us[k] = rename(b.src[k]);
      vs[k] = rename(b.dst[k]);
    }
    for (std::size_t k = 0; k < b.src.size(); ++k) {
      const Id u = us[k], v = vs[k];
      if (u == v && drop_loops) continue;
      if (int o = ranges.owner(u); taken(o, u)) place->send(o, arc(u, v, b, k));
      if (symmetrize && u != v)
        if (int o = ranges.owner(v); taken(o, v)) place->send(o, arc(v, u, b, k));
    }
  });
  staged.drain_all();
}

}  // namespace tessera::graph::build_parts
