// The sorting benchmarks' problems, kernels and verifiers (ISx and argsort),
// public so that tests can run the kernels against a serial std::sort and
// feed the verifiers wrong answers. Every check is collective and returns the
// same Verdict on every rank.
#pragma once
#include <cstdint>
#include <functional>
#include <span>
#include <vector>

#include "tessera/bench/verifiers.hpp"
#include "tessera/comm/options.hpp"
#include "tessera/runtime/runtime.hpp"

namespace tessera::bench {

// --- ISx -------------------------------------------------------------------
// Rank r's keys: `count` values uniform in [0, max_key), from its own stream
// (seeded by rank only, as ISx's per-PE generator), so weak scaling adds ranks
// without changing any rank's input.
std::vector<std::uint32_t> isx_keys(int rank, std::uint64_t count, std::uint64_t max_key);

// Rank r's bucket is [r * width, (r + 1) * width), width = ceil(max_key / ranks).
// The sorts leave each rank's bucket, sorted, in `sorted`.
// ParRes ISx's shape: count per bucket, bucketize into a send buffer,
// MPI_Alltoall of counts, MPI_Alltoallv of keys, then count keys over the
// bucket's range (ISx's count_local_keys): `key_counts[k - r * width]`. Its
// timed region ends there, as ISx's does; isx_expand_counts writes the keys.
void isx_sort_alltoallv(Runtime& rt, std::span<const std::uint32_t> keys, std::uint64_t max_key,
                        std::vector<std::uint32_t>& key_counts);
std::vector<std::uint32_t> isx_expand_counts(Runtime& rt, std::span<const std::uint32_t> key_counts,
                                             std::uint64_t max_key);
// Bucketize + comm::exchange (one bulk all-to-all), then an LSD radix sort of
// the bucket. `scratch` (any content) is kept by the caller, so that repeated
// sorts reuse its pages.
void isx_sort_bulk(Runtime& rt, std::span<const std::uint32_t> keys, std::uint64_t max_key,
                   std::vector<std::uint32_t>& sorted, std::vector<std::uint32_t>& scratch);
// Keys streamed to their bucket's rank through the aggregation engine
// (comm::RecordExchange, 4-byte records, no count or bucketize pass), then
// an LSD radix sort of the bucket.
void isx_sort_aggregated(Runtime& rt, std::span<const std::uint32_t> keys, std::uint64_t max_key,
                         std::vector<std::uint32_t>& sorted, std::vector<std::uint32_t>& scratch,
                         const AggregationOptions& aggregation);

// Globally sorted (every rank ascending, each rank's keys no smaller than any
// key of an earlier rank), as many keys as the input and the same order-free
// checksum (a sum of a hash of every key, so a key replaced by another fails).
Verdict check_isx(Runtime& rt, std::span<const std::uint32_t> input, std::span<const std::uint32_t> sorted);

// --- Argsort ---------------------------------------------------------------
// The benchmark's keys, a closed form of the global index: uniform in
// [0, 2^key_bits) (Arkouda's benchmark: ak.randint(0, 2**32, N)).
std::uint64_t argsort_key(std::uint64_t index, int key_bits);

// `perm` (this rank's part; the parts in rank order make the whole) lists every
// index of [0, n) once, and key_of(perm[j]) ascends, ties by ascending index
// (the stable order), across rank boundaries too. When `gathered` is not
// empty it must hold key_of(perm[j]) (the gather a[perm]).
Verdict check_argsort(Runtime& rt, std::uint64_t n, std::span<const std::uint64_t> perm,
                      const std::function<std::uint64_t(std::uint64_t)>& key_of,
                      std::span<const std::uint64_t> gathered = {});

}  // namespace tessera::bench
