// Connected components by two algorithms (a third, Afforest, in afforest.cpp) with the same answer (each vertex
// labelled with the smallest vertex id of its component):
//
//  * Label propagation with a frontier: the classic min-label diffusion,
//    local first: within a rank it jumps to the local fixed point (through a
//    union-find of the local edges), so a round costs one rank crossing, not
//    one hop.
//  * FastSV: Y. Zhang, A. Azad and Z. Hu, "FastSV: A Distributed-Memory
//    Connected Component Algorithm with Fast Convergence", SIAM PP 2020
//    (after Shiloach and Vishkin, J. Algorithms 1982). Stochastic hooking,
//    aggressive hooking and shortcutting on a parent vector f, until the
//    grandparents gf = f[f] stop changing.
//
// Their verifier (check_labels) and the component summary sit beside them.
#include "tessera/graph/components.hpp"

#include <chrono>
#include <optional>

#include "tessera/array/ghost_set.hpp"
#include "tessera/comm/aggregators.hpp"
#include "tessera/graph/subgraph.hpp"
#include "tessera/runtime/cancellation.hpp"
#include "tessera/runtime/collective.hpp"
#include "local_forest.hpp"
#include "row_blocks.hpp"

namespace tessera::graph {

namespace {

using Clock = std::chrono::steady_clock;

double since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

// Components need both directions of every edge.
const EdgeList& undirected_view(const EdgeList& g, std::optional<EdgeList>& holder) {
  if (!g.directed()) return g;
  holder.emplace(g.symmetrized({}, true));  // labels must fit g's vertex ranges
  return *holder;
}

DistArray<std::uint64_t> identity_labels(const EdgeList& g) {
  DistArray<std::uint64_t> labels(g.runtime(), g.vertex_ranges());
  auto l = labels.local();
  for (std::size_t i = 0; i < l.size(); ++i) l[i] = g.local_vertex_begin() + i;
  return labels;
}

// Ends a round on every rank: counts the changes of the whole graph, reports
// progress, and says whether the labels have converged.
bool converged(Runtime& rt, Components& out, std::uint64_t changed, const ComponentsOptions& options,
               Clock::time_point t0) {
  changed = all_reduce(rt.comm(), changed, MPI_SUM);
  ++out.rounds;
  if (options.on_round) options.on_round(out.rounds, changed, since(t0));
  cancellation_point(rt.comm());
  return changed == 0;
}

}  // namespace

Components label_propagation(const EdgeList& input, const ComponentsOptions& options) {
  std::optional<EdgeList> holder;
  const EdgeList& g = undirected_view(input, holder);
  Runtime& rt = g.runtime();
  auto t0 = Clock::now();
  Components out{identity_labels(g), 0, 0, 0, 0};
  DistArray<std::uint64_t> next(rt, g.vertex_ranges());
  auto labels = out.labels.local(), proposed = next.local();
  std::copy(labels.begin(), labels.end(), proposed.begin());
  const std::size_t n = labels.size();
  const std::uint64_t base = g.local_vertex_begin(), end = g.local_vertex_end();
  return g.with_dst([&](auto dst) {
  auto local = [&](std::uint64_t v) { return v >= base && v < end; };

  // The pieces local edges join (a union-find on local indices; a piece's
  // root is its smallest index): propagation within the rank reaches the
  // smallest label of each piece, so each round jumps straight to it.
  std::vector<std::uint64_t> piece(n);
  for (std::size_t i = 0; i < n; ++i) piece[i] = i;
  LocalForest<std::uint64_t> pieces(piece, 0);
  g.for_each_row([&](std::uint64_t v, std::size_t first, std::size_t last) {
    for (std::size_t k = first; k < last; ++k)
      if (local(dst[k])) pieces.link(v - base, dst[k] - base);
  });
  pieces.compress();
  // Vertices with a remote neighbour: only they push.
  std::vector<std::uint8_t> active(n, 1);

  UpdateAggregator<std::uint64_t, ops::Min> push(next, options.aggregation);
  for (;;) {
    // The local fixed point: each piece's smallest label, at its root first.
    for (std::size_t i = 0; i < n; ++i)
      if (auto r = piece[i]; labels[i] < labels[r]) labels[r] = labels[i], active[r] = 1;
    for (std::size_t i = 0; i < n; ++i)
      if (auto r = piece[i]; labels[r] < labels[i]) labels[i] = labels[r], active[i] = 1;
    ++out.local_rounds;
    g.for_each_row([&](std::uint64_t v, std::size_t first, std::size_t last) {
      if (!active[v - base]) return;
      std::uint64_t label = labels[v - base];
      for (std::size_t k = first; k < last; ++k)
        if (!local(dst[k])) push.update(dst[k], label);
    });
    push.flush();
    std::uint64_t changed = 0;
    for (std::size_t i = 0; i < n; ++i) {
      active[i] = proposed[i] < labels[i];
      if (active[i]) {
        labels[i] = proposed[i];
        ++changed;
      }
    }
    if (converged(rt, out, changed, options, t0)) break;
  }
  out.extra_bytes = all_reduce<std::uint64_t>(rt.comm(), n * (2 * sizeof(std::uint64_t) + 1), MPI_MAX);
  out.seconds = since(t0);
  return std::move(out);
  });
}

Components fastsv(const EdgeList& input, const ComponentsOptions& options) {
  std::optional<EdgeList> holder;
  const EdgeList& g = undirected_view(input, holder);
  Runtime& rt = g.runtime();
  auto t0 = Clock::now();
  const std::uint64_t base = g.local_vertex_begin(), end = g.local_vertex_end();
  return g.with_dst([&](auto dst) {

  // The remote neighbours whose grandparents each round needs: O(ghosts).
  GhostSet ghosts = GhostSet::remote_of(dst, base, end, g.vertices());
  std::vector<std::uint64_t> ghost_gf(ghosts.size());

  Components out{identity_labels(g), 0, 0, 0, 0};  // out.labels is the parent vector f
  // f_next equals f at the start of every round (it is copied back at the
  // end), so hooks from faster peers may land in it at any time.
  DistArray<std::uint64_t> gf = identity_labels(g), f_next = identity_labels(g);
  auto f = out.labels.local();
  std::vector<std::uint64_t> min_neighbour_gf(f.size()), gf_new(f.size());

  SrcAggregator<std::uint64_t> read_gf(gf, options.aggregation);
  SrcAggregator<std::uint64_t> read_f(out.labels, options.aggregation);
  UpdateAggregator<std::uint64_t, ops::Min> hook(f_next, options.aggregation);
  for (;;) {
    auto gfl = gf.local();
    auto ghost_ids = ghosts.ids();
    for (std::size_t j = 0; j < ghost_ids.size(); ++j) read_gf.get(ghost_ids[j], ghost_gf[j]);
    read_gf.flush();

    // mngf[u] = min over neighbours v of gf[v] (and gf[u] itself).
    std::copy(gfl.begin(), gfl.end(), min_neighbour_gf.begin());
    g.for_each_row([&](std::uint64_t u, std::size_t first, std::size_t last) {
      std::uint64_t m = min_neighbour_gf[u - base];
      for (std::size_t k = first; k < last; ++k) {
        std::uint64_t v = dst[k];
        std::uint64_t x = (v >= base && v < end) ? gfl[v - base] : ghost_gf[ghosts.position(v)];
        m = std::min(m, x);
      }
      min_neighbour_gf[u - base] = m;
    });

    auto fn = f_next.local();
    for (std::size_t i = 0; i < f.size(); ++i) {
      hook.update(f[i], min_neighbour_gf[i]);                    // stochastic hooking: f[f[u]]
      fn[i] = std::min({fn[i], min_neighbour_gf[i], gfl[i]});  // aggressive hooking, shortcutting
    }
    hook.flush();
    std::copy(fn.begin(), fn.end(), f.begin());

    for (std::size_t i = 0; i < f.size(); ++i) read_f.get(f[i], gf_new[i]);
    read_f.flush();
    std::uint64_t changed = 0;
    for (std::size_t i = 0; i < f.size(); ++i) {
      changed += gf_new[i] != gfl[i];
      gfl[i] = gf_new[i];
    }
    if (converged(rt, out, changed, options, t0)) break;
  }
  out.seconds = since(t0);
  return out;
  });
}

namespace {
template <class G>
void check_fits(const G& g, const DistArray<std::uint64_t>& labels) {
  if (!(labels.distribution() == g.vertex_ranges()))
    throw MismatchError("the labels are not distributed like the graph's vertices (" + std::to_string(labels.size()) +
                        " labels, " + std::to_string(g.vertices()) + " vertices)");
}

// Either graph form: only its vertex ranges are read.
template <class G>
ComponentSummary summarize_of(const G& g, const DistArray<std::uint64_t>& labels) {
  check_fits(g, labels);
  Runtime& rt = g.runtime();
  // A bad label is found on its rank before any traffic and reported on
  // every rank (a throw inside the aggregator would leave the others waiting).
  std::string problem;
  for (std::size_t i = 0; i < labels.local().size() && problem.empty(); ++i)
    if (labels.local()[i] >= g.vertices())
      problem = "vertex " + std::to_string(g.local_vertex_begin() + i) + " has label " +
                std::to_string(labels.local()[i]) + ", not a vertex of this " + std::to_string(g.vertices()) +
                "-vertex graph";
  if (problem = first_problem(rt.comm(), problem); !problem.empty()) throw RangeError(problem);
  DistArray<std::uint64_t> size(rt, g.vertex_ranges());
  {
    UpdateAggregator<std::uint64_t, ops::Add> count(size);
    for (auto l : labels.local()) count.update(l, 1);
  }
  ComponentSummary s;
  std::uint64_t best = 0, best_label = kNoIndex;
  auto sz = size.local();
  for (std::size_t i = 0; i < sz.size(); ++i) {
    if (sz[i] == 0) continue;
    ++s.count;
    s.isolated += sz[i] == 1;
    s.vertices += sz[i];
    if (sz[i] > best) best = sz[i], best_label = size.local_begin() + i;
  }
  s.count = all_reduce(rt.comm(), s.count, MPI_SUM);
  s.isolated = all_reduce(rt.comm(), s.isolated, MPI_SUM);
  s.vertices = all_reduce(rt.comm(), s.vertices, MPI_SUM);
  // Ties: the smallest label of the largest size (each rank offers its first).
  auto largest = all_argmax<std::uint64_t>(rt.comm(), best, best_label);
  s.largest_size = largest.value;
  s.largest_label = largest.index;
  return s;
}

// A labelling is the components' labelling iff (1) every label is at most
// its vertex's id and is a root (label[label[v]] == label[v]), (2) labels
// agree across every edge, so each class is a union of components, and (3)
// each class is connected: a search seeded only from the roots (label[v] ==
// v), crossing edges, reaches every vertex. (3) is what rejects two
// components that share a label: the one without the root is never reached.
// The search is the distributed form of GAPBS's per-label BFS verifier; it
// expands locally as far as it can and messages only boundary crossings, so
// its rounds count rank crossings, not hops.
// g: an undirected graph of either form, read through its rows view.
template <class G>
std::string check_labels_of(const G& g, const DistArray<std::uint64_t>& labels, std::size_t arcs_per_block) {
  Runtime& rt = g.runtime();
  auto l = labels.local();
  const std::uint64_t base = g.local_vertex_begin(), end = g.local_vertex_end();
  return with_rows(g, [&](const auto& rows) {
  std::string problem;

  // (1) Local bounds first: only labels below their vertex are read remotely.
  for (std::size_t i = 0; i < l.size() && problem.empty(); ++i)
    if (l[i] > base + i)
      problem = "vertex " + std::to_string(base + i) + " has label " + std::to_string(l[i]) +
                ", above its own id (a label is the smallest id of its component)";
  {
    std::vector<std::uint64_t> of_label(l.size());
    {
      SrcAggregator<std::uint64_t> read(labels);
      if (problem.empty())
        for (std::size_t i = 0; i < l.size(); ++i) read.get(l[i], of_label[i]);
    }
    for (std::size_t i = 0; i < l.size() && problem.empty(); ++i)
      if (of_label[i] != l[i])
        problem = "vertex " + std::to_string(base + i) + " has label " + std::to_string(l[i]) +
                  " whose own label is " + std::to_string(of_label[i]) +
                  " (a label must be a vertex labelled with itself)";
  }
  // (2) A block of arcs at a time (rows cut where a block ends): the far
  // ends' labels take O(vertices), not 8 bytes an arc. Every rank reads as
  // many blocks (each read is collective).
  const std::uint64_t arcs = g.local_arcs();
  const std::size_t block =
      arcs_per_block ? arcs_per_block : std::max<std::size_t>(l.size(), std::size_t{1} << 20);
  const auto blocks = all_reduce<std::uint64_t>(rt.comm(), (arcs + block - 1) / block, MPI_MAX);
  std::vector<std::uint64_t> of_dst(std::min<std::uint64_t>(block, arcs));
  ArcCursor next;  // the block's first arc
  for (std::uint64_t b = 0; b < blocks; ++b) {
    const ArcCursor first = next;
    {
      SrcAggregator<std::uint64_t> read(labels);
      std::size_t j = 0;
      for_next_arcs(rows, next, block, [&](std::size_t, std::uint64_t v) { read.get(v, of_dst[j++]); });
    }
    if (!problem.empty()) continue;
    ArcCursor at = first;
    std::size_t j = 0;
    for_next_arcs(rows, at, block, [&](std::size_t i, std::uint64_t v) {
      if (const std::uint64_t far = of_dst[j++]; far != l[i] && problem.empty())
        problem = "edge (" + std::to_string(base + i) + ", " + std::to_string(v) + ") joins labels " +
                  std::to_string(l[i]) + " and " + std::to_string(far);
    });
  }
  if (problem = first_problem(rt.comm(), problem); !problem.empty()) return problem;

  // (3) Every rank runs every round, also with nothing to expand.
  std::vector<std::uint8_t> reached(l.size(), 0);
  std::vector<std::uint64_t> frontier;
  for (std::size_t i = 0; i < l.size(); ++i)
    if (l[i] == base + i) reached[i] = 1, frontier.push_back(base + i);
  // A bit per vertex of the graph: the remote vertices already told (n/8
  // bytes, indexed directly, where a set of ghosts costs a pass over the
  // arcs to build and a lookup an arc).
  std::vector<std::uint64_t> told((g.vertices() + 63) / 64, 0);
  DistArray<std::uint64_t> arrived(rt, g.vertex_ranges());
  for (;;) {
    {
      UpdateAggregator<std::uint64_t, ops::Max> reach(arrived);
      while (!frontier.empty()) {
        std::uint64_t v = frontier.back();
        frontier.pop_back();
        rows.for_each(v - base, [&](std::uint64_t w) {
          if (w >= base && w < end) {
            if (!reached[w - base]) reached[w - base] = 1, frontier.push_back(w);
          } else if (auto& word = told[w >> 6]; !(word >> (w & 63) & 1)) {
            word |= std::uint64_t{1} << (w & 63);
            reach.update(w, 1);
          }
        });
      }
    }  // the aggregator flushes here: arrivals from every rank are in
    auto a = arrived.local();
    for (std::size_t i = 0; i < a.size(); ++i)
      if (a[i] && !reached[i]) reached[i] = 1, frontier.push_back(base + i);
    if (all_reduce<std::uint64_t>(rt.comm(), frontier.size(), MPI_SUM) == 0) break;
  }
  for (std::size_t i = 0; i < l.size() && problem.empty(); ++i)
    if (!reached[i])
      problem = "vertex " + std::to_string(base + i) + " has label " + std::to_string(l[i]) +
                " but is not connected to vertex " + std::to_string(l[i]) +
                ": two or more components share that label";
  return first_problem(rt.comm(), problem);
  });
}

}  // namespace

ComponentSummary summarize(const EdgeList& g, const DistArray<std::uint64_t>& labels) {
  return summarize_of(g, labels);
}
ComponentSummary summarize(const PackedGraph& g, const DistArray<std::uint64_t>& labels) {
  return summarize_of(g, labels);
}

std::string check_labels(const EdgeList& input, const DistArray<std::uint64_t>& labels, std::size_t arcs_per_block) {
  check_fits(input, labels);
  std::optional<EdgeList> holder;
  return check_labels_of(undirected_view(input, holder), labels, arcs_per_block);
}

std::string check_labels(const PackedGraph& g, const DistArray<std::uint64_t>& labels, std::size_t arcs_per_block) {
  check_fits(g, labels);
  // A directed graph's rows hold out-arcs only; the search needs in-arcs
  // too, which only a symmetrized copy gives (its vertex ranges are g's).
  if (g.directed()) return check_labels(g.unpacked(), labels, arcs_per_block);
  return check_labels_of(g, labels, arcs_per_block);
}

namespace {
// The largest component's vertices as flags on g's ranges.
DistArray<std::uint8_t> in_largest(const EdgeList& g, const DistArray<std::uint64_t>& labels,
                                   const ComponentSummary& summary) {
  DistArray<std::uint8_t> keep(g.vertex_map(), StorageOptions::heap());
  auto l = labels.local();
  for (std::size_t i = 0; i < l.size(); ++i) keep.local()[i] = l[i] == summary.largest_label;
  return keep;
}
}  // namespace

LargestComponent largest_component(const EdgeList& g, const DistArray<std::uint64_t>& labels,
                                   const StorageOptions& storage) {
  ComponentSummary summary = summarize(g, labels);
  auto sub = induced_subgraph(g, in_largest(g, labels, summary), storage);
  return {std::move(sub.graph), std::move(sub.original_ids), summary};
}

LargestComponent largest_component(EdgeList&& g, const DistArray<std::uint64_t>& labels,
                                   const StorageOptions& ids_storage) {
  ComponentSummary summary = summarize(g, labels);
  auto keep = in_largest(g, labels, summary);
  auto sub = induced_subgraph(std::move(g), keep, ids_storage);
  return {std::move(sub.graph), std::move(sub.original_ids), summary};
}

}  // namespace tessera::graph
