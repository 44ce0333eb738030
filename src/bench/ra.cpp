// RandomAccess (HPCC, Luszczek et al., "The HPC Challenge (HPCC) Benchmark
// Suite", SC'06): XOR-update random words of a distributed table with the
// HPCC pseudo-random stream. Rules kept: the table is a power of two (2^m per
// rank when the rank count is a power of two; otherwise the largest power of
// two not above ranks x 2^m), 4x table-size updates, at most 1024 updates
// buffered per rank (the look-ahead), at most 1% wrong words.
// Verifier: every rank regenerates the whole update stream and applies the
// updates that land in its part to a fresh table, then compares word by word.
#include "tessera/bench/benchmarks.hpp"

#include <algorithm>
#include <bit>
#include <cstdio>

#include "tessera/array/dist_array.hpp"
#include "tessera/bench/report.hpp"
#include "tessera/runtime/collective.hpp"
#include "tessera/comm/aggregators.hpp"
#include "rma_table.hpp"
#include "tessera/runtime/wait.hpp"

namespace tessera::bench {

namespace {
constexpr std::uint64_t kPoly = 7;
constexpr std::uint64_t kPeriod = 1317624576693539401ull;
constexpr std::uint64_t kLookAhead = 1024;

inline std::uint64_t next_random(std::uint64_t x) {
  return (x << 1) ^ (static_cast<std::int64_t>(x) < 0 ? kPoly : 0);
}

// The n-th value of the HPCC stream, by squaring in GF(2)[x] / poly: O(log n).
std::uint64_t hpcc_start(std::uint64_t n) {
  n %= kPeriod;
  if (n == 0) return 1;
  std::uint64_t powers[64];  // x^(2i) mod poly, as multiplication tables
  std::uint64_t t = 1;
  for (auto& p : powers) {
    p = t;
    t = next_random(next_random(t));
  }
  int bit = 62;
  while (bit >= 0 && !((n >> bit) & 1)) --bit;
  std::uint64_t ran = 2;
  while (bit > 0) {
    std::uint64_t sq = 0;
    for (int j = 0; j < 64; ++j)
      if ((ran >> j) & 1) sq ^= powers[j];
    ran = sq;
    --bit;
    if ((n >> bit) & 1) ran = next_random(ran);
  }
  return ran;
}

struct Setup {
  std::uint64_t table = 0;            // global words, a power of two
  std::uint64_t updates_per_rank = 0;
};

// The table each rank must hold after every rank applied its first `count`
// updates: regenerated independently of any communication.
template <class Table>
std::vector<std::uint64_t> expected_part(const Setup& s, const Table& t, int ranks, std::uint64_t count) {
  std::vector<std::uint64_t> want(t.local().size());
  std::uint64_t lo = t.local_begin(), hi = t.local_end();
  for (std::uint64_t i = lo; i < hi; ++i) want[i - lo] = i;
  for (int r = 0; r < ranks; ++r) {
    std::uint64_t ran = hpcc_start(s.updates_per_rank * static_cast<std::uint64_t>(r));
    for (std::uint64_t k = 0; k < count; ++k) {
      ran = next_random(ran);
      std::uint64_t i = ran & (s.table - 1);
      if (i >= lo && i < hi) want[i - lo] ^= ran;
    }
  }
  return want;
}

template <class Table>
std::uint64_t count_errors(Runtime& rt, const Table& t, const std::vector<std::uint64_t>& want) {
  std::uint64_t bad = 0;
  for (std::size_t k = 0; k < want.size(); ++k) bad += t.local()[k] != want[k];
  return all_reduce(rt.comm(), bad, MPI_SUM);
}

template <class Table>
void reset(Table& t) {
  std::uint64_t lo = t.local_begin();
  for (std::size_t k = 0; k < t.local().size(); ++k) t.local()[k] = lo + k;
}

// Aggregated: one UpdateAggregator with XOR; buffers capped by the look-ahead.
void run_aggregated(const Setup& s, DistArray<std::uint64_t>& t, const AggregationOptions& agg, int rank) {
  UpdateAggregator<std::uint64_t, ops::BitXor> up(t, agg);
  std::uint64_t ran = hpcc_start(s.updates_per_rank * static_cast<std::uint64_t>(rank));
  const std::uint64_t mask = s.table - 1;
  for (std::uint64_t k = 0; k < s.updates_per_rank; ++k) {
    ran = next_random(ran);
    up.update(ran & mask, ran);
  }
}

// Fine-grained RMA: one MPI_Accumulate(BXOR) per update, completed every
// look-ahead updates.
void run_rma(const Setup& s, const RmaTable<std::uint64_t>& t, Runtime& rt, std::uint64_t count) {
  MPI_Win win = t.window();
  int rank = rt.rank();
  std::uint64_t ran = hpcc_start(s.updates_per_rank * static_cast<std::uint64_t>(rank));
  const std::uint64_t mask = s.table - 1;
  TESSERA_MPI(MPI_Win_lock_all(MPI_MODE_NOCHECK, win));
  for (std::uint64_t k = 0; k < count; ++k) {
    ran = next_random(ran);
    std::uint64_t i = ran & mask;
    int owner = t.owner(i);
    TESSERA_MPI(MPI_Accumulate(&ran, 1, MPI_UINT64_T, owner, t.displacement(i, owner), 1, MPI_UINT64_T, MPI_BXOR, win));
    if ((k + 1) % kLookAhead == 0) TESSERA_MPI(MPI_Win_flush_all(win));
  }
  TESSERA_MPI(MPI_Win_unlock_all(win));
  barrier(rt.comm());
}
}  // namespace

bool run_ra(Runtime& rt, const RaOptions& o) {
  Setup s;
  s.table = std::bit_floor((std::uint64_t{1} << o.log_table_per_rank) * static_cast<std::uint64_t>(rt.size()));
  s.updates_per_rank = 4 * s.table / static_cast<std::uint64_t>(rt.size());
  std::uint64_t fine = std::min(o.fine_updates_per_rank, s.updates_per_rank);

  // HPCC's look-ahead: no more than 1024 updates buffered per rank in total.
  AggregationOptions agg = o.aggregation.resolved();
  std::size_t record = sizeof(std::uint64_t) * 2;
  std::size_t cap = std::max<std::size_t>(1, kLookAhead / static_cast<std::size_t>(rt.size())) * record;
  agg.buffer_bytes = std::min(agg.buffer_bytes, cap);

  nlohmann::json config{{"table_words", s.table},
                        {"updates", s.updates_per_rank * static_cast<std::uint64_t>(rt.size())},
                        {"fine_updates", fine * static_cast<std::uint64_t>(rt.size())},
                        {"look_ahead", kLookAhead},
                        {"aggregation", agg.describe(rt.size())}};
  if (rt.rank() == 0 && !o.format.quiet)  // progress on stderr: stdout holds the report
    std::fprintf(stderr, "RA: table 2^%d words, %llu updates; aggregation: %s\n", std::countr_zero(s.table),
                static_cast<unsigned long long>(s.updates_per_rank * static_cast<std::uint64_t>(rt.size())),
                agg.describe(rt.size()).c_str());
  Report report(rt, "ra", config, o.format);
  report.set_baselines({"fine-grained", "aggregated heap"});

  auto add_row = [&](const std::string& variant, const std::string& storage, Timing timing, std::uint64_t per_rank,
                     std::uint64_t errors) {
    Result r = rate_result(variant, storage, timing, static_cast<double>(per_rank) * rt.size(), 1e9, "GUPS");
    double frac = static_cast<double>(errors) / static_cast<double>(s.table);
    r.verified = frac <= 0.01;
    char buf[128];
    std::snprintf(buf, sizeof(buf), "%llu of %llu words wrong (%.4f%%, limit 1%%)",
                  static_cast<unsigned long long>(errors), static_cast<unsigned long long>(s.table), 100 * frac);
    r.check = buf;
    r.extra = {{"errors", errors}};
    report.add(r);
  };

  // Fine-grained baseline on a prefix of each rank's stream.
  {
    RmaTable<std::uint64_t> t(rt, Distribution::block(s.table, rt.size()));
    Timing timing = time_reps(rt, 1, [&] { reset(t); }, [&] { run_rma(s, t, rt, fine); });
    add_row("fine-grained MPI_Accumulate", "MPI window", timing, fine, count_errors(rt, t, expected_part(s, t, rt.size(), fine)));
  }
  for (bool shared : {false, true}) {
    DistArray<std::uint64_t> t(rt, s.table, shared ? StorageOptions::shared() : StorageOptions::heap());
    AggregationOptions a = agg;
    a.same_node_direct = shared ? 1 : 0;
    Timing timing = time_reps(rt, o.reps, [&] { reset(t); }, [&] { run_aggregated(s, t, a, rt.rank()); });
    add_row("aggregated", shared ? "shared+direct" : "heap", timing, s.updates_per_rank,
            count_errors(rt, t, expected_part(s, t, rt.size(), s.updates_per_rank)));
  }
  return report.print();
}

}  // namespace tessera::bench
