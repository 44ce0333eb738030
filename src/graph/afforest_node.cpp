// Afforest on one node: every rank links its own rows into one parent array
// in node-shared memory, with compare-and-swap, as GAPBS's threads link into
// theirs.
//
// M. Sutton, T. Ben-Nun and A. Barak, "Optimizing Parallel Graph
// Connectivity Computation via Subgraph Sampling", IPDPS 2018: link two
// neighbours of each vertex (hooking the larger root under the smaller, so a
// root stays its tree's smallest id), compress, find the likely largest
// component by sampling, then link the remaining neighbours of the vertices
// outside it (an undirected graph stores both directions, so an edge from
// the largest component to another is read from the other side); compress.
// A directed graph stores an arc at its source only: every arc is linked,
// nothing skipped (weak components).
//
// Used when the whole job shares one node: the distributed Afforest
// (afforest.cpp) sends the sampled cut arcs between ranks, which GAPBS's
// threads never do, and at 2 ranks here took 1.5x GAPBS's time at 2
// threads. Ranks meet at a barrier between phases; no message carries a
// vertex. Memory: the parent array, an id's width per vertex, once per node
// (on its first rank). Either graph form: the rows are read through their
// view (an EdgeList's CSR, or a PackedGraph's bytes decoded in place).
#include "afforest_node.hpp"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <unordered_map>

#include "tessera/runtime/cancellation.hpp"
#include "tessera/runtime/collective.hpp"
#include "tessera/runtime/trace.hpp"
#include "tessera/runtime/wait.hpp"
#include "tessera/storage/node_segment.hpp"
#include "row_blocks.hpp"

namespace tessera::graph {

namespace {

template <class Id>
class SharedParents {
 public:
  explicit SharedParents(Id* p) : p_(p) {}
  Id get(std::uint64_t v) const { return std::atomic_ref<Id>(p_[v]).load(std::memory_order_relaxed); }
  void set(std::uint64_t v, Id x) const { std::atomic_ref<Id>(p_[v]).store(x, std::memory_order_relaxed); }

  // Joins the trees of u and v: the larger root is hooked under the smaller
  // one where it is still a root (a failed swap means another rank moved
  // it: look again from where things are now).
  void link(std::uint64_t u, std::uint64_t v) const {
    Id a = get(u), b = get(v);
    while (a != b) {
      const Id high = std::max(a, b), low = std::min(a, b);
      const Id above = get(high);
      if (above == low) return;
      if (above == high) {
        Id expected = high;
        if (std::atomic_ref<Id>(p_[high]).compare_exchange_strong(expected, low, std::memory_order_relaxed)) return;
      }
      a = get(get(high));
      b = get(low);
    }
  }

  // Points every vertex of [begin, end) at its root. Other ranks compress
  // their ranges meanwhile: pointers only move towards roots.
  void compress(std::uint64_t begin, std::uint64_t end) const {
    for (std::uint64_t u = begin; u < end; ++u)
      for (Id up = get(u), above = get(up); up != above; up = above, above = get(up)) set(u, above);
  }

 private:
  Id* p_;
};

}  // namespace

bool afforest_on_one_node(const Runtime& rt, const ComponentsOptions& options) {
  return options.node_shared && rt.size() > 1 && rt.node().count == 1;
}

namespace {

// The kernel, once for both graph forms: Rows reads a rank's rows (plain or
// decoding), Id is the parent array's width.
template <class G, class Rows, class Id>
std::optional<Components> afforest_on_node_at(const G& g, const Rows& rows, Id, const ComponentsOptions& options) {
  Runtime& rt = g.runtime();
  const auto t0 = std::chrono::steady_clock::now();
  const NodeGroup& node = rt.node();
  const std::uint64_t n = g.vertices();
  if (!afforest_on_one_node(rt, options) || n == 0) return std::nullopt;
  const std::uint64_t bytes = n * sizeof(Id);
  NodeSegment segment(rt, node.rank == 0 ? bytes : 0, "cc", "the node-shared parents of connected components");
  std::span<std::byte> all = node.rank == 0 ? segment.own() : segment.peer(node.world_ranks[0]);
  // A rank that could not map the array (another PID namespace): every rank
  // takes the distributed path instead.
  if (all_reduce<int>(rt.comm(), all.size() >= bytes ? 1 : 0, MPI_MIN) == 0) return std::nullopt;
  const SharedParents<Id> p(reinterpret_cast<Id*>(all.data()));

  const std::uint64_t base = g.local_vertex_begin(), end = g.local_vertex_end();
  const std::size_t local = g.local_vertices();
  for (std::uint64_t u = base; u < end; ++u) p.set(u, static_cast<Id>(u));
  barrier(rt.comm());
  int phases = 1;
  constexpr std::uint64_t kNeighbourRounds = 2, kAll = ~std::uint64_t{0};
  auto link_rows = [&](std::uint64_t first, std::uint64_t last, Id skip) {
    // A round: link the neighbours at positions [first, last) of every
    // row, then compress.
    trace::Span round(trace::Category::round, "Afforest round");
    round.arg("round", phases).arg("first_arc", first).arg("arcs", last == kAll ? -1 : static_cast<std::int64_t>(last - first));
    // Copies of the view and the array handle: locals whose address never
    // escapes, so their pointers stay in registers across the swaps (read
    // through the closure, every arc reloaded them).
    const Rows view = rows;
    const SharedParents<Id> parents = p;
    for (std::size_t i = 0; i < local; ++i) {
      const std::uint64_t u = base + i;
      if (parents.get(u) == skip) continue;
      view.for_range(i, first, last, [&](std::uint64_t v) { parents.link(u, v); });
    }
    barrier(rt.comm());
    parents.compress(base, end);
    barrier(rt.comm());
    cancellation_point(rt.comm());
    ++phases;
  };
  // No vertex id is all ones (ids are below the vertex count): skips none.
  constexpr Id kNone = static_cast<Id>(-1);
  if (g.directed()) {
    link_rows(0, kAll, kNone);
  } else {
    // Both sampled neighbours of a vertex in one pass, one compress after
    // (as the distributed form's sampling): one walk of the rows and the
    // arcs instead of two. kron-20 at 2 ranks: 40 -> 32 ms.
    link_rows(0, kNeighbourRounds, kNone);
    // The same samples on every rank (a fixed stream over the whole array,
    // which no rank changes now), so each finds the same label.
    constexpr std::size_t kSamples = 1024;
    std::unordered_map<Id, std::uint32_t> counts;
    std::uint64_t x = 0x9e3779b97f4a7c15ull;
    for (std::size_t s = 0; s < kSamples; ++s) {
      x ^= x << 13, x ^= x >> 7, x ^= x << 17;
      ++counts[p.get(x % n)];
    }
    auto most = std::max_element(counts.begin(), counts.end(), [](const auto& a, const auto& b) {
      return a.second < b.second || (a.second == b.second && a.first > b.first);
    });
    link_rows(kNeighbourRounds, kAll, most->first);
  }

  // Rounds: the phases that end at a barrier; local rounds: the link passes.
  Components out{DistArray<std::uint64_t>(rt, g.vertex_ranges()), phases, phases - 1, 0, 0};
  out.labels.prefer_huge_pages();  // first touched just below, inside the timed kernel
  auto labels = out.labels.local();
  for (std::size_t i = 0; i < local; ++i) labels[i] = p.get(base + i);
  // Also the last meeting: every rank has read its labels before the first
  // rank unmaps the array (a peer's own mapping would outlive it anyway).
  out.extra_bytes = all_reduce<std::uint64_t>(rt.comm(), node.rank == 0 ? bytes : 0, MPI_MAX);
  out.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return out;
}

}  // namespace

template <class G>
std::optional<Components> afforest_on_node(const G& g, const ComponentsOptions& options) {
  return with_rows_and_id(g, [&](const auto& rows, auto id) { return afforest_on_node_at(g, rows, id, options); });
}

template std::optional<Components> afforest_on_node(const EdgeList&, const ComponentsOptions&);
template std::optional<Components> afforest_on_node(const PackedGraph&, const ComponentsOptions&);

}  // namespace tessera::graph
