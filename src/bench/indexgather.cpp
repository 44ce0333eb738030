// Indexgather, after Bale (Maley and DeVinney, "Conveyors for Streaming
// Many-To-Many Communication", IA3 2019; the bale_classic kernel `ig`): every
// rank holds a table part and reads random global entries into a local array.
// Variants: aggregated SrcAggregator (Heap; Shared with and without the
// same-node path; a co-locale segment, default storage under --colocales),
// fine-grained MPI_Get, bulk exchange with MPI_Alltoallv; and the per-core
// ceiling (ceiling.hpp): the same tgt[k] = table[idx[k]] on a private copy of
// the whole table with no communication, and memcpy bandwidth.
// Verifier (check_indexgather): table[i] = indexgather_value(i) is a closed
// form, so every fetched value is checked against the index it was read from.
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
#include "tessera/runtime/wait.hpp"

namespace tessera::bench {

std::uint64_t indexgather_value(std::uint64_t i) { return i * 0x9e3779b97f4a7c15ull ^ 0x5bd1e995ull; }

std::vector<std::uint64_t> indexgather_indices(int rank, std::uint64_t count, std::uint64_t table) {
  return random_indices(rank, 0x16, count, table);
}

Verdict check_indexgather(Runtime& rt, std::span<const std::uint64_t> indices, std::span<const std::uint64_t> fetched) {
  std::uint64_t bad = indices.size() == fetched.size() ? 0 : 1;
  for (std::size_t k = 0; k < std::min(indices.size(), fetched.size()); ++k)
    bad += fetched[k] != indexgather_value(indices[k]);
  bad = all_reduce(rt.comm(), bad, MPI_SUM);
  return {bad == 0, std::to_string(bad) + " wrong values"};
}

namespace {
constexpr std::uint64_t kUnset = ~std::uint64_t{0};

template <class Table>
void fill_table(Table& t) {
  for (std::uint64_t i = t.local_begin(); i < t.local_end(); ++i)
    t.local()[i - t.local_begin()] = indexgather_value(i);
}

void gather_aggregated(const DistArray<std::uint64_t>& t, const std::vector<std::uint64_t>& idx,
                       std::vector<std::uint64_t>& tgt, const AggregationOptions& agg, std::size_t* buffer_used) {
  SrcAggregator<std::uint64_t> src(t, agg);
  if (buffer_used) *buffer_used = src.exchange().buffer_bytes();
  src.get(std::span<const std::uint64_t>(idx), std::span<std::uint64_t>(tgt));
}

// Returns its own time, from the aggregator's construction to the end of its
// flush: the traffic (last batches included) is read after the clock stops,
// and the destructor's flush of the then empty exchange (a reduction and a
// barrier) is not timed.
double gather_counted(const DistArray<std::uint64_t>& t, const std::vector<std::uint64_t>& idx,
                      std::vector<std::uint64_t>& tgt, const AggregationOptions& agg, Traffic& traffic,
                      std::uint64_t remote) {
  const double t0 = MPI_Wtime();
  SrcAggregator<std::uint64_t> src(t, agg);
  src.get(std::span<const std::uint64_t>(idx), std::span<std::uint64_t>(tgt));
  src.flush();
  const double seconds = MPI_Wtime() - t0;
  traffic.record(t.runtime(), src, remote);
  return seconds;
}

// The kernel with no communication: every rank reads its own stream from a
// private copy of the whole table.
void gather_local(const std::vector<std::uint64_t>& table, const std::vector<std::uint64_t>& idx,
                  std::vector<std::uint64_t>& tgt) {
  const std::uint64_t* t = table.data();
  for (std::size_t k = 0; k < idx.size(); ++k) tgt[k] = t[idx[k]];
}

void gather_fine(const RmaTable<std::uint64_t>& t, const std::vector<std::uint64_t>& idx,
                 std::vector<std::uint64_t>& tgt, std::size_t n) {
  MPI_Win win = t.window();
  TESSERA_MPI(MPI_Win_lock_all(MPI_MODE_NOCHECK, win));
  for (std::size_t k = 0; k < n; ++k) {
    int owner = t.owner(idx[k]);
    TESSERA_MPI(MPI_Get(&tgt[k], 1, MPI_UINT64_T, owner, t.displacement(idx[k], owner), 1, MPI_UINT64_T, win));
    TESSERA_MPI(MPI_Win_flush(owner, win));  // a read is complete before the next, as shmem_g
  }
  TESSERA_MPI(MPI_Win_unlock_all(win));
  Runtime::current().comm_counters().one_sided_gets(n);
}

// Bulk: bucket requests by owner, exchange, look up, exchange back.
void gather_alltoallv(const DistArray<std::uint64_t>& t, const std::vector<std::uint64_t>& idx,
                      std::vector<std::uint64_t>& tgt) {
  const std::uint64_t* local = t.local().data();
  const std::uint64_t begin = t.local_begin();
  tgt = comm::request_reply<std::uint64_t>(
      t.runtime().comm(), idx, [&](std::uint64_t i) { return t.owner(i); },
      [&](std::uint64_t i) { return local[i - begin]; });
}
}  // namespace

bool run_indexgather_sweep(Runtime& rt, const GatherOptions& o);

namespace {
// The tables (one per storage, all filled alike), the reads and their
// results, shared by every variant.
struct GatherRun {
  GatherRun(Runtime& rt, const GatherOptions& o)
      : rt(rt), o(o), table(o.table_per_rank * static_cast<std::uint64_t>(rt.size())),
        idx(indexgather_indices(rt.rank(), o.requests_per_rank, table)), tgt(idx.size()),
        fine(static_cast<std::size_t>(std::min(o.fine_requests_per_rank, o.requests_per_rank))),
        agg(o.aggregation.resolved()) {}
  Runtime& rt;
  const GatherOptions& o;
  const std::uint64_t table;
  const std::vector<std::uint64_t> idx;
  std::vector<std::uint64_t> tgt;
  const std::size_t fine;
  const AggregationOptions agg;
  double all = 0;          // reads of one repetition, whole job
  std::uint64_t remote = 0;  // this rank's reads another rank owns (the same for every table)
  Counted counted[7]{};    // the aggregated rows, in order

  std::function<void()> reset() {
    return [this] { std::fill(tgt.begin(), tgt.end(), kUnset); };
  }
  std::function<std::string(bool&)> check(std::size_t reads) {
    return verify_by([this, reads] {
      return check_indexgather(rt, std::span(idx).first(reads), std::span(tgt).first(reads));
    });
  }
  // An aggregated read of `t` with `a`, row k of counted.
  Variant aggregated(const std::string& storage, const DistArray<std::uint64_t>& t, AggregationOptions a, int k) {
    Variant v{.variant = "aggregated", .storage = storage, .reps = o.reps, .work = all, .prepare = reset(),
              .verify = check(idx.size())};
    return counted_variant(rt, std::move(v), counted[k], [this, &t, a](Traffic& traffic) {
      return gather_counted(t, idx, tgt, a, traffic, remote);
    });
  }
};
}  // namespace

bool run_indexgather(Runtime& rt, const GatherOptions& o) {
  if (o.sweep) return run_indexgather_sweep(rt, o);
  GatherRun x(rt, o);
  const std::string agg_text = x.agg.describe(rt.size());
  nlohmann::json config{{"table_per_rank", o.table_per_rank},
                        {"requests_per_rank", o.requests_per_rank},
                        {"fine_requests_per_rank", x.fine},
                        {"reps", o.reps},
                        {"aggregation", agg_text}};
  progress(rt, o.format,
           "indexgather: " + std::to_string(x.table) + " table entries, " + std::to_string(o.requests_per_rank) +
               " reads per rank; aggregation: " + agg_text);
  Report report(rt, "indexgather", config, o.format);
  report.set_baselines({"fine-grained", "alltoallv"});
  DistArray<std::uint64_t> heap(rt, x.table, StorageOptions::heap());
  fill_table(heap);
  DistArray<std::uint64_t> shared(rt, x.table, StorageOptions::shared());
  fill_table(shared);
  DistArray<std::uint64_t> colocale(rt, x.table, StorageOptions::colocale());
  fill_table(colocale);
  RmaTable<std::uint64_t> rma(rt, heap.distribution());
  fill_table(rma);
  const double ranks = static_cast<double>(rt.size());
  x.all = static_cast<double>(x.idx.size()) * ranks;
  x.remote = remote_operations(heap, x.idx);
  std::vector<std::uint64_t> private_table(x.table);
  for (std::uint64_t i = 0; i < x.table; ++i) private_table[i] = indexgather_value(i);
  const AggregationOptions direct0 = x.agg.with_same_node_direct(0);
  auto rows = run_variants(rt, report,
      {{.variant = "fine-grained MPI_Get", .storage = "MPI window", .reps = 1,
        .work = static_cast<double>(x.fine) * ranks, .prepare = x.reset(),
        .run = [&] { gather_fine(rma, x.idx, x.tgt, x.fine); }, .verify = x.check(x.fine), .skipped = rma.unavailable()},
       {.variant = "alltoallv", .storage = "heap", .reps = o.reps, .work = x.all, .prepare = x.reset(),
        .run = [&] { gather_alltoallv(heap, x.idx, x.tgt); }, .verify = x.check(x.idx.size())},
       x.aggregated("heap", heap, direct0, 0),
       // Right after its direct counterpart: the ratio compares rows measured close in time.
       x.aggregated("heap multi-hop", heap, direct0.with_routing(AggregationRouting::grid), 1),
       // The same exchange with batches to co-locales through MPI, and with node-first routing.
       x.aggregated(kMpiTransportRow, heap, direct0.with_same_node_rings(0), 5),
       x.aggregated(kNodeFirstRow, heap, direct0.with_routing(AggregationRouting::node_first), 6),
       x.aggregated("shared", shared, direct0, 2),
       x.aggregated("shared+direct", shared, x.agg.with_same_node_direct(1), 3),
       x.aggregated(kColocaleRow, colocale, x.agg.with_same_node_direct(1), 4),
       {.variant = kLocalLoopRow, .storage = "heap", .reps = o.reps, .work = x.all, .prepare = x.reset(),
        .run = [&] { gather_local(private_table, x.idx, x.tgt); }, .verify = x.check(x.idx.size())}},
      1e6, "M reads/s");
  std::vector<std::uint64_t> copy(x.idx.size());
  auto bandwidth = run_variants(rt, report, {memcpy_variant(rt, x.idx, copy, o.reps)}, 1e9, "GB/s");
  add_ceiling_summary(report, rows, rows.back(), bandwidth.front());
  add_multi_hop_summary(report, x.agg, rows, "heap", "heap multi-hop");
  add_transport_summary(report, rows);
  add_colocale_summary(report, rt, rows);
  add_bytes_summary(report, rows, "heap", "read");
  return report.print();
}

// `--sweep`: the aggregated (heap) read at fixed buffer sizes 1K ... 1M and
// in auto mode, one row each (JSON: extra.buffer_bytes), then auto against
// the best fixed size.
bool run_indexgather_sweep(Runtime& rt, const GatherOptions& o) {
  std::uint64_t table = o.table_per_rank * static_cast<std::uint64_t>(rt.size());
  auto idx = indexgather_indices(rt.rank(), o.requests_per_rank, table);
  std::vector<std::uint64_t> tgt(idx.size());
  AggregationOptions agg = o.aggregation.resolved();
  agg.same_node_direct = 0;
  nlohmann::json config{{"table_per_rank", o.table_per_rank}, {"requests_per_rank", o.requests_per_rank},
                        {"reps", o.reps}, {"sweep", true}};
  progress(rt, o.format, "indexgather --sweep: " + std::to_string(table) + " table entries, " +
                             std::to_string(o.requests_per_rank) + " reads per rank, buffer sizes 1K..1M and auto");
  Report report(rt, "indexgather", config, o.format);
  DistArray<std::uint64_t> heap(rt, table, StorageOptions::heap());
  fill_table(heap);
  auto reset = [&] { std::fill(tgt.begin(), tgt.end(), kUnset); };
  auto check = verify_by([&] { return check_indexgather(rt, idx, tgt); });
  const double all = static_cast<double>(idx.size()) * static_cast<double>(rt.size());
  std::vector<Variant> variants;
  std::vector<std::size_t> sizes;
  for (std::size_t bytes = 1 << 10; bytes <= (1 << 20); bytes *= 2) sizes.push_back(bytes);
  for (std::size_t bytes : sizes) {
    AggregationOptions fixed = agg;
    fixed.buffer_bytes = bytes;
    variants.push_back({.group = "sweep", .variant = "aggregated", .storage = "heap " + std::to_string(bytes >> 10) + "K",
                        .reps = o.reps, .work = all, .prepare = reset,
                        .run = [&, fixed] { gather_aggregated(heap, idx, tgt, fixed, nullptr); }, .verify = check,
                        .details = [bytes] { return nlohmann::json{{"buffer_bytes", bytes}}; }});
  }
  AggregationOptions automatic = agg;
  automatic.buffer_bytes = AggregationOptions::kAutoBufferBytes;
  std::size_t auto_used = 0;
  agg_autotune::reset();  // start as a fresh process would
  variants.push_back({.group = "sweep", .variant = "aggregated", .storage = "heap auto", .reps = o.reps, .work = all,
                      .prepare = reset, .run = [&] { gather_aggregated(heap, idx, tgt, automatic, &auto_used); },
                      .verify = check, .details = [&] {
                        return nlohmann::json{{"buffer_bytes", auto_used}, {"auto", true}};
                      }});
  auto rows = run_variants(rt, report, variants, 1e6, "M reads/s");
  std::size_t best = 0;
  for (std::size_t k = 0; k + 1 < rows.size(); ++k)
    if (rows[k].rate > rows[best].rate) best = k;
  const Result& a = rows.back();
  double ratio = a.rate / rows[best].rate;
  char text[200];
  std::snprintf(text, sizeof(text), "auto chose %zu B (last repetition): %.4g M reads/s = %.2f of the best fixed size %zu B (%.4g M reads/s)",
                auto_used, a.rate, ratio, sizes[best], rows[best].rate);
  report.add_summary(text, {{"auto_buffer_bytes", auto_used}, {"auto_rate", a.rate}, {"best_fixed_buffer_bytes", sizes[best]},
                            {"best_fixed_rate", rows[best].rate}, {"auto_over_best_fixed", ratio}});
  return report.print();
}

}  // namespace tessera::bench
