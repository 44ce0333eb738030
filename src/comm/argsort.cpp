// LSD radix argsort after Arkouda's RadixSortLSD (see argsort.hpp for the
// algorithm and its sources).
#include "tessera/comm/argsort.hpp"

#include <string>
#include <utility>
#include <vector>

#include "tessera/comm/aggregators.hpp"
#include "tessera/comm/bulk_access.hpp"
#include "tessera/runtime/collective.hpp"
#include "tessera/runtime/error.hpp"

namespace tessera {

namespace {

struct KeyIndex {
  std::uint64_t key;
  std::uint64_t index;
};

// Where each rank's first pair of each bucket goes, Arkouda's way: the
// per-rank counts sit bucket-major, rank-minor in a distributed array
// (positions b * ranks + rank), whose global exclusive scan is the answer.
// On return counts_to_positions[b] holds this rank's first position of bucket b.
void global_positions(DistArray<std::uint64_t>& layout, std::span<const std::uint64_t> slots,
                      std::vector<std::uint64_t>& counts_to_positions, const AggregationOptions& aggregation) {
  scatter(layout, slots, std::span<const std::uint64_t>(counts_to_positions), aggregation);
  std::uint64_t running = 0;
  for (std::uint64_t& c : layout.local()) running += std::exchange(c, running);
  const std::uint64_t before = exclusive_prefix_sum(layout.runtime().comm(), running);
  for (std::uint64_t& c : layout.local()) c += before;
  gather(layout, slots, std::span<std::uint64_t>(counts_to_positions), aggregation);
}

}  // namespace

ArgsortStats argsort(const DistArray<std::uint64_t>& keys, DistArray<std::uint64_t>& perm,
                     const ArgsortOptions& options) {
  if (!(perm.map() == keys.map()))
    throw MismatchError("argsort: the permutation array must lie on the keys' Map (same runtime, same split)");
  if (options.digit_bits < 1 || options.digit_bits > 20)
    throw ConfigError("argsort: digit width " + std::to_string(options.digit_bits) + " bits is outside 1..20");
  Runtime& rt = keys.runtime();
  MPI_Comm comm = rt.comm();
  const AggregationOptions aggregation = options.aggregation.resolved();
  const auto ranks = static_cast<std::uint64_t>(rt.size());
  const int bits = options.digit_bits;
  const std::uint64_t buckets = std::uint64_t{1} << bits, digit_mask = buckets - 1;

  // Bits on which some keys differ: the other digits need no pass.
  std::uint64_t any = 0, every = ~std::uint64_t{0};
  for (std::uint64_t k : keys.local()) any |= k, every &= k;
  const std::uint64_t varying = all_reduce(comm, any, MPI_BOR) ^ all_reduce(comm, every, MPI_BAND);

  DistArray<KeyIndex> from(keys.map(), options.scratch), to(keys.map(), options.scratch);
  {
    auto in = keys.local();
    auto out = from.local();
    for (std::size_t k = 0; k < in.size(); ++k) out[k] = {in[k], keys.local_begin() + k};
  }
  DistArray<std::uint64_t> layout(rt, buckets * ranks);
  std::vector<std::uint64_t> slots(buckets);
  for (std::uint64_t b = 0; b < buckets; ++b) slots[b] = b * ranks + static_cast<std::uint64_t>(rt.rank());

  ArgsortStats stats;
  std::vector<std::uint64_t> position(buckets);
  for (int shift = 0; shift < 64; shift += bits) {
    if (((varying >> shift) & digit_mask) == 0) {
      ++stats.digits_skipped;
      continue;
    }
    std::fill(position.begin(), position.end(), 0);
    for (const KeyIndex& e : from.local()) ++position[(e.key >> shift) & digit_mask];
    global_positions(layout, slots, position, aggregation);
    {
      DstAggregator<KeyIndex> put(to, aggregation);
      for (const KeyIndex& e : from.local()) put.put(position[(e.key >> shift) & digit_mask]++, e);
    }  // the scope end flushes: every pair is in place on every rank
    std::swap(from, to);
    ++stats.digits_sorted;
  }
  auto sorted = from.local();
  auto out = perm.local();
  for (std::size_t k = 0; k < sorted.size(); ++k) out[k] = sorted[k].index;
  return stats;
}

DistArray<std::uint64_t> argsort(const DistArray<std::uint64_t>& keys, const ArgsortOptions& options) {
  DistArray<std::uint64_t> perm(keys.map());
  argsort(keys, perm, options);
  return perm;
}

}  // namespace tessera
