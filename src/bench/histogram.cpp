// Histogram, after Bale (the bale_classic kernel `histo`): every rank adds 1
// to random entries of a distributed count table. Variants: aggregated
// CountAggregator (a record is the element's offset, as Bale's histo sends the
// index alone; Heap; Shared with the same-node atomic path; a co-locale
// segment, default storage under --colocales), the general
// UpdateAggregator<add> (offset and value in each record) beside it,
// fine-grained MPI_Accumulate(SUM), bulk exchange with MPI_Alltoallv; and
// the per-core ceiling (ceiling.hpp): the same ++count[i] on a private table
// of the whole size with no communication, and memcpy bandwidth.
// Verifier (check_histogram): the grand total must equal the number of
// updates, and every rank recounts its own part by regenerating every rank's
// index stream.
#include "tessera/bench/benchmarks.hpp"

#include <algorithm>
#include <numeric>

#include "random_indices.hpp"
#include "rma_table.hpp"
#include "multi_hop_summary.hpp"
#include "colocale_summary.hpp"
#include "ceiling.hpp"
#include "traffic.hpp"
#include "transport_summary.hpp"
#include "tessera/array/dist_array.hpp"
#include "tessera/bench/report.hpp"
#include "tessera/bench/verifiers.hpp"
#include "tessera/runtime/collective.hpp"
#include "tessera/comm/aggregators.hpp"
#include "tessera/comm/request_reply.hpp"
#include "tessera/runtime/error.hpp"
#include "tessera/runtime/wait.hpp"

namespace tessera::bench {

namespace {
constexpr std::uint64_t kSalt = 0x41;
constexpr std::uint64_t kLookAhead = 1024;
// The general update aggregator's row (offset and value in each record).
constexpr const char* kUpdateRecordsRow = "heap update records";
}  // namespace

std::vector<std::uint64_t> histogram_indices(int rank, std::uint64_t count, std::uint64_t counts) {
  return random_indices(rank, kSalt, count, counts);
}

Verdict check_histogram(Runtime& rt, std::span<const std::int64_t> local, std::uint64_t local_begin,
                        std::uint64_t counts, std::uint64_t updates_done) {
  std::vector<std::int64_t> want(local.size(), 0);
  std::uint64_t lo = local_begin, hi = local_begin + local.size();
  for (int r = 0; r < rt.size(); ++r)
    for (std::uint64_t i : histogram_indices(r, updates_done, counts))
      if (i >= lo && i < hi) ++want[i - lo];
  std::int64_t sum = 0;
  std::uint64_t bad = 0;
  for (std::size_t k = 0; k < want.size(); ++k) {
    sum += local[k];
    bad += local[k] != want[k];
  }
  std::int64_t total = all_reduce(rt.comm(), sum, MPI_SUM);
  std::uint64_t bad_total = all_reduce(rt.comm(), bad, MPI_SUM);
  auto expected_total = static_cast<std::int64_t>(updates_done * static_cast<std::uint64_t>(rt.size()));
  return {total == expected_total && bad_total == 0,
          "total " + std::to_string(total) + " of " + std::to_string(expected_total) + ", " +
              std::to_string(bad_total) + " counts differ from the recount"};
}

Verdict check_histogram_private(Runtime& rt, std::span<const std::int64_t> private_counts, std::uint64_t local_begin,
                                std::size_t local_size, std::uint64_t updates_done) {
  std::vector<std::int64_t> sum(private_counts.begin(), private_counts.end());
  all_reduce(rt.comm(), sum.data(), static_cast<int>(sum.size()), MPI_SUM);
  if (local_begin + local_size > sum.size())
    throw RangeError("check_histogram_private: block [" + std::to_string(local_begin) + ", " +
                      std::to_string(local_begin + local_size) + ") lies outside the table of " +
                      std::to_string(sum.size()) + " counts");
  return check_histogram(rt, std::span<const std::int64_t>(sum).subspan(local_begin, local_size), local_begin,
                         sum.size(), updates_done);
}

namespace {
// Returns its own time, from the aggregator's construction to the end of its
// flush: the traffic (last batches included) is read after the clock stops,
// and the destructor's flush of the then empty exchange (a reduction and a
// barrier) is not timed.
double histo_aggregated(DistArray<std::int64_t>& counts, const std::vector<std::uint64_t>& idx,
                        const AggregationOptions& agg, Traffic& traffic, std::uint64_t remote) {
  const double t0 = MPI_Wtime();
  CountAggregator<std::int64_t> up(counts, agg);
  up.count(idx);  // the bulk entry point: still one record per update
  up.flush();
  const double seconds = MPI_Wtime() - t0;
  traffic.record(counts.runtime(), up, remote);
  return seconds;
}

// The same with the general update aggregator: each record carries the value.
double histo_updates(DistArray<std::int64_t>& counts, const std::vector<std::uint64_t>& idx,
                     const AggregationOptions& agg, Traffic& traffic, std::uint64_t remote) {
  const double t0 = MPI_Wtime();
  UpdateAggregator<std::int64_t, ops::Add> up(counts, agg);
  for (std::uint64_t i : idx) up.update(i, 1);
  up.flush();
  const double seconds = MPI_Wtime() - t0;
  traffic.record(counts.runtime(), up, remote);
  return seconds;
}

// The kernel with no communication: every rank counts its own stream into a
// private table of the whole size.
void histo_local(std::vector<std::int64_t>& counts, const std::vector<std::uint64_t>& idx) {
  std::int64_t* c = counts.data();
  for (std::uint64_t i : idx) ++c[i];
}

void histo_fine(Runtime& rt, const RmaTable<std::int64_t>& counts, const std::vector<std::uint64_t>& idx,
                std::size_t n) {
  MPI_Win win = counts.window();
  const std::int64_t one = 1;
  TESSERA_MPI(MPI_Win_lock_all(MPI_MODE_NOCHECK, win));
  for (std::size_t k = 0; k < n; ++k) {
    int owner = counts.owner(idx[k]);
    TESSERA_MPI(
        MPI_Accumulate(&one, 1, MPI_INT64_T, owner, counts.displacement(idx[k], owner), 1, MPI_INT64_T, MPI_SUM, win));
    if ((k + 1) % kLookAhead == 0) TESSERA_MPI(MPI_Win_flush_all(win));
  }
  TESSERA_MPI(MPI_Win_unlock_all(win));
  rt.comm_counters().one_sided_accumulates(n);
  barrier(rt.comm());
}

// Bulk: bucket updates by owner, exchange, apply.
void histo_alltoallv(DistArray<std::int64_t>& counts, const std::vector<std::uint64_t>& idx) {
  std::int64_t* local = counts.local().data();
  const std::uint64_t begin = counts.local_begin();
  for (std::uint64_t i :
       comm::deliver<std::uint64_t>(counts.runtime().comm(), idx, [&](std::uint64_t i) { return counts.owner(i); }))
    ++local[i - begin];
}
}  // namespace

namespace {
// The updates and what every variant shares.
struct HistoRun {
  HistoRun(Runtime& rt, const HistogramOptions& o)
      : rt(rt), o(o), table(o.counts_per_rank * static_cast<std::uint64_t>(rt.size())),
        idx(histogram_indices(rt.rank(), o.updates_per_rank, table)),
        fine(static_cast<std::size_t>(std::min(o.fine_updates_per_rank, o.updates_per_rank))),
        agg(o.aggregation.resolved()) {}
  Runtime& rt;
  const HistogramOptions& o;
  const std::uint64_t table;
  const std::vector<std::uint64_t> idx;
  const std::size_t fine;
  const AggregationOptions agg;
  double all = 0;            // updates of one repetition, whole job
  std::uint64_t remote = 0;  // this rank's updates another rank owns (the same for every table)
  Counted counted[8]{};      // the aggregated rows, in order

  template <class Counts>
  static std::function<void()> zero(Counts& c) {
    return [&c] { std::fill(c.local().begin(), c.local().end(), 0); };
  }
  template <class Counts>
  std::function<std::string(bool&)> check(const Counts& c, std::uint64_t per_rank) {
    return verify_by([this, &c, per_rank] { return check_histogram(rt, c.local(), c.local_begin(), table, per_rank); });
  }
  // Counting into `c` with `a` (CountAggregator, or with `updates` the general
  // update aggregator), row k of counted.
  Variant aggregated(const std::string& storage, DistArray<std::int64_t>& c, AggregationOptions a, int k,
                     bool updates = false) {
    Variant v{.variant = "aggregated", .storage = storage, .reps = o.reps, .work = all, .prepare = zero(c),
              .verify = check(c, idx.size())};
    return counted_variant(rt, std::move(v), counted[k], [this, &c, a, updates](Traffic& traffic) {
      return updates ? histo_updates(c, idx, a, traffic, remote) : histo_aggregated(c, idx, a, traffic, remote);
    });
  }
};
}  // namespace

bool run_histogram(Runtime& rt, const HistogramOptions& o) {
  HistoRun x(rt, o);
  const std::string agg_text = x.agg.describe(rt.size());
  nlohmann::json config{{"counts_per_rank", o.counts_per_rank},
                        {"updates_per_rank", o.updates_per_rank},
                        {"fine_updates_per_rank", x.fine},
                        {"reps", o.reps},
                        {"aggregation", agg_text}};
  progress(rt, o.format,
           "histogram: " + std::to_string(x.table) + " counts, " + std::to_string(o.updates_per_rank) +
               " updates per rank; aggregation: " + agg_text);
  Report report(rt, "histogram", config, o.format);
  report.set_baselines({"fine-grained", "alltoallv"});
  const double ranks = static_cast<double>(rt.size());
  DistArray<std::int64_t> heap(rt, x.table, StorageOptions::heap());
  DistArray<std::int64_t> shared(rt, x.table, StorageOptions::shared());
  DistArray<std::int64_t> colocale(rt, x.table, StorageOptions::colocale());
  RmaTable<std::int64_t> rma(rt, heap.distribution());
  x.all = static_cast<double>(x.idx.size()) * ranks;
  x.remote = remote_operations(heap, x.idx);
  std::vector<std::int64_t> local(x.table, 0);
  const AggregationOptions direct0 = x.agg.with_same_node_direct(0);
  auto rows = run_variants(rt, report,
      {{.variant = "fine-grained MPI_Accumulate", .storage = "MPI window", .reps = 1,
        .work = static_cast<double>(x.fine) * ranks, .prepare = HistoRun::zero(rma),
        .run = [&] { histo_fine(rt, rma, x.idx, x.fine); }, .verify = x.check(rma, x.fine), .skipped = rma.unavailable()},
       {.variant = "alltoallv", .storage = "heap", .reps = o.reps, .work = x.all, .prepare = HistoRun::zero(heap),
        .run = [&] { histo_alltoallv(heap, x.idx); }, .verify = x.check(heap, x.idx.size())},
       x.aggregated("heap", heap, direct0, 0),
       // Right after its direct counterpart: the ratio compares rows measured close in time.
       x.aggregated("heap multi-hop", heap, direct0.with_routing(AggregationRouting::grid), 1),
       // Counting with the general update aggregator: each record also carries the value 1.
       x.aggregated(kUpdateRecordsRow, heap, direct0, 7, true),
       // The same exchange with batches to co-locales through MPI, and with node-first routing.
       x.aggregated(kMpiTransportRow, heap, direct0.with_same_node_rings(0), 5),
       x.aggregated(kNodeFirstRow, heap, direct0.with_routing(AggregationRouting::node_first), 6),
       x.aggregated("shared", shared, direct0, 2),
       x.aggregated("shared+direct", shared, x.agg.with_same_node_direct(1), 3),
       x.aggregated(kColocaleRow, colocale, x.agg.with_same_node_direct(1), 4),
       {.variant = kLocalLoopRow, .storage = "heap", .reps = o.reps, .work = x.all,
        .prepare = [&] { std::fill(local.begin(), local.end(), 0); }, .run = [&] { histo_local(local, x.idx); },
        .verify = verify_by([&] {
          return check_histogram_private(rt, local, heap.local_begin(), heap.local().size(), x.idx.size());
        })}},
      1e6, "M upd/s");
  std::vector<std::uint64_t> copy(x.idx.size());
  auto bandwidth = run_variants(rt, report, {memcpy_variant(rt, x.idx, copy, o.reps)}, 1e9, "GB/s");
  add_ceiling_summary(report, rows, rows.back(), bandwidth.front());
  add_multi_hop_summary(report, x.agg, rows, "heap", "heap multi-hop");
  add_transport_summary(report, rows);
  add_colocale_summary(report, rt, rows);
  add_bytes_summary(report, rows, "heap", "update");
  return report.print();
}

}  // namespace tessera::bench
