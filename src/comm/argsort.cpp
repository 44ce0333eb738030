// LSD radix argsort after Arkouda's RadixSortLSD (see argsort.hpp for the
// algorithm and its sources).
#include "tessera/comm/argsort.hpp"

#include <algorithm>
#include <bit>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "tessera/comm/aggregators.hpp"
#include "tessera/comm/bulk_access.hpp"
#include "tessera/runtime/collective.hpp"
#include "tessera/runtime/error.hpp"
#include "tessera/runtime/trace.hpp"

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

// One radix pass: element k of this rank's source goes to the global position
// position[digit_of(k)]++ of `target`, as value_of(k). This rank's positions
// are stored at once, co-located ranks' through the same-node mapping
// (Shared targets), the others' as (offset, value) records through the
// aggregation engine. A DstAggregator would do the same, but finds every
// position's owner by a division; here only the values that leave pay it.
// Collective; the scope end of the exchange flushes it.
template <class T, class DigitOf, class ValueOf>
void scatter_pass(DistArray<T>& target, std::size_t count, std::vector<std::uint64_t>& position, DigitOf digit_of,
                  ValueOf value_of, const AggregationOptions& aggregation) {
  constexpr std::size_t kRecordBytes = sizeof(std::uint64_t) + sizeof(T);
  T* local = target.local().data();
  comm::RecordExchange exchange(target.runtime(), {kRecordBytes, 0, 0}, aggregation,
                                [local](int, const std::byte* records, std::size_t n, std::byte*) {
                                  for (std::size_t k = 0; k < n; ++k, records += kRecordBytes) {
                                    std::uint64_t offset;
                                    std::memcpy(&offset, records, sizeof offset);
                                    std::memcpy(local + offset, records + sizeof offset, sizeof(T));
                                  }
                                });
  const std::vector<T*> direct = detail::direct_targets(target, exchange.options().same_node_direct);
  const Distribution& dist = target.distribution();
  const std::uint64_t begin = target.local_begin(), mine = target.local().size();
  for (std::size_t k = 0; k < count; ++k) {
    const std::uint64_t at = position[digit_of(k)]++;
    const T value = value_of(k);
    if (at - begin < mine) {  // unsigned: also false below begin
      local[at - begin] = value;
      continue;
    }
    const int owner = dist.owner(at);
    const std::uint64_t offset = dist.local_offset(at, owner);
    if (T* colocal = direct[static_cast<std::size_t>(owner)]) {
      colocal[offset] = value;
    } else {
      std::byte* record = exchange.push(owner);
      std::memcpy(record, &offset, sizeof offset);
      std::memcpy(record + sizeof offset, &value, sizeof(T));
    }
  }
}

}  // namespace

AggregationOptions bulk_scatter_aggregation(const AggregationOptions& given, int ranks, std::uint64_t bytes_per_rank) {
  AggregationOptions o = given;
  auto unset_in_environment = [](const char* name) {
    const char* v = std::getenv(name);
    return v == nullptr || *v == '\0';
  };
  if (o.max_in_flight == 0 && unset_in_environment("TESSERA_AGG_IN_FLIGHT")) o.max_in_flight = 4;
  if (o.buffer_bytes == 0 && unset_in_environment("TESSERA_AGG_BUFFER_BYTES")) {
    constexpr std::uint64_t kBudget = std::uint64_t{64} << 20, kMin = 16 << 10, kMax = 1 << 20;
    const auto P = static_cast<std::uint64_t>(std::max(1, ranks));
    const int in_flight = o.max_in_flight > 0 ? o.max_in_flight : AggregationOptions{}.resolved().max_in_flight;
    std::uint64_t bytes = kBudget / (P * static_cast<std::uint64_t>(1 + in_flight));
    bytes = std::min(bytes, std::max<std::uint64_t>(kDefaultAggBufferBytes, bytes_per_rank / P));
    o.buffer_bytes = static_cast<std::size_t>(std::bit_floor(std::clamp(bytes, kMin, kMax)));
  }
  return o.resolved();
}

namespace {

void check_arguments(const DistArray<std::uint64_t>& keys, const DistArray<std::uint64_t>& perm,
                     const ArgsortOptions& options) {
  if (!(perm.map() == keys.map()))
    throw MismatchError("argsort: the permutation array must lie on the keys' Map (same runtime, same split)");
  if (static_cast<const void*>(&perm) == static_cast<const void*>(&keys))
    throw MismatchError("argsort: the permutation must go to another array than the keys");
  if (options.digit_bits < 1 || options.digit_bits > 20)
    throw ConfigError("argsort: digit width " + std::to_string(options.digit_bits) + " bits is outside 1..20");
}

// The shifts of the digits on which some keys (of any rank) differ: the
// other digits need no pass. Collective.
std::vector<int> digits_to_sort(MPI_Comm comm, std::span<const std::uint64_t> in, int bits, ArgsortStats& stats) {
  const std::uint64_t digit_mask = (std::uint64_t{1} << bits) - 1;
  std::uint64_t any = 0, every = ~std::uint64_t{0};
  for (std::uint64_t k : in) any |= k, every &= k;
  const std::uint64_t varying = all_reduce(comm, any, MPI_BOR) ^ all_reduce(comm, every, MPI_BAND);
  std::vector<int> shifts;
  for (int shift = 0; shift < 64; shift += bits) {
    if (((varying >> shift) & digit_mask) == 0)
      ++stats.digits_skipped;
    else
      shifts.push_back(shift);
  }
  stats.digits_sorted = static_cast<int>(shifts.size());
  return shifts;
}

}  // namespace

ArgsortStats argsort(const DistArray<std::uint64_t>& keys, DistArray<std::uint64_t>& perm,
                     const ArgsortOptions& options) {
  check_arguments(keys, perm, options);
  Runtime& rt = keys.runtime();
  const AggregationOptions aggregation = bulk_scatter_aggregation(
      options.aggregation, rt.size(), keys.local().size() * (sizeof(std::uint64_t) + sizeof(KeyIndex)));
  const auto ranks = static_cast<std::uint64_t>(rt.size());
  const int bits = options.digit_bits;
  const std::uint64_t buckets = std::uint64_t{1} << bits, digit_mask = buckets - 1;
  const std::span<const std::uint64_t> in = keys.local();
  const std::uint64_t first_index = keys.local_begin();
  ArgsortStats stats;
  const std::vector<int> shifts = digits_to_sort(rt.comm(), in, bits, stats);
  if (shifts.empty()) {  // every key equal: the identity
    for (std::size_t k = 0; k < in.size(); ++k) perm.local()[k] = first_index + k;
    return stats;
  }

  std::vector<std::uint64_t> position(buckets);
  DistArray<std::uint64_t> layout(rt, buckets * ranks);
  std::vector<std::uint64_t> slots(buckets);
  for (std::uint64_t b = 0; b < buckets; ++b) slots[b] = b * ranks + static_cast<std::uint64_t>(rt.rank());

  // Pairs travel between two scratch arrays; the first pass reads the keys
  // themselves and the last writes only the indices, straight into perm (so
  // two digits need one scratch array, and no pass copies in or out).
  std::optional<DistArray<KeyIndex>> scratch[2];
  auto pairs = [&](int which) -> DistArray<KeyIndex>& {
    if (!scratch[which]) {
      scratch[which].emplace(keys.map(), options.scratch);
      // A 16-bit digit scatters to 65,536 places at once, spread over the
      // whole array: with 4 KiB pages most stores need a page walk (Heap
      // scratch with huge pages sorts faster than Shared, at 1 rank).
      scratch[which]->prefer_huge_pages();
    }
    return *scratch[which];
  };
  const std::size_t n = in.size();
  int from = -1;  // -1: the keys
  for (std::size_t d = 0; d < shifts.size(); ++d) {
    trace::Span traced(trace::Category::round, "argsort pass");
    traced.arg("digit", d + 1).arg("shift", shifts[d]);
    const int shift = shifts[d];
    const bool last = d + 1 == shifts.size();
    // This rank's counts of the digit among the pairs it holds now (pairs
    // move between ranks, so only the global counts stay fixed).
    std::fill(position.begin(), position.end(), 0);
    if (from < 0)
      for (std::uint64_t k : in) ++position[(k >> shift) & digit_mask];
    else
      for (const KeyIndex& e : pairs(from).local()) ++position[(e.key >> shift) & digit_mask];
    global_positions(layout, slots, position, aggregation);
    if (from < 0) {
      auto digit_of = [in, shift, digit_mask](std::size_t k) { return (in[k] >> shift) & digit_mask; };
      if (last)
        scatter_pass(perm, n, position, digit_of, [first_index](std::size_t k) { return first_index + k; },
                     aggregation);
      else
        scatter_pass(pairs(0), n, position, digit_of,
                     [in, first_index](std::size_t k) { return KeyIndex{in[k], first_index + k}; }, aggregation);
    } else {
      const KeyIndex* src = pairs(from).local().data();
      auto digit_of = [src, shift, digit_mask](std::size_t k) { return (src[k].key >> shift) & digit_mask; };
      if (last)
        scatter_pass(perm, n, position, digit_of, [src](std::size_t k) { return src[k].index; }, aggregation);
      else
        scatter_pass(pairs(1 - from), n, position, digit_of, [src](std::size_t k) { return src[k]; },
                     aggregation);
    }
    from = from < 0 ? 0 : 1 - from;
  }
  return stats;
}

DistArray<std::uint64_t> argsort(const DistArray<std::uint64_t>& keys, const ArgsortOptions& options) {
  DistArray<std::uint64_t> perm(keys.map());
  argsort(keys, perm, options);
  return perm;
}

}  // namespace tessera
