// What travelled, counted without a trace (Chapel's communication
// diagnostics): per peer rank, the records, batches and bytes this rank's
// aggregation engine sent and received; operations served through a
// co-locale's memory with no message; MPI one-sided operations. Owned by the
// Runtime (one per process); comm/ counts into it per batch, never per
// record. `--comm-stats` prints the table at the end of any command and the
// JSON outputs carry it; a trace file carries it too.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace tessera {

class Runtime;

struct TrafficCount {
  std::uint64_t records = 0;
  std::uint64_t batches = 0;
  std::uint64_t bytes = 0;
};

class CommCounters {
 public:
  void resize(int ranks) {
    to_.resize(static_cast<std::size_t>(ranks));
    from_.resize(static_cast<std::size_t>(ranks));
  }
  // One batch of `records` records, `bytes` bytes with its header, to or from `peer`.
  void sent(int peer, std::uint64_t records, std::uint64_t bytes) noexcept {
    TrafficCount& c = to_[static_cast<std::size_t>(peer)];
    c.records += records;
    ++c.batches;
    c.bytes += bytes;
    bytes_sent_ += bytes;
  }
  void received(int peer, std::uint64_t records, std::uint64_t bytes) noexcept {
    TrafficCount& c = from_[static_cast<std::size_t>(peer)];
    c.records += records;
    ++c.batches;
    c.bytes += bytes;
  }
  // Operations on a co-locale's elements served through its memory (no message).
  void direct_reads(std::uint64_t n) noexcept { direct_reads_ += n; }
  void direct_writes(std::uint64_t n) noexcept { direct_writes_ += n; }
  // MPI one-sided operations (MPI_Get, MPI_Put, MPI_Accumulate and kin).
  void one_sided_gets(std::uint64_t n) noexcept { gets_ += n; }
  void one_sided_puts(std::uint64_t n) noexcept { puts_ += n; }
  void one_sided_accumulates(std::uint64_t n) noexcept { accumulates_ += n; }

  const std::vector<TrafficCount>& to() const noexcept { return to_; }
  std::uint64_t bytes_sent() const noexcept { return bytes_sent_; }  // to every peer
  const std::vector<TrafficCount>& from() const noexcept { return from_; }
  std::uint64_t direct_reads() const noexcept { return direct_reads_; }
  std::uint64_t direct_writes() const noexcept { return direct_writes_; }
  std::uint64_t one_sided_gets() const noexcept { return gets_; }
  std::uint64_t one_sided_puts() const noexcept { return puts_; }
  std::uint64_t one_sided_accumulates() const noexcept { return accumulates_; }
  // Every count back to zero (a benchmark counts one repetition).
  void clear();

 private:
  std::vector<TrafficCount> to_, from_;
  std::uint64_t bytes_sent_ = 0;
  std::uint64_t direct_reads_ = 0, direct_writes_ = 0;
  std::uint64_t gets_ = 0, puts_ = 0, accumulates_ = 0;
};

// This rank's counters as one JSON object (the format of docs/trace.md's
// comm_stats: to/from per peer, same_node/other_node sums, direct,
// one_sided). Local, not collective.
std::string comm_counters_json(const Runtime& rt);
// Every rank's object, as a JSON array on rank 0 ("" elsewhere). Collective.
std::string gather_comm_counters_json(Runtime& rt);
// The table `--comm-stats` prints: a line per rank (sent and received,
// same node and other nodes apart, direct and one-sided operations) and
// the totals. Collective; the text on rank 0, "" elsewhere.
std::string comm_counters_table(Runtime& rt);

// TESSERA_COMM_STATS=1: print the table on rank 0's stderr when the Runtime
// ends (`tessera --comm-stats CMD` sets it).
inline constexpr const char* kCommStatsVariable = "TESSERA_COMM_STATS";
bool comm_stats_requested();

}  // namespace tessera
