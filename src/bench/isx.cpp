// ISx, the scalable integer sort (Hanebutte and Hemstad, "ISx: A Scalable
// Integer Sort for Co-design in the Exascale Era", PGAS 2015; the ParRes
// reference, github.com/ParRes/ISx): every rank holds uniform keys in
// [0, max_key); rank r owns the bucket [r * width, (r + 1) * width). Keys go
// to their bucket's rank, which sorts them locally. Weak scaling by default.
// Variants, all on the same keys in one run:
//   - ParRes ISx's shape (the baseline): count per bucket, bucketize,
//     MPI_Alltoall of counts + MPI_Alltoallv of keys, counting over the
//     bucket's range (ISx's count_local_keys; its timed region ends there);
//   - bucketize + comm::exchange (the same bulk all-to-all), LSD radix sort;
//   - aggregated: keys streamed through the aggregation engine
//     (comm::RecordExchange, 4-byte records: no counting or bucketizing pass,
//     communication overlapped with reading the keys), LSD radix sort.
// Verifier (check_isx): globally sorted across ranks, key count and an
// order-free checksum of the keys preserved.
// ParRes ISx itself: `scripts/peers.py isx DIR` runs a built ISx tree beside
// this benchmark at the same sizes and prints the ratio of that one run.
#include <algorithm>
#include <bit>
#include <climits>
#include <cstring>
#include <numeric>
#include <utility>

#include "random_indices.hpp"
#include "tessera/bench/benchmarks.hpp"
#include "tessera/bench/report.hpp"
#include "tessera/bench/sort.hpp"
#include "tessera/comm/argsort.hpp"
#include "tessera/comm/bulk_exchange.hpp"
#include "tessera/comm/record_exchange.hpp"
#include "tessera/runtime/collective.hpp"
#include "tessera/runtime/error.hpp"
#include "tessera/runtime/splitmix64.hpp"
#include "tessera/runtime/wait.hpp"

namespace tessera::bench {

namespace {
constexpr std::uint64_t kSalt = 0x15c;

std::uint64_t bucket_width(std::uint64_t max_key, int ranks) {
  return (max_key + static_cast<std::uint64_t>(ranks) - 1) / static_cast<std::uint64_t>(ranks);
}
// This rank's bucket [lo, hi), clamped to [0, max_key).
std::pair<std::uint64_t, std::uint64_t> bucket_of(Runtime& rt, std::uint64_t max_key) {
  std::uint64_t w = bucket_width(max_key, rt.size());
  std::uint64_t lo = std::min(max_key, w * static_cast<std::uint64_t>(rt.rank()));
  return {lo, std::min(max_key, lo + w)};
}

// Radix sort of keys in [lo, lo + range): one MSD pass by the top digit
// (up to 9 bits: 512 write streams) from `keys` into `other`, then each
// bucket, a few thousand keys that stay in cache, LSD-sorted on the low bits
// (digits of at most 11 bits) back into `keys`: less CPU, measured on 2^24
// keys of 27 bits, than three LSD passes over the whole array.
// `other` is scratch of any content, kept by the caller so that
// repeated sorts reuse its pages instead of faulting in fresh ones.
void radix_sort_range(std::vector<std::uint32_t>& keys, std::uint32_t lo, std::uint64_t range,
                      std::vector<std::uint32_t>& other) {
  if (keys.size() < 2 || range < 2) return;
  const int bits = std::bit_width(range - 1);
  const int top = std::min(bits, 9), low = bits - top;
  const std::size_t top_buckets = std::size_t{1} << top;
  std::vector<std::size_t> start(top_buckets + 1, 0);
  for (std::uint32_t k : keys) ++start[((k - lo) >> low) + 1];
  std::inclusive_scan(start.begin(), start.end(), start.begin());
  other.resize(keys.size());
  {
    std::vector<std::size_t> fill(start.begin(), start.end() - 1);
    for (std::uint32_t k : keys) other[fill[(k - lo) >> low]++] = k;
  }
  if (low == 0) {
    keys.swap(other);
    return;
  }
  const int passes = (low + 10) / 11, digit = (low + passes - 1) / passes;
  const std::uint32_t mask = (std::uint32_t{1} << digit) - 1;
  std::vector<std::size_t> counts(std::size_t{1} << digit);
  for (std::size_t b = 0; b < top_buckets; ++b) {
    const std::size_t n = start[b + 1] - start[b];
    std::uint32_t* src = other.data() + start[b];
    std::uint32_t* dst = keys.data() + start[b];
    for (int p = 0; p < passes; ++p) {
      const int shift = p * digit;
      std::fill(counts.begin(), counts.end(), 0);
      for (std::size_t i = 0; i < n; ++i) ++counts[((src[i] - lo) >> shift) & mask];
      std::exclusive_scan(counts.begin(), counts.end(), counts.begin(), std::size_t{0});
      for (std::size_t i = 0; i < n; ++i) dst[counts[((src[i] - lo) >> shift) & mask]++] = src[i];
      std::swap(src, dst);
    }
    if (passes % 2 == 0) std::copy(src, src + n, keys.data() + start[b]);  // ended in `other`
  }
}

// key / width without a division instruction (Lemire, Kaser and Kurz,
// "Faster remainder by direct computation", 2019): exact for 32-bit keys.
struct BucketOf {
  std::uint64_t width, inverse;
  explicit BucketOf(std::uint64_t w) : width(w), inverse(w > 1 ? ~std::uint64_t{0} / w + 1 : 0) {}
  std::uint32_t operator()(std::uint32_t key) const {
    return width > 1 ? static_cast<std::uint32_t>((static_cast<unsigned __int128>(inverse) * key) >> 64) : key;
  }
};

struct Bucketed {
  std::vector<std::uint32_t> keys;    // grouped by destination rank
  std::vector<std::uint64_t> counts;  // per destination rank
};
// ISx's count_local_bucket_sizes, compute_send_offsets, bucketize_local_keys.
void bucketize(std::span<const std::uint32_t> keys, std::uint64_t width, int ranks, Bucketed& b) {
  const BucketOf bucket_of_key(width);
  b.counts.assign(static_cast<std::size_t>(ranks), 0);
  for (std::uint32_t k : keys) ++b.counts[bucket_of_key(k)];
  std::vector<std::uint64_t> fill(b.counts.size());
  std::exclusive_scan(b.counts.begin(), b.counts.end(), fill.begin(), std::uint64_t{0});
  b.keys.resize(keys.size());
  for (std::uint32_t k : keys) b.keys[fill[bucket_of_key(k)]++] = k;
}

std::uint64_t key_hash(std::uint32_t key) {
  std::uint64_t s = key;
  return splitmix64(s);
}

int checked_int(std::uint64_t n) {
  if (n > static_cast<std::uint64_t>(INT_MAX))
    throw ConfigError("isx: " + std::to_string(n) + " keys exceed MPI's int count; use fewer keys per rank");
  return static_cast<int>(n);
}
}  // namespace

std::vector<std::uint32_t> isx_keys(int rank, std::uint64_t count, std::uint64_t max_key) {
  std::uint64_t state = stream_seed(rank, kSalt);
  std::vector<std::uint32_t> out(count);
  for (auto& k : out)
    k = static_cast<std::uint32_t>((static_cast<unsigned __int128>(splitmix64(state)) * max_key) >> 64);
  return out;
}

void isx_sort_alltoallv(Runtime& rt, std::span<const std::uint32_t> keys, std::uint64_t max_key,
                        std::vector<std::uint32_t>& key_counts) {
  const auto P = static_cast<std::size_t>(rt.size());
  Bucketed b;
  bucketize(keys, bucket_width(max_key, rt.size()), rt.size(), b);
  std::vector<int> send_counts(P), send_displs(P), recv_counts(P), recv_displs(P);
  for (std::size_t r = 0; r < P; ++r) send_counts[r] = checked_int(b.counts[r]);
  std::exclusive_scan(send_counts.begin(), send_counts.end(), send_displs.begin(), 0);
  MPI_Request req;
  TESSERA_MPI(MPI_Ialltoall(send_counts.data(), 1, MPI_INT, recv_counts.data(), 1, MPI_INT, rt.comm(), &req));
  wait(req);
  std::uint64_t received = 0;
  for (std::size_t r = 0; r < P; ++r) recv_displs[r] = checked_int(received), received += static_cast<std::uint64_t>(recv_counts[r]);
  std::vector<std::uint32_t> mine(checked_int(received));
  TESSERA_MPI(MPI_Ialltoallv(b.keys.data(), send_counts.data(), send_displs.data(), MPI_UINT32_T, mine.data(),
                             recv_counts.data(), recv_displs.data(), MPI_UINT32_T, rt.comm(), &req));
  wait(req);
  auto [lo, hi] = bucket_of(rt, max_key);
  key_counts.assign(hi - lo, 0);  // ISx callocs it in its timed region too
  for (std::uint32_t k : mine) ++key_counts[k - lo];
}

std::vector<std::uint32_t> isx_expand_counts(Runtime& rt, std::span<const std::uint32_t> key_counts,
                                             std::uint64_t max_key) {
  auto lo = bucket_of(rt, max_key).first;
  std::vector<std::uint32_t> out;
  out.reserve(std::accumulate(key_counts.begin(), key_counts.end(), std::size_t{0}));
  for (std::size_t i = 0; i < key_counts.size(); ++i) out.insert(out.end(), key_counts[i], static_cast<std::uint32_t>(lo + i));
  return out;
}

void isx_sort_bulk(Runtime& rt, std::span<const std::uint32_t> keys, std::uint64_t max_key,
                   std::vector<std::uint32_t>& sorted, std::vector<std::uint32_t>& scratch) {
  Bucketed b{std::move(scratch), {}};
  bucketize(keys, bucket_width(max_key, rt.size()), rt.size(), b);
  std::vector<std::uint64_t> received;
  sorted = comm::exchange<std::uint32_t>(rt.comm(), b.keys, b.counts, received);
  scratch = std::move(b.keys);
  auto [lo, hi] = bucket_of(rt, max_key);
  radix_sort_range(sorted, static_cast<std::uint32_t>(lo), hi - lo, scratch);
}

void isx_sort_aggregated(Runtime& rt, std::span<const std::uint32_t> keys, std::uint64_t max_key,
                         std::vector<std::uint32_t>& sorted, std::vector<std::uint32_t>& scratch,
                         const AggregationOptions& aggregation) {
  const BucketOf bucket_of_key(bucket_width(max_key, rt.size()));
  const int me = rt.rank();
  sorted.clear();
  sorted.reserve(keys.size() + keys.size() / 8 + 4096);  // uniform keys: about one rank's share each
  {
    comm::RecordExchange exchange(rt, {sizeof(std::uint32_t), 0, 0}, aggregation,
                                  [&sorted](int, const std::byte* records, std::size_t n, std::byte*) {
                                    std::size_t at = sorted.size();
                                    sorted.resize(at + n);
                                    std::memcpy(sorted.data() + at, records, n * sizeof(std::uint32_t));
                                  });
    for (std::uint32_t k : keys) {
      int dest = static_cast<int>(bucket_of_key(k));
      if (dest == me)
        sorted.push_back(k);
      else
        std::memcpy(exchange.push(dest), &k, sizeof k);
    }
  }  // the scope end flushes: every key has reached its bucket
  auto [lo, hi] = bucket_of(rt, max_key);
  radix_sort_range(sorted, static_cast<std::uint32_t>(lo), hi - lo, scratch);
}

Verdict check_isx(Runtime& rt, std::span<const std::uint32_t> input, std::span<const std::uint32_t> sorted) {
  // totals: input count, output count, input checksum, output checksum, unsorted pairs
  std::uint64_t totals[5] = {input.size(), sorted.size(), 0, 0, 0};
  for (std::uint32_t k : input) totals[2] += key_hash(k);
  for (std::uint32_t k : sorted) totals[3] += key_hash(k);
  for (std::size_t i = 1; i < sorted.size(); ++i) totals[4] += sorted[i] < sorted[i - 1];
  all_reduce(rt.comm(), totals, 5, MPI_SUM);  // sums wrap modulo 2^64 on every rank alike
  struct Ends {
    std::uint64_t count;
    std::uint32_t first, last;
  };
  Ends mine{sorted.size(), sorted.empty() ? 0 : sorted.front(), sorted.empty() ? 0 : sorted.back()};
  std::uint64_t across = 0;
  bool seen = false;
  std::uint32_t previous = 0;
  for (const Ends& e : all_gather(rt.comm(), mine)) {
    if (e.count == 0) continue;
    across += seen && e.first < previous;
    seen = true;
    previous = e.last;
  }
  bool ok = totals[0] == totals[1] && totals[2] == totals[3] && totals[4] == 0 && across == 0;
  return {ok, std::to_string(totals[1]) + " of " + std::to_string(totals[0]) + " keys, checksum " +
                  (totals[2] == totals[3] ? "kept" : "changed") + ", " + std::to_string(totals[4]) +
                  " pairs out of order within ranks, " + std::to_string(across) + " across rank boundaries"};
}

bool run_isx(Runtime& rt, const IsxOptions& o) {
  if (o.max_key < 1 || o.max_key > (std::uint64_t{1} << 32))
    throw ConfigError("isx: --max-key " + std::to_string(o.max_key) + " must be in [1, 2^32] (32-bit keys)");
  const auto ranks = static_cast<std::uint64_t>(rt.size()), me = static_cast<std::uint64_t>(rt.rank());
  const bool weak = o.total_keys == 0;
  const std::uint64_t mine = weak ? o.keys_per_rank : o.total_keys / ranks + (me < o.total_keys % ranks);
  const std::uint64_t total = weak ? o.keys_per_rank * ranks : o.total_keys;
  auto keys = isx_keys(rt.rank(), mine, o.max_key);
  // The key exchange is a bulk scatter: larger buffers than the engine's defaults unless set.
  AggregationOptions agg = bulk_scatter_aggregation(o.aggregation, rt.size(), mine * sizeof(std::uint32_t));
  nlohmann::json config{{"scaling", weak ? "weak" : "strong"}, {"keys_per_rank", weak ? o.keys_per_rank : total / ranks},
                        {"total_keys", total}, {"max_key", o.max_key}, {"reps", o.reps},
                        {"aggregation", agg.describe(rt.size())}};
  progress(rt, o.format,
           "isx: " + std::to_string(total) + " keys in [0, " + std::to_string(o.max_key) + "), " +
               (weak ? "weak" : "strong") + " scaling; aggregation: " + agg.describe(rt.size()));
  Report report(rt, "isx", config, o.format);
  report.set_baselines({"alltoallv"});

  std::vector<std::uint32_t> key_counts, sorted, scratch;
  auto check_sorted = verify_by([&] { return check_isx(rt, keys, sorted); });
  const double work = static_cast<double>(total);
  auto rows = run_variants(
      rt, report,
      {{.variant = "alltoallv (ParRes ISx shape)", .storage = "heap", .reps = o.reps, .work = work,
        .run = [&] { isx_sort_alltoallv(rt, keys, o.max_key, key_counts); },
        .verify = verify_by([&] {
          auto expanded = isx_expand_counts(rt, key_counts, o.max_key);
          key_counts = {};
          return check_isx(rt, keys, expanded);
        })},
       {.variant = "bulk exchange + radix", .storage = "heap", .reps = o.reps, .work = work,
        .run = [&] { isx_sort_bulk(rt, keys, o.max_key, sorted, scratch); }, .verify = check_sorted},
       {.variant = "aggregated + radix", .storage = "heap", .reps = o.reps, .work = work,
        .run = [&] { isx_sort_aggregated(rt, keys, o.max_key, sorted, scratch, agg); }, .verify = check_sorted}},
      1e6, "M keys/s");
  const double best = std::max(rows[1].rate, rows[2].rate);
  // The configuration goes with the figures: check_targets.py states its
  // targets for one configuration, and scripts/peers.py runs ParRes ISx at it.
  nlohmann::json figures{{"best_rate", best},          {"baseline_ratio", best / rows[0].rate},
                         {"scaling", config["scaling"]}, {"keys_per_rank", config["keys_per_rank"]},
                         {"max_key", o.max_key}};
  std::string text = "best Tessera variant " + std::to_string(best) + " M keys/s = " +
                     std::to_string(best / rows[0].rate) + "x the ISx-shaped baseline of this run";
  report.add_summary(text, figures);
  return report.print();
}

}  // namespace tessera::bench
