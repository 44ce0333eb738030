#include "tessera/graph/edge_list.hpp"

#include <algorithm>

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

struct Plain {
  std::uint64_t src, dst;
  static constexpr bool kWeighted = false;
  double w() const { return 1.0; }
  bool operator<(const Plain& o) const { return src != o.src ? src < o.src : dst < o.dst; }
};
struct Weighted {
  std::uint64_t src, dst;
  double weight;
  static constexpr bool kWeighted = true;
  double w() const { return weight; }
  bool operator<(const Weighted& o) const {
    if (src != o.src) return src < o.src;
    if (dst != o.dst) return dst < o.dst;
    return weight < o.weight;
  }
};

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

template <class Rec>
EdgeList build_as(Runtime& rt, std::uint64_t n, bool directed, LocalEdges edges, const BuildOptions& opt,
                  const Distribution* fixed_ranges) {
  const bool sym = opt.symmetrize;
  if (sym) {
    std::size_t m = edges.size();
    for (std::size_t k = 0; k < m; ++k) {
      if (edges.src[k] == edges.dst[k]) continue;
      edges.src.push_back(edges.dst[k]);
      edges.dst.push_back(edges.src[k]);
      if constexpr (Rec::kWeighted) edges.weight.push_back(edges.weight[k]);
    }
  }
  Distribution ranges = fixed_ranges ? *fixed_ranges : balanced_vertex_ranges(rt, n, edges.src);

  // Group by owner of the source, then exchange in bulk.
  const auto P = static_cast<std::size_t>(rt.size());
  std::vector<std::uint64_t> counts(P, 0), offset(P, 0);
  for (auto u : edges.src) ++counts[static_cast<std::size_t>(ranges.owner(u))];
  for (std::size_t r = 1; r < P; ++r) offset[r] = offset[r - 1] + counts[r - 1];
  std::vector<Rec> send(edges.size());
  for (std::size_t k = 0; k < edges.size(); ++k) {
    auto r = static_cast<std::size_t>(ranges.owner(edges.src[k]));
    if constexpr (Rec::kWeighted)
      send[offset[r]++] = Rec{edges.src[k], edges.dst[k], edges.weight[k]};
    else
      send[offset[r]++] = Rec{edges.src[k], edges.dst[k]};
  }
  edges = LocalEdges{};  // release the input before the receive buffer grows
  std::vector<std::uint64_t> received;
  auto mine = comm::exchange<Rec>(rt.comm(), send, counts, received);
  send = std::vector<Rec>{};
  std::sort(mine.begin(), mine.end());

  std::size_t kept = 0;
  for (std::size_t k = 0; k < mine.size(); ++k) {
    const Rec& e = mine[k];
    if (opt.drop_self_loops && e.src == e.dst) continue;
    if ((opt.drop_duplicates || sym) && kept > 0 && mine[kept - 1].src == e.src && mine[kept - 1].dst == e.dst)
      continue;
    mine[kept++] = e;
  }
  mine.resize(kept);

  auto sizes = all_gather(rt.comm(), std::uint64_t{kept});
  auto edge_ranges = Distribution::weighted_block(sizes);
  DistArray<std::uint64_t> src(rt, edge_ranges, array_storage(opt.storage, "src"));
  DistArray<std::uint64_t> dst(rt, edge_ranges, array_storage(opt.storage, "dst"));
  std::optional<DistArray<double>> weight;
  if constexpr (Rec::kWeighted) weight.emplace(rt, edge_ranges, array_storage(opt.storage, "weight"));
  auto s = src.local(), d = dst.local();
  for (std::size_t k = 0; k < kept; ++k) {
    s[k] = mine[k].src;
    d[k] = mine[k].dst;
    if constexpr (Rec::kWeighted) weight->local()[k] = mine[k].weight;
  }
  return EdgeList::adopt(n, sym ? false : directed, std::move(ranges), std::move(src), std::move(dst),
                         std::move(weight));
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
  if (any)
    return build_as<Weighted>(rt, vertices, directed, std::move(edges), options, nullptr);
  return build_as<Plain>(rt, vertices, directed, std::move(edges), options, nullptr);
}

EdgeList EdgeList::adopt(std::uint64_t vertices, bool directed, Distribution vertex_ranges,
                         DistArray<std::uint64_t> src, DistArray<std::uint64_t> dst,
                         std::optional<DistArray<double>> weight) {
  return EdgeList(vertices, directed, std::move(vertex_ranges), std::move(src), std::move(dst), std::move(weight));
}

EdgeList::EdgeList(std::uint64_t vertices, bool directed, Distribution vertex_ranges, DistArray<std::uint64_t> src,
                   DistArray<std::uint64_t> dst, std::optional<DistArray<double>> weight)
    : vertices_(vertices),
      directed_(directed),
      vertex_map_(src.runtime(), std::move(vertex_ranges)),
      src_(std::move(src)),
      dst_(std::move(dst)),
      weight_(std::move(weight)) {
  Runtime& rt = runtime();
  agree(rt.comm(), [&] {
    if (vertex_map_.size() != vertices_)
      throw MismatchError("vertex ranges cover " + std::to_string(vertex_map_.size()) + " vertices, expected " +
                          std::to_string(vertices_));
    if (!(dst_.distribution() == src_.distribution()) ||
        (weight_ && !(weight_->distribution() == src_.distribution())))
      throw MismatchError("source, destination and weight arrays are distributed differently");
    auto s = src_.local(), d = dst_.local();
    std::uint64_t lo = local_vertex_begin(), hi = local_vertex_end();
    row_offsets_.assign(hi - lo + 1, 0);
    for (std::size_t k = 0; k < s.size(); ++k) {
      if (s[k] < lo || s[k] >= hi)
        throw MismatchError("edge " + std::to_string(src_.local_begin() + k) + " has source " + std::to_string(s[k]) +
                            " outside this rank's vertex range [" + std::to_string(lo) + ", " + std::to_string(hi) +
                            ")");
      if (d[k] >= vertices_)
        throw RangeError("edge " + std::to_string(src_.local_begin() + k) + " has destination " +
                         std::to_string(d[k]) + " outside [0, " + std::to_string(vertices_) + ")");
      if (k > 0 && (s[k] < s[k - 1] || (s[k] == s[k - 1] && d[k] < d[k - 1])))
        throw MismatchError("edges are not sorted by (source, destination) at edge " +
                            std::to_string(src_.local_begin() + k));
      ++row_offsets_[s[k] - lo + 1];
    }
  });
  for (std::size_t i = 1; i < row_offsets_.size(); ++i) row_offsets_[i] += row_offsets_[i - 1];
}

void EdgeList::throw_not_local(std::uint64_t v) const {
  throw RangeError("vertex " + std::to_string(v) + " is not local: rank " + std::to_string(runtime().rank()) +
                   " owns vertices [" + std::to_string(local_vertex_begin()) + ", " +
                   std::to_string(local_vertex_end()) + ")");
}

LocalEdges EdgeList::local_copy() const {
  LocalEdges e;
  e.src.assign(local_src().begin(), local_src().end());
  e.dst.assign(local_dst().begin(), local_dst().end());
  e.weight.assign(local_weight().begin(), local_weight().end());
  return e;
}

EdgeList EdgeList::rebuilt(const BuildOptions& options, bool keep_ranges) const {
  Runtime& rt = runtime();
  if (weighted())
    return build_as<Weighted>(rt, vertices_, directed_, local_copy(), options, keep_ranges ? &vertex_ranges() : nullptr);
  return build_as<Plain>(rt, vertices_, directed_, local_copy(), options, keep_ranges ? &vertex_ranges() : nullptr);
}

namespace {
// Build options that only set `flag` (or nothing) and the storage.
BuildOptions with_flag(const StorageOptions& storage, bool BuildOptions::*flag) {
  BuildOptions o;
  o.storage = storage;
  if (flag) o.*flag = true;
  return o;
}
}  // namespace

EdgeList EdgeList::symmetrized(const StorageOptions& storage, bool keep_ranges) const {
  return rebuilt(with_flag(storage, &BuildOptions::symmetrize), keep_ranges);
}
// Dropping edges keeps every source on its owner: the ranges stay.
EdgeList EdgeList::without_self_loops(const StorageOptions& storage) const {
  return rebuilt(with_flag(storage, &BuildOptions::drop_self_loops), true);
}
EdgeList EdgeList::without_duplicates(const StorageOptions& storage) const {
  return rebuilt(with_flag(storage, &BuildOptions::drop_duplicates), true);
}
EdgeList EdgeList::rebalanced(const StorageOptions& storage) const { return rebuilt(with_flag(storage, nullptr), false); }

DistArray<std::uint64_t> EdgeList::out_degrees() const {
  DistArray<std::uint64_t> deg(vertex_map_);
  auto d = deg.local();
  for (std::size_t i = 0; i < d.size(); ++i) d[i] = row_offsets_[i + 1] - row_offsets_[i];
  return deg;
}

DistArray<std::uint64_t> EdgeList::in_degrees() const {
  DistArray<std::uint64_t> deg(vertex_map_);
  {
    UpdateAggregator<std::uint64_t, ops::Add> add(deg);
    for (auto v : local_dst()) add.update(v, 1);
  }  // flushed here, once
  return deg;
}

double EdgeList::edge_imbalance() const {
  std::uint64_t mine = local_src().size();
  std::uint64_t most = all_reduce(runtime().comm(), mine, MPI_MAX);
  double mean = static_cast<double>(edges()) / runtime().size();
  return mean > 0 ? static_cast<double>(most) / mean : 1.0;
}

}  // namespace tessera::graph
