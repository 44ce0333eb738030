// LSD radix argsort after Arkouda's RadixSortLSD (see argsort.hpp for the
// algorithm and its sources).
#include "tessera/comm/argsort.hpp"

#include <sys/mman.h>

#include <cstdint>
#include <cstring>
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

// One radix pass's scatter: every pair to its global position. This rank's
// positions are stored at once, co-located ranks' through the same-node
// mapping (Shared scratch), the others' as (offset, key, index) records
// through the aggregation engine. A DstAggregator would do the same, but
// finds each position's owner by a division; here only the pairs that
// leave the rank pay for it.
class PairScatter {
 public:
  PairScatter(DistArray<KeyIndex>& a, DistArray<KeyIndex>& b, const AggregationOptions& aggregation)
      : arrays_{&a, &b},
        exchange_(a.runtime().comm(), {kRecordBytes, 0, 0}, aggregation,
                  [this](int, const std::byte* records, std::size_t n, std::byte*) { store(records, n); }),
        direct_{detail::direct_targets(a, exchange_.options().same_node_direct),
                detail::direct_targets(b, exchange_.options().same_node_direct)},
        begin_(a.local_begin()),
        count_(a.local().size()) {}

  // Scatters `from`'s pairs into the other array (collective); position[d]
  // is this rank's first position for digit value d.
  template <class DigitOf>
  void pass(int from, std::vector<std::uint64_t>& position, DigitOf digit_of) {
    to_ = 1 - from;
    DistArray<KeyIndex>& target = *arrays_[to_];
    KeyIndex* local = target.local().data();
    const std::vector<KeyIndex*>& direct = direct_[to_];
    const Distribution& dist = target.distribution();
    for (const KeyIndex& e : arrays_[from]->local()) {
      const std::uint64_t at = position[digit_of(e.key)]++;
      if (at - begin_ < count_) {  // unsigned: also false below begin_
        local[at - begin_] = e;
        continue;
      }
      const int owner = dist.owner(at);
      const std::uint64_t offset = dist.local_offset(at, owner);
      if (KeyIndex* colocal = direct[static_cast<std::size_t>(owner)]) {
        colocal[offset] = e;
      } else {
        std::byte* record = exchange_.push(owner);
        std::memcpy(record, &offset, sizeof offset);
        std::memcpy(record + sizeof offset, &e, sizeof e);
      }
    }
    exchange_.flush();  // every pair is in place on every rank
  }

 private:
  static constexpr std::size_t kRecordBytes = sizeof(std::uint64_t) + sizeof(KeyIndex);
  void store(const std::byte* records, std::size_t n) {
    KeyIndex* local = arrays_[to_]->local().data();
    for (std::size_t k = 0; k < n; ++k, records += kRecordBytes) {
      std::uint64_t offset;
      std::memcpy(&offset, records, sizeof offset);
      std::memcpy(local + offset, records + sizeof offset, sizeof(KeyIndex));
    }
  }

  DistArray<KeyIndex>* arrays_[2];
  int to_ = 1;
  comm::RecordExchange exchange_;
  std::vector<KeyIndex*> direct_[2];
  std::uint64_t begin_, count_;
};

// Asks for transparent huge pages under a Heap array's part (before its first
// touch): a 16-bit digit scatters to 65,536 places at once, spread over the
// whole array, so with 4 KiB pages most stores need a page walk. A hint,
// ignored where THP is off; measured here: about 5% off the argsort's time.
template <class T>
void prefer_huge_pages(DistArray<T>& array) {
  if (array.storage_kind() != StorageKind::heap) return;
  constexpr std::uintptr_t kHuge = std::uintptr_t{2} << 20;
  auto bytes = std::as_writable_bytes(array.local());
  auto begin = (reinterpret_cast<std::uintptr_t>(bytes.data()) + kHuge - 1) & ~(kHuge - 1);
  auto end = (reinterpret_cast<std::uintptr_t>(bytes.data()) + bytes.size()) & ~(kHuge - 1);
  if (end > begin) ::madvise(reinterpret_cast<void*>(begin), end - begin, MADV_HUGEPAGE);
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

  DistArray<KeyIndex> first(keys.map(), options.scratch), second(keys.map(), options.scratch);
  prefer_huge_pages(first);
  prefer_huge_pages(second);
  {
    auto in = keys.local();
    auto out = first.local();
    for (std::size_t k = 0; k < in.size(); ++k) out[k] = {in[k], keys.local_begin() + k};
  }
  DistArray<std::uint64_t> layout(rt, buckets * ranks);
  std::vector<std::uint64_t> slots(buckets);
  for (std::uint64_t b = 0; b < buckets; ++b) slots[b] = b * ranks + static_cast<std::uint64_t>(rt.rank());

  ArgsortStats stats;
  PairScatter scatter_pairs(first, second, aggregation);
  DistArray<KeyIndex>* arrays[2] = {&first, &second};
  int from = 0;
  std::vector<std::uint64_t> position(buckets);
  for (int shift = 0; shift < 64; shift += bits) {
    if (((varying >> shift) & digit_mask) == 0) {
      ++stats.digits_skipped;
      continue;
    }
    auto digit_of = [shift, digit_mask](std::uint64_t key) { return (key >> shift) & digit_mask; };
    std::fill(position.begin(), position.end(), 0);
    for (const KeyIndex& e : arrays[from]->local()) ++position[digit_of(e.key)];
    global_positions(layout, slots, position, aggregation);
    scatter_pairs.pass(from, position, digit_of);
    from = 1 - from;
    ++stats.digits_sorted;
  }
  auto sorted = arrays[from]->local();
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
