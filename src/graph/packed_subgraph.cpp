// Induced subgraphs and the largest component of a PackedGraph, in the
// graph's own arrays (include/tessera/graph/subgraph.hpp, components.hpp).
//
// Why a row never grows. Kept vertices are renumbered 0..k-1 in their order:
// f(v) = the number of kept vertices below v, so for kept a < b,
// 0 <= f(b) - f(a) <= b - a, and the sign of f(v) - f(u) is that of v - u.
// A kept row u re-coded with f:
// - the degree is the number of kept neighbours: no more than before;
// - a difference between two neighbours kept one after the other becomes
//   f(b) - f(a) <= b - a, the sum of the old differences between them, and
//   size_of(x + y) <= size_of(x) + size_of(y) (x + y has at most one bit
//   more than the larger, and the smaller's code is at least a byte);
// - the first value zigzag(f(v) - f(u)) for the first kept neighbour v:
//   when the old first neighbour v0 was kept too, its magnitude is no larger
//   and its sign the same, so its code is no longer; when v0 was dropped,
//   it is at most zigzag(v0 - u) + 2 (v - v0) (or 2 (v - v0) when u lies
//   between), one bit more than the larger of zigzag(v0 - u) and
//   2 (v - v0), within the codes of zigzag(v0 - u) and the differences up
//   to v.
// So each value written ends no later than the old values it stands for,
// which are read before it is written: a row is re-coded at a write
// position at or before its read position, in the same byte array, and
// the rows before it took no more bytes than they had.
#include <algorithm>
#include <bit>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "tessera/graph/components.hpp"
#include "tessera/graph/subgraph.hpp"
#include "tessera/runtime/collective.hpp"
#include "tessera/runtime/error.hpp"
#include "tessera/runtime/trace.hpp"

namespace tessera::graph {

namespace {

// The kept vertices of the whole graph and the new id of each, on every
// rank: kept rows hold arbitrary neighbours, and their new ids are read
// here with no message per arc (the EdgeList's path asks each neighbour's
// owner, 4 or 8 bytes there and back an arc). A bit a vertex, or-ed over
// the ranks in one reduction (each rank sets its own), and for each 64-bit
// word the kept vertices before it as 32 bits (counted from the start of
// its span of 2^31 vertices; a 64-bit count a span): n/8 + n/16 bytes a
// rank for n vertices (kron-20: 192 KB; 2^32 vertices: 768 MB). A lookup
// is two loads and a popcount; 64-byte blocks of 448 vertices with one
// count each (n/7 bytes) measured 3 times slower at kron-20 (a division
// and seven popcounts an arc).
class KeptSet {
 public:
  // Collective: kept(i) for each of this rank's vertices base + i.
  template <class Kept>
  KeptSet(Runtime& rt, std::uint64_t vertices, std::uint64_t base, std::size_t local, Kept&& kept)
      : words_((vertices + 63) / 64, 0), before_(words_.size()), span_before_((vertices >> kSpanBits) + 1) {
    for (std::size_t i = 0; i < local; ++i)
      if (kept(i)) words_[(base + i) >> 6] |= std::uint64_t{1} << ((base + i) & 63);
    constexpr std::size_t kChunk = std::size_t{1} << 27;  // words a reduction (MPI's int counts)
    for (std::size_t at = 0; at < words_.size(); at += kChunk)
      all_reduce(rt.comm(), words_.data() + at, static_cast<int>(std::min(kChunk, words_.size() - at)), MPI_BOR);
    std::uint64_t total = 0;
    for (std::size_t w = 0; w < words_.size(); ++w) {
      const std::uint64_t span = (w * 64) >> kSpanBits;
      if (((w * 64) & ((std::uint64_t{1} << kSpanBits) - 1)) == 0) span_before_[span] = total;
      before_[w] = static_cast<std::uint32_t>(total - span_before_[span]);
      total += static_cast<std::uint64_t>(std::popcount(words_[w]));
    }
    total_ = total;
  }

  std::uint64_t total() const noexcept { return total_; }
  bool contains(std::uint64_t v) const noexcept { return words_[v >> 6] >> (v & 63) & 1; }
  // The kept vertices below v (v's new id when v is kept); `kept` gets
  // whether v is.
  std::uint64_t new_id(std::uint64_t v, bool& kept) const noexcept {
    const std::uint64_t word = words_[v >> 6], below = (std::uint64_t{1} << (v & 63)) - 1;
    kept = word >> (v & 63) & 1;
    return span_before_[v >> kSpanBits] + before_[v >> 6] + static_cast<std::uint64_t>(std::popcount(word & below));
  }

 private:
  static constexpr unsigned kSpanBits = 31;  // a span's count below it fits 32 bits
  std::vector<std::uint64_t> words_;
  std::vector<std::uint32_t> before_;
  std::vector<std::uint64_t> span_before_;
  std::uint64_t total_ = 0;
};

// g's kept rows re-coded in place (see the top of the file), the arrays
// shrunk. `closed`: every neighbour of a kept vertex is kept (a union of
// components), so the degrees stay and each row is read once; a neighbour
// found dropped is then an error (the labels were not components), after
// the pass (which stays within the array: f is still monotone).
PackedSubgraph compact(PackedGraph&& g, const KeptSet& kept, bool closed, const StorageOptions& ids_storage) {
  trace::Span span(trace::Category::phase, "packed subgraph in place");
  Runtime& rt = g.runtime();
  agree(rt.comm(), [&] {
    const DistArray<std::uint64_t>* ids = g.original_ids();
    if (!g.offsets().shrinkable() || !g.bytes().shrinkable() || (ids && !ids->shrinkable()))
      throw MismatchError("the graph's arrays (" + g.offsets().metadata_path() +
                          ") are another job's, mapped in place: they cannot be compacted here; extract the "
                          "component of a copy (unpacked())");
  });
  const std::uint64_t base = g.local_vertex_begin(), n_local = g.local_vertices();
  const bool directed = g.directed();
  std::uint64_t local_kept = 0;
  for (std::uint64_t i = 0; i < n_local; ++i) local_kept += kept.contains(base + i);
  auto ranges = Distribution::weighted_block(all_gather(rt.comm(), local_kept));
  const std::uint64_t new_base = exclusive_prefix_sum(rt.comm(), local_kept);
  DistArray<std::uint64_t> original(rt, ranges, array_storage(ids_storage, "ids"));
  {
    auto o = original.local();
    std::uint64_t next = 0;
    for (std::uint64_t i = 0; i < n_local; ++i)
      if (kept.contains(base + i)) o[next++] = base + i;
  }

  auto [offsets, bytes, ids] = std::move(g).release_arrays();
  auto off = offsets.local();
  std::uint8_t* const data = bytes.local().data();
  std::uint64_t row = 0, written = 0, loops = 0, first = off[0];
  std::uint64_t stray = kNoIndex;  // a kept vertex with a neighbour outside a closed set
  for (std::uint64_t i = 0; i < n_local; ++i) {
    const std::uint64_t last = off[i + 1];  // read before off[row + 1] (maybe off[i + 1]) is written
    const std::uint64_t u = base + i;
    if (!kept.contains(u)) {
      first = last;
      continue;
    }
    if (first != last) {
      const std::uint8_t* p = data + first;
      const std::uint64_t d = byte_code::get(p);
      auto v = static_cast<std::uint64_t>(static_cast<std::int64_t>(u) + byte_code::unzigzag(byte_code::get(p)));
      const auto nu = static_cast<std::int64_t>(new_base + row);
      std::uint8_t* out = data + written;
      bool in = true;
      if (closed) {  // d values in, d out, one pass
        bool all_in = true;
        out = byte_code::put(d, out);
        std::uint64_t previous = kept.new_id(v, in);
        all_in &= in;
        loops += v == u;
        out = byte_code::put(byte_code::zigzag(static_cast<std::int64_t>(previous) - nu), out);
        for (std::uint64_t k = 1; k < d; ++k) {
          v += byte_code::get(p);  // read before the code for it is written
          const std::uint64_t nv = kept.new_id(v, in);
          all_in &= in;
          loops += v == u;
          out = byte_code::put(nv - previous, out);
          previous = nv;
        }
        if (!all_in && stray == kNoIndex) stray = u;
      } else {  // the kept neighbours counted first: the degree leads the row
        std::uint64_t degree = 0;
        {
          const std::uint8_t* q = p;
          for (std::uint64_t k = 0, w = v;;) {
            degree += kept.contains(w);
            if (++k == d) break;
            w += byte_code::get(q);
          }
        }
        if (degree) {
          out = byte_code::put(degree, out);
          std::uint64_t previous = 0;
          bool leading = true;
          for (std::uint64_t k = 0;;) {
            const std::uint64_t nv = kept.new_id(v, in);
            if (in) {
              out = byte_code::put(leading ? byte_code::zigzag(static_cast<std::int64_t>(nv) - nu) : nv - previous, out);
              previous = nv;
              leading = false;
              loops += v == u;
            }
            if (++k == d) break;
            v += byte_code::get(p);  // read before the code for it is written
          }
        }
      }
      written = static_cast<std::uint64_t>(out - data);
    }
    off[++row] = written;
    first = last;
  }
  agree(rt.comm(), [&] {
    if (stray != kNoIndex)
      throw MismatchError("vertex " + std::to_string(stray) +
                          " of the component has a neighbour outside it: the labels are not the graph's components "
                          "(the graph is lost)");
  });
  bytes.shrink(Distribution::weighted_block(all_gather(rt.comm(), written)));
  offsets.shrink(Distribution::weighted_block(all_gather(rt.comm(), local_kept + 1)));
  // g's original ids follow their vertices: a rank keeps its own, in order.
  if (ids) {
    auto o = ids->local();
    std::uint64_t next = 0;
    for (std::uint64_t i = 0; i < n_local; ++i)
      if (kept.contains(base + i)) o[next++] = o[i];
    ids->shrink(ranges);
  } else {
    ids.emplace(rt, ranges, StorageOptions::heap());
    std::copy(original.local().begin(), original.local().end(), ids->local().begin());
  }
  loops = all_reduce(rt.comm(), loops, MPI_SUM);
  return {PackedGraph::adopt(kept.total(), directed, loops, std::move(offsets), std::move(bytes), std::move(ids)),
          std::move(original)};
}

}  // namespace

PackedSubgraph induced_subgraph(PackedGraph&& g, const DistArray<std::uint8_t>& keep, const StorageOptions& ids_storage) {
  if (!(keep.distribution() == g.vertex_ranges()))
    throw MismatchError("the kept vertices are not distributed like the graph's vertices (" +
                        std::to_string(keep.size()) + " flags, " + std::to_string(g.vertices()) + " vertices)");
  auto k = keep.local();
  KeptSet kept(g.runtime(), g.vertices(), g.local_vertex_begin(), k.size(), [&](std::size_t i) { return k[i] != 0; });
  return compact(std::move(g), kept, false, ids_storage);
}

PackedLargestComponent largest_component(PackedGraph&& g, const DistArray<std::uint64_t>& labels,
                                         const StorageOptions& ids_storage) {
  ComponentSummary summary = summarize(g, labels);  // MismatchError for labels on other vertex ranges
  auto l = labels.local();
  KeptSet kept(g.runtime(), g.vertices(), g.local_vertex_begin(), l.size(),
               [&](std::size_t i) { return l[i] == summary.largest_label; });
  auto sub = compact(std::move(g), kept, true, ids_storage);
  return {std::move(sub.graph), std::move(sub.original_ids), summary};
}

}  // namespace tessera::graph
