// Distributed Afforest: connected components fast at every rank count.
//
// Follows M. Sutton, T. Ben-Nun and A. Barak, "Optimizing Parallel Graph
// Connectivity Computation via Subgraph Sampling", IPDPS 2018 (GAPBS's `cc`)
// within each rank, and Shiloach-Vishkin style min-hooking of roots with
// pointer jumping (Y. Shiloach and U. Vishkin, J. Algorithms 1982; as in
// FastSV, Zhang, Azad and Hu, SIAM PP 2020) across ranks, on the local trees
// only:
//
//  1. Sampling: every vertex links two neighbours on its rank (into a local
//     union-find: min-id roots, path splitting) and keeps one on another rank
//     as a cut arc, looked for among its first 8 (at 1 rank: its first two,
//     as GAPBS). Local links first make big local trees, so the cut arcs
//     collapse into few pairs of roots. The local trees' roots are
//     hooked across those cut arcs (step 3) on a copy, and the most frequent
//     label among 1024 sampled vertices per rank, weighted by the rank's
//     vertex count, names the likely largest component c.
//  2. Skipping: vertices outside c link their remaining neighbours (local
//     ones in the union-find, remote ones kept as cut arcs); vertices in c
//     skip theirs. Correct for an undirected graph as in Afforest: an edge
//     (u, v) with u in c and v outside is read from v's side. A directed
//     graph stores each arc at its source only, so nothing is skipped there:
//     every arc is linked once, in both directions, and no symmetrized copy
//     is made (weak components).
//  3. Across ranks: every cut arc (u, v) becomes a pair of local roots
//     (root(u), root(v)) (one aggregated read of v's root), duplicates
//     dropped. Each round is one aggregated read (the other end's current
//     ancestor, and one pointer-jumping step for every hooked root), then the
//     pairs whose ends share an ancestor are dropped and the rest hook the
//     larger ancestor under the smaller, only where it is still a root (a min
//     at the owner: parents only decrease, so no cycles). When no pair is left
//     and no pointer moved, each local root's parent is its component's
//     smallest id, and every vertex takes its root's.
//
// Memory: the parent array (the labels), its copy for the sampling, the first
// sampled label each local tree meets, a byte per vertex, and the cut arcs
// actually linked (one per vertex in the sampling, then those of vertices
// outside c) with their root pairs: O(vertices per rank) plus aggregation
// buffers, and no copy of the edges.
#include <algorithm>
#include <chrono>
#include <unordered_map>

#include "tessera/comm/aggregators.hpp"
#include "tessera/graph/components.hpp"
#include "tessera/runtime/collective.hpp"
#include "local_forest.hpp"

namespace tessera::graph {

namespace {

using Clock = std::chrono::steady_clock;

struct CutArc {
  std::uint64_t local, remote;  // a local vertex (or root) and a vertex of another rank
  auto operator<=>(const CutArc&) const = default;
};

struct HookStats {
  int rounds = 0;
  std::size_t pair_bytes = 0;
};

// Step 3 on `parent`, whose local part is a compressed local forest (each
// vertex points at its local root, a root at itself): hooks the roots across
// `arcs` until none joins two trees, then points every local vertex at its
// component's root. Collective; every rank runs every round.
void hook_across_ranks(Runtime& rt, DistArray<std::uint64_t>& parent, std::vector<CutArc> arcs,
                       const ComponentsOptions& options, HookStats& stats, Clock::time_point t0) {
  auto p = parent.local();
  const std::uint64_t base = parent.local_begin(), end = base + p.size();
  auto is_local = [&](std::uint64_t x) { return x >= base && x < end; };

  // Pairs of local roots, without duplicates; one read per distinct far end
  // (many arcs name the same one, e.g. the sampled component's root).
  std::sort(arcs.begin(), arcs.end(), [](const CutArc& x, const CutArc& y) { return x.remote < y.remote; });
  std::vector<std::uint64_t> far, remote_root;
  for (const auto& a : arcs)
    if (far.empty() || far.back() != a.remote) far.push_back(a.remote);
  remote_root.resize(far.size());
  {
    SrcAggregator<std::uint64_t> read(parent, options.aggregation);
    for (std::size_t k = 0; k < far.size(); ++k) read.get(far[k], remote_root[k]);
  }
  for (std::size_t k = 0, j = 0; k < arcs.size(); ++k) {
    while (far[j] != arcs[k].remote) ++j;
    arcs[k] = {p[arcs[k].local - base], remote_root[j]};
  }
  std::erase_if(arcs, [](const CutArc& a) { return a.local == a.remote; });
  far = {};
  remote_root.assign(arcs.size(), 0);
  std::sort(arcs.begin(), arcs.end());
  arcs.erase(std::unique(arcs.begin(), arcs.end()), arcs.end());
  arcs.shrink_to_fit();
  stats.pair_bytes = std::max(stats.pair_bytes, arcs.size() * (sizeof(CutArc) + sizeof(std::uint64_t)));

  // Local roots not hooked yet (is_root), and those hooked: only these move.
  std::vector<std::uint64_t> roots, hooked, grandparent, own_root(arcs.size());
  std::vector<std::uint8_t> is_root(p.size(), 0);
  for (std::size_t i = 0; i < p.size(); ++i)
    if (p[i] == base + i) roots.push_back(base + i), is_root[i] = 1;
  // A hook lands only on a vertex that is still a root: trees need not be
  // stars, so one pointer-jumping step rides along with each round's reads
  // instead of jumping to stars between hooks (a hook that finds a non-root
  // is dropped and its pair tries again next round).
  struct Hook {
    std::uint64_t high, low;
  };
  MessageAggregator<Hook> hook(
      rt,
      [&](int, const Hook& h) {
        if (std::size_t i = h.high - base; is_root[i]) p[i] = std::min(p[i], h.low);
      },
      options.aggregation);

  for (;;) {
    // One exchange: the other end's current ancestor, and each hooked root's
    // grandparent. Parents only decrease, and any ancestor is in the tree.
    grandparent.resize(hooked.size());
    {
      SrcAggregator<std::uint64_t> read(parent, options.aggregation);
      for (std::size_t k = 0; k < arcs.size(); ++k) read.get(arcs[k].remote, remote_root[k]);
      for (std::size_t k = 0; k < hooked.size(); ++k) read.get(p[hooked[k] - base], grandparent[k]);
    }
    std::uint64_t jumped = 0;
    for (std::size_t k = 0; k < hooked.size(); ++k)
      if (grandparent[k] != p[hooked[k] - base]) p[hooked[k] - base] = grandparent[k], ++jumped;
    // Pairs whose ends share an ancestor are in one tree for good; the rest
    // hook the larger ancestor under the smaller if it is a root.
    std::size_t kept = 0;
    for (std::size_t k = 0; k < arcs.size(); ++k) {
      std::uint64_t a = p[arcs[k].local - base], b = remote_root[k];
      if (a == b) continue;
      remote_root[kept] = b;
      own_root[kept] = a;
      arcs[kept++] = {arcs[k].local, b};  // the far end's ancestor: next round reads further up
    }
    arcs.resize(kept);
    remote_root.resize(kept);
    own_root.resize(kept);
    // Done when no pair is left and no pointer moved: every tree is a star.
    std::uint64_t work[2] = {kept, jumped};
    all_reduce(rt.comm(), work, 2, MPI_SUM);
    ++stats.rounds;
    if (options.on_round) options.on_round(stats.rounds, work[0], std::chrono::duration<double>(Clock::now() - t0).count());
    if (work[0] == 0 && work[1] == 0) break;
    for (std::size_t k = 0; k < kept; ++k) {
      std::uint64_t a = own_root[k], b = remote_root[k], high = std::max(a, b);
      hook.send(parent.owner(high), {high, std::min(a, b)});
    }
    hook.flush();
    std::erase_if(roots, [&](std::uint64_t r) {
      if (p[r - base] == r) return false;
      is_root[r - base] = 0;
      hooked.push_back(r);
      return true;
    });
  }
  // Every vertex takes its local root's parent, which is a root: a non-root
  // points at a smaller local root, already final in this increasing pass.
  for (std::size_t i = 0; i < p.size(); ++i)
    if (is_local(p[i]) && p[i] != base + i) p[i] = p[p[i] - base];
}

}  // namespace

Components afforest(const EdgeList& g, const ComponentsOptions& options) {
  Runtime& rt = g.runtime();
  auto t0 = Clock::now();
  const std::uint64_t base = g.local_vertex_begin(), end = g.local_vertex_end();
  auto is_local = [&](std::uint64_t x) { return x >= base && x < end; };
  auto dst = g.local_dst();
  auto rows = g.row_offsets();
  const std::size_t n = g.local_vertices();

  Components out{DistArray<std::uint64_t>(rt, g.vertex_ranges()), 0, 0, 0, 0};
  auto parent = out.labels.local();
  for (std::size_t i = 0; i < n; ++i) parent[i] = base + i;
  LocalForest forest(parent, base);
  std::vector<CutArc> cut;
  HookStats stats;
  std::size_t extra = 0;

  // Links neighbours [first, last) of every vertex for which `take` holds.
  auto link_range = [&](std::size_t i, std::size_t first, std::size_t last) {
    const std::uint64_t u = base + i;
    for (std::size_t k = first; k < last; ++k) {
      std::uint64_t v = dst[k];
      if (is_local(v))
        forest.link(u, v);
      else
        cut.push_back({u, v});
    }
  };

  constexpr std::size_t kNeighbourRounds = 2;
  std::vector<std::uint8_t> done;
  if (g.directed()) {
    // No skipping: an arc is stored at its source only (see step 2 above).
    for (std::size_t i = 0; i < n; ++i) link_range(i, rows[i], rows[i + 1]);
    forest.compress();
    out.local_rounds = 1;
  } else {
    // Sampling: two local neighbours and one remote neighbour of each vertex,
    // looked for among its first kScan. (At 1 rank: GAPBS's first two.) The
    // local ones grow big local trees, so the cut arcs collapse into few
    // pairs of roots. done[i]: how many leading neighbours are linked.
    constexpr std::size_t kScan = 8;
    done.assign(n, 0);
    for (std::size_t i = 0; i < n; ++i) {
      const std::uint64_t u = base + i;
      std::size_t locals = 0, remotes = 0, prefix = 0;
      bool whole = true;
      for (std::size_t k = rows[i]; k < rows[i + 1] && k < rows[i] + kScan; ++k) {
        std::uint64_t v = dst[k];
        bool linked = false;
        if (is_local(v)) {
          if (locals < kNeighbourRounds) forest.link(u, v), ++locals, linked = true;
        } else if (remotes == 0) {
          cut.push_back({u, v}), ++remotes, linked = true;
        }
        whole = whole && linked;
        prefix += whole;
        if (locals == kNeighbourRounds && remotes == 1) break;
        if (locals == kNeighbourRounds && rt.size() == 1) break;
      }
      done[i] = static_cast<std::uint8_t>(prefix);
    }
    forest.compress();

    // The likely largest component, from the sampled subgraph's labels (on a
    // copy: the local forest goes on growing in `parent`).
    DistArray<std::uint64_t> sampled(rt, g.vertex_ranges());
    std::copy(parent.begin(), parent.end(), sampled.local().begin());
    hook_across_ranks(rt, sampled, cut, options, stats, t0);
    auto label = sampled.local();
    struct Candidate {
      std::uint64_t label;
      double weight;
    };
    Candidate mine{kNoIndex, 0};
    if (n > 0) {
      constexpr std::size_t kSamples = 1024;
      std::unordered_map<std::uint64_t, std::uint64_t> counts;
      std::uint64_t x = 0x9e3779b97f4a7c15ull ^ base;  // a fixed xorshift stream: runs repeat
      const std::size_t samples = std::min(kSamples, n);
      for (std::size_t s = 0; s < samples; ++s) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        ++counts[label[x % n]];
      }
      for (auto [l, c] : counts)
        if (c > mine.weight || (c == mine.weight && l < mine.label)) mine = {l, static_cast<double>(c)};
      mine.weight *= static_cast<double>(n) / static_cast<double>(samples);
    }
    // Ranks that agree on the label add their weights.
    auto all = all_gather(rt.comm(), mine);
    Candidate giant{kNoIndex, 0};
    for (const auto& c : all) {
      if (c.label == kNoIndex) continue;
      double w = 0;
      for (const auto& d : all) w += d.label == c.label ? d.weight : 0;
      if (w > giant.weight || (w == giant.weight && c.label < giant.label)) giant = {c.label, w};
    }
    extra = std::max(extra, label.size_bytes() + n + cut.capacity() * sizeof(CutArc) + stats.pair_bytes);

    // The sampled arcs' work is done: what they joined is v ~ label[v].
    cut.clear();
    for (std::size_t i = 0; i < n; ++i)
      if (label[i] != giant.label && rows[i] + done[i] < rows[i + 1]) link_range(i, rows[i] + done[i], rows[i + 1]);
    forest.compress();
    // Each local tree meets each sampled label of its vertices once (a local
    // tree mostly holds one: `first` finds the repeats without sorting).
    std::vector<std::uint64_t> first(n, kNoIndex);
    for (std::size_t i = 0; i < n; ++i) {
      std::uint64_t r = parent[i], l = label[i];
      if (l == r || (is_local(l) && parent[l - base] == r)) continue;  // the local tree holds it
      auto& f = first[r - base];
      if (f == l) continue;
      if (f == kNoIndex) f = l;
      cut.push_back({r, l});
    }
    out.local_rounds = static_cast<int>(kNeighbourRounds) + 1;
    extra = std::max(extra, label.size_bytes() + first.capacity() * sizeof(std::uint64_t) + n +
                                cut.capacity() * sizeof(CutArc));
  }
  extra = std::max(extra, cut.capacity() * sizeof(CutArc) + stats.pair_bytes);
  hook_across_ranks(rt, out.labels, std::move(cut), options, stats, t0);
  extra = std::max(extra, stats.pair_bytes);
  out.rounds = stats.rounds;
  out.extra_bytes = all_reduce<std::uint64_t>(rt.comm(), extra, MPI_MAX);
  out.seconds = std::chrono::duration<double>(Clock::now() - t0).count();
  return out;
}

Components components_by(const std::string& algorithm, const EdgeList& g, const ComponentsOptions& options) {
  if (algorithm == "afforest") return afforest(g, options);
  if (algorithm == "fastsv") return fastsv(g, options);
  if (algorithm == "lp") return label_propagation(g, options);
  throw ConfigError("unknown components algorithm '" + algorithm + "' (afforest, fastsv or lp)");
}

}  // namespace tessera::graph
