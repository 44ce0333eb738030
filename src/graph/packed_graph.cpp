// PackedGraph: numbering by degree, packing the rows, and unpacking them.
#include "tessera/graph/packed_graph.hpp"

#include <algorithm>
#include <unordered_map>

#include "tessera/comm/aggregators.hpp"
#include "tessera/runtime/collective.hpp"
#include "tessera/runtime/error.hpp"
#include "tessera/runtime/trace.hpp"
#include "tessera/storage/mapping.hpp"
#include "build_parts.hpp"
#include "row_blocks.hpp"

namespace tessera::graph {

namespace {

// A class of vertices numbered together: its block of old ids, its degree.
struct DegreeClass {
  std::uint64_t block, degree;
  bool operator==(const DegreeClass&) const = default;
};
struct DegreeClassHash {
  std::size_t operator()(const DegreeClass& c) const noexcept { return std::hash<std::uint64_t>()(c.block * 0x9e3779b97f4a7c15ull ^ c.degree); }
};
using ClassCounts = std::unordered_map<DegreeClass, std::uint64_t, DegreeClassHash>;

// New ids for g's local vertices: the old ids cut into `blocks` equal
// blocks, each block's vertices by decreasing degree, ties in id order.
// Every rank learns how many vertices of each class the ranks before it
// hold, so the numbering is a prefix sum over (block, degree, rank, vertex)
// and does not depend on the rank count.
// `ranges` receives the vertex ranges of the numbered graph: contiguous
// new ids with about equal arcs + vertices a rank (a sweep costs per vertex
// too, and a block's hubs and its low-degree vertices differ tenfold).
// `degree`: the arcs out of each local vertex of `old` (a build's counts).
template <class Id>
DistArray<Id> ids_by_degree(const DistArray<std::uint64_t>& degree, std::uint64_t blocks,
                            std::optional<Distribution>& ranges) {
  Runtime& rt = degree.runtime();
  auto deg = degree.local();
  const std::uint64_t n = degree.size(), base = degree.local_begin();
  auto block_of = [&](std::uint64_t v) {
    return static_cast<std::uint64_t>(static_cast<unsigned __int128>(v) * blocks / std::max<std::uint64_t>(n, 1));
  };
  ClassCounts mine;
  for (std::size_t i = 0; i < deg.size(); ++i) ++mine[{block_of(base + i), deg[i]}];
  std::vector<std::uint64_t> flat;  // (block, degree, count) triples
  for (auto [c, k] : mine) flat.insert(flat.end(), {c.block, c.degree, k});
  const auto counts = all_gather(rt.comm(), static_cast<int>(flat.size()));
  std::vector<int> displs(counts.size() + 1, 0);
  for (std::size_t r = 0; r < counts.size(); ++r) displs[r + 1] = displs[r] + counts[r];
  std::vector<std::uint64_t> all(static_cast<std::size_t>(displs.back()));
  std::copy(flat.begin(), flat.end(), all.begin() + displs[static_cast<std::size_t>(rt.rank())]);
  all_gather_in_place<std::uint64_t>(rt.comm(), all, counts, std::span<const int>(displs).first(counts.size()));
  // total over all ranks, before over the ranks before this one.
  ClassCounts total, before;
  for (int r = 0; r < rt.size(); ++r)
    for (int k = displs[static_cast<std::size_t>(r)]; k < displs[static_cast<std::size_t>(r) + 1]; k += 3) {
      const DegreeClass c{all[static_cast<std::size_t>(k)], all[static_cast<std::size_t>(k) + 1]};
      total[c] += all[static_cast<std::size_t>(k) + 2];
      if (r < rt.rank()) before[c] += all[static_cast<std::size_t>(k) + 2];
    }
  std::vector<std::pair<DegreeClass, std::uint64_t>> classes(total.begin(), total.end());
  std::sort(classes.begin(), classes.end(), [](const auto& a, const auto& b) {
    return a.first.block != b.first.block ? a.first.block < b.first.block : a.first.degree > b.first.degree;
  });
  ClassCounts next;  // the next new id of each class here
  std::uint64_t start = 0, cost = 0;
  for (auto [c, k] : classes) {
    next[c] = start + before[c];
    start += k;
    cost += (c.degree + 1) * k;
  }
  const auto P = static_cast<std::uint64_t>(rt.size());
  std::vector<std::uint64_t> range_sizes(P, 0);
  std::uint64_t cut_id = 0;  // where the current rank's range starts
  for (std::uint64_t r = 1; r < P; ++r) {
    const std::uint64_t target = cost / P * r + cost % P * r / P;
    auto it = classes.begin();
    std::uint64_t first_id = 0, spent = 0;  // at the start of class *it
    for (; it != classes.end() && spent + (it->first.degree + 1) * it->second <= target; ++it) {
      spent += (it->first.degree + 1) * it->second;
      first_id += it->second;
    }
    std::uint64_t cut = first_id;
    if (it != classes.end()) cut += std::min(it->second, (target - spent) / (it->first.degree + 1));
    cut = std::max(cut, cut_id);
    range_sizes[r - 1] = cut - cut_id;
    cut_id = cut;
  }
  range_sizes[P - 1] = n - cut_id;
  ranges = Distribution::weighted_block(range_sizes);
  DistArray<Id> ids(degree.map(), StorageOptions::heap());
  auto out = ids.local();
  for (std::size_t i = 0; i < deg.size(); ++i) out[i] = static_cast<Id>(next[{block_of(base + i), deg[i]}]++);
  return ids;
}

// Every rank's copy of the numbering (old id -> new id), all-gathered in
// pieces of at most 2^26 ids a rank (MPI counts are ints). A copy a rank
// (4 bytes a vertex at 32-bit ids): the fill renames both ends of every arc
// the source gives, wherever they are, without a message per arc.
template <class Id>
std::vector<Id> whole_numbering(Runtime& rt, const DistArray<Id>& local_ids) {
  const auto& d = local_ids.distribution();
  std::vector<Id> all;
  all.reserve(d.size());  // untouched yet: huge pages make its random reads miss the TLB less
  prefer_huge_pages(std::as_writable_bytes(std::span<Id>(all.data(), d.size())));
  all.resize(d.size());
  constexpr std::uint64_t kPiece = std::uint64_t{1} << 26;
  const auto P = static_cast<std::size_t>(rt.size());
  std::uint64_t longest = 0;
  for (int r = 0; r < rt.size(); ++r) longest = std::max(longest, d.count(r));
  auto mine = local_ids.local();
  std::vector<Id> gathered;
  for (std::uint64_t at = 0; at < longest; at += kPiece) {
    std::vector<int> counts(P), displs(P + 1, 0);
    for (std::size_t r = 0; r < P; ++r) {
      const std::uint64_t c = d.count(static_cast<int>(r));
      counts[r] = static_cast<int>(c > at ? std::min(kPiece, c - at) : 0);
      displs[r + 1] = displs[r] + counts[r];
    }
    gathered.assign(static_cast<std::size_t>(displs[P]), Id{});
    const auto me = static_cast<std::size_t>(rt.rank());
    std::copy_n(mine.begin() + static_cast<std::ptrdiff_t>(std::min<std::uint64_t>(at, mine.size())), counts[me],
                gathered.begin() + displs[me]);
    all_gather_in_place<Id>(rt.comm(), gathered, counts, std::span<const int>(displs).first(P));
    for (std::size_t r = 0; r < P; ++r)
      std::copy_n(gathered.begin() + displs[r], counts[r],
                  all.begin() + static_cast<std::ptrdiff_t>(d.begin(static_cast<int>(r)) + at));
  }
  return all;
}

// PackedGraph::build at id type Id, after the counting pass: the numbering
// (by the counted degrees), each new vertex's counted arcs at its new owner,
// then one pass over the source a window of rows: the window's arcs placed
// (renamed), its rows sorted and cleaned, packed into a piece of bytes; the
// pieces copied into the byte array once their total is known.
template <class Id>
PackedGraph build_packed(Runtime& rt, std::uint64_t n, bool directed, const EdgeSource& source,
                         const BuildOptions& opt, const PackOptions& options, build_parts::ArcCounts counted) {
  using namespace build_parts;
  const bool sym = opt.symmetrize, drop_loops = opt.drop_self_loops;
  const bool dedupe = opt.drop_duplicates || (sym && !opt.keep_duplicates);
  const DistArray<std::uint64_t>& degree = counted.degree;
  std::optional<Distribution> ranges;
  std::optional<DistArray<Id>> new_ids;  // of this rank's old vertices (by_degree)
  if (options.by_degree) {
    const std::uint64_t blocks = options.blocks ? options.blocks : std::clamp<std::uint64_t>(n >> 16, 1, 16);
    new_ids.emplace(ids_by_degree<Id>(degree, blocks, ranges));
  } else {
    ranges = opt.vertex_ranges ? *opt.vertex_ranges : balanced_vertex_ranges(rt, degree);
  }
  const std::uint64_t lo = ranges->begin(rt.rank());
  const std::size_t local_n = ranges->count(rt.rank());
  // The counted arcs of this rank's new vertices, and (by_degree) new -> old.
  std::vector<std::uint64_t> cursor;
  std::optional<DistArray<std::uint64_t>> original;
  if (new_ids) {
    DistArray<std::uint64_t> moved(rt, *ranges, StorageOptions::heap());
    original.emplace(rt, *ranges, array_storage(options.storage, "ids"));
    {
      DstAggregator<std::uint64_t> put_degree(moved), put_original(*original);
      auto ids = new_ids->local();
      auto deg = degree.local();
      for (std::size_t i = 0; i < ids.size(); ++i) {
        put_degree.put(ids[i], deg[i]);
        put_original.put(ids[i], degree.local_begin() + i);
      }
    }
    auto m = moved.local();
    cursor.assign(m.begin(), m.end());
  } else {
    cursor = moved_to(rt, degree, *ranges);
  }
  const std::vector<Id> numbering = new_ids ? whole_numbering(rt, *new_ids) : std::vector<Id>{};
  new_ids.reset();
  { [[maybe_unused]] auto counts_done = std::move(counted.degree); }  // 8 bytes a vertex given back
  // Counted row offsets (arcs); cursor: each row's next slot.
  std::vector<std::uint64_t> row(local_n + 1, 0);
  for (std::size_t i = 0; i < local_n; ++i) {
    row[i + 1] = row[i] + cursor[i];
    cursor[i] = row[i];
  }
  DistArray<std::uint64_t> offsets(rt, Distribution::weighted_block(all_gather(rt.comm(), std::uint64_t{local_n + 1})),
                                   array_storage(options.storage, "offsets"));
  auto off = offsets.local();
  off[0] = 0;
  // Windows are sized as each pass starts, from the memory then available:
  // the first takes most of the rows, later ones what the packed rows of the
  // earlier ones left (kron-27 at 2 ranks: 2 passes where windows sized once
  // at a third of memory took 3, each a pass over the source).
  std::vector<Id> window_dst;
  std::vector<std::vector<std::uint8_t>> pieces;  // each window's rows, packed
  std::uint64_t overflow = 0, loops = 0, repeats[2] = {0, 0};
  auto rename = [&](std::uint64_t v) { return numbering.empty() ? static_cast<Id>(v) : numbering[v]; };
  std::size_t next_row = 0;  // the first local row no window has taken
  for (std::uint64_t pass = 0; all_reduce<int>(rt.comm(), next_row < local_n ? 1 : 0, MPI_MAX); ++pass) {
    release(window_dst);
    const std::uint64_t window_arcs = fill_window_arcs(rt, sizeof(Id), 0.5);
    const std::size_t first_row = next_row;
    if (next_row < local_n) next_row = row_block_end(row, next_row, window_arcs);
    const std::size_t window_rows = next_row - first_row;
    const bool mine = window_rows > 0;
    const bool whole = all_reduce<int>(rt.comm(), pass == 0 && next_row == local_n ? 1 : 0, MPI_MIN) != 0;
    if (opt.on_phase)
      opt.on_phase(whole ? std::string("placing the arcs")
                         : "placing the arcs: window " + std::to_string(pass + 1) + " (each window a pass over the source)");
    std::array<std::uint64_t, 2> window{0, 0};  // global new ids [from, to) of the rows filled here in this pass
    if (mine) window = {lo + first_row, lo + first_row + window_rows};
    const auto windows = all_gather(rt.comm(), window);
    const std::uint64_t shift = row[first_row];
    window_dst.resize(row[next_row] - shift);
    auto write = [&](const FillArc<Id, false>& a) {
      const std::size_t i = a.u - lo;
      if (cursor[i] == row[i + 1]) return void(++overflow);  // more than counted: reported below
      window_dst[cursor[i]++ - shift] = a.v;
    };
    place_arcs<Id, false>(rt, source, *ranges, windows, lo + first_row, window_rows,
                          row[first_row + window_rows] - shift, sym, drop_loops, rename, write);
    check_filled(rt.comm(), overflow, cursor, row, lo, first_row, first_row + window_rows, "this pass",
                 "the same edges every pass");
    if (opt.on_phase)
      opt.on_phase("sorting, cleaning and packing the rows" + (whole ? std::string() : " of window " + std::to_string(pass + 1)));
    if (!mine) continue;
    // Sorted and cleaned in the window, then packed: sizes first, then bytes.
    std::vector<std::uint64_t> window_row(row.begin() + static_cast<std::ptrdiff_t>(first_row),
                                          row.begin() + static_cast<std::ptrdiff_t>(first_row + window_rows + 1));
    for (auto& r : window_row) r -= shift;
    clean_rows<Id>(window_row, window_dst, {}, lo + first_row, drop_loops, dedupe, false, repeats);
    const std::span<const Id> arcs(window_dst);
    auto row_of = [&](std::size_t k) { return arcs.subspan(window_row[k], window_row[k + 1] - window_row[k]); };
    for (std::size_t k = 0; k < window_rows; ++k) {
      const std::uint64_t u = lo + first_row + k;
      if (!drop_loops) loops += static_cast<std::uint64_t>(std::count(row_of(k).begin(), row_of(k).end(), static_cast<Id>(u)));
      off[first_row + k + 1] = off[first_row + k] + byte_code::row_size(u, row_of(k));
    }
    auto& piece = pieces.emplace_back(off[first_row + window_rows] - off[first_row]);
    std::uint8_t* out = piece.data();
    for (std::size_t k = 0; k < window_rows; ++k) out = byte_code::put_row(lo + first_row + k, row_of(k), out);
  }
  release(window_dst);
  release(cursor);
  if (opt.counts) {
    std::uint64_t totals[3] = {counted.loops_seen, repeats[0], repeats[1]};
    all_reduce(rt.comm(), totals, 3, MPI_SUM);
    *opt.counts = {totals[0], totals[1], totals[2]};
  }
  DistArray<std::uint8_t> bytes(rt, Distribution::weighted_block(all_gather(rt.comm(), off[local_n])),
                                array_storage(options.storage, "bytes"));
  std::uint8_t* at = bytes.local().data();
  for (auto& piece : pieces) {  // each piece freed once copied: the rows are held once, plus a piece
    at = std::copy(piece.begin(), piece.end(), at);
    release(piece);
  }
  loops = all_reduce(rt.comm(), loops, MPI_SUM);
  return PackedGraph::adopt(n, sym ? false : directed, loops, std::move(offsets), std::move(bytes), std::move(original));
}
}  // namespace

PackedGraph::PackedGraph(std::uint64_t vertices, bool directed, std::uint64_t self_loops,
                         DistArray<std::uint64_t> offsets, DistArray<std::uint8_t> bytes,
                         std::optional<DistArray<std::uint64_t>> original_ids)
    : vertices_(vertices),
      self_loops_(self_loops),
      directed_(directed),
      vertex_map_(offsets.runtime(), [&] {
        std::vector<std::uint64_t> counts(static_cast<std::size_t>(offsets.distribution().ranks()));
        for (int r = 0; r < offsets.distribution().ranks(); ++r)
          counts[static_cast<std::size_t>(r)] = offsets.distribution().count(r) - 1;
        return Distribution::weighted_block(counts);
      }()),
      offsets_(std::move(offsets)),
      bytes_(std::move(bytes)),
      original_ids_(std::move(original_ids)) {
  auto r = rows();
  for (std::size_t i = 0; i < r.size(); ++i) local_arcs_ += r.degree(i);
  arcs_ = all_reduce(runtime().comm(), local_arcs_, MPI_SUM);
}

PackedGraph PackedGraph::adopt(std::uint64_t vertices, bool directed, std::uint64_t self_loops,
                               DistArray<std::uint64_t> offsets, DistArray<std::uint8_t> bytes,
                               std::optional<DistArray<std::uint64_t>> original_ids) {
  return PackedGraph(vertices, directed, self_loops, std::move(offsets), std::move(bytes), std::move(original_ids));
}

PackedGraph PackedGraph::pack(const EdgeList& g, const PackOptions& options) {
  if (g.weighted())
    throw ConfigError("a packed graph holds no weights: keep a weighted graph as an EdgeList (or drop its weights)");
  // g's rows as they are (no cleaning): the counted degrees are g's own.
  BuildOptions as_is;
  as_is.id_width = g.id_width();
  if (!options.by_degree) as_is.vertex_ranges = g.vertex_ranges();  // g's own layout
  return build(g.runtime(), g.vertices(), g.directed(), build_parts::source_of(g, false), as_is, options);
}

PackedGraph PackedGraph::build(Runtime& rt, std::uint64_t n, bool directed, const EdgeSource& source,
                               const BuildOptions& opt, const PackOptions& options) {
  trace::Span span(trace::Category::phase, "pack graph");
  const IdWidth width = opt.id_width ? *opt.id_width : id_width_for(n);
  if (width == IdWidth::narrow && n > (std::uint64_t{1} << 32))
    throw RangeError("a graph of " + std::to_string(n) + " vertices needs 64-bit vertex ids, not 32-bit");
  if (opt.vertex_ranges && options.by_degree)
    throw ConfigError("a packed graph numbered by degree chooses its own vertex ranges (they balance its rows' "
                      "costs): build it without vertex_ranges, or with by_degree off");
  if (opt.vertex_ranges && (opt.vertex_ranges->size() != n || opt.vertex_ranges->ranks() != rt.size()))
    throw MismatchError("the vertex ranges asked for cover " + std::to_string(opt.vertex_ranges->size()) +
                        " vertices on " + std::to_string(opt.vertex_ranges->ranks()) + " ranks, not " +
                        std::to_string(n) + " on " + std::to_string(rt.size()));
  if (opt.on_phase) opt.on_phase("counting the arcs of every vertex (a pass over the source)");
  auto counted = build_parts::count_arcs(rt, n, source, opt.symmetrize, opt.drop_self_loops);
  if (counted.weighted)
    throw ConfigError("a packed graph holds no weights: keep a weighted graph as an EdgeList (or drop its weights)");
  return with_id_type(width, [&](auto zero) {
    return build_packed<decltype(zero)>(rt, n, directed, source, opt, options, std::move(counted));
  });
}

DistArray<std::uint64_t> PackedGraph::out_degrees() const {
  DistArray<std::uint64_t> d(vertex_map_);
  auto out = d.local();
  auto r = rows();
  for (std::size_t i = 0; i < r.size(); ++i) out[i] = r.degree(i);
  return d;
}

EdgeList PackedGraph::unpacked(const StorageOptions& storage) const {
  auto r = rows();
  const std::uint64_t base = local_vertex_begin();
  EdgeSource source = [&](const EdgeSink& sink) {
    std::vector<std::uint64_t> s, d;
    for (std::size_t i = 0; i < r.size(); ++i) {
      r.for_each(i, [&](std::uint64_t v) {
        s.push_back(base + i);
        d.push_back(v);
      });
      if (s.size() >= (std::size_t{1} << 16)) {
        sink({s, d, {}});
        s.clear();
        d.clear();
      }
    }
    if (!s.empty()) sink({s, d, {}});
  };
  BuildOptions build;
  build.vertex_ranges = vertex_ranges();
  build.storage = storage;
  return EdgeList::build(runtime(), vertices_, directed_, source, build);
}

}  // namespace tessera::graph
