// Direction-optimizing breadth-first search: S. Beamer, K. Asanović and
// D. Patterson, "Direction-Optimizing Breadth-First Search", SC'12 (GAPBS's
// `bfs`: the same alpha = 15 / beta = 18 switch on the same counts).
//
// Distributed, 1D: each rank owns a range of vertices, their out-arcs (and
// for a directed graph their in-arcs, from the transpose on the same ranges).
//  * Top-down: every frontier vertex offers itself as the parent of its
//    out-neighbours; offers to another rank's vertices travel through a
//    message aggregator and are decided by the owner: the first offer of the
//    step discovers the vertex, later ones of the same step keep the
//    smallest parent.
//  * Bottom-up: the frontier, as a bitmap of every vertex (each rank's words
//    all-gathered), is read by every unvisited vertex along its in-arcs in
//    increasing order until one is in it: the smallest again.
// The switch counts (frontier arcs, unexplored arcs, vertices found) are
// summed over the ranks, so every rank takes the same direction, whatever
// the rank count.
//
// Its verifier (check_bfs) sits below it.
#include "tessera/graph/bfs.hpp"

#include <algorithm>
#include <bit>
#include <chrono>
#include <optional>

#include "tessera/comm/aggregators.hpp"
#include "tessera/runtime/cancellation.hpp"
#include "tessera/runtime/collective.hpp"
#include "tessera/runtime/error.hpp"
#include "tessera/runtime/trace.hpp"

namespace tessera::graph {

BfsDirection parse_bfs_direction(const std::string& name) {
  if (name == "optimizing") return BfsDirection::optimizing;
  if (name == "top-down") return BfsDirection::top_down;
  if (name == "bottom-up") return BfsDirection::bottom_up;
  throw ConfigError("the BFS direction must be optimizing, top-down or bottom-up, not '" + name + "'");
}

const char* bfs_direction_name(BfsDirection d) {
  switch (d) {
    case BfsDirection::top_down: return "top-down";
    case BfsDirection::bottom_up: return "bottom-up";
    default: return "optimizing";
  }
}

namespace {

using Clock = std::chrono::steady_clock;

template <class G>
void check_source(const G& g, std::uint64_t source) {
  agree(g.runtime().comm(), [&] {
    if (source >= g.vertices())
      throw RangeError("source vertex " + std::to_string(source) + " is outside the graph's vertex ids " +
                       (g.vertices() == 0 ? std::string("(the graph is empty)")
                                          : "0.." + std::to_string(g.vertices() - 1)));
  });
}

// The frontier as one bit per vertex of the graph, on every rank: each rank
// sets its own vertices' bits in the words its range touches, the words are
// all-gathered and the shared boundary words OR-ed. Each rank's block ends
// with its frontier's size, so the gather also gives the frontier's total
// (no all-reduce of its own: on oversubscribed ranks a step costs its
// collective rounds).
class FrontierBitmap {
 public:
  template <class G>
  explicit FrontierBitmap(const G& g) : comm_(g.runtime().comm()), words_((g.vertices() + 63) / 64 + 1, 0) {
    const Distribution& r = g.vertex_ranges();
    int total = 0;
    for (int p = 0; p < r.ranks(); ++p) {
      const std::uint64_t b = r.begin(p), e = b + r.count(p);
      const std::uint64_t first = b / 64, last = e > b ? (e + 63) / 64 : first;
      first_.push_back(first);
      counts_.push_back(static_cast<int>(last - first) + 1);  // the words, then the size
      displs_.push_back(total);
      total += counts_.back();
    }
    me_ = g.runtime().rank();
    gathered_.resize(static_cast<std::size_t>(total));
    own_begin_ = r.begin(me_);
    own_end_ = own_begin_ + r.count(me_);
    next_.assign(static_cast<std::size_t>(own_words()), 0);
  }
  // Collective: the bitmap of every rank's `frontier` (its own vertices);
  // returns the frontiers' total size.
  std::uint64_t load(const std::vector<std::uint64_t>& frontier) {
    const std::size_t P = counts_.size();
    if (P == 1) {
      std::fill(words_.begin(), words_.end(), 0);
      for (auto v : frontier) words_[v >> 6] |= 1ull << (v & 63);
      return frontier.size();
    }
    const std::size_t me = static_cast<std::size_t>(me_);
    std::uint64_t* mine = gathered_.data() + displs_[me];
    const int n_words = own_words();
    std::fill(mine, mine + n_words, 0);
    for (auto v : frontier) mine[(v >> 6) - first_[me]] |= 1ull << (v & 63);
    mine[n_words] = frontier.size();
    return combine();
  }
  // The next frontier, built in place by a bottom-up step (GAPBS's `next`
  // bitmap: no list of the vertices found).
  void mark_next(std::uint64_t v) noexcept { next_[(v >> 6) - first_[static_cast<std::size_t>(me_)]] |= 1ull << (v & 63); }
  // Collective: the marked vertices (`marked` of them here) become the
  // frontier; returns its total size.
  std::uint64_t publish_next(std::uint64_t marked) {
    const std::size_t me = static_cast<std::size_t>(me_);
    if (counts_.size() == 1) {
      std::copy(next_.begin(), next_.end(), words_.begin());
      std::fill(next_.begin(), next_.end(), 0);
      return marked;
    }
    std::copy(next_.begin(), next_.end(), gathered_.begin() + displs_[me]);
    gathered_[static_cast<std::size_t>(displs_[me] + own_words())] = marked;
    std::fill(next_.begin(), next_.end(), 0);
    return combine();
  }
  // This rank's vertices in the frontier, increasing (GAPBS's BitmapToQueue).
  void list_own(std::vector<std::uint64_t>& out) const {
    out.clear();
    const std::uint64_t first = first_[static_cast<std::size_t>(me_)];
    for (std::size_t k = 0; k < static_cast<std::size_t>(own_words()); ++k)
      for (std::uint64_t bits = words_[first + k]; bits; bits &= bits - 1) {
        const std::uint64_t v = (first + k) * 64 + static_cast<std::uint64_t>(std::countr_zero(bits));
        if (v >= own_begin_ && v < own_end_) out.push_back(v);
      }
  }
  const std::uint64_t* words() const noexcept { return words_.data(); }
  std::size_t memory_bytes() const noexcept {
    return (words_.capacity() + gathered_.capacity() + next_.capacity()) * sizeof(std::uint64_t);
  }

 private:
  // The words this rank's vertices touch (its block of the gather, less the size at its end).
  int own_words() const noexcept { return counts_[static_cast<std::size_t>(me_)] - 1; }
  // After the gather: every rank's words OR-ed into the bitmap (boundary
  // words are shared); the frontiers' total size.
  std::uint64_t combine() {
    all_gather_in_place<std::uint64_t>(comm_, gathered_, counts_, displs_);
    std::fill(words_.begin(), words_.end(), 0);
    std::uint64_t total = 0;
    for (std::size_t p = 0; p < counts_.size(); ++p) {
      const int words = counts_[p] - 1;
      for (int k = 0; k < words; ++k) words_[first_[p] + static_cast<std::uint64_t>(k)] |= gathered_[displs_[p] + k];
      total += gathered_[displs_[p] + words];
    }
    return total;
  }

  MPI_Comm comm_;
  int me_ = 0;
  std::uint64_t own_begin_ = 0, own_end_ = 0;
  std::vector<std::uint64_t> words_, gathered_, first_, next_;
  std::vector<int> counts_, displs_;
};

struct Offer {
  std::uint64_t vertex, parent;
};

const EdgeList& in_arcs_of(const EdgeList& g, const EdgeList* given, bool needed, std::optional<EdgeList>& holder) {
  if (!g.directed() || !needed) return g;
  if (!given) return holder.emplace(g.transposed({}, true));
  agree(g.runtime().comm(), [&] {
    if (given->vertices() != g.vertices() || !(given->vertex_ranges() == g.vertex_ranges()) ||
        given->arcs() != g.arcs())
      throw MismatchError("the in-arcs given to BFS are not the graph's transpose on its vertex ranges "
                          "(EdgeList::transposed(storage, true))");
    // The search reads both graphs' destinations at one id width.
    if (given->id_width() != g.id_width())
      throw MismatchError("the in-arcs given to BFS have " + id_width_name(given->id_width()) +
                          " vertex ids, the graph " + id_width_name(g.id_width()) +
                          " (EdgeList::transposed keeps the width)");
  });
  return *given;
}

// The search over g's rows (`out`: an EdgeList's at its id width, or a
// packed graph's), with `in` the rows of the in-arcs (g's own, or its
// transpose's on the same ranges, in the same form).
template <class G, class Rows>
Bfs bfs_at(const G& g, const Rows& out_rows, const Rows& in_rows, std::uint64_t source, const BfsOptions& o,
           Clock::time_point t0) {
  auto since = [&] { return std::chrono::duration<double>(Clock::now() - t0).count(); };
  Runtime& rt = g.runtime();
  MPI_Comm comm = rt.comm();
  const std::uint64_t base = g.local_vertex_begin(), end = g.local_vertex_end(), n = g.vertices();
  const std::size_t n_local = g.local_vertices();
  const Distribution& ranges = g.vertex_ranges();

  Bfs out{DistArray<std::int64_t>(g.vertex_map()), DistArray<std::int64_t>(g.vertex_map()), 0, 0, 0, 0, 0, 0};
  // The outputs' first touch (their fill below) is part of the search's
  // time: 2 MiB pages take a 512th of the faults (kron-20, 1 rank: 34 -> 26 ms).
  out.parents.prefer_huge_pages();
  out.depths.prefer_huge_pages();
  std::int64_t* parent = out.parents.local().data();
  std::int64_t* depth = out.depths.local().data();
  // The search tests two bitmaps of the local vertices, found (at any
  // depth) and found in this step (for the smallest-parent rule), not the
  // outputs: 1/64 of their 16 bytes a vertex, they stay in cache. The
  // outputs are only written. (Filling them at the end, only where not
  // found, measured slower at 2 ranks: the pages are then first touched
  // in the search's random order.)
  const std::size_t n_words = n_local / 64 + 1;
  std::vector<std::uint64_t> found(n_words, 0), fresh(n_words, 0);
  auto is_set = [](const std::vector<std::uint64_t>& bits, std::size_t i) { return bits[i >> 6] >> (i & 63) & 1; };
  auto set = [](std::vector<std::uint64_t>& bits, std::size_t i) { bits[i >> 6] |= 1ull << (i & 63); };
  for (std::size_t i = 0; i < n_local; ++i) parent[i] = depth[i] = -1;

  // Room for every local vertex up front: only the pages a search fills are
  // touched, and no step copies a growing list.
  std::vector<std::uint64_t> frontier, next;
  frontier.reserve(n_local);
  next.reserve(n_local);
  std::int64_t level = 0;  // the depth of the frontier
  std::uint64_t scout = 0;
  if (source >= base && source < end) {
    parent[source - base] = static_cast<std::int64_t>(source);
    depth[source - base] = 0;
    set(found, source - base);
    frontier.push_back(source);
    scout = out_rows.degree(source - base);
  }
  scout = all_reduce(comm, scout, MPI_SUM);
  std::uint64_t edges_to_check = g.arcs();  // GAPBS's num_edges_directed(): arcs, as the scout counts
  // The source, then each step's new frontier (summed over the ranks): a
  // vertex is found once, so no count of the depths at the end.
  out.reached = 1;

  // An offer of `u` as the parent of local vertex v, in a top-down step.
  auto offer = [&](std::uint64_t v, std::uint64_t u) {
    const std::size_t i = v - base;
    if (!is_set(found, i)) {
      set(found, i);
      set(fresh, i);
      depth[i] = level + 1;
      parent[i] = static_cast<std::int64_t>(u);
      next.push_back(v);
    } else if (is_set(fresh, i) && static_cast<std::int64_t>(u) < parent[i]) {
      parent[i] = static_cast<std::int64_t>(u);
    }
  };
  // At one rank every arc is local: no aggregator (its setup duplicates a communicator).
  std::optional<MessageAggregator<Offer>> offers;
  if (rt.size() > 1) offers.emplace(rt, [&](int, const Offer& m) { offer(m.vertex, m.parent); }, o.aggregation);
  std::optional<FrontierBitmap> bitmap;
  // After a bottom-up step the frontier is in the bitmap only (not listed);
  // after a top-down step it is listed only.
  bool bitmap_holds_frontier = false;
  // `found`: the new frontier's size over every rank.
  auto finish_step = [&](bool bottom_up, std::uint64_t found) {
    frontier.swap(next);
    next.clear();
    ++level;
    (bottom_up ? out.bottom_up_steps : out.top_down_steps)++;
    if (found) out.levels = static_cast<int>(level);
    out.reached += found;
    if (o.on_level) o.on_level(static_cast<int>(level), found, bottom_up, since());
    cancellation_point(comm);
    return found;
  };
  auto top_down = [&] {
    trace::Span step(trace::Category::round, "BFS level");
    step.arg("level", level + 1).arg("direction", "top-down");
    if (bitmap_holds_frontier) bitmap->list_own(frontier);
    for (auto u : frontier)
      out_rows.for_each(u - base, [&](std::uint64_t v) {
        if (v >= base && v < end) offer(v, u);
        else offers->send(ranges.owner(v), {v, u});
      });
    if (offers) offers->flush();
    for (auto v : next) fresh[(v - base) >> 6] = 0;
    // GAPBS's scout count (the new frontier's out-arcs) and the frontier's
    // size, summed in one all-reduce.
    std::uint64_t sums[2] = {0, next.size()};
    for (auto v : next) sums[0] += out_rows.degree(v - base);
    all_reduce(comm, sums, 2, MPI_SUM);
    scout = sums[0];
    bitmap_holds_frontier = false;
    step.arg("found", sums[1]);
    return finish_step(false, sums[1]);
  };
  auto bottom_up = [&] {
    trace::Span step(trace::Category::round, "BFS level");
    step.arg("level", level + 1).arg("direction", "bottom-up");
    if (!bitmap) bitmap.emplace(g);
    if (!bitmap_holds_frontier) bitmap->load(frontier);
    const std::uint64_t* front = bitmap->words();
    std::uint64_t marked = 0;
    // The unfound vertices, a word of the bitmap at a time (the bits past
    // the last vertex are never searched).
    for (std::size_t w = 0; w < n_words; ++w) {
      std::uint64_t unfound = ~found[w];
      if (w == n_words - 1) unfound &= (1ull << (n_local & 63)) - 1;
      std::uint64_t now_found = 0;
      for (; unfound; unfound &= unfound - 1) {
        const std::size_t i = w * 64 + static_cast<std::size_t>(std::countr_zero(unfound));
        in_rows.find(i, [&](std::uint64_t u) {
          if (!(front[u >> 6] >> (u & 63) & 1)) return false;
          parent[i] = static_cast<std::int64_t>(u);
          depth[i] = level + 1;
          now_found |= unfound & -unfound;
          bitmap->mark_next(base + i);
          ++marked;
          return true;
        });
      }
      found[w] |= now_found;
    }
    // The new frontier's bitmap, ready for a next bottom-up step, and its
    // size in the same collective; listed only if a top-down step follows.
    const std::uint64_t found = bitmap->publish_next(marked);
    bitmap_holds_frontier = true;
    step.arg("found", found);
    return finish_step(true, found);
  };

  std::uint64_t frontier_size = 1;
  auto deeper = [&] { return o.max_depth < 0 || level < o.max_depth; };
  while (frontier_size > 0 && deeper()) {
    const bool go_bottom_up = o.direction == BfsDirection::bottom_up ||
                              (o.direction == BfsDirection::optimizing && scout > edges_to_check / o.alpha);
    if (go_bottom_up) {
      std::uint64_t awake = frontier_size, old_awake;
      do {
        old_awake = awake;
        awake = bottom_up();
      } while (awake > 0 && deeper() && (o.direction == BfsDirection::bottom_up || awake >= old_awake ||
                             awake > n / static_cast<std::uint64_t>(o.beta)));
      frontier_size = awake;
      scout = 1;
    } else {
      edges_to_check -= std::min(edges_to_check, scout);
      frontier_size = top_down();
    }
  }
  const std::uint64_t extra = (frontier.capacity() + next.capacity() + found.size() + fresh.size()) * sizeof(std::uint64_t) +
                              (bitmap ? bitmap->memory_bytes() : 0);
  out.extra_bytes = all_reduce(comm, extra, MPI_MAX);
  out.seconds = since();
  return out;
}

}  // namespace

namespace {
template <class G>
void check_options(const G& g, std::uint64_t source, const BfsOptions& o) {
  check_source(g, source);
  if (o.alpha < 1 || o.beta < 1)
    throw ConfigError("BFS alpha and beta must be at least 1 (GAPBS: 15 and 18)");
  if (o.max_depth < -1) throw ConfigError("the BFS depth limit must be >= 0 (or -1: none)");
}
}  // namespace

Bfs bfs(const EdgeList& g, std::uint64_t source, const BfsOptions& o, const EdgeList* given_in_arcs) {
  check_options(g, source, o);
  const auto t0 = Clock::now();
  std::optional<EdgeList> holder;
  const EdgeList& in = in_arcs_of(g, given_in_arcs, o.direction != BfsDirection::top_down, holder);
  return g.with_dst([&](auto dst) {
    using Id = std::remove_const_t<typename decltype(dst)::element_type>;
    const PlainRows<Id> out(g.row_offsets(), dst.data()), in_rows(in.row_offsets(), in.local_dst_as<Id>().data());
    return bfs_at(g, out, in_rows, source, o, t0);
  });
}

Bfs bfs(const PackedGraph& g, std::uint64_t source, const BfsOptions& o, const PackedGraph* given_in_arcs) {
  check_options(g, source, o);
  const auto t0 = Clock::now();
  const PackedGraph* in = &g;
  if (g.directed() && o.direction != BfsDirection::top_down) {
    if (!given_in_arcs)
      throw ConfigError("BFS on a directed packed graph reads in-arcs bottom-up: pass its transpose packed on the "
                        "same vertex ranges, or search top-down");
    agree(g.runtime().comm(), [&] {
      if (given_in_arcs->vertices() != g.vertices() || !(given_in_arcs->vertex_ranges() == g.vertex_ranges()) ||
          given_in_arcs->arcs() != g.arcs())
        throw MismatchError("the in-arcs given to BFS are not the packed graph's transpose on its vertex ranges");
    });
    in = given_in_arcs;
  }
  return bfs_at(g, g.rows(), in->rows(), source, o, t0);
}

Subgraph khop_subgraph(const EdgeList& g, std::uint64_t source, int hops, const StorageOptions& storage,
                       const BfsOptions& options) {
  if (hops < 0) throw ConfigError("the number of hops must be >= 0, not " + std::to_string(hops));
  BfsOptions o = options;
  o.max_depth = hops;
  auto b = bfs(g, source, o);
  DistArray<std::uint8_t> keep(g.vertex_map());
  auto depth = b.depths.local();
  for (std::size_t i = 0; i < depth.size(); ++i) keep.local()[i] = depth[i] >= 0;
  return induced_subgraph(g, keep, storage);
}

// The verifier. Messages carry (target vertex, a vertex, a depth).
namespace {
struct ArcFact {
  std::uint64_t to, from;
  std::int64_t depth;
};
}  // namespace

namespace {
template <class G>
std::string check_bfs_of(const G& g, std::uint64_t source, const DistArray<std::int64_t>& parents) {
  if (!(parents.distribution() == g.vertex_ranges()))
    throw MismatchError("the parents are not distributed like the graph's vertices (" +
                        std::to_string(parents.size()) + " parents, " + std::to_string(g.vertices()) + " vertices)");
  check_source(g, source);
  Runtime& rt = g.runtime();
  MPI_Comm comm = rt.comm();
  const std::uint64_t base = g.local_vertex_begin(), n = g.vertices();
  auto p = parents.local();
  const std::size_t n_local = p.size();
  const Distribution& ranges = g.vertex_ranges();
  std::string problem;
  auto note = [&](std::string what) {
    if (problem.empty()) problem = std::move(what);
  };
  auto id = [](std::uint64_t v) { return std::to_string(v); };

  // Values in range; the source its own parent.
  for (std::size_t i = 0; i < n_local; ++i) {
    const std::uint64_t v = base + i;
    if (p[i] < -1 || (p[i] >= 0 && static_cast<std::uint64_t>(p[i]) >= n))
      note("vertex " + id(v) + " has parent " + std::to_string(p[i]) + ", neither -1 nor a vertex of the " + id(n) +
           "-vertex graph");
    else if (v == source && p[i] != static_cast<std::int64_t>(source))
      note("the source " + id(source) + " has parent " + std::to_string(p[i]) + ", not itself");
  }
  if (problem = first_problem(comm, problem); !problem.empty()) return problem;

  // Every parent arc exists: asked of the parent's owner, whose out-neighbours are sorted.
  {
    // The row searched in place (out_neighbours would copy a hub's row per child).
    with_rows(g, [&](const auto& rows) {
      MessageAggregator<ArcFact> ask(
          rt,
          [&](int, const ArcFact& m) {
            if (!rows.contains(m.from - base, m.to))
              note("vertex " + id(m.to) + " has parent " + id(m.from) + " but the graph has no arc (" + id(m.from) +
                   ", " + id(m.to) + ")");
          });
      for (std::size_t i = 0; i < n_local; ++i)
        if (p[i] >= 0 && base + i != source) {
          const auto u = static_cast<std::uint64_t>(p[i]);
          ask.send(ranges.owner(u), {base + i, u, 0});
        }
    });
  }
  if (problem = first_problem(comm, problem); !problem.empty()) return problem;

  // Tree depths by pointer jumping: ancestor and hops to it, until every
  // ancestor is the source; a chain that does not get there in log2(n) + 2
  // rounds is a cycle.
  DistArray<std::uint64_t> ancestor(g.vertex_map());
  DistArray<std::int64_t> hops(g.vertex_map());
  auto anc = ancestor.local();
  auto h = hops.local();
  for (std::size_t i = 0; i < n_local; ++i) {
    anc[i] = p[i] < 0 ? kNoIndex : static_cast<std::uint64_t>(p[i]);
    h[i] = p[i] < 0 ? -1 : base + i == source ? 0 : 1;
  }
  int rounds_left = 2;
  for (std::uint64_t m = n; m > 1; m >>= 1) ++rounds_left;
  std::vector<std::uint64_t> anc_of_anc(n_local);
  std::vector<std::int64_t> hops_of_anc(n_local);
  for (;;) {
    std::uint64_t pending = 0;
    {
      SrcAggregator<std::uint64_t> read_anc(ancestor);
      SrcAggregator<std::int64_t> read_hops(hops);
      for (std::size_t i = 0; i < n_local; ++i)
        if (anc[i] != kNoIndex && anc[i] != source) {
          read_anc.get(anc[i], anc_of_anc[i]);
          read_hops.get(anc[i], hops_of_anc[i]);
        }
    }
    for (std::size_t i = 0; i < n_local; ++i)
      if (anc[i] != kNoIndex && anc[i] != source) {
        if (anc_of_anc[i] == kNoIndex) {
          note("the parent chain of vertex " + id(base + i) + " reaches vertex " + id(anc[i]) +
               ", which has no parent (-1)");
          continue;
        }
        h[i] += hops_of_anc[i];
        anc[i] = anc_of_anc[i];
        pending += anc[i] != source;
      }
    // Also ends the round's reads on every rank before the next round writes.
    pending = all_reduce(comm, pending, MPI_SUM);
    if (problem = first_problem(comm, problem); !problem.empty()) return problem;
    if (pending == 0 || --rounds_left == 0) break;
  }
  for (std::size_t i = 0; i < n_local; ++i)
    if (anc[i] != kNoIndex && anc[i] != source)
      note("the parent chain of vertex " + id(base + i) + " does not reach the source " + id(source) +
           " (a cycle)");
  if (problem = first_problem(comm, problem); !problem.empty()) return problem;

  // Along every arc (u, v) from a reached u: v reached, depth(v) <= depth(u) + 1.
  {
    MessageAggregator<ArcFact> tell(rt, [&](int, const ArcFact& m) {
      const std::int64_t dv = h[m.to - base];
      if (dv < 0)
        note("vertex " + id(m.to) + " is not reached but its in-neighbour " + id(m.from) + " is (depth " +
             std::to_string(m.depth) + ")");
      else if (dv > m.depth + 1)
        note("vertex " + id(m.to) + " has depth " + std::to_string(dv) + " but its in-neighbour " + id(m.from) +
             " has depth " + std::to_string(m.depth) + " (not a shortest path)");
    });
    with_rows(g, [&](const auto& rows) {
      for (std::size_t i = 0; i < n_local; ++i) {
        const std::int64_t du = h[i];
        if (du >= 0) rows.for_each(i, [&](std::uint64_t v) { tell.send(ranges.owner(v), {v, base + i, du}); });
      }
    });
  }
  return first_problem(comm, problem);
}
}  // namespace

std::string check_bfs(const EdgeList& g, std::uint64_t source, const DistArray<std::int64_t>& parents) {
  return check_bfs_of(g, source, parents);
}
std::string check_bfs(const PackedGraph& g, std::uint64_t source, const DistArray<std::int64_t>& parents) {
  return check_bfs_of(g, source, parents);
}

}  // namespace tessera::graph
