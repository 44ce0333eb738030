// Load-balancing strategies after Charm++'s GreedyLB, RefineLB and a
// communication-aware refinement (hop-bytes, Bhatele et al., "Topology
// aware task mapping"). Deterministic: ties go to the lower id / rank, so
// every run with the same loads decides the same.
#include <algorithm>
#include <cstdio>
#include <numeric>
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

double hop_bytes(const std::vector<ChunkEdge>& edges, const Placement& placement, const HopDistance& hops) {
  double sum = 0;
  for (auto& e : edges) sum += static_cast<double>(e.bytes) * hops(placement[e.from], placement[e.to]);
  return sum;
}

Placement greedy_balance(const BalanceInput& in) {
  check_input(in);
  using Entry = std::pair<double, int>;  // (load, rank): the min-heap pops the least loaded, lowest rank
  std::priority_queue<Entry, std::vector<Entry>, std::greater<>> heap;
  for (int r = 0; r < in.ranks; ++r) heap.push({0.0, r});
  Placement out(in.load.size());
  for (auto c : heaviest_first(in.load)) {
    auto [l, r] = heap.top();
    heap.pop();
    out[c] = r;
    heap.push({l + in.load[c], r});
  }
  return out;
}

Placement refine_balance(const BalanceInput& in) {
  check_input(in);
  Placement out = in.current;
  auto loads = rank_loads(in.load, out, in.ranks);
  double limit = threshold(in);
  auto order = heaviest_first(in.load);
  std::vector<bool> stuck(static_cast<std::size_t>(in.ranks), false);
  while (true) {
    int src = -1;
    for (int r = 0; r < in.ranks; ++r)
      if (!stuck[static_cast<std::size_t>(r)] && loads[static_cast<std::size_t>(r)] > limit &&
          (src < 0 || loads[static_cast<std::size_t>(r)] > loads[static_cast<std::size_t>(src)]))
        src = r;
    if (src < 0) break;
    int dst = least_loaded(loads);
    bool moved = false;
    for (auto c : order) {  // the heaviest chunk of src that fits on dst
      if (out[c] != src || in.load[c] <= 0) continue;
      if (loads[static_cast<std::size_t>(dst)] + in.load[c] > limit) continue;
      out[c] = dst;
      loads[static_cast<std::size_t>(src)] -= in.load[c];
      loads[static_cast<std::size_t>(dst)] += in.load[c];
      moved = true;
      break;
    }
    if (!moved) stuck[static_cast<std::size_t>(src)] = true;
  }
  return out;
}

Placement comm_balance(const BalanceInput& in) {
  check_input(in);
  Placement out = in.current;
  auto loads = rank_loads(in.load, out, in.ranks);
  double limit = threshold(in);
  // Adjacency (both directions: a chunk's hop-bytes count its sends and receives).
  std::vector<std::vector<std::pair<std::uint64_t, double>>> adj(in.load.size());
  for (auto& e : in.edges) {
    adj[e.from].push_back({e.to, static_cast<double>(e.bytes)});
    adj[e.to].push_back({e.from, static_cast<double>(e.bytes)});
  }
  auto cost_on = [&](std::size_t c, int r) {
    double s = 0;
    for (auto [n, b] : adj[c]) s += b * in.hops(r, out[n]);
    return s;
  };
  std::vector<bool> stuck(static_cast<std::size_t>(in.ranks), false);
  while (true) {
    int src = -1;
    for (int r = 0; r < in.ranks; ++r)
      if (!stuck[static_cast<std::size_t>(r)] && loads[static_cast<std::size_t>(r)] > limit &&
          (src < 0 || loads[static_cast<std::size_t>(r)] > loads[static_cast<std::size_t>(src)]))
        src = r;
    if (src < 0) break;
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
    if (best_r < 0) {
      stuck[static_cast<std::size_t>(src)] = true;
      continue;
    }
    out[best_c] = best_r;
    loads[static_cast<std::size_t>(src)] -= in.load[best_c];
    loads[static_cast<std::size_t>(best_r)] += in.load[best_c];
  }
  return out;
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
