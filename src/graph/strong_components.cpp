// Strongly connected components by trimming and colouring:
//
//  * Trimming (McLendon, Hendrickson, Plimpton and Rauchwerger, "Finding
//    strongly connected components in distributed graphs", JPDC 2005): a
//    vertex without live in-arcs or without live out-arcs is a component of
//    its own; removing it may expose more. Every acyclic part goes here.
//  * Colouring (Orzan, PhD thesis 2004; Slota, Rajamanickam and Madduri,
//    "BFS and Coloring-based Parallel Algorithms for Strongly Connected
//    Components", IPDPS 2014): the smallest id reaching each vertex is
//    propagated forward; a vertex r whose colour is r is the smallest id of
//    its component, which is exactly the vertices of colour r that reach r
//    (a backward search within the colour). Those are removed; repeat.
//
// Both searches expand locally as far as they can and message only arcs that
// cross ranks: forward by pushing to the owner, backward by reading the marks
// of this rank's remote out-neighbours each round (no transposed graph).
#include "tessera/graph/strong_components.hpp"

#include <algorithm>
#include <chrono>

#include "tessera/array/ghost_set.hpp"
#include "tessera/comm/aggregators.hpp"
#include "tessera/runtime/cancellation.hpp"
#include "tessera/runtime/collective.hpp"

namespace tessera::graph {

namespace {

using Clock = std::chrono::steady_clock;
constexpr std::uint64_t kNone = ~std::uint64_t{0};

// Id: the graph's vertex id type, so every arc loop indexes a span of Id.
template <class Id>
class StrongComponentsSearch {
 public:
  StrongComponentsSearch(const EdgeList& g, std::span<const Id> dst, Components& out, const ComponentsOptions& options)
      : g_(g),
        rt_(g.runtime()),
        out_(out),
        options_(options),
        base_(g.local_vertex_begin()),
        end_(g.local_vertex_end()),
        n_(end_ - base_),
        dst_(dst),
        ghosts_(GhostSet::remote_of(dst_, base_, end_, g.vertices())),
        alive_(rt_, g.vertex_ranges()),
        mark_(rt_, g.vertex_ranges()),
        lost_in_(rt_, g.vertex_ranges()),
        proposed_(rt_, g.vertex_ranges()),
        in_count_(rt_, g.vertex_ranges()),
        ghost_alive_(ghosts_.size(), 1),
        ghost_mark_(ghosts_.size(), 0),
        ghost_colour_(ghosts_.size(), kNone),
        out_alive_(n_, 0),
        colour_(n_, kNone) {
    build_reverse_arcs();
    std::fill(alive_.local().begin(), alive_.local().end(), 1);
    // Live in- and out-arc counts, self loops excluded.
    {
      UpdateAggregator<std::uint64_t, ops::Add> count(in_count_, options_.aggregation);
      g_.for_each_row([&](std::uint64_t u, std::size_t first, std::size_t last) {
        for (std::size_t k = first; k < last; ++k)
          if (dst_[k] != u) ++out_alive_[u - base_], count.update(dst_[k], 1);
      });
    }
  }

  void run() {
    auto t0 = Clock::now();
    auto label = out_.labels.local();
    std::fill(label.begin(), label.end(), kNone);
    for (auto v = base_; v < end_; ++v) queue_trim(v);
    for (;;) {
      trim();
      if (all_reduce<std::uint64_t>(rt_.comm(), live_count(), MPI_SUM) == 0) break;
      colour();
      std::uint64_t found = collect_backward();
      if (options_.on_round) {
        double seconds = std::chrono::duration<double>(Clock::now() - t0).count();
        options_.on_round(out_.rounds, all_reduce(rt_.comm(), found, MPI_SUM), seconds);
      }
      cancellation_point(rt_.comm());
    }
  }

 private:
  bool local(std::uint64_t w) const { return w >= base_ && w < end_; }
  std::size_t key(std::uint64_t w) const { return local(w) ? w - base_ : n_ + ghosts_.position(w); }
  bool is_alive(std::uint64_t v) const { return alive_.local()[v - base_] != 0; }
  std::span<const std::uint64_t> local_sources(std::size_t k) const {
    return std::span<const std::uint64_t>(rev_src_).subspan(rev_offset_[k], rev_offset_[k + 1] - rev_offset_[k]);
  }
  std::uint64_t live_count() const {
    std::uint64_t c = 0;
    for (auto a : alive_.local()) c += a;
    return c;
  }

  // For every target (local vertex, then ghost), the local vertices with an
  // arc to it: the in-arcs this rank can follow backward without messages.
  void build_reverse_arcs() {
    rev_offset_.assign(n_ + ghosts_.size() + 1, 0);
    g_.for_each_row([&](std::uint64_t u, std::size_t first, std::size_t last) {
      for (std::size_t k = first; k < last; ++k)
        if (dst_[k] != u) ++rev_offset_[key(dst_[k]) + 1];
    });
    for (std::size_t k = 1; k < rev_offset_.size(); ++k) rev_offset_[k] += rev_offset_[k - 1];
    rev_src_.resize(rev_offset_.back());
    std::vector<std::size_t> fill(rev_offset_.begin(), rev_offset_.end() - 1);
    g_.for_each_row([&](std::uint64_t u, std::size_t first, std::size_t last) {
      for (std::size_t k = first; k < last; ++k)
        if (dst_[k] != u) rev_src_[fill[key(dst_[k])]++] = u;
    });
  }

  bool trimmable(std::uint64_t v) const {
    std::size_t i = v - base_;
    return alive_.local()[i] && (out_alive_[i] == 0 || in_count_.local()[i] == lost_in_.local()[i]);
  }
  void queue_trim(std::uint64_t v) {
    if (trimmable(v)) work_.push_back(v);
  }

  // Takes v out of the live graph: its live neighbours lose an arc.
  void remove(std::uint64_t v, UpdateAggregator<std::uint64_t, ops::Add>& lost) {
    alive_.local()[v - base_] = 0;
    auto [first, last] = g_.out_edges(v);
    for (std::size_t k = first; k < last; ++k) {
      std::uint64_t w = dst_[k];
      if (w == v) continue;
      if (local(w)) {
        ++lost_in_.local()[w - base_];
        queue_trim(w);
      } else if (ghost_alive_[ghosts_.position(w)]) {
        lost.update(w, 1);
      }
    }
    for (auto u : local_sources(v - base_)) {
      --out_alive_[u - base_];
      queue_trim(u);
    }
  }

  // Remote out-neighbours that died since the last look: their local
  // sources lose an out-arc.
  void refresh_ghosts() {
    std::vector<std::uint64_t> now(ghosts_.size());
    {
      SrcAggregator<std::uint64_t> read(alive_, options_.aggregation);
      auto ids = ghosts_.ids();
      for (std::size_t j = 0; j < ids.size(); ++j)
        if (ghost_alive_[j]) read.get(ids[j], now[j]);
    }
    for (std::size_t j = 0; j < ghosts_.size(); ++j) {
      if (!ghost_alive_[j] || now[j]) continue;
      ghost_alive_[j] = 0;
      for (auto u : local_sources(n_ + j)) {
        --out_alive_[u - base_];
        queue_trim(u);
      }
    }
  }

  void trim() {
    auto label = out_.labels.local();
    for (;;) {
      {
        UpdateAggregator<std::uint64_t, ops::Add> lost(lost_in_, options_.aggregation);
        while (!work_.empty()) {
          std::uint64_t v = work_.back();
          work_.pop_back();
          if (!trimmable(v)) continue;
          label[v - base_] = v;
          remove(v, lost);
        }
      }  // flushed: in-arc losses from every rank have arrived
      refresh_ghosts();
      for (auto v = base_; v < end_; ++v) queue_trim(v);
      ++out_.rounds;
      if (all_reduce<std::uint64_t>(rt_.comm(), work_.size(), MPI_SUM) == 0) return;
    }
  }

  // colour[v]: the smallest live id with a live path to v. Seeds are
  // expanded in increasing colour, so a vertex is claimed at most once per
  // round (the first colour to reach it is the smallest this round offers).
  void colour() {
    auto prop = proposed_.local();
    std::vector<std::pair<std::uint64_t, std::uint64_t>> seeds;  // (colour, vertex)
    for (std::size_t i = 0; i < n_; ++i) {
      colour_[i] = is_alive(base_ + i) ? base_ + i : kNone;
      prop[i] = colour_[i];
      if (colour_[i] != kNone) seeds.emplace_back(base_ + i, base_ + i);
    }
    std::vector<std::uint64_t> sent(ghosts_.size(), kNone);
    for (;;) {
      {
        UpdateAggregator<std::uint64_t, ops::Min> push(proposed_, options_.aggregation);
        for (auto [c, seed] : seeds) {
          if (colour_[seed - base_] != c) continue;  // a smaller colour got here first
          work_.push_back(seed);
          while (!work_.empty()) {
            std::uint64_t v = work_.back();
            work_.pop_back();
            auto [first, last] = g_.out_edges(v);
            for (std::size_t k = first; k < last; ++k) {
              std::uint64_t w = dst_[k];
              if (local(w)) {
                if (is_alive(w) && c < colour_[w - base_]) colour_[w - base_] = c, work_.push_back(w);
              } else if (std::size_t j = ghosts_.position(w); ghost_alive_[j] && c < sent[j]) {
                sent[j] = c;
                push.update(w, c);
              }
            }
          }
        }
      }
      seeds.clear();
      for (std::size_t i = 0; i < n_; ++i)
        if (is_alive(base_ + i) && prop[i] < colour_[i]) colour_[i] = prop[i], seeds.emplace_back(prop[i], base_ + i);
      std::sort(seeds.begin(), seeds.end());
      ++out_.rounds;
      if (all_reduce<std::uint64_t>(rt_.comm(), seeds.size(), MPI_SUM) == 0) break;
    }
    // The colours of the remote out-neighbours, for the backward search.
    std::copy(colour_.begin(), colour_.end(), prop.begin());
    SrcAggregator<std::uint64_t> read(proposed_, options_.aggregation);
    auto ids = ghosts_.ids();
    for (std::size_t j = 0; j < ids.size(); ++j)
      if (ghost_alive_[j]) read.get(ids[j], ghost_colour_[j]);
  }

  // Marks the live vertices that reach the root of their colour, labels and
  // removes them. Returns how many on this rank.
  std::uint64_t collect_backward() {
    auto mark = mark_.local();
    std::fill(mark.begin(), mark.end(), 0);
    std::fill(ghost_mark_.begin(), ghost_mark_.end(), 0);
    for (std::size_t i = 0; i < n_; ++i)
      if (is_alive(base_ + i) && colour_[i] == base_ + i) mark[i] = 1, work_.push_back(base_ + i);
    auto reach = [&](std::span<const std::uint64_t> sources, std::uint64_t c) {
      for (auto u : sources)
        if (is_alive(u) && !mark[u - base_] && colour_[u - base_] == c) mark[u - base_] = 1, work_.push_back(u);
    };
    for (;;) {
      while (!work_.empty()) {
        std::uint64_t w = work_.back();
        work_.pop_back();
        reach(local_sources(w - base_), colour_[w - base_]);
      }
      std::vector<std::uint64_t> now(ghosts_.size(), 0);
      {
        SrcAggregator<std::uint64_t> read(mark_, options_.aggregation);
        auto ids = ghosts_.ids();
        for (std::size_t j = 0; j < ids.size(); ++j)
          if (ghost_alive_[j] && !ghost_mark_[j]) read.get(ids[j], now[j]);
      }
      for (std::size_t j = 0; j < ghosts_.size(); ++j)
        if (now[j] && !ghost_mark_[j]) ghost_mark_[j] = 1, reach(local_sources(n_ + j), ghost_colour_[j]);
      ++out_.rounds;
      if (all_reduce<std::uint64_t>(rt_.comm(), work_.size(), MPI_SUM) == 0) break;
    }
    auto label = out_.labels.local();
    std::uint64_t found = 0;
    {
      UpdateAggregator<std::uint64_t, ops::Add> lost(lost_in_, options_.aggregation);
      for (std::size_t i = 0; i < n_; ++i)
        if (mark[i] && is_alive(base_ + i)) label[i] = colour_[i], ++found, remove(base_ + i, lost);
    }
    refresh_ghosts();
    for (auto v = base_; v < end_; ++v) queue_trim(v);
    return found;
  }

  const EdgeList& g_;
  Runtime& rt_;
  Components& out_;
  const ComponentsOptions& options_;
  const std::uint64_t base_, end_;
  const std::size_t n_;
  std::span<const Id> dst_;
  GhostSet ghosts_;
  // DistArrays where another rank reads or updates: alive and mark flags,
  // in-arcs lost to removed sources, proposed colours; in_count_ is fixed.
  DistArray<std::uint64_t> alive_, mark_, lost_in_, proposed_, in_count_;
  std::vector<std::uint8_t> ghost_alive_, ghost_mark_;
  std::vector<std::uint64_t> ghost_colour_, out_alive_, colour_;
  std::vector<std::size_t> rev_offset_;
  std::vector<std::uint64_t> rev_src_;
  std::vector<std::uint64_t> work_;
};

}  // namespace

Components strong_components(const EdgeList& g, const ComponentsOptions& options) {
  if (!g.directed()) return fastsv(g, options);
  auto t0 = Clock::now();
  Components out{DistArray<std::uint64_t>(g.runtime(), g.vertex_ranges()), 0, 0};
  g.with_dst([&](auto dst) {
    using Id = typename decltype(dst)::value_type;
    StrongComponentsSearch<Id>(g, dst, out, options).run();
  });
  out.seconds = std::chrono::duration<double>(Clock::now() - t0).count();
  return out;
}

}  // namespace tessera::graph
