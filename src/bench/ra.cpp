// RandomAccess (HPCC, Luszczek et al., "The HPC Challenge (HPCC) Benchmark
// Suite", SC'06): XOR-update random words of a distributed table with the
// HPCC pseudo-random stream. Rules kept: the table is a power of two (2^m per
// rank when the rank count is a power of two; otherwise the largest power of
// two not above ranks x 2^m), 4x table-size updates, at most 1024 updates
// buffered per rank (the look-ahead). HPCC allows 1% wrong words for
// implementations that may lose racing updates; every variant here applies
// updates atomically, so the verifier (check_ra) demands every word exact:
// every rank regenerates the whole update stream and applies the updates that
// land in its part to a fresh table, then compares word by word.
#include "tessera/bench/benchmarks.hpp"

#include <algorithm>
#include <bit>

#include "tessera/array/dist_array.hpp"
#include "tessera/bench/report.hpp"
#include "tessera/bench/verifiers.hpp"
#include "tessera/runtime/collective.hpp"
#include "tessera/comm/aggregators.hpp"
#include "rma_table.hpp"
#include "tessera/runtime/wait.hpp"

namespace tessera::bench {

namespace {
constexpr std::uint64_t kPoly = 7;
constexpr std::uint64_t kPeriod = 1317624576693539401ull;
constexpr std::uint64_t kLookAhead = 1024;

// RaProblem::next, inline: the bench library is position-independent, where
// GCC calls an exported function rather than inline it (it might be
// interposed), one call per update in the aggregated loop.
inline std::uint64_t hpcc_next(std::uint64_t value) {
  return (value << 1) ^ (static_cast<std::int64_t>(value) < 0 ? kPoly : 0);
}

// The n-th value of the HPCC stream, by squaring in GF(2)[x] / poly: O(log n).
std::uint64_t hpcc_start(std::uint64_t n) {
  n %= kPeriod;
  if (n == 0) return 1;
  std::uint64_t powers[64];  // x^(2i) mod poly, as multiplication tables
  std::uint64_t t = 1;
  for (auto& p : powers) {
    p = t;
    t = RaProblem::next(RaProblem::next(t));
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
    if ((n >> bit) & 1) ran = RaProblem::next(ran);
  }
  return ran;
}
}  // namespace

RaProblem RaProblem::for_job(int ranks, int log_words_per_rank) {
  RaProblem p;
  p.table_words = std::bit_floor((std::uint64_t{1} << log_words_per_rank) * static_cast<std::uint64_t>(ranks));
  p.updates_per_rank = 4 * p.table_words / static_cast<std::uint64_t>(ranks);
  return p;
}

std::uint64_t RaProblem::next(std::uint64_t value) { return hpcc_next(value); }

std::uint64_t RaProblem::stream_start(int rank) const {
  return hpcc_start(updates_per_rank * static_cast<std::uint64_t>(rank));
}

Verdict check_ra(Runtime& rt, const RaProblem& problem, std::span<const std::uint64_t> local,
                 std::uint64_t local_begin, std::uint64_t updates_done) {
  // Regenerated independently of any communication: every rank replays every
  // rank's stream and keeps the updates that land in its part.
  std::vector<std::uint64_t> want(local.size());
  std::uint64_t lo = local_begin, hi = local_begin + local.size();
  for (std::uint64_t i = lo; i < hi; ++i) want[i - lo] = i;
  for (int r = 0; r < rt.size(); ++r) {
    std::uint64_t ran = problem.stream_start(r);
    for (std::uint64_t k = 0; k < updates_done; ++k) {
      ran = RaProblem::next(ran);
      std::uint64_t i = problem.index_of(ran);
      if (i >= lo && i < hi) want[i - lo] ^= ran;
    }
  }
  std::uint64_t bad = 0;
  for (std::size_t k = 0; k < want.size(); ++k) bad += local[k] != want[k];
  bad = all_reduce(rt.comm(), bad, MPI_SUM);
  return {bad == 0, std::to_string(bad) + " of " + std::to_string(problem.table_words) + " words wrong"};
}

namespace {
template <class Table>
void reset(Table& t) {
  std::uint64_t lo = t.local_begin();
  for (std::size_t k = 0; k < t.local().size(); ++k) t.local()[k] = lo + k;
}

// Aggregated: one UpdateAggregator with XOR; buffers capped by the look-ahead.
// The stream is generated as it is pushed (update_each: one record per
// update, none combined, nothing generated ahead of its push), so the only
// updates buffered are the exchange's, own ones included (its self lane).
void run_aggregated(const RaProblem& p, DistArray<std::uint64_t>& t, const AggregationOptions& agg, int rank) {
  UpdateAggregator<std::uint64_t, ops::BitXor> up(t, agg);
  up.update_each(p.updates_per_rank, [p, ran = p.stream_start(rank)](std::size_t) mutable {
    ran = hpcc_next(ran);
    return std::pair{p.index_of(ran), ran};
  });
}

// Fine-grained RMA: one MPI_Accumulate(BXOR) per update, completed every
// look-ahead updates.
void run_rma(const RaProblem& p, const RmaTable<std::uint64_t>& t, Runtime& rt, std::uint64_t count) {
  MPI_Win win = t.window();
  std::uint64_t ran = p.stream_start(rt.rank());
  TESSERA_MPI(MPI_Win_lock_all(MPI_MODE_NOCHECK, win));
  for (std::uint64_t k = 0; k < count; ++k) {
    ran = RaProblem::next(ran);
    std::uint64_t i = p.index_of(ran);
    int owner = t.owner(i);
    TESSERA_MPI(MPI_Accumulate(&ran, 1, MPI_UINT64_T, owner, t.displacement(i, owner), 1, MPI_UINT64_T, MPI_BXOR, win));
    if ((k + 1) % kLookAhead == 0) TESSERA_MPI(MPI_Win_flush_all(win));
  }
  TESSERA_MPI(MPI_Win_unlock_all(win));
  rt.comm_counters().one_sided_accumulates(count);
  barrier(rt.comm());
}
}  // namespace

bool run_ra(Runtime& rt, const RaOptions& o) {
  const RaProblem p = RaProblem::for_job(rt.size(), o.log_table_per_rank);
  std::uint64_t fine = std::min(o.fine_updates_per_rank, p.updates_per_rank);

  // HPCC's look-ahead: no more than 1024 updates buffered per rank in total:
  // a lane per rank (this rank's own updates wait in the self lane) of at
  // most 1024 / ranks records each, in the aggregator's record size (12
  // bytes while the offsets fit in 4, else 16).
  AggregationOptions agg = o.aggregation.resolved();
  const std::size_t record =
      UpdateAggregator<std::uint64_t, ops::BitXor>::record_bytes_for(Distribution::block(p.table_words, rt.size()));
  std::size_t cap = std::max<std::size_t>(1, kLookAhead / static_cast<std::size_t>(rt.size())) * record;
  agg.buffer_bytes = std::min(agg.buffer_bytes, cap);

  const auto ranks = static_cast<std::uint64_t>(rt.size());
  nlohmann::json config{{"table_words", p.table_words},
                        {"updates", p.updates_per_rank * ranks},
                        {"fine_updates", fine * ranks},
                        {"look_ahead", kLookAhead},
                        {"record_bytes", record},
                        {"reps", o.reps},
                        {"aggregation", agg.describe(rt.size())}};
  progress(rt, o.format,
           "RA: table 2^" + std::to_string(std::countr_zero(p.table_words)) + " words, " +
               std::to_string(p.updates_per_rank * ranks) + " updates; aggregation: " + agg.describe(rt.size()));
  Report report(rt, "ra", config, o.format);
  report.set_baselines({"fine-grained", "aggregated heap"});

  auto check = [&](const auto& t, std::uint64_t per_rank) {
    return verify_by([&rt, &p, &t, per_rank] { return check_ra(rt, p, t.local(), t.local_begin(), per_rank); });
  };
  RmaTable<std::uint64_t> rma(rt, Distribution::block(p.table_words, rt.size()));
  DistArray<std::uint64_t> heap(rt, p.table_words, StorageOptions::heap());
  DistArray<std::uint64_t> shared(rt, p.table_words, StorageOptions::shared());
  const double work = static_cast<double>(p.updates_per_rank * ranks);
  run_variants(rt, report,
               {{.variant = "fine-grained MPI_Accumulate", .storage = "MPI window", .reps = 1,
                 .work = static_cast<double>(fine * ranks), .prepare = [&] { reset(rma); },
                 .run = [&] { run_rma(p, rma, rt, fine); }, .verify = check(rma, fine), .skipped = rma.unavailable()},
                {.variant = "aggregated", .storage = "heap", .reps = o.reps, .work = work,
                 .prepare = [&] { reset(heap); }, .run = [&] { run_aggregated(p, heap, agg.with_same_node_direct(0), rt.rank()); },
                 .verify = check(heap, p.updates_per_rank)},
                {.variant = "aggregated", .storage = "shared+direct", .reps = o.reps, .work = work,
                 .prepare = [&] { reset(shared); }, .run = [&] { run_aggregated(p, shared, agg.with_same_node_direct(1), rt.rank()); },
                 .verify = check(shared, p.updates_per_rank)}},
               1e9, "GUPS");
  return report.print();
}

}  // namespace tessera::bench
