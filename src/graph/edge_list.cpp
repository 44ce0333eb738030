#include "tessera/graph/edge_list.hpp"

#include <algorithm>
#include <cstdlib>

#include "tessera/comm/aggregators.hpp"
#include "tessera/comm/bulk_exchange.hpp"
#include "tessera/runtime/collective.hpp"

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

void check_ids(Runtime& rt, std::uint64_t n, const LocalEdges& e) {
  agree(rt.comm(), [&] {
    if (e.weighted() && e.weight.size() != e.src.size())
      throw MismatchError("edge list has " + std::to_string(e.src.size()) + " edges but " +
                          std::to_string(e.weight.size()) + " weights");
    if (e.dst.size() != e.src.size())
      throw MismatchError("edge list has " + std::to_string(e.src.size()) + " sources but " +
                          std::to_string(e.dst.size()) + " destinations");
    for (std::size_t k = 0; k < e.src.size(); ++k)
      if (e.src[k] >= n || e.dst[k] >= n)
        throw RangeError("edge (" + std::to_string(e.src[k]) + ", " + std::to_string(e.dst[k]) +
                         ") names a vertex outside [0, " + std::to_string(n) + ")");
  });
}

// Vertex ranges that give every rank about E/P edges: boundary k is placed
// after the vertex holding edge number ceil(k E / P) in source order.
Distribution balanced_vertex_ranges(Runtime& rt, std::uint64_t n, std::span<const std::uint64_t> sources) {
  const int P = rt.size();
  DistArray<std::uint64_t> degree(rt, n);
  {
    UpdateAggregator<std::uint64_t, ops::Add> add(degree);
    for (auto u : sources) add.update(u, 1);
  }
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
  std::vector<std::uint64_t> sizes(static_cast<std::size_t>(P));
  for (int r = 0; r < P; ++r) {
    auto ur = static_cast<std::size_t>(r);
    bounds[ur + 1] = std::max(bounds[ur + 1], bounds[ur]);
    sizes[ur] = bounds[ur + 1] - bounds[ur];
  }
  return Distribution::weighted_block(sizes);
}

// Adds (v, u) for every (u, v) that is not a self loop. Each array grows to
// its exact new size one at a time, so the old and new copies of only one
// array coexist.
void add_reverses(LocalEdges& e, bool weighted) {
  const std::size_t m = e.size();
  std::size_t loops = 0;
  for (std::size_t k = 0; k < m; ++k) loops += e.src[k] == e.dst[k];
  auto grow = [&](auto& array, auto&& appended) {
    std::remove_reference_t<decltype(array)> bigger;
    bigger.reserve(2 * m - loops);
    bigger.insert(bigger.end(), array.begin(), array.end());
    for (std::size_t k = 0; k < m; ++k)
      if (e.src[k] != e.dst[k]) bigger.push_back(appended(k));
    array = std::move(bigger);  // frees the old copy
  };
  grow(e.src, [&](std::size_t k) { return e.dst[k]; });  // e.src[k] for k < m is unchanged
  grow(e.dst, [&](std::size_t k) { return e.src[k]; });
  if (weighted) grow(e.weight, [&](std::size_t k) { return e.weight[k]; });
}

// Orders the arcs by the owner of their source, in place (American flag
// sort: O(ranks) extra memory); counts[r] arcs go to rank r.
void group_by_owner(LocalEdges& e, const Distribution& ranges, std::span<const std::uint64_t> counts, bool weighted) {
  const std::size_t P = counts.size();
  std::vector<std::uint64_t> next(P, 0), end(P, 0);
  for (std::size_t r = 0; r < P; ++r) {
    next[r] = r ? end[r - 1] : 0;
    end[r] = next[r] + counts[r];
  }
  for (std::size_t r = 0; r < P; ++r)
    while (next[r] < end[r]) {
      const std::size_t k = next[r];
      const auto o = static_cast<std::size_t>(ranges.owner(e.src[k]));
      if (o == r) {
        ++next[r];
        continue;
      }
      const std::size_t to = next[o]++;
      std::swap(e.src[k], e.src[to]);
      std::swap(e.dst[k], e.dst[to]);
      if (weighted) std::swap(e.weight[k], e.weight[to]);
    }
}

// One of the arrays, sent to the owners of the sources; the input is freed.
template <class T>
std::vector<T> send_to_owners(Runtime& rt, std::vector<T>& array, std::span<const std::uint64_t> counts) {
  if (rt.size() == 1) return std::move(array);
  std::vector<std::uint64_t> received_counts;
  auto got = comm::exchange<T>(rt.comm(), std::span<const T>(array), counts, received_counts);
  array = std::vector<T>{};
  return got;
}

// Peak memory: the input plus one received array while exchanging (each
// array is sent and freed in turn), then the received arrays and one sorted
// array; the edge arrays are allocated at their exact size once the rest is
// freed. So a build never holds more than 1.5x the arcs beyond its input.
// `weighted`: the graph's, agreed by all ranks (a rank without edges has
// no weights to show).
EdgeList build_arrays(Runtime& rt, std::uint64_t n, bool directed, LocalEdges edges, const BuildOptions& opt,
                      const Distribution* fixed_ranges, bool weighted) {
  const bool sym = opt.symmetrize;
  const IdWidth width = opt.id_width ? *opt.id_width : id_width_for(n);
  if (width == IdWidth::narrow && n > (std::uint64_t{1} << 32))
    throw RangeError("a graph of " + std::to_string(n) + " vertices needs 64-bit vertex ids, not 32-bit");
  if (sym) add_reverses(edges, weighted);
  Distribution ranges = fixed_ranges ? *fixed_ranges : balanced_vertex_ranges(rt, n, edges.src);

  const auto P = static_cast<std::size_t>(rt.size());
  std::vector<std::uint64_t> counts(P, 0);
  if (P > 1) {
    for (auto u : edges.src) ++counts[static_cast<std::size_t>(ranges.owner(u))];
    group_by_owner(edges, ranges, counts, weighted);
  }
  auto src = send_to_owners(rt, edges.src, counts);
  auto dst = send_to_owners(rt, edges.dst, counts);
  std::vector<double> weight;
  if (weighted) weight = send_to_owners(rt, edges.weight, counts);
  edges = LocalEdges{};

  // Counting sort by source: row offsets, then every arc's destination
  // (and weight) in its row.
  const std::uint64_t lo = ranges.begin(rt.rank());
  const std::size_t local_n = static_cast<std::size_t>(ranges.count(rt.rank()));
  std::vector<std::uint64_t> row(local_n + 1, 0);
  for (auto u : src) ++row[u - lo + 1];
  for (std::size_t i = 0; i < local_n; ++i) row[i + 1] += row[i];
  std::vector<std::uint64_t> sorted_dst(dst.size());
  std::vector<double> sorted_weight(weight.size());
  {
    std::vector<std::uint64_t> at(row.begin(), row.end() - 1);
    for (std::size_t k = 0; k < src.size(); ++k) {
      const std::uint64_t pos = at[src[k] - lo]++;
      sorted_dst[pos] = dst[k];
      if (weighted) sorted_weight[pos] = weight[k];
    }
  }
  release(src), release(dst), release(weight);

  // Each row sorted by (destination, weight), then cleaned in place.
  const bool dedupe = opt.drop_duplicates || sym;
  std::vector<std::pair<std::uint64_t, double>> scratch;
  std::size_t kept = 0;
  for (std::size_t i = 0, first = 0; i < local_n; ++i) {
    const std::size_t last = row[i + 1];
    if (weighted) {
      scratch.clear();
      for (std::size_t k = first; k < last; ++k) scratch.emplace_back(sorted_dst[k], sorted_weight[k]);
      std::sort(scratch.begin(), scratch.end());
      for (std::size_t k = first; k < last; ++k)
        sorted_dst[k] = scratch[k - first].first, sorted_weight[k] = scratch[k - first].second;
    } else {
      std::sort(sorted_dst.begin() + static_cast<std::ptrdiff_t>(first),
                sorted_dst.begin() + static_cast<std::ptrdiff_t>(last));
    }
    const std::size_t row_start = kept;
    for (std::size_t k = first; k < last; ++k) {
      const std::uint64_t v = sorted_dst[k];
      if (opt.drop_self_loops && v == lo + i) continue;
      if (dedupe && kept > row_start && sorted_dst[kept - 1] == v) continue;  // the smallest weight stays
      sorted_dst[kept] = v;
      if (weighted) sorted_weight[kept] = sorted_weight[k];
      ++kept;
    }
    row[i] = row_start;
    first = last;
  }
  row[local_n] = kept;
  release(scratch);

  // The final arrays at their exact sizes: offsets (local_n + 1 per rank),
  // destinations at the graph's id width, weights.
  auto sizes = all_gather(rt.comm(), std::uint64_t{kept});
  auto edge_ranges = Distribution::weighted_block(sizes);
  DistArray<std::uint64_t> offsets(rt, Distribution::weighted_block(all_gather(rt.comm(), std::uint64_t{local_n + 1})),
                                   array_storage(opt.storage, "offsets"));
  std::copy(row.begin(), row.end(), offsets.local().begin());
  release(row);
  IdArray dst_array = with_id_type(width, [&](auto zero) -> IdArray {
    using Id = decltype(zero);
    DistArray<Id> a(rt, edge_ranges, array_storage(opt.storage, "dst"));
    std::transform(sorted_dst.begin(), sorted_dst.begin() + static_cast<std::ptrdiff_t>(kept), a.local().begin(),
                   [](std::uint64_t v) { return static_cast<Id>(v); });
    return a;
  });
  release(sorted_dst);
  std::optional<DistArray<double>> weight_array;
  if (weighted) {
    weight_array.emplace(rt, edge_ranges, array_storage(opt.storage, "weight"));
    std::copy_n(sorted_weight.begin(), kept, weight_array->local().begin());
    release(sorted_weight);
  }
  return EdgeList::adopt(n, sym ? false : directed, std::move(ranges), std::move(offsets), std::move(dst_array),
                         std::move(weight_array));
}

}  // namespace

EdgeList EdgeList::build(Runtime& rt, std::uint64_t vertices, bool directed, LocalEdges edges,
                         const BuildOptions& options) {
  check_ids(rt, vertices, edges);
  // Ranks without edges have no say in whether the graph is weighted.
  int has_edges = edges.size() > 0, weighted = edges.weighted();
  int any = all_reduce(rt.comm(), has_edges ? weighted : 0, MPI_MAX);
  int all = all_reduce(rt.comm(), has_edges ? weighted : 1, MPI_MIN);
  if (any && !all) throw MismatchError("some ranks passed edge weights and others did not");
  return build_arrays(rt, vertices, directed, std::move(edges), options, nullptr, any != 0);
}

EdgeList EdgeList::adopt(std::uint64_t vertices, bool directed, Distribution vertex_ranges,
                         DistArray<std::uint64_t> offsets, IdArray dst, std::optional<DistArray<double>> weight) {
  return EdgeList(vertices, directed, std::move(vertex_ranges), std::move(offsets), std::move(dst), std::move(weight));
}

namespace {

// The checks a mapped or adopted graph needs before any kernel indexes with
// it, in one pass over a rank's arcs: row offsets from 0 to the arc count,
// never decreasing; every destination inside the graph; each row sorted.
// Returns the rank's self loops. Throws naming the first bad arc.
template <class Id>
std::uint64_t check_rows(std::span<const std::uint64_t> rows, std::span<const Id> dst, std::uint64_t lo,
                         std::uint64_t vertices, std::uint64_t first_arc) {
  std::uint64_t loops = 0;
  for (std::size_t i = 0; i + 1 < rows.size(); ++i) {
    const std::uint64_t first = rows[i], last = rows[i + 1];
    if (last < first || last > dst.size())
      throw MismatchError("row offsets of vertex " + std::to_string(lo + i) + " run from " + std::to_string(first) +
                          " to " + std::to_string(last) + ", outside this rank's " + std::to_string(dst.size()) +
                          " arcs or backwards");
    const std::uint64_t u = lo + i;
    std::uint64_t previous = 0;
    for (std::uint64_t k = first; k < last; ++k) {
      const std::uint64_t v = dst[k];
      if (v >= vertices)
        throw RangeError("arc " + std::to_string(first_arc + k) + " (" + std::to_string(u) + ", " + std::to_string(v) +
                         ") has a destination outside [0, " + std::to_string(vertices) + ")");
      if (k > first && v < previous)
        throw MismatchError("arcs are not sorted by (source, destination) at arc " + std::to_string(first_arc + k));
      loops += v == u;
      previous = v;
    }
  }
  return loops;
}

}  // namespace

EdgeList::EdgeList(std::uint64_t vertices, bool directed, Distribution vertex_ranges, DistArray<std::uint64_t> offsets,
                   IdArray dst, std::optional<DistArray<double>> weight)
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
      return check_rows(rows, d, local_vertex_begin(), vertices_, edge_ranges_.begin(rt.rank()));
    });
  });
  self_loops_ = all_reduce<std::uint64_t>(rt.comm(), loops, MPI_SUM);
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

EdgeList EdgeList::rebuilt(const BuildOptions& options, bool keep_ranges) const {
  Runtime& rt = runtime();
  return build_arrays(rt, vertices_, directed_, local_copy(), options, keep_ranges ? &vertex_ranges() : nullptr,
                      weighted());
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
  LocalEdges edges = local_copy();
  std::swap(edges.src, edges.dst);
  return build_arrays(runtime(), vertices_, directed_, std::move(edges), with_flag(storage, nullptr, id_width()),
                      keep_ranges ? &vertex_ranges() : nullptr, weighted());
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
