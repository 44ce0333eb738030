// Load-balancing strategies after Charm++'s GreedyLB, RefineLB and a
// communication-aware refinement (hop-bytes, Bhatele et al., "Topology
// aware task mapping"). Deterministic: ties go to the lower id / rank, so
// every run with the same loads decides the same.
#include <algorithm>
#include <bit>
#include <cstdio>
#include <numeric>
#include <optional>
#include <queue>

#include "tessera/chunks/balance.hpp"
#include "tessera/runtime/error.hpp"

namespace tessera::chunks {

double same_rank_hops(int a, int b) { return a == b ? 0.0 : 1.0; }

Strategy parse_strategy(const std::string& text, const std::string& option) {
  if (text == "none") return Strategy::none;
  if (text == "greedy") return Strategy::greedy;
  if (text == "refine") return Strategy::refine;
  if (text == "comm") return Strategy::comm;
  throw ConfigError(option + " '" + text + "': expected none, greedy, refine or comm");
}

std::string to_string(Strategy s) {
  switch (s) {
    case Strategy::none: return "none";
    case Strategy::greedy: return "greedy";
    case Strategy::refine: return "refine";
    case Strategy::comm: return "comm";
  }
  return "?";
}

namespace {
void check_input(const BalanceInput& in) {
  check_placement(in.current, in.load.size(), in.ranks, "load balancing: the current placement");
  for (auto& e : in.edges)
    if (e.from >= in.load.size() || e.to >= in.load.size())
      throw RangeError("load balancing: an edge names chunk " + std::to_string(std::max(e.from, e.to)) +
                       " of " + std::to_string(in.load.size()));
}
// Chunks in decreasing load, ties by id.
std::vector<std::size_t> heaviest_first(const std::vector<double>& load) {
  std::vector<std::size_t> order(load.size());
  std::iota(order.begin(), order.end(), std::size_t{0});
  std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) { return load[a] > load[b]; });
  return order;
}
double threshold(const BalanceInput& in) {
  double total = std::accumulate(in.load.begin(), in.load.end(), 0.0);
  return in.tolerance * total / in.ranks;
}
int least_loaded(const std::vector<double>& loads) {
  return static_cast<int>(std::min_element(loads.begin(), loads.end()) - loads.begin());
}
}  // namespace

std::vector<double> rank_loads(const std::vector<double>& load, const Placement& placement, int ranks) {
  std::vector<double> r(static_cast<std::size_t>(ranks), 0.0);
  for (std::size_t c = 0; c < load.size(); ++c) r[static_cast<std::size_t>(placement[c])] += load[c];
  return r;
}

std::uint64_t chunks_moved(const Placement& before, const Placement& after) {
  std::uint64_t moved = 0;
  for (std::size_t c = 0; c < before.size(); ++c) moved += before[c] != after[c];
  return moved;
}

double hop_bytes(const std::vector<ChunkEdge>& edges, const Placement& placement, const HopDistance& hops) {
  double sum = 0;
  for (auto& e : edges) sum += static_cast<double>(e.bytes) * hops(placement[e.from], placement[e.to]);
  return sum;
}

Placement greedy_balance(const BalanceInput& in) {
  check_input(in);
  // LPT (heaviest chunk first, to the least loaded rank), except that a chunk
  // stays where it is while its current rank has room under the threshold:
  // plain LPT ignores the current placement and moves nearly every chunk,
  // paying the migration and scattering stencil neighbours over the ranks
  // (measured: its faces then crossed ranks and it gained least of the three).
  using Entry = std::pair<double, int>;  // (load, rank): the min-heap pops the least loaded, lowest rank
  const double limit = threshold(in);
  std::vector<double> loads(static_cast<std::size_t>(in.ranks), 0.0);
  Placement out(in.load.size());
  auto order = heaviest_first(in.load);
  std::vector<bool> placed(in.load.size(), false);
  for (auto c : order) {  // first pass: what fits where it is
    auto here = static_cast<std::size_t>(in.current[c]);
    if (loads[here] + in.load[c] <= limit) {
      loads[here] += in.load[c];
      out[c] = in.current[c];
      placed[c] = true;
    }
  }
  std::priority_queue<Entry, std::vector<Entry>, std::greater<>> heap;
  for (int r = 0; r < in.ranks; ++r) heap.push({loads[static_cast<std::size_t>(r)], r});
  for (auto c : order) {  // the rest, LPT
    if (placed[c]) continue;
    auto [l, r] = heap.top();
    heap.pop();
    out[c] = r;
    heap.push({l + in.load[c], r});
  }
  return out;
}

namespace {

// The loop both refinement strategies share: while some rank is above the
// limit and not given up on, the most loaded one (src) gives one chunk:
// pick(src, placement, loads, limit) names the move (chunk, destination), or
// nothing, and then src is given up on. Only overloaded ranks give chunks,
// so few move.
template <class Pick>
Placement refine_with(const BalanceInput& in, Pick&& pick) {
  check_input(in);
  Placement out = in.current;
  auto loads = rank_loads(in.load, out, in.ranks);
  const double limit = threshold(in);
  std::vector<bool> stuck(static_cast<std::size_t>(in.ranks), false);
  while (true) {
    int src = -1;
    for (int r = 0; r < in.ranks; ++r)
      if (!stuck[static_cast<std::size_t>(r)] && loads[static_cast<std::size_t>(r)] > limit &&
          (src < 0 || loads[static_cast<std::size_t>(r)] > loads[static_cast<std::size_t>(src)]))
        src = r;
    if (src < 0) break;
    std::optional<std::pair<std::size_t, int>> move = pick(src, out, loads, limit);
    if (!move) {
      stuck[static_cast<std::size_t>(src)] = true;
      continue;
    }
    auto [c, dst] = *move;
    out[c] = dst;
    loads[static_cast<std::size_t>(src)] -= in.load[c];
    loads[static_cast<std::size_t>(dst)] += in.load[c];
  }
  return out;
}

}  // namespace

Placement refine_balance(const BalanceInput& in) {
  auto order = heaviest_first(in.load);
  // The heaviest chunk of src that fits on the least loaded rank.
  return refine_with(in, [&](int src, const Placement& out, const std::vector<double>& loads,
                             double limit) -> std::optional<std::pair<std::size_t, int>> {
    const int dst = least_loaded(loads);
    for (auto c : order) {
      if (out[c] != src || in.load[c] <= 0) continue;
      if (loads[static_cast<std::size_t>(dst)] + in.load[c] > limit) continue;
      return std::pair{static_cast<std::size_t>(c), dst};
    }
    return std::nullopt;
  });
}

Placement comm_balance(const BalanceInput& in) {
  check_input(in);  // before the edges index anything
  // Adjacency (both directions: a chunk's hop-bytes count its sends and receives).
  std::vector<std::vector<std::pair<std::uint64_t, double>>> adj(in.load.size());
  for (auto& e : in.edges) {
    adj[e.from].push_back({e.to, static_cast<double>(e.bytes)});
    adj[e.to].push_back({e.from, static_cast<double>(e.bytes)});
  }
  // The move of one of src's chunks that adds the least hop-bytes (ties: the
  // heavier chunk, then the less loaded rank) among those that fit.
  return refine_with(in, [&](int src, const Placement& out, const std::vector<double>& loads,
                             double limit) -> std::optional<std::pair<std::size_t, int>> {
    auto cost_on = [&](std::size_t c, int r) {
      double s = 0;
      for (auto [n, b] : adj[c]) s += b * in.hops(r, out[n]);
      return s;
    };
    std::size_t best_c = 0;
    int best_r = -1;
    double best_delta = 0;
    for (std::size_t c = 0; c < in.load.size(); ++c) {
      if (out[c] != src || in.load[c] <= 0) continue;
      double here = cost_on(c, src);
      for (int r = 0; r < in.ranks; ++r) {
        if (r == src || loads[static_cast<std::size_t>(r)] + in.load[c] > limit) continue;
        double delta = cost_on(c, r) - here;
        bool better = best_r < 0 || delta < best_delta ||
                      (delta == best_delta && (in.load[c] > in.load[best_c] ||
                                               (in.load[c] == in.load[best_c] && loads[static_cast<std::size_t>(r)] < loads[static_cast<std::size_t>(best_r)])));
        if (better) {
          best_c = c;
          best_r = r;
          best_delta = delta;
        }
      }
    }
    if (best_r < 0) return std::nullopt;
    return std::pair{best_c, best_r};
  });
}

Placement balance(Strategy s, const BalanceInput& in) {
  check_input(in);
  // Within tolerance already: no strategy moves anything, so balancing a
  // balanced run costs only the measurement.
  auto loads = rank_loads(in.load, in.current, in.ranks);
  if (*std::max_element(loads.begin(), loads.end()) <= threshold(in)) return in.current;
  switch (s) {
    case Strategy::none: check_input(in); return in.current;
    case Strategy::greedy: return greedy_balance(in);
    case Strategy::refine: return refine_balance(in);
    case Strategy::comm: return comm_balance(in);
  }
  return in.current;
}

double time_share_bound(const std::vector<double>& rank_load, const std::vector<RankCores>& ranks) {
  if (rank_load.size() != ranks.size() || ranks.empty())
    throw RangeError("time_share_bound: " + std::to_string(rank_load.size()) + " rank loads for " +
                     std::to_string(ranks.size()) + " ranks");
  double t = *std::max_element(rank_load.begin(), rank_load.end());
  std::vector<RankCores> sets(ranks);
  for (auto& r : ranks) {
    RankCores node_union{r.node, 0};
    for (auto& q : ranks)
      if (q.node == r.node) node_union.cores |= q.cores;
    sets.push_back(node_union);
  }
  for (auto& s : sets) {
    double load = 0;
    for (std::size_t r = 0; r < ranks.size(); ++r)
      if (ranks[r].node == s.node && (ranks[r].cores & ~s.cores) == 0) load += rank_load[r];
    t = std::max(t, load / std::max(1, std::popcount(s.cores)));
  }
  return t;
}

std::string BalanceReport::to_string() const {
  char line[400];
  std::snprintf(line, sizeof line,
                "lb %-6s max/avg load %.3f -> %.3f (avg %.3g ms/step), chunks moved %llu, bytes moved %llu, "
                "hop-bytes %.3g -> %.3g, decide %.3g ms, migrate %.3g ms",
                chunks::to_string(strategy).c_str(), average_load > 0 ? max_load_before / average_load : 0.0,
                average_load > 0 ? max_load_after / average_load : 0.0, average_load * 1e3,
                static_cast<unsigned long long>(chunks_moved), static_cast<unsigned long long>(bytes_moved),
                hop_bytes_before, hop_bytes_after, decide_seconds * 1e3, migrate_seconds * 1e3);
  return line;
}

}  // namespace tessera::chunks
