// Measurement-based load balancing (after Charm++'s central strategies).
// A strategy is a pure function from the measured loads (and, for the
// communication-aware one, the chunk communication graph and a hop distance
// between ranks) to a new Placement; ChunkArray::at_sync measures, decides on
// rank 0, broadcasts and migrates.
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "tessera/chunks/placement.hpp"

namespace tessera::chunks {

// Bytes sent from one chunk to another since the last balancing step.
struct ChunkEdge {
  std::uint64_t from = 0;
  std::uint64_t to = 0;
  std::uint64_t bytes = 0;
};

// Hops between two ranks; the default counts 0 on the same rank and 1
// otherwise (so hop-bytes = bytes crossing ranks). A Topology's hops fit here.
using HopDistance = std::function<double(int, int)>;
double same_rank_hops(int a, int b);

struct BalanceInput {
  std::vector<double> load{};  // per chunk (seconds per step)
  Placement current{};        // where each chunk is now
  int ranks = 1;
  std::vector<ChunkEdge> edges{};  // communication-aware strategy only
  HopDistance hops{same_rank_hops};
  double tolerance = 1.05;    // a rank is overloaded above tolerance x average
};

enum class Strategy { none, greedy, refine, comm };
// "none", "greedy", "refine", "comm"; throws ConfigError naming `option`.
Strategy parse_strategy(const std::string& text, const std::string& option);
std::string to_string(Strategy s);

// Greedy: chunks in decreasing load keep their rank while it stays under
// tolerance x average; the rest go, heaviest first, each to the least loaded
// rank (LPT). Plain LPT would move almost every chunk.
Placement greedy_balance(const BalanceInput& in);
// Refine: only overloaded ranks give chunks away, the heaviest that fits
// under the threshold on the least loaded rank first; few migrations.
Placement refine_balance(const BalanceInput& in);
// Communication-aware refine: an overloaded rank gives away the chunk whose
// move adds the fewest hop-bytes (ties: the heavier chunk), to a rank that
// stays under the threshold; neighbours therefore travel together.
Placement comm_balance(const BalanceInput& in);
// The strategy `s`, or the current placement unchanged when no rank is above
// tolerance x average (what at_sync calls).
Placement balance(Strategy s, const BalanceInput& in);

// Per-rank load sums under `placement`.
std::vector<double> rank_loads(const std::vector<double>& load, const Placement& placement, int ranks);
// How many chunks sit on a different rank in `after` than in `before`.
std::uint64_t chunks_moved(const Placement& before, const Placement& after);
// Σ bytes x hops over the edges under `placement`.
double hop_bytes(const std::vector<ChunkEdge>& edges, const Placement& placement, const HopDistance& hops);

// Where a rank may run: its node and the node's cores it is bound to (bit c
// = logical core c, the first 64; all of them when unbound).
struct RankCores {
  int node = 0;
  std::uint64_t cores = 0;
};
// The least time a step can take when rank r computes rank_load[r] and ranks
// sharing cores time-share them (waiting ranks yield): the busiest rank's
// load, and for every rank's core set and each node's union of them, the
// load of the ranks confined to that set over its number of cores.
double time_share_bound(const std::vector<double>& rank_load, const std::vector<RankCores>& ranks);

// What one balancing step did, printed by at_sync on rank 0.
struct BalanceReport {
  Strategy strategy = Strategy::none;
  double max_load_before = 0, max_load_after = 0, average_load = 0;  // seconds per step
  double hop_bytes_before = 0, hop_bytes_after = 0;
  std::uint64_t chunks_moved = 0;
  std::uint64_t bytes_moved = 0;
  double decide_seconds = 0, migrate_seconds = 0;
  std::string to_string() const;
};

}  // namespace tessera::chunks
