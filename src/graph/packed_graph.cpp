// PackedGraph: numbering by degree, packing the rows, and unpacking them.
#include "tessera/graph/packed_graph.hpp"

#include <algorithm>
#include <unordered_map>

#include "tessera/comm/aggregators.hpp"
#include "tessera/runtime/collective.hpp"
#include "tessera/runtime/error.hpp"
#include "tessera/runtime/trace.hpp"

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
template <class Id>
DistArray<Id> ids_by_degree(const EdgeList& g, std::uint64_t blocks, std::optional<Distribution>& ranges) {
  Runtime& rt = g.runtime();
  auto rows = g.row_offsets();
  const std::uint64_t n = g.vertices(), base = g.local_vertex_begin();
  auto block_of = [&](std::uint64_t v) {
    return static_cast<std::uint64_t>(static_cast<unsigned __int128>(v) * blocks / std::max<std::uint64_t>(n, 1));
  };
  ClassCounts mine;
  for (std::size_t i = 0; i + 1 < rows.size(); ++i) ++mine[{block_of(base + i), rows[i + 1] - rows[i]}];
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
  DistArray<Id> ids(g.vertex_map(), StorageOptions::heap());
  auto out = ids.local();
  for (std::size_t i = 0; i + 1 < rows.size(); ++i)
    out[i] = static_cast<Id>(next[{block_of(base + i), rows[i + 1] - rows[i]}]++);
  return ids;
}

// g with vertex v renamed new_id[v]; `original` receives new -> old ids.
template <class Id>
EdgeList renamed(const EdgeList& g, const DistArray<Id>& new_id, const Distribution& ranges,
                 std::optional<DistArray<std::uint64_t>>& original, const StorageOptions& ids_storage) {
  Runtime& rt = g.runtime();
  auto dst = g.local_dst_as<Id>();
  std::vector<Id> heads(dst.size());
  {
    SrcAggregator<Id> read(new_id);
    for (std::size_t k = 0; k < dst.size(); ++k) read.get(static_cast<std::uint64_t>(dst[k]), heads[k]);
  }
  auto rows = g.row_offsets();
  auto tails = new_id.local();
  EdgeSource source = [&](const EdgeSink& sink) {
    constexpr std::size_t kBatch = std::size_t{1} << 16;
    std::vector<std::uint64_t> s, d;
    s.reserve(kBatch);
    d.reserve(kBatch);
    for (std::size_t i = 0; i + 1 < rows.size(); ++i)
      for (std::uint64_t k = rows[i]; k < rows[i + 1]; ++k) {
        s.push_back(tails[i]);
        d.push_back(heads[k]);
        if (s.size() == kBatch) {
          sink({s, d, {}});
          s.clear();
          d.clear();
        }
      }
    if (!s.empty()) sink({s, d, {}});
  };
  BuildOptions build;
  build.id_width = g.id_width();
  build.storage = StorageOptions::heap();
  build.vertex_ranges = ranges;
  EdgeList out = EdgeList::build(rt, g.vertices(), g.directed(), source, build);
  original.emplace(out.vertex_map(), ids_storage);
  {
    DstAggregator<std::uint64_t> put(*original);
    for (std::size_t i = 0; i < tails.size(); ++i) put.put(tails[i], g.local_vertex_begin() + i);
  }
  return out;
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

PackedGraph PackedGraph::pack(const EdgeList& g, const PackOptions& options) {
  if (g.weighted())
    throw ConfigError("a packed graph holds no weights: keep a weighted graph as an EdgeList (or drop its weights)");
  trace::Span span(trace::Category::phase, "pack graph");
  Runtime& rt = g.runtime();
  std::optional<DistArray<std::uint64_t>> original;
  std::optional<EdgeList> numbered;
  if (options.by_degree)
    g.with_dst([&](auto dst) {
      using Id = std::remove_const_t<typename decltype(dst)::element_type>;
      std::optional<Distribution> ranges;
      const std::uint64_t blocks =
          options.blocks ? options.blocks : std::clamp<std::uint64_t>(g.vertices() >> 16, 1, 16);
      auto ids = ids_by_degree<Id>(g, blocks, ranges);
      numbered.emplace(renamed(g, ids, *ranges, original, array_storage(options.storage, "ids")));
    });
  const EdgeList& plain = numbered ? *numbered : g;
  const std::uint64_t base = plain.local_vertex_begin();
  auto rows = plain.row_offsets();
  const std::size_t n_local = plain.local_vertices();
  DistArray<std::uint64_t> offsets(rt, Distribution::weighted_block(all_gather(rt.comm(), std::uint64_t{n_local + 1})),
                                   array_storage(options.storage, "offsets"));
  auto off = offsets.local();
  plain.with_dst([&](auto dst) {
    off[0] = 0;
    for (std::size_t i = 0; i < n_local; ++i)
      off[i + 1] = off[i] + byte_code::row_size(base + i, dst.subspan(rows[i], rows[i + 1] - rows[i]));
  });
  DistArray<std::uint8_t> bytes(rt, Distribution::weighted_block(all_gather(rt.comm(), off[n_local])),
                                array_storage(options.storage, "bytes"));
  plain.with_dst([&](auto dst) {
    std::uint8_t* out = bytes.local().data();
    for (std::size_t i = 0; i < n_local; ++i)
      byte_code::put_row(base + i, dst.subspan(rows[i], rows[i + 1] - rows[i]), out + off[i]);
  });
  return PackedGraph(g.vertices(), g.directed(), g.self_loops(), std::move(offsets), std::move(bytes), std::move(original));
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
