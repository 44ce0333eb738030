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

struct ArgsortOptions {
  int digit_bits = 16;                // bits per radix pass, 1..20
  AggregationOptions aggregation{};   // of the scatter of (key, index) pairs
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
