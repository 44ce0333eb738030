// Induced subgraphs (include/tessera/graph/subgraph.hpp). One routine
// serves the copy and the in-place form: it reads arc k and writes arc j <= k,
// so the output may be the input itself.
#include "tessera/graph/subgraph.hpp"

#include <limits>
#include <optional>

#include "tessera/comm/aggregators.hpp"
#include "tessera/runtime/collective.hpp"
#include "tessera/runtime/error.hpp"
#include "tessera/storage/disk_tier.hpp"

namespace tessera::graph {

namespace {

void check_keep(const EdgeList& g, const DistArray<std::uint8_t>& keep) {
  if (!(keep.distribution() == g.vertex_ranges()))
    throw MismatchError("the kept vertices are not distributed like the graph's vertices (" +
                        std::to_string(keep.size()) + " flags, " + std::to_string(g.vertices()) + " vertices)");
}

// The new vertex ranges and, per kept vertex, its id in g.
struct Renumbering {
  std::uint64_t local_kept = 0, first = 0, total = 0;
  Distribution ranges;
  DistArray<std::uint64_t> original;
};

Renumbering renumber(const EdgeList& g, const DistArray<std::uint8_t>& keep, const StorageOptions& ids_storage) {
  Runtime& rt = g.runtime();
  auto k = keep.local();
  std::uint64_t kept = 0;
  for (auto x : k) kept += x != 0;
  auto ranges = Distribution::weighted_block(all_gather(rt.comm(), kept));
  const std::uint64_t first = exclusive_prefix_sum(rt.comm(), kept), total = ranges.size();
  DistArray<std::uint64_t> original(rt, ranges, array_storage(ids_storage, "ids"));
  std::uint64_t next = 0;
  for (std::size_t i = 0; i < k.size(); ++i)
    if (k[i]) original.local()[next++] = g.local_vertex_begin() + i;
  return {kept, first, total, std::move(ranges), std::move(original)};
}

// Rows of the kept vertices with their arcs renumbered, from (rows, d, w)
// into (out_rows, out, out_w), which may be the same arrays: arc k is read
// before any arc at or beyond it is written. Arcs to dropped vertices are
// removed after the renumbering (their new id is `none`). Returns the arcs
// kept; out_rows gets local_kept + 1 entries.
// `release_source`: the input is a file mapping (Shared storage) left
// behind by a copy; its pages leave the resident set once read, so a copy
// from a mapped file never holds both whole (the page cache keeps them).
template <class Id>
std::uint64_t keep_rows(const Map& vertex_map, std::uint64_t vertices, std::span<const std::uint8_t> k,
                        const Renumbering& n,
                        std::span<const std::uint64_t> rows, std::span<const Id> d, std::span<const double> w,
                        std::span<std::uint64_t> out_rows, std::span<Id> out, std::span<double> out_w,
                        bool release_source = false) {
  constexpr Id none = std::numeric_limits<Id>::max();
  // Every vertex kept below 2^32 (narrow ids) leaves `none` free as a mark;
  // when every vertex is kept nothing is dropped and no mark is needed.
  const bool drops = n.total < vertices;
  std::optional<DistArray<Id>> new_id;
  new_id.emplace(vertex_map, StorageOptions::heap());
  {
    std::uint64_t next = n.first;
    auto ids = new_id->local();
    for (std::size_t i = 0; i < k.size(); ++i) ids[i] = k[i] ? static_cast<Id>(next++) : none;
  }
  std::uint64_t j = 0, row = 0, first = rows[0];
  {
    SrcAggregator<Id> read(*new_id);
    out_rows[0] = 0;
    std::uint64_t released = 0;
    constexpr std::uint64_t kReleaseArcs = std::uint64_t{16} << 20;
    for (std::size_t i = 0; i + 1 < rows.size(); ++i) {
      const std::uint64_t last = rows[i + 1];  // read before out_rows[row + 1] (maybe rows[i + 1]) is written
      if (release_source && first - released >= kReleaseArcs) {
        release_file_pages(d.data(), released, first);
        if (!w.empty())
          release_file_pages(w.data(), released, first);
        released = first;
      }
      if (k[i]) {
        for (std::uint64_t e = first; e < last; ++e, ++j) {
          read.get(static_cast<std::uint64_t>(d[e]), out[j]);
          if (!w.empty()) out_w[j] = w[e];
        }
        out_rows[++row] = j;
      }
      first = last;
    }
  }  // the reads land here
  new_id.reset();
  if (!drops) return j;
  // Arcs whose head was dropped go, in place; rows shift down.
  std::uint64_t kept = 0;
  first = 0;
  for (std::uint64_t r = 0; r < row; ++r) {
    const std::uint64_t last = out_rows[r + 1];
    for (std::uint64_t e = first; e < last; ++e)
      if (out[e] != none) {
        out[kept] = out[e];
        if (!out_w.empty()) out_w[kept] = out_w[e];
        ++kept;
      }
    out_rows[r + 1] = kept;
    first = last;
  }
  return kept;
}

}  // namespace

Subgraph induced_subgraph(const EdgeList& g, const DistArray<std::uint8_t>& keep, const StorageOptions& storage) {
  check_keep(g, keep);
  Runtime& rt = g.runtime();
  Renumbering n = renumber(g, keep, storage);
  auto k = keep.local();
  auto rows = g.row_offsets();
  // Arrays as long as the kept rows, shrunk to the arcs that stay.
  std::uint64_t upper = 0;
  for (std::size_t i = 0; i < k.size(); ++i)
    if (k[i]) upper += rows[i + 1] - rows[i];
  auto counted = Distribution::weighted_block(all_gather(rt.comm(), upper));
  DistArray<std::uint64_t> offsets(rt, Distribution::weighted_block(all_gather(rt.comm(), n.local_kept + 1)),
                                   array_storage(storage, "offsets"));
  std::optional<DistArray<double>> weight;
  if (g.weighted()) weight.emplace(rt, counted, array_storage(storage, "weight"));
  IdArray dst = g.with_dst([&](auto d) -> IdArray {
    using Id = typename decltype(d)::value_type;
    DistArray<Id> out(rt, counted, array_storage(storage, "dst"));
    const std::uint64_t arcs = keep_rows<Id>(g.vertex_map(), g.vertices(), k, n, rows, d, g.local_weight(), offsets.local(), out.local(),
                                             weight ? weight->local() : std::span<double>{},
                                             g.storage_kind() == StorageKind::shared);
    auto final_ranges = Distribution::weighted_block(all_gather(rt.comm(), arcs));
    out.shrink(final_ranges);
    if (weight) weight->shrink(final_ranges);
    return out;
  });
  return {EdgeList::adopt(n.total, g.directed(), std::move(n.ranges), std::move(offsets), std::move(dst),
                          std::move(weight)),
          std::move(n.original)};
}

Subgraph induced_subgraph(EdgeList&& g, const DistArray<std::uint8_t>& keep, const StorageOptions& ids_storage) {
  check_keep(g, keep);
  Runtime& rt = g.runtime();
  Renumbering n = renumber(g, keep, ids_storage);
  agree(rt.comm(), [&] {
    if (!g.offsets().shrinkable())
      throw MismatchError("the graph's arrays (" + g.offsets_metadata_path() +
                          ") are another job's, mapped in place: they cannot be compacted here; extract a copy");
  });
  const std::uint64_t vertices = g.vertices();
  const bool directed = g.directed();
  const Map vertex_map = g.vertex_map();
  auto k = keep.local();
  auto [offsets, dst, weight] = std::move(g).release_arrays();
  auto rows = offsets.local();
  std::span<double> w = weight ? weight->local() : std::span<double>{};
  const std::uint64_t arcs = std::visit(
      [&](auto& a) {
        using Id = typename std::remove_reference_t<decltype(a)>::value_type;
        return keep_rows<Id>(vertex_map, vertices, k, n, rows, a.local(), w, rows, a.local(), w);
      },
      dst);
  auto final_ranges = Distribution::weighted_block(all_gather(rt.comm(), arcs));
  offsets.shrink(Distribution::weighted_block(all_gather(rt.comm(), n.local_kept + 1)));
  std::visit([&](auto& a) { a.shrink(final_ranges); }, dst);
  if (weight) weight->shrink(final_ranges);
  return {EdgeList::adopt(n.total, directed, std::move(n.ranges), std::move(offsets), std::move(dst), std::move(weight)),
          std::move(n.original)};
}

}  // namespace tessera::graph
