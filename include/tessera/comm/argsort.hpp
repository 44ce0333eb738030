// Distributed argsort of 64-bit keys: LSD radix sort after Arkouda's
// (Bears-R-Us/arkouda, src/RadixSortLSD.chpl; Merrill, "Arkouda: interactive
// data exploration backed by Chapel", CHIUW 2019, and the HPE notes
// "Aggregation in Arkouda"). Per digit, least significant first:
//   1. every rank counts the digit's values among its (key, index) pairs;
//   2. the counts are laid out bucket-major, rank-minor in a distributed array
//      (put there through an aggregator) and scanned globally (a local scan
//      plus runtime/collective.hpp's exclusive_prefix_sum): the scan at
//      (bucket, rank) is where that rank's first pair of that bucket goes;
//   3. every pair is written to its global position: this rank's at once,
//      co-locales' through the same-node mapping (Shared scratch), the rest as
//      (offset, pair) records through the aggregation engine (RecordExchange,
//      as a DstAggregator, without its division per element to find owners).
//      The first pass reads the keys; the last writes only indices, into perm.
// The sort is stable, so the permutation is unique: ties keep index order.
// Digits on which every key agrees (from a global AND/OR of the keys) are
// skipped, so keys of 32 significant bits take two 16-bit passes, not four.
#pragma once
#include <cstdint>

#include "tessera/array/dist_array.hpp"
#include "tessera/comm/options.hpp"

namespace tessera {

// Aggregation settings for a bulk scatter (every rank sends about
// `bytes_per_rank` in all, spread over the ranks), where buffers larger than
// the engine's defaults pay: fewer, larger messages and fewer waits for a
// peer to drain them when ranks share cores (measured on a loaded machine:
// argsort and ISx's key exchange ran faster with 1 MiB x 4 in flight than
// with 64 KiB x 1). Fields set in `given` or by the
// environment (TESSERA_AGG_BUFFER_BYTES, TESSERA_AGG_IN_FLIGHT) are kept; an
// unset in-flight count becomes 4 and an unset buffer the largest power of
// two in 16 KiB..1 MiB that keeps the send buffers within 64 MiB per rank
// (past about 800 ranks the 16 KiB floor exceeds that) and is not much above
// one destination's share of the data. Returns resolved options.
AggregationOptions bulk_scatter_aggregation(const AggregationOptions& given, int ranks, std::uint64_t bytes_per_rank);

struct ArgsortOptions {
  int digit_bits = 16;                // bits per radix pass, 1..20
  // Of the scatter of (key, index) pairs; unset fields as bulk_scatter_aggregation picks them.
  AggregationOptions aggregation{};
  StorageOptions scratch = StorageOptions::heap();  // the two (key, index) arrays
};

struct ArgsortStats {
  int digits_sorted = 0;   // radix passes run
  int digits_skipped = 0;  // passes skipped: every key agrees on that digit
};

// perm[j] = the global index of the j-th smallest key (ties by index), for a
// `perm` on the same Map as `keys`. Collective over the keys' runtime.
// Throws MismatchError when perm's Map differs, ConfigError for a digit width
// outside 1..20.
ArgsortStats argsort(const DistArray<std::uint64_t>& keys, DistArray<std::uint64_t>& perm,
                     const ArgsortOptions& options = {});

// The same, into a new array on the keys' Map (Heap storage).
DistArray<std::uint64_t> argsort(const DistArray<std::uint64_t>& keys, const ArgsortOptions& options = {});

}  // namespace tessera
