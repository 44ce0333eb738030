// Distributed Afforest: connected components fast at every rank count.
//
// Follows M. Sutton, T. Ben-Nun and A. Barak, "Optimizing Parallel Graph
// Connectivity Computation via Subgraph Sampling", IPDPS 2018 (GAPBS's `cc`)
// within each rank, and solves the graph that cut edges make between the
// local trees by contracting it: each rank reduces what it receives to a
// spanning forest of root pairs, and a small contracted graph is solved on
// one rank in one round trip (as distributed union-find codes finish their
// last levels on one process); a large one is first hooked across ranks
// Shiloach-Vishkin style (min-hooking of roots with pointer jumping; Y.
// Shiloach and U. Vishkin, J. Algorithms 1982; as in FastSV, Zhang, Azad and
// Hu, SIAM PP 2020) until it fits. A round trip costs a few collectives
// whatever the graph, where hooking costs several per round: with ranks
// sharing cores, every collective waits for a descheduled peer.
//
//  1. Sampling: every vertex links two neighbours on its rank (into a local
//     union-find: min-id roots, path splitting) and keeps one on another rank
//     as a cut arc, looked for among its first 8 (at 1 rank: its first two,
//     as GAPBS). Local links first make big local trees, so the cut arcs
//     collapse into few pairs of roots. The sampled graph's components are
//     solved (step 3) in place: every vertex holds its sampled label, and
//     the most frequent label among 1024 sampled vertices per rank, weighted
//     by the rank's vertex count, names the likely largest component c.
//  2. Skipping: the local forest is rebuilt from the sampled labels (the
//     vertices of one label on a rank form one tree; a label owned by another
//     rank becomes one cut arc), then vertices outside c link their
//     remaining neighbours (local ones in the union-find, remote ones as cut
//     arcs); vertices in c skip theirs. Correct for an undirected graph as in
//     Afforest: an edge (u, v) with u in c and v outside is read from v's
//     side. A directed graph stores each arc at its source only, so nothing
//     is skipped there: every arc is linked once, in both directions, and no
//     symmetrized copy is made (weak components).
//  3. Across ranks: every cut arc (u, v) goes as (root(u), v) to v's owner,
//     which makes it a pair of local roots (root(u), root(v)) and keeps a
//     spanning forest of its pairs (repeats and cycles dropped). When all
//     the pairs fit the gather limit, rank 0 receives them, solves them with
//     a union-find and returns each root's smallest joined id to its owner;
//     otherwise roots hook across ranks: each round is one aggregated read
//     (the other end's current ancestor, and one pointer-jumping step for
//     every hooked root), then the pairs whose ends share an ancestor are
//     dropped and the rest hook the larger ancestor under the smaller, only
//     where it is still a root (a min at the owner: parents only decrease, so
//     no cycles), until no pair is left and no pointer moves. Every vertex
//     then takes its root's label.
//
// Memory: the parent array (the labels), the local forest (an id's width
// per vertex), a byte per vertex, the cut arcs
// actually linked (one per vertex in the sampling, then those of vertices
// outside c and one per remote label) with the pairs and the hash forest
// they are reduced in; on rank 0 the gathered pairs (at most the gather
// limit, O(vertices per rank)): no copy of the edges.
//
// One implementation for both graph forms: every step reads a rank's rows
// through a rows view (PlainRows over an EdgeList's CSR, PackedRows
// decoding a PackedGraph's bytes in place), and names an arc by its row and
// its position in that row.
#include <algorithm>
#include <chrono>
#include <unordered_map>

#include "tessera/comm/aggregators.hpp"
#include "tessera/comm/request_reply.hpp"
#include "tessera/graph/components.hpp"
#include "tessera/runtime/cancellation.hpp"
#include "tessera/runtime/collective.hpp"
#include "tessera/runtime/trace.hpp"
#include "afforest_node.hpp"
#include "local_forest.hpp"
#include "row_blocks.hpp"

namespace tessera::graph {

namespace {

using Clock = std::chrono::steady_clock;

// Frees a vector's storage (`v = {}` would only clear it: the braces pick
// the initializer-list assignment, which keeps the capacity).
template <class T>
void release(std::vector<T>& v) {
  std::vector<T>().swap(v);
}

struct CutArc {
  std::uint64_t local, remote;  // a local vertex (or root) and a vertex (or root) of another rank
};

// What the phases of one run share.
struct Run {
  Runtime& rt;
  const Distribution& ranges;
  const ComponentsOptions& options;
  Clock::time_point t0;
  std::uint64_t gather_limit;
  int rounds = 0;
  trace::RoundClock round_clock{"Afforest round"};
  std::size_t extra = 0;     // the most working memory seen, bytes
  std::size_t resident = 0;  // held through every phase (the local forest)

  void round_done(std::uint64_t pairs) {
    ++rounds;
    round_clock.done({{"round", rounds}, {"pairs", static_cast<std::int64_t>(pairs)}});
    if (options.on_round)
      options.on_round(rounds, pairs, std::chrono::duration<double>(Clock::now() - t0).count());
    cancellation_point(rt.comm());
  }
  void note(std::size_t bytes) { extra = std::max(extra, resident + bytes); }
};

// Sends `records` to the ranks `owner_of` names (grouped in place, no
// copy); frees the input first.
template <class OwnerOf>
std::vector<CutArc> exchange_by_owner(Runtime& rt, std::vector<CutArc> records, OwnerOf owner_of, Run& run) {
  const std::size_t sent = records.capacity();
  auto got = comm::deliver(rt.comm(), std::move(records), owner_of);
  run.note((sent + got.size()) * sizeof(CutArc));
  return got;
}

// Step 3's first half: each arc (local root, vertex v of another rank) goes
// to v's owner, which keeps the pairs (root(v) here, root there) of a
// spanning forest of what it received; `reached` marks the roots reached.
// `fill(arcs)` supplies the arcs, `chunks` times (the same count on every
// rank), so arcs can travel in pieces of O(vertices). `p` is the
// compressed local forest.
template <class Fill>
std::vector<CutArc> route_to_far_owners(Run& run, std::span<const std::uint64_t> p, std::uint64_t base,
                                        std::uint64_t chunks, Fill fill, std::span<std::uint8_t> reached) {
  SparseForest joined(1024);
  std::vector<CutArc> pairs;
  for (std::uint64_t c = 0; c < chunks; ++c) {
    std::vector<CutArc> arcs;
    fill(arcs);
    run.note(arcs.capacity() * sizeof(CutArc) + pairs.capacity() * sizeof(CutArc) + joined.memory_bytes());
    auto got = exchange_by_owner(run.rt, std::move(arcs), [&](const CutArc& a) { return run.ranges.owner(a.remote); },
                                 run);
    for (const auto& a : got) {
      std::uint64_t root = p[a.remote - base];
      if (!reached.empty()) reached[root - base] = 1;
      if (joined.unite(a.local, root)) pairs.push_back({root, a.local});
    }
    run.note(got.capacity() * sizeof(CutArc) + pairs.capacity() * sizeof(CutArc) + joined.memory_bytes());
  }
  return pairs;
}

// Rank 0 solves every pair in one union-find and sends each root that is
// not its component's smallest id that id, to the root's owner.
void gather_and_solve(Run& run, std::span<std::uint64_t> p, std::uint64_t base, std::vector<CutArc> pairs,
                      std::uint64_t total) {
  Runtime& rt = run.rt;
  std::vector<CutArc> all = gather_to_root<CutArc>(rt.comm(), pairs, 0);
  release(pairs);
  std::vector<CutArc> labels;
  if (rt.rank() == 0) {
    SparseForest joined(all.size() / 2);
    for (const auto& e : all) joined.unite(e.local, e.remote);
    run.note(all.capacity() * sizeof(CutArc) + joined.memory_bytes());
    release(all);
    joined.for_each([&](std::uint64_t id, std::uint64_t root) {
      if (root != id) labels.push_back({id, root});
    });
  }
  for (const auto& l : exchange_by_owner(rt, std::move(labels), [&](const CutArc& l) { return run.ranges.owner(l.local); },
                                         run))
    p[l.local - base] = l.remote;
  run.round_done(total);
}

// Step 3's rounds for a contracted graph too large to gather: `parent`'s
// local part is a compressed local forest, `pairs` join local roots to roots
// of other ranks. Hooks until no pair joins two trees and every tree is a
// star, so each local root's parent is its component's smallest id.
// Collective; every rank runs every round.
void hook_across_ranks(Run& run, DistArray<std::uint64_t>& parent, std::vector<CutArc> arcs) {
  auto p = parent.local();
  const std::uint64_t base = parent.local_begin();
  const auto& options = run.options;
  std::vector<std::uint64_t> remote_root(arcs.size()), roots, hooked, grandparent, own_root(arcs.size());
  // Local roots not hooked yet (is_root), and those hooked: only these move.
  std::vector<std::uint8_t> is_root(p.size(), 0);
  for (std::size_t i = 0; i < p.size(); ++i)
    if (p[i] == base + i) roots.push_back(base + i), is_root[i] = 1;
  run.note(arcs.capacity() * (sizeof(CutArc) + 2 * sizeof(std::uint64_t)) + p.size() * (1 + 2 * sizeof(std::uint64_t)));
  // A hook lands only on a vertex that is still a root: trees need not be
  // stars, so one pointer-jumping step rides along with each round's reads
  // instead of jumping to stars between hooks (a hook that finds a non-root
  // is dropped and its pair tries again next round).
  struct Hook {
    std::uint64_t high, low;
  };
  MessageAggregator<Hook> hook(
      run.rt,
      [&](int, const Hook& h) {
        if (std::size_t i = h.high - base; is_root[i]) p[i] = std::min(p[i], h.low);
      },
      options.aggregation);
  SrcAggregator<std::uint64_t> read(parent, options.aggregation);

  for (;;) {
    // One exchange: the other end's current ancestor, and each hooked root's
    // grandparent. Parents only decrease, and any ancestor is in the tree.
    grandparent.resize(hooked.size());
    for (std::size_t k = 0; k < arcs.size(); ++k) read.get(arcs[k].remote, remote_root[k]);
    for (std::size_t k = 0; k < hooked.size(); ++k) read.get(p[hooked[k] - base], grandparent[k]);
    read.flush();
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
    all_reduce(run.rt.comm(), work, 2, MPI_SUM);
    run.round_done(work[0]);
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
}

// The value of p at each arc's far end (a vertex of another rank), asked of
// its owner. Collective.
std::vector<std::uint64_t> read_labels(Run& run, std::span<const std::uint64_t> p, std::uint64_t base,
                                       const std::vector<CutArc>& arcs) {
  std::vector<std::uint64_t> far(arcs.size());
  for (std::size_t k = 0; k < arcs.size(); ++k) far[k] = arcs[k].remote;
  std::size_t asked = 0;
  auto labels = comm::request_reply(
      run.rt.comm(), std::move(far), [&](std::uint64_t v) { return run.ranges.owner(v); },
      [&](std::uint64_t v) { return ++asked, p[v - base]; });
  run.note((3 * arcs.size() + asked) * sizeof(std::uint64_t));
  return labels;
}

// Step 3's second half on `parent`, a compressed local forest: joins the
// trees that `pairs` (local root, root of another rank) connect, then labels
// every local vertex with its component's smallest id. Collective.
void solve_pairs(Run& run, DistArray<std::uint64_t>& parent, std::vector<CutArc> pairs) {
  auto p = parent.local();
  const std::uint64_t base = parent.local_begin(), end = base + p.size();
  const std::uint64_t total = all_reduce<std::uint64_t>(run.rt.comm(), pairs.size(), MPI_SUM);
  if (total == 0) return;  // every local tree is a component
  if (total <= run.gather_limit)
    gather_and_solve(run, p, base, std::move(pairs), total);
  else
    hook_across_ranks(run, parent, std::move(pairs));
  // Every vertex takes its local root's label, which is final: a root holds
  // its own label, and a non-root points at a smaller local root, already
  // relabelled in this increasing pass.
  for (std::size_t i = 0; i < p.size(); ++i)
    if (p[i] >= base && p[i] < end && p[i] != base + i) p[i] = p[p[i] - base];
}

// Step 3 for arcs already collected (local root, vertex of another rank).
void join_across_ranks(Run& run, DistArray<std::uint64_t>& parent, std::vector<CutArc> arcs,
                       std::span<std::uint8_t> reached = {}) {
  auto fill = [&](std::vector<CutArc>& out) { out = std::move(arcs); };
  solve_pairs(run, parent, route_to_far_owners(run, parent.local(), parent.local_begin(), 1, fill, reached));
}

// One run over a rank's rows as `Rows` reads them (PlainRows: an EdgeList's
// destinations at its width, each row loop over a span of Id; PackedRows:
// decoded as read), in the phases of the header's steps. Arcs are named by
// their position within their row, never by an index into an id array. The
// local phases link in a forest of local indices of type Id (a graph of
// 32-bit ids: half the bytes of the labels, and the finds' random reads are
// what the sampling waits on); the labels (global ids) are written from it
// before each exchange.
template <class Rows, class Id>
class Afforest {
  using Index = Id;

 public:
  template <class G>
  Afforest(const G& g, const Rows& rows, const ComponentsOptions& options)
      : rt_(g.runtime()),
        run_{rt_, g.vertex_ranges(), options, Clock::now(), gather_limit(g.vertices(), options)},
        rows_(rows),
        base_(g.local_vertex_begin()),
        end_(g.local_vertex_end()),
        n_(g.local_vertices()),
        out_{DistArray<std::uint64_t>(rt_, g.vertex_ranges()), 0, 0, 0, 0},
        parent_(out_.labels.local()),
        up_(n_),
        forest_(up_, 0) {
    out_.labels.prefer_huge_pages();  // first touched inside the timed kernel
    for (std::size_t i = 0; i < n_; ++i) up_[i] = static_cast<Index>(i);
    run_.resident = n_ * sizeof(Index);
    run_.note(0);
  }

  // A directed graph: every arc linked once, nothing skipped.
  void link_every_arc();
  // Steps 1-3 on an undirected graph.
  void sample_skip_and_join() {
    std::vector<std::uint8_t> done = sample();
    solve_sample();
    const std::uint64_t giant = likely_largest();
    carry_over_sample(giant, done);
    link_outside(done);
  }
  Components finish() {
    out_.rounds = run_.rounds;
    out_.extra_bytes = all_reduce<std::uint64_t>(rt_.comm(), run_.extra, MPI_MAX);
    out_.seconds = std::chrono::duration<double>(Clock::now() - run_.t0).count();
    return std::move(out_);
  }

 private:
  // Sampling: how many neighbours of each vertex are linked on its rank.
  static constexpr std::size_t kNeighbourRounds = 2, kScan = 8;
  // done[i] for a vertex of the likely largest component: nothing more to link.
  static constexpr std::uint8_t kInGiant = 0xff;
  // for_range's last position: to the row's end.
  static constexpr std::uint64_t kAllPositions = ~std::uint64_t{0};

  std::uint64_t gather_limit(std::uint64_t vertices, const ComponentsOptions& o) const {
    return o.gather_limit ? o.gather_limit
                          : std::max<std::uint64_t>(vertices / static_cast<std::uint64_t>(rt_.size()), 1 << 16);
  }
  bool is_local(std::uint64_t x) const { return x >= base_ && x < end_; }
  Index index_of(std::uint64_t local_vertex) const { return static_cast<Index>(local_vertex - base_); }
  // The labels from the compressed forest: each vertex's local root.
  void export_roots() {
    for (std::size_t i = 0; i < n_; ++i) parent_[i] = base_ + up_[i];
  }

  std::vector<std::uint8_t> sample();
  void solve_sample();
  std::uint64_t likely_largest();
  void carry_over_sample(std::uint64_t giant, std::vector<std::uint8_t>& done);
  void link_outside(const std::vector<std::uint8_t>& done);

  Runtime& rt_;
  Run run_;
  Rows rows_;
  std::uint64_t base_, end_;
  std::size_t n_;
  Components out_;
  std::span<std::uint64_t> parent_;  // out_.labels' local part
  std::vector<Index> up_;            // the local forest's parents, local indices
  LocalForest<Index> forest_;
  std::vector<CutArc> cut_;  // (local vertex or root, vertex of another rank)
};

template <class Rows, class Id>
void Afforest<Rows, Id>::link_every_arc() {
  // Every arc crossing ranks is sent, so they travel in chunks of
  // O(vertices per rank) instead of all at once.
  std::uint64_t remote = 0;
  for (std::size_t i = 0; i < n_; ++i)
    rows_.for_each(i, [&](std::uint64_t v) {
      if (is_local(v))
        forest_.link(static_cast<Index>(i), index_of(v));
      else
        ++remote;
    });
  forest_.compress();
  export_roots();
  out_.local_rounds = 1;
  const std::size_t chunk = std::max<std::size_t>(n_, 1 << 16);
  const std::uint64_t chunks = all_reduce<std::uint64_t>(rt_.comm(), (remote + chunk - 1) / chunk, MPI_MAX);
  // The next arc to send: of local vertex `next`, at position `at` in its row.
  std::size_t next = 0;
  std::uint64_t at = 0;
  auto fill = [&](std::vector<CutArc>& arcs) {
    arcs.reserve(chunk);
    for (; next < n_; ++next, at = 0) {
      std::uint64_t pos = at;
      const bool full = find_from(rows_, next, at, [&](std::uint64_t v) {
        ++pos;
        if (!is_local(v)) arcs.push_back({parent_[next], v});
        return arcs.size() == chunk;
      });
      if (full) {  // inside this row (or at its end): the next chunk goes on from there
        at = pos;
        return;
      }
    }
  };
  solve_pairs(run_, out_.labels, route_to_far_owners(run_, parent_, base_, chunks, fill, {}));
}

// Step 1's links: two local neighbours and one remote neighbour of each
// vertex, looked for among its first kScan (at 1 rank: GAPBS's first two).
// The local ones grow big local trees, so the cut arcs collapse into few
// pairs of roots. Returns, per vertex, how many leading neighbours are linked.
template <class Rows, class Id>
std::vector<std::uint8_t> Afforest<Rows, Id>::sample() {
  std::vector<std::uint8_t> done(n_, 0);
  const bool single = rt_.size() == 1;
  for (std::size_t i = 0; i < n_; ++i) {
    std::size_t locals = 0, remotes = 0, prefix = 0, scanned = 0;
    bool whole = true;
    rows_.find(i, [&](std::uint64_t v) {
      bool linked = false;
      if (is_local(v)) {
        if (locals < kNeighbourRounds) forest_.link(static_cast<Index>(i), index_of(v)), ++locals, linked = true;
      } else if (remotes == 0) {
        cut_.push_back({base_ + i, v}), ++remotes;  // not counted as done: the cap below may drop it
      }
      whole = whole && linked;
      prefix += whole;
      return ++scanned == kScan || (locals == kNeighbourRounds && (remotes == 1 || single));
    });
    done[i] = static_cast<std::uint8_t>(prefix);
  }
  forest_.compress();
  export_roots();
  return done;
}

// Step 1's components of the sampled graph, in place: every vertex ends
// holding its sampled label.
template <class Rows, class Id>
void Afforest<Rows, Id>::solve_sample() {
  // Roots send at most kArcsPerRoot of their vertices' arcs (a big tree's
  // thousands of arcs mostly repeat one pair of roots). A tree of one vertex
  // is a leaf: it only reads its far end's label afterwards (most of them,
  // in a Kronecker graph: vertices of low degree with no neighbour on their
  // rank), instead of joining the contracted graph.
  constexpr std::uint8_t kArcsPerRoot = 4, kLeaf = 0xff;
  std::vector<std::uint8_t> tag(n_, 0);  // per root: vertices seen (up to 2), then arcs sent or kLeaf
  for (std::size_t i = 0; i < n_; ++i)
    if (auto& t = tag[parent_[i] - base_]; t < 2) ++t;
  for (auto& t : tag) t = t == 1 ? kLeaf : 0;
  std::vector<CutArc> leaves;
  std::size_t kept = 0;
  for (const auto& a : cut_) {
    std::uint64_t r = parent_[a.local - base_];
    if (auto& t = tag[r - base_]; t == kLeaf)
      leaves.push_back({r, a.remote});
    else if (t < kArcsPerRoot)
      ++t, cut_[kept++] = {r, a.remote};
  }
  cut_.resize(kept);
  run_.note(n_ + (cut_.capacity() + leaves.capacity()) * sizeof(CutArc));
  // tag now marks the roots other ranks' arcs reached.
  std::fill(tag.begin(), tag.end(), 0);
  join_across_ranks(run_, out_.labels, std::move(cut_), tag);
  release(cut_);
  // A leaf takes its far end's label, unless the contracted graph labelled
  // it (then arcs of others rely on its own label). Any such label is one
  // the leaf is connected to, which is all steps 2 and 3 need: it need not
  // be its component's smallest id.
  auto far_label = read_labels(run_, parent_, base_, leaves);
  for (std::size_t k = 0; k < leaves.size(); ++k)
    if (std::uint64_t u = leaves[k].local; !tag[u - base_]) parent_[u - base_] = far_label[k];
}

// Step 1's end: the label most frequent among 1024 sampled vertices per
// rank, weighted by the rank's vertex count, summed where ranks agree.
template <class Rows, class Id>
std::uint64_t Afforest<Rows, Id>::likely_largest() {
  struct Candidate {
    std::uint64_t label;
    double weight;
  };
  Candidate mine{kNoIndex, 0};
  if (n_ > 0) {
    constexpr std::size_t kSamples = 1024;
    std::unordered_map<std::uint64_t, std::uint64_t> counts;
    std::uint64_t x = 0x9e3779b97f4a7c15ull ^ base_;  // a fixed xorshift stream: runs repeat
    const std::size_t samples = std::min(kSamples, n_);
    for (std::size_t s = 0; s < samples; ++s) {
      x ^= x << 13, x ^= x >> 7, x ^= x << 17;
      ++counts[parent_[x % n_]];
    }
    for (auto [l, c] : counts)
      if (c > mine.weight || (c == mine.weight && l < mine.label)) mine = {l, static_cast<double>(c)};
    mine.weight *= static_cast<double>(n_) / static_cast<double>(samples);
  }
  auto all = all_gather(rt_.comm(), mine);
  Candidate giant{kNoIndex, 0};
  for (const auto& c : all) {
    if (c.label == kNoIndex) continue;
    double w = 0;
    for (const auto& d : all) w += d.label == c.label ? d.weight : 0;
    if (w > giant.weight || (w == giant.weight && c.label < giant.label)) giant = {c.label, w};
  }
  return giant.label;
}

// Step 2's start: the sampled components carried over as a local forest
// (the vertices of one label are joined: the sampled arcs proved it). A
// local label is a root already (the smallest id of its component); a
// remote one gets its first vertex here as the root, and one cut arc to the
// label. Vertices of the likely largest component are marked done.
template <class Rows, class Id>
void Afforest<Rows, Id>::carry_over_sample(std::uint64_t giant, std::vector<std::uint8_t>& done) {
  std::unordered_map<std::uint64_t, std::uint64_t> root_of_label;  // remote label -> its local root
  for (std::size_t i = 0; i < n_; ++i) {
    const std::uint64_t u = base_ + i, l = parent_[i];
    if (l == giant) done[i] = kInGiant;
    if (is_local(l)) {
      // A label below the vertex is (or was joined to) a root: pointers
      // keep going down, and roots stay their trees' smallest ids. A leaf
      // may carry one above it: linked below, once every parent is set.
      up_[i] = l > u ? static_cast<Index>(i) : index_of(l);
      continue;
    }
    auto [at, fresh] = root_of_label.try_emplace(l, u);
    up_[i] = index_of(at->second);
    if (fresh) cut_.push_back({u, l});
  }
  for (std::size_t i = 0; i < n_; ++i)
    if (const std::uint64_t l = parent_[i]; is_local(l) && l > base_ + i)
      forest_.link(static_cast<Index>(i), index_of(l));
  run_.note(n_ + root_of_label.size() * 4 * sizeof(std::uint64_t));
}

// Step 2's skipping and step 3: vertices outside the likely largest
// component link the rest of their neighbours (local ones in the forest,
// remote ones as cut arcs), and the cut arcs join the trees across ranks.
template <class Rows, class Id>
void Afforest<Rows, Id>::link_outside(const std::vector<std::uint8_t>& done) {
  for (std::size_t i = 0; i < n_; ++i) {
    if (done[i] == kInGiant) continue;
    const std::uint64_t u = base_ + i;
    rows_.for_range(i, done[i], kAllPositions, [&](std::uint64_t v) {
      if (is_local(v))
        forest_.link(static_cast<Index>(i), index_of(v));
      else
        cut_.push_back({u, v});
    });
  }
  forest_.compress();
  export_roots();
  out_.local_rounds = static_cast<int>(kNeighbourRounds) + 1;
  for (auto& a : cut_) a.local = parent_[a.local - base_];
  join_across_ranks(run_, out_.labels, std::move(cut_));
}

// Either graph form: the node-shared form when it applies, else the
// distributed one, both over g's rows view.
template <class G>
Components afforest_of(const G& g, const ComponentsOptions& options) {
  if (auto on_node = afforest_on_node(g, options)) return std::move(*on_node);
  return with_rows_and_id(g, [&]<class Rows, class Id>(const Rows& rows, Id) {
    Afforest<Rows, Id> run(g, rows, options);
    if (g.directed())
      run.link_every_arc();  // an arc is stored at its source only (step 2 above)
    else
      run.sample_skip_and_join();
    return run.finish();
  });
}

}  // namespace

Components afforest(const EdgeList& g, const ComponentsOptions& options) { return afforest_of(g, options); }
Components afforest(const PackedGraph& g, const ComponentsOptions& options) { return afforest_of(g, options); }

Components components_by(const std::string& algorithm, const EdgeList& g, const ComponentsOptions& options) {
  if (algorithm == "afforest") return afforest(g, options);
  if (algorithm == "fastsv") return fastsv(g, options);
  if (algorithm == "lp") return label_propagation(g, options);
  throw ConfigError("unknown components algorithm '" + algorithm + "' (afforest, fastsv or lp)");
}

}  // namespace tessera::graph
