// Argsort, after Arkouda's argsort benchmark (Bears-R-Us/arkouda,
// benchmarks/argsort.py: ak.argsort(ak.randint(0, 2**32, N))): the library's
// LSD radix argsort (comm/argsort.hpp, Arkouda's RadixSortLSD algorithm) of
// 64-bit keys, with its scratch arrays in Heap storage and in Shared storage
// with the same-node direct path, then the gather a[perm] (Arkouda's
// gather.py shape) through comm/bulk_access.hpp. Baseline: std::sort of
// (key, index) pairs on one rank, the whole array gathered there when it is
// at most --gather-limit keys (else rank 0's own part).
// Verifier (check_argsort): perm lists every index once, the keys it points
// to ascend with ties in index order (the stable order) across rank
// boundaries too, and a[perm] holds those keys; the keys are a closed form of
// the index, so the check needs no communication but the permutation count.
// Arkouda itself (Chapel) is not run here: `scripts/peers.py quoted argsort`
// prints its figures as quoted references, never as ratios to this run.
#include <algorithm>
#include <utility>

#include "tessera/array/dist_array.hpp"
#include "tessera/bench/benchmarks.hpp"
#include "tessera/bench/report.hpp"
#include "tessera/bench/sort.hpp"
#include "tessera/comm/argsort.hpp"
#include "tessera/comm/bulk_access.hpp"
#include "tessera/comm/request_reply.hpp"
#include "tessera/runtime/collective.hpp"
#include "tessera/runtime/error.hpp"
#include "tessera/runtime/splitmix64.hpp"

namespace tessera::bench {

std::uint64_t argsort_key(std::uint64_t index, int key_bits) {
  std::uint64_t state = index ^ 0x2545f4914f6cdd1dull;
  std::uint64_t h = splitmix64(state);
  return key_bits >= 64 ? h : h >> (64 - key_bits);
}

namespace {
using KeyOf = std::function<std::uint64_t(std::uint64_t)>;

// Across ranks: each rank's last pair before the next non-empty rank's first
// (pairs out of order at rank boundaries).
std::uint64_t disorder_across_ranks(MPI_Comm comm, std::uint64_t n, std::span<const std::uint64_t> perm,
                                    const KeyOf& key_of) {
  struct Ends {
    std::uint64_t count, first_key, first_index, last_key, last_index;
  };
  Ends mine{0, 0, 0, 0, 0};
  if (!perm.empty() && perm.front() < n && perm.back() < n)
    mine = {perm.size(), key_of(perm.front()), perm.front(), key_of(perm.back()), perm.back()};
  std::uint64_t across = 0;
  const Ends* previous = nullptr;
  auto ends = all_gather(comm, mine);
  for (const Ends& e : ends) {
    if (e.count == 0) continue;
    if (previous && !(previous->last_key < e.first_key ||
                      (previous->last_key == e.first_key && previous->last_index < e.first_index)))
      ++across;
    previous = &e;
  }
  return across;
}

// Permutation: every index goes to its owner under a block split of [0, n),
// which counts them; adds this rank's duplicated and missing indices.
void count_indices(Runtime& rt, std::uint64_t n, std::span<const std::uint64_t> perm, std::uint64_t out_of_range,
                   std::uint64_t& duplicated, std::uint64_t& missing) {
  Distribution owners = Distribution::block(n, rt.size());
  std::vector<std::uint64_t> in_range;
  in_range.reserve(perm.size() - out_of_range);
  for (std::uint64_t i : perm)
    if (i < n) in_range.push_back(i);
  auto mine_to_count = comm::deliver(rt.comm(), std::move(in_range), [&](std::uint64_t i) { return owners.owner(i); });
  std::vector<std::uint8_t> seen(owners.count(rt.rank()), 0);
  const std::uint64_t begin = owners.begin(rt.rank());
  for (std::uint64_t i : mine_to_count) duplicated += seen[i - begin]++ > 0;
  missing = static_cast<std::uint64_t>(std::count(seen.begin(), seen.end(), 0));
}
}  // namespace

Verdict check_argsort(Runtime& rt, std::uint64_t n, std::span<const std::uint64_t> perm, const KeyOf& key_of,
                      std::span<const std::uint64_t> gathered) {
  // totals: entries, out of range, out of order within ranks, duplicated, missing, wrong gathered values
  std::uint64_t totals[6] = {perm.size(), 0, 0, 0, 0, 0};
  auto before = [&](std::size_t a, std::size_t b) {  // (key, index) of perm[a] < that of perm[b]
    std::uint64_t ka = key_of(perm[a]), kb = key_of(perm[b]);
    return ka < kb || (ka == kb && perm[a] < perm[b]);
  };
  for (std::size_t j = 0; j < perm.size(); ++j) {
    if (perm[j] >= n) {
      ++totals[1];
      continue;
    }
    if (j > 0 && perm[j - 1] < n && !before(j - 1, j)) ++totals[2];
  }
  if (!gathered.empty()) {
    totals[5] += gathered.size() != perm.size() ? 1 : 0;
    for (std::size_t j = 0; j < std::min(perm.size(), gathered.size()); ++j)
      totals[5] += perm[j] < n && gathered[j] != key_of(perm[j]);
  }
  const std::uint64_t across = disorder_across_ranks(rt.comm(), n, perm, key_of);
  count_indices(rt, n, perm, totals[1], totals[3], totals[4]);
  all_reduce(rt.comm(), totals, 6, MPI_SUM);
  bool ok = totals[0] == n && totals[1] == 0 && totals[2] == 0 && across == 0 && totals[3] == 0 && totals[4] == 0 &&
            totals[5] == 0;
  std::string found = std::to_string(totals[0]) + " entries for " + std::to_string(n) + " keys, " +
                      std::to_string(totals[1]) + " out of range, " + std::to_string(totals[3]) + " duplicated, " +
                      std::to_string(totals[4]) + " missing, " + std::to_string(totals[2]) +
                      " out of order within ranks, " + std::to_string(across) + " across rank boundaries";
  if (!gathered.empty()) found += ", " + std::to_string(totals[5]) + " wrong gathered values";
  return {ok, found};
}

namespace {
// The keys (Heap and Shared), the permutations each sort writes, the gather's
// output and the one-rank baseline's input, shared by every variant.
struct ArgsortRun {
  ArgsortRun(Runtime& rt, const ArgsortBenchOptions& o)
      : rt(rt), o(o), n(o.keys_per_rank * static_cast<std::uint64_t>(rt.size())),
        key_of([bits = o.key_bits](std::uint64_t i) { return argsort_key(i, bits); }),
        // The sort picks its own buffers for its bulk scatter unless they are set
        // (bulk_scatter_aggregation); the gather a[perm] is as bulk (every rank
        // reads as many elements as it holds), so it gets the same kind of settings.
        sort_agg(bulk_scatter_aggregation(o.aggregation, rt.size(),
                                          o.keys_per_rank * (sizeof(std::uint64_t) + 2 * sizeof(std::uint64_t)))),
        agg(bulk_scatter_aggregation(o.aggregation, rt.size(), o.keys_per_rank * 2 * sizeof(std::uint64_t))),
        keys(rt, n, StorageOptions::heap()), shared_keys(rt, n, StorageOptions::shared()),
        // The Shared variant's permutation is Shared too: its last pass writes co-locales' part directly.
        heap_perm(keys.map(), StorageOptions::heap()), shared_perm(keys.map(), StorageOptions::shared()),
        gathered(heap_perm.local().size()), whole(n <= o.gather_limit) {
    for (std::uint64_t i = keys.local_begin(); i < keys.local_end(); ++i)
      keys.local()[i - keys.local_begin()] = shared_keys.local()[i - keys.local_begin()] = key_of(i);
    // The one-rank baseline sorts the whole array when it is small enough to
    // gather, else rank 0's part (the first keys: an argsort problem of its own).
    baseline_keys = whole ? gather_to_root<std::uint64_t>(rt.comm(), keys.local())
                          : (rt.rank() == 0 ? std::vector<std::uint64_t>(keys.local().begin(), keys.local().end())
                                            : std::vector<std::uint64_t>{});
    m = broadcast<std::uint64_t>(rt.comm(), baseline_keys.size(), 0);
  }
  Runtime& rt;
  const ArgsortBenchOptions& o;
  const std::uint64_t n;
  const KeyOf key_of;
  const AggregationOptions sort_agg, agg;
  DistArray<std::uint64_t> keys, shared_keys, heap_perm, shared_perm;
  DistArray<std::uint64_t>* perm = &heap_perm;  // the last one sorted, read by the gathers
  std::vector<std::uint64_t> gathered;
  const bool whole;
  std::vector<std::uint64_t> baseline_keys{};
  std::uint64_t m = 0;
  std::vector<std::pair<std::uint64_t, std::uint64_t>> pairs{};
  std::vector<std::uint64_t> baseline_perm{};
  ArgsortStats stats{};
};

std::vector<Variant> sort_variants(ArgsortRun& x) {
  auto sort_with = [&x](DistArray<std::uint64_t>& into, StorageOptions scratch, int direct) {
    return [&x, &into, scratch, direct] {
      x.perm = &into;
      x.stats = argsort(x.keys, into, {x.o.digit_bits, x.sort_agg.with_same_node_direct(direct), scratch});
    };
  };
  auto check_perm = verify_by([&x] { return check_argsort(x.rt, x.n, x.perm->local(), x.key_of); });
  auto digits = [&x] {
    return nlohmann::json{{"digits_sorted", x.stats.digits_sorted}, {"digits_skipped", x.stats.digits_skipped}};
  };
  const double all = static_cast<double>(x.n);
  return {{.variant = std::string("std::sort (key, index), 1 rank") + (x.whole ? "" : ", rank 0's part"),
           .storage = "-", .reps = std::min(x.o.reps, 3), .work = static_cast<double>(x.m),
           .prepare = [&x] {
             x.pairs.resize(x.baseline_keys.size());
             for (std::size_t i = 0; i < x.pairs.size(); ++i) x.pairs[i] = {x.baseline_keys[i], i};
           },
           .run = [&x] { std::sort(x.pairs.begin(), x.pairs.end()); },
           .verify = verify_by([&x] {
             x.baseline_perm.resize(x.pairs.size());
             for (std::size_t i = 0; i < x.pairs.size(); ++i) x.baseline_perm[i] = x.pairs[i].second;
             return check_argsort(x.rt, x.m, x.baseline_perm, x.key_of);
           }),
           .rank0_only = true},
          {.variant = "radix argsort", .storage = "heap", .reps = x.o.reps, .work = all,
           .run = sort_with(x.heap_perm, StorageOptions::heap(), 0), .verify = check_perm, .details = digits},
          {.variant = "radix argsort", .storage = "shared+direct", .reps = x.o.reps, .work = all,
           .run = sort_with(x.shared_perm, StorageOptions::shared(), 1), .verify = check_perm, .details = digits}};
}

std::vector<Variant> gather_variants(ArgsortRun& x) {
  auto check_gather = verify_by([&x] { return check_argsort(x.rt, x.n, x.perm->local(), x.key_of, x.gathered); });
  auto gather_from = [&x](DistArray<std::uint64_t>& from, int direct) {
    return [&x, &from, direct] {
      gather(from, x.perm->local(), std::span<std::uint64_t>(x.gathered), x.agg.with_same_node_direct(direct));
    };
  };
  auto zero = [&x] { std::fill(x.gathered.begin(), x.gathered.end(), 0); };
  const double all = static_cast<double>(x.n);
  return {{.group = "gather", .variant = "gather a[perm]", .storage = "heap", .reps = x.o.reps, .work = all,
           .prepare = zero, .run = gather_from(x.keys, 0), .verify = check_gather},
          {.group = "gather", .variant = "gather a[perm]", .storage = "shared+direct", .reps = x.o.reps, .work = all,
           .prepare = zero, .run = gather_from(x.shared_keys, 1), .verify = check_gather}};
}
}  // namespace

bool run_argsort_bench(Runtime& rt, const ArgsortBenchOptions& o) {
  if (o.key_bits < 1 || o.key_bits > 64)
    throw ConfigError("argsort: --key-bits " + std::to_string(o.key_bits) + " must be in 1..64");
  ArgsortRun x(rt, o);
  const std::string sort_agg = x.sort_agg.describe(rt.size()), agg = x.agg.describe(rt.size());
  nlohmann::json config{{"keys_per_rank", o.keys_per_rank}, {"total_keys", x.n}, {"key_bits", o.key_bits},
                        {"digit_bits", o.digit_bits},       {"baseline_keys", x.m}, {"reps", o.reps},
                        {"aggregation", agg},               {"sort_aggregation", sort_agg}};
  progress(rt, o.format,
           "argsort: " + std::to_string(x.n) + " keys in [0, 2^" + std::to_string(o.key_bits) + "), " +
               std::to_string(o.digit_bits) + "-bit digits; baseline std::sort of " + std::to_string(x.m) +
               " keys on rank 0; sort aggregation: " + sort_agg + "; gather aggregation: " + agg);
  Report report(rt, "argsort", config, o.format);
  report.set_baselines({"std::sort"});
  auto sorts = run_variants(rt, report, sort_variants(x), 1e6, "M keys/s");
  auto gathers = run_variants(rt, report, gather_variants(x), 1e6, "M elems/s");
  const double best = std::max(sorts[1].rate, sorts[2].rate);
  const double best_gather = std::max(gathers[0].rate, gathers[1].rate);
  // The configuration goes with the figures: check_targets.py states its targets for one.
  report.add_summary("argsort " + std::to_string(best) + " M keys/s, gather " + std::to_string(best_gather) +
                         " M elems/s",
                     {{"best_rate", best},
                      {"best_gather_rate", best_gather},
                      {"key_bits", o.key_bits},
                      {"keys_per_rank", o.keys_per_rank}});
  return report.print();
}

}  // namespace tessera::bench
