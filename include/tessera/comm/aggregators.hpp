// Copy aggregators over a DistArray (after Arkouda's SrcAggregator and
// DstAggregator), an update aggregator with a reduction, a counting
// aggregator (the update +1 with the offset alone on the wire), and user-defined
// message handlers. Each buffers fine-grained operations per destination rank
// in a RecordExchange and delivers them in bulk.
//
// Semantics shared by all of them:
//  - construction and flush() are collective over the array's ranks;
//  - an operation is guaranteed visible (or a get's destination filled) only
//    after the next flush() (or destruction, which flushes);
//  - the flush rule: let the aggregator's scope end flush it. Call flush()
//    only when the values are needed while the aggregator still lives (every
//    flush is a reduction plus a barrier, so `flush(); }` pays twice).
//  - no order is promised between operations, even from one rank to one element;
//  - operations on this rank's own elements are applied at once (counts,
//    SrcAggregator::get(span) and UpdateAggregator::update(span) /
//    update_each: buffered in the exchange's self lane, applied here in
//    batches and at the latest by the next flush());
//  - same-node direct path: when the array is in Shared or Co-locale storage
//    and the owner is a co-located rank, the operation goes straight through the mapping
//    (update uses atomics then), unless AggregationOptions::same_node_direct = 0.
#pragma once
#include <algorithm>
#include <atomic>
#include <bit>
#include <cstring>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <tuple>
#include <utility>
#include <type_traits>
#include <vector>

#include "tessera/array/dist_array.hpp"
#include "tessera/comm/record_exchange.hpp"

namespace tessera {

// Reductions for UpdateAggregator. A user functor works too: any type with
// `T operator()(T current, T value) const`, default-constructed or passed to
// the constructor (a lambda with captures). The order in which updates to one
// element arrive is not fixed, so the reduction should commute.
namespace ops {
struct Add {
  template <class T> T operator()(T a, T b) const { return a + b; }
};
struct Min {
  template <class T> T operator()(T a, T b) const { return b < a ? b : a; }
};
struct Max {
  template <class T> T operator()(T a, T b) const { return a < b ? b : a; }
};
struct BitXor {
  template <class T> T operator()(T a, T b) const { return a ^ b; }
};
struct Replace {
  template <class T> T operator()(T, T b) const { return b; }
};
}  // namespace ops

namespace detail {

// One record: a local offset at the owner (4 bytes when every rank's block
// has at most 2^32 elements, else 8: see narrow_offsets), and a value.
template <class T, class Offset = std::uint64_t>
struct OffsetValue {
  Offset offset;
  T value;
};
template <class T, class Offset = std::uint64_t>
constexpr std::size_t kOffsetValueBytes = sizeof(Offset) + sizeof(T);
// The same record as one typed store (UpdateAggregator's span loop):
// OffsetValue itself when it has no padding (8-byte-aligned like the wide
// count records), else packed, so exactly kOffsetValueBytes whatever the
// sizes (4-byte offsets and 8-byte values: 12-byte records). Packed only when
// it must be: GCC builds a packed record on the stack and copies it with one
// 16-byte load over two 8-byte stores, a failed store-to-load forward per
// update (RA's loop spent most of its time there) — unless the record is
// built in place from its fields, as push_generated does.
template <class T, class Offset>
struct [[gnu::packed]] PackedOffsetValue {
  Offset offset;
  T value;
};
template <class T, class Offset = std::uint64_t>
using TypedOffsetValue = std::conditional_t<sizeof(OffsetValue<T, Offset>) == kOffsetValueBytes<T, Offset>,
                                            OffsetValue<T, Offset>, PackedOffsetValue<T, Offset>>;

template <class T, class Offset = std::uint64_t>
inline void write_record(std::byte* at, std::uint64_t offset, const T& value) {
  const auto narrowed = static_cast<Offset>(offset);
  std::memcpy(at, &narrowed, sizeof(narrowed));
  std::memcpy(at + sizeof(narrowed), &value, sizeof(T));
}
template <class T, class Offset = std::uint64_t>
inline OffsetValue<T, Offset> read_record(const std::byte* at) {
  OffsetValue<T, Offset> r;
  std::memcpy(&r.offset, at, sizeof(r.offset));
  std::memcpy(&r.value, at + sizeof(r.offset), sizeof(T));
  return r;
}


// Whether T can be updated in shared memory with a lock-free atomic.
template <class T>
constexpr bool kAtomicCapable =
    std::is_trivially_copyable_v<T> && (sizeof(T) == 4 || sizeof(T) == 8) && std::atomic_ref<T>::is_always_lock_free;

// Applies op atomically at p (co-located ranks may update the same element).
template <class T, class Op>
inline void atomic_apply(T* p, T value, Op op) {
  std::atomic_ref<T> ref(*p);
  if constexpr (std::is_same_v<Op, ops::Replace>) {
    ref.store(value, std::memory_order_relaxed);
  } else if constexpr (std::is_same_v<Op, ops::Add> && (std::is_integral_v<T> || std::is_floating_point_v<T>)) {
    ref.fetch_add(value, std::memory_order_relaxed);
  } else if constexpr (std::is_same_v<Op, ops::BitXor> && std::is_integral_v<T>) {
    ref.fetch_xor(value, std::memory_order_relaxed);
  } else {
    T current = ref.load(std::memory_order_relaxed);
    while (!ref.compare_exchange_weak(current, op(current, value), std::memory_order_relaxed)) {
    }
  }
}

// Per-rank pointers to co-located ranks' elements when the direct path is on.
template <class T>
std::vector<T*> direct_targets(const DistArray<T>& array, bool enabled) {
  std::vector<T*> out(static_cast<std::size_t>(array.runtime().size()), nullptr);
  if (!enabled) return out;  // Heap storage maps no co-locale: colocal_data is null
  for (int r = 0; r < array.runtime().size(); ++r) out[static_cast<std::size_t>(r)] = array.colocal_data(r);
  return out;
}
// Whether `direct` (direct_targets) reaches some rank other than `me`: the
// span loops then go one operation at a time (the same-node path acts at once).
template <class T>
bool reaches_a_colocale(const std::vector<T*>& direct, int me) {
  for (std::size_t r = 0; r < direct.size(); ++r)
    if (static_cast<int>(r) != me && direct[r] != nullptr) return true;
  return false;
}

}  // namespace detail

// Remote read: get(i, dst) stores array[i] into dst (which must stay valid
// until the next flush).
template <class T>
class SrcAggregator {
 public:
  explicit SrcAggregator(const DistArray<T>& array, const AggregationOptions& options = {})
      : array_(array),
        exchange_(array.runtime(), {sizeof(std::uint64_t), sizeof(T), sizeof(T*), true}, options,
                  std::bind_front(&SrcAggregator::serve_reads, this), &SrcAggregator::store_replies),
        direct_(detail::direct_targets(array, exchange_.options().same_node_direct)),
        me_(array.runtime().rank()),
        direct_any_(detail::reaches_a_colocale(direct_, me_)) {}
  SrcAggregator(const SrcAggregator&) = delete;
  SrcAggregator& operator=(const SrcAggregator&) = delete;
  // The runtime's counters learn the reads served through the mapping here
  // (once, not per read).
  ~SrcAggregator() { array_.runtime().comm_counters().direct_reads(direct_records_); }

  void get(std::uint64_t i, T& dst) {
    int owner = array_.owner(i);
    std::uint64_t off = array_.distribution().local_offset(i, owner);
    if (owner == me_) {
      dst = array_.local()[off];
    } else if (const T* direct = direct_[static_cast<std::size_t>(owner)]) {
      dst = direct[off];
      ++direct_records_;
    } else {
      std::byte* side;
      std::byte* rec = exchange_.push(owner, side);
      std::memcpy(rec, &off, sizeof(off));
      T* p = &dst;
      std::memcpy(side, &p, sizeof(p));
    }
  }
  // get(indices[k], dst[k]) for each k, one request record (and one reply)
  // per index as ever, in a loop that keeps its state in registers
  // (RecordExchange::push_each_with_side). This rank's own elements take the
  // exchange's self lane, read at the latest by the next flush(), not at
  // once: no branch on the owner per index (random owners mispredict it).
  // dst must hold at least indices.size() elements.
  void get(std::span<const std::uint64_t> indices, std::span<T> dst) {
    if (dst.size() < indices.size())
      throw RangeError("SrcAggregator::get: " + std::to_string(indices.size()) + " indices but room for " +
                       std::to_string(dst.size()) + " values");
    if (direct_any_) {  // the same-node path reads at once: one index at a time
      for (std::size_t k = 0; k < indices.size(); ++k) get(indices[k], dst[k]);
      return;
    }
    const auto out = reinterpret_cast<std::uintptr_t>(dst.data());
    array_.distribution().with_locator([&](const auto where) {
      exchange_.push_each_with_side<std::uint64_t, std::uintptr_t>(indices, [where, out](std::uint64_t i, std::size_t k) {
        const int owner = where.owner(i);
        return std::tuple{owner, where.local_offset(i, owner), out + k * sizeof(T)};
      });
    });
  }
  void get_checked(std::uint64_t i, T& dst) {
    array_.distribution().check(i);
    get(i, dst);
  }
  void flush() { exchange_.flush(); }
  const comm::RecordExchange& exchange() const noexcept { return exchange_; }
  // Reads served through the same-node mapping, never a message.
  std::uint64_t direct_records() const noexcept { return direct_records_; }

 private:
  // At the owner: each record is a local offset; the reply is the element there.
  void serve_reads(int, const std::byte* offsets, std::size_t n, std::byte* reply) const {
    const T* local = array_.local().data();
    for (std::size_t k = 0; k < n; ++k) {
      std::uint64_t off;
      std::memcpy(&off, offsets + k * sizeof(off), sizeof(off));
      std::memcpy(reply + k * sizeof(T), local + off, sizeof(T));
    }
  }
  // At the origin: each side record is where the value read must go.
  static void store_replies(const std::byte* values, const std::byte* destinations, std::size_t n) {
    for (std::size_t k = 0; k < n; ++k) {
      T* dst;
      std::memcpy(&dst, destinations + k * sizeof(T*), sizeof(T*));
      std::memcpy(dst, values + k * sizeof(T), sizeof(T));
    }
  }

  const DistArray<T>& array_;
  comm::RecordExchange exchange_;
  std::vector<T*> direct_;
  int me_;
  bool direct_any_ = false;  // some co-locale's elements are read through the same-node mapping
  std::uint64_t direct_records_ = 0;
};

// An aggregator's offsets on the wire: automatic (4 bytes when every rank's
// block has at most 2^32 elements, else 8) or wide (8 bytes whatever the blocks).
enum class OffsetWidth { automatic, wide };

namespace detail {
// Whether offsets into `d` go as 4 bytes: automatic width and every rank's
// block at most 2^32 elements. The same on every rank.
inline bool narrow_offsets(const Distribution& d, OffsetWidth width) {
  if (width != OffsetWidth::automatic) return false;
  for (int r = 0; r < d.ranks(); ++r)
    if (d.count(r) > std::uint64_t{1} << 32) return false;
  return true;
}
}  // namespace detail

// Remote read-modify-write: update(i, v) sets array[i] = op(array[i], v).
// A record is the owner's local offset and the value: 4 + sizeof(T) bytes
// when every rank's block has at most 2^32 elements (RA: 12 bytes), else
// 8 + sizeof(T).
template <class T, class Op = ops::Add>
class UpdateAggregator {
  // Co-located elements can be reached directly when the update is a single
  // atomic instruction, or a plain store (Replace: last writer wins anyway).
  static constexpr bool kReplace = std::is_same_v<Op, ops::Replace>;
  static constexpr bool kDirectCapable = detail::kAtomicCapable<T> || kReplace;

 public:
  explicit UpdateAggregator(DistArray<T>& array, const AggregationOptions& options = {},
                            OffsetWidth width = OffsetWidth::automatic)
      : UpdateAggregator(array, Op{}, options, width) {}
  // With a given reduction object (a lambda, or a functor that carries state).
  UpdateAggregator(DistArray<T>& array, Op op, const AggregationOptions& options = {},
                   OffsetWidth width = OffsetWidth::automatic)
      : array_(array),
        op_(std::move(op)),
        narrow_(detail::narrow_offsets(array.distribution(), width)),
        exchange_(array.runtime(), {record_bytes_of(narrow_), 0, 0, true}, options,
                  std::bind_front(&UpdateAggregator::apply_batch, this)),
        direct_(kDirectCapable ? detail::direct_targets(array, exchange_.options().same_node_direct)
                               : std::vector<T*>(static_cast<std::size_t>(array.runtime().size()))),
        me_(array.runtime().rank()) {
    // Co-locales write into this rank's elements directly, so every update
    // here must be atomic too.
    for (T* p : direct_) atomic_ = atomic_ || p != nullptr;
    direct_any_ = detail::reaches_a_colocale(direct_, me_);
  }

  UpdateAggregator(const UpdateAggregator&) = delete;
  UpdateAggregator& operator=(const UpdateAggregator&) = delete;
  ~UpdateAggregator() { array_.runtime().comm_counters().direct_writes(direct_records_); }

  void update(std::uint64_t i, const T& value) {
    int owner = array_.owner(i);
    std::uint64_t off = array_.distribution().local_offset(i, owner);
    if (owner == me_) {
      apply(array_.local().data() + off, value, atomic_);
    } else if (T* direct = direct_[static_cast<std::size_t>(owner)]) {
      if constexpr (kDirectCapable) apply(direct + off, value, true);
      ++direct_records_;
    } else if (narrow_) {
      detail::write_record<T, std::uint32_t>(exchange_.push(owner), off, value);
    } else {
      detail::write_record<T>(exchange_.push(owner), off, value);
    }
  }
  // update(indices[k], values[k]) for each k, one record per update as ever
  // (no combining), in a loop that keeps its state in registers (see
  // update_each). The spans must be the same size.
  void update(std::span<const std::uint64_t> indices, std::span<const T> values) {
    if (values.size() != indices.size())
      throw RangeError("UpdateAggregator::update: " + std::to_string(indices.size()) + " indices but " +
                       std::to_string(values.size()) + " values");
    const std::uint64_t* in = indices.data();
    const T* v = values.data();
    update_each(indices.size(), [in, v](std::size_t k) { return std::pair<std::uint64_t, T>{in[k], v[k]}; });
  }
  // update(i, v) for each {i, v} = next(k), k = 0, 1, ..., n - 1 in order:
  // next may keep state (a random stream advanced per call, generated as it
  // is sent: nothing materialized). One record per update as ever (no
  // combining), pushed by RecordExchange::push_generated: the per-update
  // call's byte-wise record write makes the compiler reload the exchange's
  // cursor and the distribution's fields for every update; here they stay
  // in registers. This rank's own elements take the exchange's self lane,
  // applied at the latest by the next flush(), not at once: no branch on
  // the owner per update (random owners mispredict it).
  template <class Next>
  void update_each(std::size_t n, Next next) {
    if (direct_any_) {  // the same-node path's atomics: one update at a time
      for (std::size_t k = 0; k < n; ++k) {
        const auto [i, v] = next(k);
        update(static_cast<std::uint64_t>(i), static_cast<T>(v));
      }
      return;
    }
    if (narrow_)
      push_generated<std::uint32_t>(n, std::move(next));
    else
      push_generated<std::uint64_t>(n, std::move(next));
  }
  void update_checked(std::uint64_t i, const T& value) {
    array_.distribution().check(i);
    update(i, value);
  }
  void flush() { exchange_.flush(); }
  const comm::RecordExchange& exchange() const noexcept { return exchange_; }
  // Updates applied through the same-node mapping, never a message.
  std::uint64_t direct_records() const noexcept { return direct_records_; }
  // Bytes of one record on the wire: the offset (4 or 8) and the value.
  std::size_t record_bytes() const noexcept { return exchange_.shape().record_bytes; }
  // The same before construction, for an array distributed as `d` (to size
  // buffers in records: RA's look-ahead).
  static std::size_t record_bytes_for(const Distribution& d, OffsetWidth width = OffsetWidth::automatic) {
    return record_bytes_of(detail::narrow_offsets(d, width));
  }

 private:
  static constexpr std::size_t record_bytes_of(bool narrow) {
    return narrow ? detail::kOffsetValueBytes<T, std::uint32_t> : detail::kOffsetValueBytes<T>;
  }
  template <class Offset, class Next>
  void push_generated(std::size_t n, Next next) {
    using Record = detail::TypedOffsetValue<T, Offset>;
    T* const local = array_.local().data();
    array_.distribution().with_locator([&](const auto where) {
      exchange_.push_generated<Record>(n, [where, local, me = me_, next = std::move(next)](std::size_t k) mutable {
        const auto [i, v] = next(k);
        const auto index = static_cast<std::uint64_t>(i);
        const int owner = where.owner(index);
        const std::uint64_t offset = where.local_offset(index, owner);
        // This rank's own element is applied from the self lane up to a
        // batch later: fetch its line now, while the pushes compute, so
        // the apply finds it in cache. Others' elements prefetch the
        // (cached) first line instead: a select, not a branch.
        __builtin_prefetch(owner == me ? local + offset : local, 1, 3);
        return std::tuple<int, Offset, T>{owner, static_cast<Offset>(offset), static_cast<T>(v)};
      });
    });
  }
  // At the owner: each record is a local offset and a value to fold in.
  // Offsets into a large array are random misses, and the record holding
  // the next offset may still be in the sending core's cache (a ring batch):
  // each element's line is prefetched kElementAhead records before its
  // fold, and the records kRecordAhead records before they are read, so the
  // misses overlap instead of queueing behind the record loads (RA: see
  // docs/aggregation.md).
  static constexpr std::size_t kElementAhead = 24, kRecordAhead = 96;
  void apply_batch(int, const std::byte* records, std::size_t n, std::byte*) {
    narrow_ ? apply_records<std::uint32_t>(records, n) : apply_records<std::uint64_t>(records, n);
  }
  template <class Offset>
  void apply_records(const std::byte* records, std::size_t n) {
    constexpr std::size_t bytes = detail::kOffsetValueBytes<T, Offset>;
    T* local = array_.local().data();
    const auto record = [records](std::size_t k) { return detail::read_record<T, Offset>(records + k * bytes); };
    if (atomic_) {
      for (std::size_t k = 0; k < n; ++k) {
        auto r = record(k);
        apply(local + r.offset, r.value, true);
      }
      return;
    }
    std::size_t k = 0;
    for (; k + kElementAhead < n; ++k) {
      __builtin_prefetch(records + std::min(k + kRecordAhead, n) * bytes, 0, 3);
      __builtin_prefetch(local + record(k + kElementAhead).offset, 1, 3);
      auto r = record(k);
      local[r.offset] = op_(local[r.offset], r.value);
    }
    for (; k < n; ++k) {
      auto r = record(k);
      local[r.offset] = op_(local[r.offset], r.value);
    }
  }
  void apply(T* p, const T& value, bool atomic) {
    if constexpr (detail::kAtomicCapable<T>) {
      if (atomic) {
        detail::atomic_apply(p, value, op_);
        return;
      }
    }
    *p = op_(*p, value);
  }

  DistArray<T>& array_;
  [[no_unique_address]] Op op_;  // before exchange_: its handler uses it
  bool narrow_;                  // before exchange_: it sizes the records
  comm::RecordExchange exchange_;
  std::vector<T*> direct_;
  int me_;
  bool atomic_ = false;
  bool direct_any_ = false;  // some co-locale's elements are updated through the same-node mapping
  std::uint64_t direct_records_ = 0;
};

// Counting: count(i) adds 1 to array[i] (a histogram, a degree count). The
// increment is implied, so a record is the owner's local offset alone: 4
// bytes when every rank's block has fewer than 2^32 elements, else 8 (an
// update's record carries the value as well: 12 bytes for int64 counts).
// Counts for this rank go through the exchange's self lane like any other
// destination's: no branch on the owner per count.
using CountRecord = OffsetWidth;  // the counting aggregator's name for it
template <class T>
class CountAggregator {
  static_assert(std::is_integral_v<T> || std::is_floating_point_v<T>, "counts are numbers");

 public:
  explicit CountAggregator(DistArray<T>& array, const AggregationOptions& options = {},
                           CountRecord record = CountRecord::automatic)
      : array_(array),
        narrow_(detail::narrow_offsets(array.distribution(), record)),
        exchange_(array.runtime(), {narrow_ ? sizeof(std::uint32_t) : sizeof(std::uint64_t), 0, 0, true}, options,
                  std::bind_front(&CountAggregator::apply_batch, this)),
        direct_(detail::kAtomicCapable<T> ? detail::direct_targets(array, exchange_.options().same_node_direct)
                                          : std::vector<T*>(static_cast<std::size_t>(array.runtime().size()))) {
    // Co-locales increment this rank's elements directly: every increment here must be atomic too.
    for (T* p : direct_) atomic_ = atomic_ || p != nullptr;
    // Own counts take the self lane (batched like the others), never the mapping.
    direct_[static_cast<std::size_t>(array.runtime().rank())] = nullptr;
    direct_any_ = detail::reaches_a_colocale(direct_, array.runtime().rank());
  }

  CountAggregator(const CountAggregator&) = delete;
  CountAggregator& operator=(const CountAggregator&) = delete;
  ~CountAggregator() { array_.runtime().comm_counters().direct_writes(direct_records_); }

  void count(std::uint64_t i) {
    int owner = array_.owner(i);
    std::uint64_t off = array_.distribution().local_offset(i, owner);
    if (T* direct = direct_[static_cast<std::size_t>(owner)]) {
      increment(direct + off, true);
      ++direct_records_;
    } else if (narrow_) {
      const auto narrow = static_cast<std::uint32_t>(off);
      std::memcpy(exchange_.push(owner), &narrow, sizeof(narrow));
    } else {
      std::memcpy(exchange_.push(owner), &off, sizeof(off));
    }
  }
  // count(i) for each index, one record per index as ever (no combining),
  // in a loop that keeps its state in registers (RecordExchange::push_each):
  // the per-index call's byte-wise record write makes the compiler reload
  // the exchange's cursor and the distribution's fields for every index.
  void count(std::span<const std::uint64_t> indices) {
    if (direct_any_) {  // the same-node path's atomics: one index at a time
      for (std::uint64_t i : indices) count(i);
      return;
    }
    array_.distribution().with_locator([&](const auto where) {
      if (narrow_) {
        exchange_.push_each<std::uint32_t>(indices, [where](std::uint64_t i) {
          const int owner = where.owner(i);
          return std::pair{owner, static_cast<std::uint32_t>(where.local_offset(i, owner))};
        });
      } else {
        exchange_.push_each<std::uint64_t>(indices, [where](std::uint64_t i) {
          const int owner = where.owner(i);
          return std::pair{owner, where.local_offset(i, owner)};
        });
      }
    });
  }
  void count_checked(std::uint64_t i) {
    array_.distribution().check(i);
    count(i);
  }
  void flush() { exchange_.flush(); }
  const comm::RecordExchange& exchange() const noexcept { return exchange_; }
  std::uint64_t direct_records() const noexcept { return direct_records_; }
  // Bytes of one record on the wire: 4 or 8.
  std::size_t record_bytes() const noexcept { return narrow_ ? sizeof(std::uint32_t) : sizeof(std::uint64_t); }

 private:
  void apply_batch(int, const std::byte* records, std::size_t n, std::byte*) {
    T* local = array_.local().data();
    if (narrow_) {
      for (std::size_t k = 0; k < n; ++k) {
        std::uint32_t off;
        std::memcpy(&off, records + k * sizeof(off), sizeof(off));
        increment(local + off, atomic_);
      }
    } else {
      for (std::size_t k = 0; k < n; ++k) {
        std::uint64_t off;
        std::memcpy(&off, records + k * sizeof(off), sizeof(off));
        increment(local + off, atomic_);
      }
    }
  }
  static void increment(T* p, bool atomic) {
    if constexpr (detail::kAtomicCapable<T>) {
      if (atomic) {
        std::atomic_ref<T>(*p).fetch_add(T{1}, std::memory_order_relaxed);
        return;
      }
    }
    *p += T{1};
  }

  DistArray<T>& array_;
  bool narrow_;  // before exchange_: it sizes the records
  comm::RecordExchange exchange_;
  std::vector<T*> direct_;
  bool atomic_ = false;
  bool direct_any_ = false;  // some co-locale's counts take the same-node mapping
  std::uint64_t direct_records_ = 0;
};

// Remote write: put(i, v) sets array[i] = v. An update whose reduction is
// "replace" underneath; concurrent puts to one element leave one of the values.
template <class T>
class DstAggregator {
 public:
  explicit DstAggregator(DistArray<T>& array, const AggregationOptions& options = {}) : writes_(array, options) {}
  void put(std::uint64_t i, const T& value) { writes_.update(i, value); }
  // put(indices[k], values[k]) for each k (UpdateAggregator::update(span)):
  // one record per put, own elements through the self lane. Same sizes.
  void put(std::span<const std::uint64_t> indices, std::span<const T> values) { writes_.update(indices, values); }
  // put(i, v) for each {i, v} = next(k), k = 0, ..., n - 1 in order (UpdateAggregator::update_each).
  template <class Next>
  void put_each(std::size_t n, Next next) {
    writes_.update_each(n, std::move(next));
  }
  // Bounds-checked put: throws RangeError for i outside [0, size).
  void put_checked(std::uint64_t i, const T& value) { writes_.update_checked(i, value); }
  void flush() { writes_.flush(); }
  const comm::RecordExchange& exchange() const noexcept { return writes_.exchange(); }
  std::uint64_t direct_records() const noexcept { return writes_.direct_records(); }

 private:
  UpdateAggregator<T, ops::Replace> writes_;
};

// User-defined handler: send(dest, msg) runs handler(source, msg) on rank
// dest. Messages to this rank run at once; others run when their batch
// arrives, at the latest by the next flush(). A handler must not send.
template <class Msg>
class MessageAggregator {
  static_assert(std::is_trivially_copyable_v<Msg>, "messages must be trivially copyable");

 public:
  using Handler = std::function<void(int source, const Msg&)>;

  MessageAggregator(Runtime& rt, Handler handler, const AggregationOptions& options = {})
      : handler_(std::move(handler)),
        exchange_(rt, {sizeof(Msg), 0, 0}, options, std::bind_front(&MessageAggregator::run_batch, this)),
        me_(rt.rank()) {}

  void send(int dest, const Msg& msg) {
    if (dest == me_) {
      handler_(me_, msg);
      return;
    }
    std::memcpy(exchange_.push(dest), &msg, sizeof(Msg));
  }
  void flush() { exchange_.flush(); }
  const comm::RecordExchange& exchange() const noexcept { return exchange_; }

 private:
  // At the destination: runs the handler on each message of a batch.
  void run_batch(int source, const std::byte* messages, std::size_t n, std::byte*) {
    for (std::size_t k = 0; k < n; ++k) {
      Msg m;
      std::memcpy(&m, messages + k * sizeof(Msg), sizeof(Msg));
      handler_(source, m);
    }
  }

  Handler handler_;
  comm::RecordExchange exchange_;
  int me_;
};

}  // namespace tessera
