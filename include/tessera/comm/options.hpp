// Settings of the aggregation engine. Defaults come from the environment:
//   TESSERA_AGG_BUFFER_BYTES  bytes of one per-destination buffer (e.g. 65536, 64K, 1M), or "auto"
//   TESSERA_AGG_MEMORY_BUDGET buffer bytes one aggregator may use per rank in auto mode (default 64M):
//                             its request batches and, with replies, the reply buffers or
//                             same-node ring slots that hold their answers
//   TESSERA_AGG_IN_FLIGHT     batches per destination that may be in flight
//   TESSERA_AGG_SAME_NODE     1: reach co-located ranks' Shared arrays directly; 0: always messages
//   TESSERA_AGG_RINGS         1 (default): batches to co-located ranks go through shared-memory
//                             rings (SameNodeRings); 0: through MPI like batches between nodes
//   TESSERA_AGG_ROUTING       direct (default): one buffer per destination rank;
//                             grid: ranks as a sqrt(P) x sqrt(P) grid, records travel along
//                             their row then their column, about 2 sqrt(P) buffers per rank;
//                             node-first: the grid whose rows are the nodes: a record for
//                             another node goes first to the co-locale with its destination's
//                             index on the node, the one forwarder of those records off-node
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>

namespace tessera {

enum class AggregationRouting : int { unset = -1, direct = 0, grid = 1, node_first = 2 };

// Where a rank's records go in grid routing. Ranks are laid out row-major on
// a grid of ceil(sqrt(P)) columns; the last row may be short. A record from s
// to d goes along s's row to (row s, column d), which forwards it along its
// column to d. When (row s, column d) does not exist (s in a short last row)
// it goes along s's column first to (row d, column s), which forwards it
// along its row. So every hop stays inside one row or one column.
struct GridRoute {
  int columns = 1, rows = 1;
  static GridRoute of(int ranks);
  int row(int r) const noexcept { return r / columns; }
  int column(int r) const noexcept { return r % columns; }
  // The first hop from s towards d (s != d): d itself when they share a row
  // or a column, else the rank that forwards.
  int next_hop(int ranks, int s, int d) const noexcept;
  // Buffers rank `rank` needs at most: its first hops plus the ranks it
  // forwards to (exact for every rank, computed from the grid's shape).
  int buffers_of(int ranks, int rank) const;
  // The largest buffers_of over all ranks.
  int max_buffers(int ranks) const;
  // How many of buffers_of are first hops (kind "forward"): with replies
  // they hold one batch more (their batches wait for two hops).
  int forward_buffers_of(int ranks, int rank) const;
  // Batches rank `rank` holds at most with `per_buffer` batches per buffer
  // (1 + in flight), forward buffers one more; and the largest over ranks.
  int batches_of(int ranks, int rank, int per_buffer) const;
  int max_batches(int ranks, int per_buffer) const;
};

struct AggregationOptions {
  // Sentinel buffer size: chosen by the engine from the rank count, the memory
  // budget and measured flush rates (TESSERA_AGG_BUFFER_BYTES=auto).
  static constexpr std::size_t kAutoBufferBytes = ~std::size_t{0};

  std::size_t buffer_bytes = 0;  // 0: environment, else the built-in default; kAutoBufferBytes: auto
  int max_in_flight = 0;         // 0: environment, else the built-in default
  int same_node_direct = -1;     // -1: environment, else 0/1
  int same_node_rings = -1;      // -1: environment, else 0/1 (direct routing only)
  AggregationRouting routing = AggregationRouting::unset;  // unset: environment, else direct
  std::size_t memory_budget = 0;  // auto mode's send-buffer budget per aggregator per rank; 0: environment

  // Fills every unset field from the environment or the defaults; throws
  // ConfigError naming the variable when it is malformed. An auto buffer size
  // stays kAutoBufferBytes (it needs the rank count: buffer_bytes_for).
  AggregationOptions resolved() const;
  bool auto_buffer() const { return resolved().buffer_bytes == kAutoBufferBytes; }
  // The per-destination buffer size an exchange of `ranks` ranks uses now.
  // In auto mode an exchange with replies (`reply_bytes` per `record_bytes`
  // sent) pays each batch's reply room from the same budget: the request
  // buffers get the share record / (record + reply) of it.
  std::size_t buffer_bytes_for(int ranks, std::size_t record_bytes = 1, std::size_t reply_bytes = 0) const;

  // How many per-destination buffers one rank holds at most (ranks for
  // direct routing, about 2 sqrt(ranks) for grid routing; node-first depends
  // on the nodes' sizes, not known here: ranks, the bound).
  std::size_t destinations(int ranks) const;
  // Batches one rank holds at most: destinations x (1 + max_in_flight),
  // with grid routing plus one per forward buffer (exchanges with replies;
  // counted always).
  std::size_t send_batches(int ranks) const;
  // Send-side memory of one aggregator on `ranks` ranks: send_batches x buffer_bytes.
  std::size_t send_memory_bytes(int ranks) const;
  // Send plus receive buffers (the engine's own accounting, see RecordExchange).
  std::size_t buffer_memory_bytes(int ranks) const;
  std::string describe(int ranks) const;
  // A copy with the same-node path switched on (1) or off (0).
  AggregationOptions with_same_node_direct(int on) const {
    AggregationOptions a = *this;
    a.same_node_direct = on;
    return a;
  }
  AggregationOptions with_same_node_rings(int on) const {
    AggregationOptions a = *this;
    a.same_node_rings = on;
    return a;
  }
  AggregationOptions with_routing(AggregationRouting r) const {
    AggregationOptions a = *this;
    a.routing = r;
    return a;
  }
};

constexpr std::size_t kDefaultAggBufferBytes = 64 * 1024;
constexpr int kDefaultAggInFlight = 1;
constexpr std::size_t kDefaultAggMemoryBudget = std::size_t{64} << 20;
// The auto mode's range: below 1 KiB the per-message cost dominates; above
// 1 MiB buffers stop fitting in cache and latency grows for nothing.
constexpr std::size_t kAutoMinBufferBytes = std::size_t{1} << 10;
constexpr std::size_t kAutoMaxBufferBytes = std::size_t{1} << 20;

const char* routing_name(AggregationRouting r);

// "64K" / "1M" / "4096" to bytes; throws ConfigError naming `what`.
std::size_t parse_byte_size(const std::string& text, const std::string& what);

// The auto mode's memory of what it measured: every exchange reports, at each
// flush, how long its buffers took to fill; the next exchange built in auto
// mode starts from the size this suggests. Values agree on every rank because
// the engine combines them in a collective (RecordExchange::flush).
namespace agg_autotune {
// The size auto mode picks when a rank holds at most `batches` send batches
// (AggregationOptions::send_batches) under `budget` bytes: the largest power
// of two within budget / batches, at most the tuned size.
std::size_t pick(std::size_t batches, std::size_t budget);
// The tuned size (all ranks agree); kDefaultAggBufferBytes before any flush.
std::size_t tuned();
// From one flush round of an exchange that used `bytes` per buffer: batches
// sent and the seconds its busiest destination took to fill one. Returns the
// size the next exchange should use (not yet agreed across ranks).
std::size_t suggest(std::size_t bytes, std::uint64_t batches, double seconds_per_batch);
void set_tuned(std::size_t bytes);
// After a round at `bytes` (the same figures on every rank): a hill climb on
// the measured rate (records per second) over the power-of-two sizes tried in
// this process. It keeps the best rate seen at each size and settles on the
// fastest, which another size replaces only when faster by kClimbMargin; it
// tries the settled size's unmeasured neighbours (first the way the fill time
// points: fast-filling buffers grow), then stays there.
std::size_t climb(std::size_t bytes, std::uint64_t batches, double seconds_per_batch, double records_per_second);
inline constexpr double kClimbMargin = 0.03;
// Forgets what was measured: the next exchange starts at the default size.
void reset();
}  // namespace agg_autotune

}  // namespace tessera
