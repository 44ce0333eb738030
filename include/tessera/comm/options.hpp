// Settings of the aggregation engine. Defaults come from the environment:
//   TESSERA_AGG_BUFFER_BYTES  bytes of one per-destination buffer (e.g. 65536, 64K, 1M)
//   TESSERA_AGG_IN_FLIGHT     batches per destination that may be in flight
//   TESSERA_AGG_SAME_NODE     1: reach co-located ranks' Shared arrays directly; 0: always MPI
#pragma once
#include <cstddef>
#include <string>

namespace tessera {

struct AggregationOptions {
  std::size_t buffer_bytes = 0;  // 0: environment, else the built-in default
  int max_in_flight = 0;         // 0: environment, else the built-in default
  int same_node_direct = -1;     // -1: environment, else 0/1

  // Fills every unset field from the environment or the defaults; throws
  // ConfigError naming the variable when it is malformed.
  AggregationOptions resolved() const;

  // Send-side memory of one aggregator on `ranks` ranks:
  // ranks x buffer_bytes x (1 + max_in_flight).
  std::size_t send_memory_bytes(int ranks) const;
  std::string describe(int ranks) const;
  // A copy with the same-node path switched on (1) or off (0).
  AggregationOptions with_same_node_direct(int on) const {
    AggregationOptions a = *this;
    a.same_node_direct = on;
    return a;
  }
};

constexpr std::size_t kDefaultAggBufferBytes = 64 * 1024;
constexpr int kDefaultAggInFlight = 1;

// "64K" / "1M" / "4096" to bytes; throws ConfigError naming `what`.
std::size_t parse_byte_size(const std::string& text, const std::string& what);

}  // namespace tessera
