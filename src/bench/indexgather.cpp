// Indexgather, after Bale (Maley and DeVinney, "Conveyors for Streaming
// Many-To-Many Communication", IA3 2019; the bale_classic kernel `ig`): every
// rank holds a table part and reads random global entries into a local array.
// Variants: aggregated SrcAggregator (Heap; Shared with and without the
// same-node path), fine-grained MPI_Get, bulk exchange with MPI_Alltoallv.
// Verifier: table[i] = value_of(i) is a closed form, so every fetched value
// is checked against the index it was read from.
#include "tessera/bench/benchmarks.hpp"

#include <algorithm>
#include <cstdio>
#include <numeric>

#include "random_indices.hpp"
#include "rma_table.hpp"
#include "bucket_exchange.hpp"
#include "tessera/array/dist_array.hpp"
#include "tessera/bench/report.hpp"
#include "tessera/runtime/collective.hpp"
#include "tessera/comm/aggregators.hpp"
#include "tessera/runtime/wait.hpp"

namespace tessera::bench {

namespace {
inline std::uint64_t table_value(std::uint64_t i) { return i * 0x9e3779b97f4a7c15ull ^ 0x5bd1e995ull; }
constexpr std::uint64_t kUnset = ~std::uint64_t{0};

template <class Table>
void fill_table(Table& t) {
  for (std::uint64_t i = t.local_begin(); i < t.local_end(); ++i) t.local()[i - t.local_begin()] = table_value(i);
}

std::uint64_t count_wrong(Runtime& rt, const std::vector<std::uint64_t>& idx, const std::vector<std::uint64_t>& tgt,
                          std::size_t n) {
  std::uint64_t bad = 0;
  for (std::size_t k = 0; k < n; ++k) bad += tgt[k] != table_value(idx[k]);
  return all_reduce(rt.comm(), bad, MPI_SUM);
}

void gather_aggregated(const DistArray<std::uint64_t>& t, const std::vector<std::uint64_t>& idx,
                       std::vector<std::uint64_t>& tgt, const AggregationOptions& agg) {
  SrcAggregator<std::uint64_t> src(t, agg);
  for (std::size_t k = 0; k < idx.size(); ++k) src.get(idx[k], tgt[k]);
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
}

// Bulk: bucket requests by owner, exchange, look up, exchange back.
void gather_alltoallv(const DistArray<std::uint64_t>& t, const std::vector<std::uint64_t>& idx,
                      std::vector<std::uint64_t>& tgt) {
  BucketExchange exchange(t, idx);
  std::vector<std::uint64_t> answers(exchange.incoming.size());
  const std::uint64_t* local = t.local().data();
  for (std::size_t k = 0; k < answers.size(); ++k) answers[k] = local[exchange.incoming[k]];
  tgt = exchange.reply(answers);
}
}  // namespace

bool run_indexgather(Runtime& rt, const GatherOptions& o) {
  std::uint64_t table = o.table_per_rank * static_cast<std::uint64_t>(rt.size());
  auto idx = random_indices(rt.rank(), 0x16, o.requests_per_rank, table);
  std::vector<std::uint64_t> tgt(idx.size());
  std::size_t fine = static_cast<std::size_t>(std::min(o.fine_requests_per_rank, o.requests_per_rank));
  AggregationOptions agg = o.aggregation.resolved();
  nlohmann::json config{{"table_per_rank", o.table_per_rank},
                        {"requests_per_rank", o.requests_per_rank},
                        {"fine_requests_per_rank", fine},
                        {"reps", o.reps},
                        {"aggregation", agg.describe(rt.size())}};
  if (rt.rank() == 0 && !o.format.quiet)  // progress on stderr: stdout holds the report
    std::fprintf(stderr, "indexgather: %llu table entries, %llu reads per rank; aggregation: %s\n",
                static_cast<unsigned long long>(table), static_cast<unsigned long long>(o.requests_per_rank),
                agg.describe(rt.size()).c_str());
  Report report(rt, "indexgather", config, o.format);
  report.set_baselines({"fine-grained", "alltoallv"});

  auto reset = [&] { std::fill(tgt.begin(), tgt.end(), kUnset); };
  auto check = [&](std::size_t reads) {
    return [&rt, &idx, &tgt, reads](bool& ok) {
      std::uint64_t wrong = count_wrong(rt, idx, tgt, reads);
      ok = wrong == 0;
      return std::to_string(wrong) + " wrong values";
    };
  };
  auto aggregation = [&](int direct) {
    AggregationOptions a = agg;
    a.same_node_direct = direct;
    return a;
  };
  DistArray<std::uint64_t> heap(rt, table);
  fill_table(heap);
  DistArray<std::uint64_t> shared(rt, table, StorageOptions::shared());
  fill_table(shared);
  RmaTable<std::uint64_t> rma(rt, heap.distribution());
  fill_table(rma);
  const double ranks = static_cast<double>(rt.size()), all = static_cast<double>(idx.size()) * ranks;
  run_variants(rt, report,
               {{"fine-grained MPI_Get", "MPI window", 1, static_cast<double>(fine) * ranks, reset,
                 [&] { gather_fine(rma, idx, tgt, fine); }, check(fine)},
                {"alltoallv", "heap", o.reps, all, reset, [&] { gather_alltoallv(heap, idx, tgt); }, check(idx.size())},
                {"aggregated", "heap", o.reps, all, reset, [&] { gather_aggregated(heap, idx, tgt, aggregation(0)); },
                 check(idx.size())},
                {"aggregated", "shared", o.reps, all, reset, [&] { gather_aggregated(shared, idx, tgt, aggregation(0)); },
                 check(idx.size())},
                {"aggregated", "shared+direct", o.reps, all, reset,
                 [&] { gather_aggregated(shared, idx, tgt, aggregation(1)); }, check(idx.size())}},
               1e6, "M reads/s");
  return report.print();
}

}  // namespace tessera::bench
