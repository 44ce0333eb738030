// SameNodeRings: the same-node transport of an aggregation exchange. For every
// ordered pair of co-located ranks (s, r) and each kind of batch (requests,
// replies) there is one single-producer / single-consumer ring of fixed-size
// slots in r's NodeSegment (node-shared memory that nothing outlives). s
// writes a batch straight into a free slot of r's ring (the records are
// pushed there one by one: no staging copy), then publishes it with one
// release store of the ring's head; r handles the batch in place and frees
// the slot with one release store of the tail. No system call, no message
// matching, one copy in all (the push). Requests and replies have rings of
// their own, so a full request ring never blocks the replies that drain it.
//
// A rank that could not map a co-locale's segment (another PID namespace, a
// non-dumpable process) does not reach it here: those batches go through MPI.
// Not thread-safe: one exchange belongs to one thread of one rank.
#pragma once
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>
#include <vector>

#include "tessera/runtime/runtime.hpp"
#include "tessera/storage/node_segment.hpp"

namespace tessera::comm {

class SameNodeRings {
 public:
  enum class Kind : int { request = 0, reply = 1 };
  struct Shape {
    std::uint32_t slots = 2;              // batches a ring holds (1 being filled + in flight)
    std::size_t request_bytes = 0;        // largest request batch
    std::size_t reply_bytes = 0;          // largest reply batch; 0: no reply rings
  };

  SameNodeRings() = default;
  // Collective over the runtime (even where a node has one rank).
  SameNodeRings(Runtime& rt, Shape shape);

  // Whether this rank writes its batches to `rank` into rank's rings.
  bool reaches(int rank) const noexcept {
    auto r = static_cast<std::size_t>(rank);
    return r < out_.size() && out_[r].base != nullptr;
  }
  // Room for the next batch of `kind` to `dest` (reaches(dest)): the free
  // slot at the ring's head, or null while the ring is full.
  std::byte* room(int dest, Kind kind) noexcept {
    Ring& ring = out_[static_cast<std::size_t>(dest)].rings[static_cast<int>(kind)];
    if (ring.head - ring.cached_tail >= shape_.slots) {
      ring.cached_tail = ring.control->tail.load(std::memory_order_acquire);
      if (ring.head - ring.cached_tail >= shape_.slots) return nullptr;
    }
    return ring.slot(ring.head % shape_.slots) + kLength;
  }
  // Publishes the batch written into room(dest, kind): its first `bytes`.
  void publish(int dest, Kind kind, std::size_t bytes) noexcept {
    Ring& ring = out_[static_cast<std::size_t>(dest)].rings[static_cast<int>(kind)];
    std::uint64_t length = bytes;
    std::memcpy(ring.slot(ring.head % shape_.slots), &length, kLength);
    ring.control->head.store(++ring.head, std::memory_order_release);
  }
  // The oldest batch of `kind` from `source` not yet consumed (empty if
  // none); valid until consume(source, kind).
  std::span<const std::byte> peek(int source, Kind kind) const noexcept {
    const Ring& ring = in_[static_cast<std::size_t>(source)].rings[static_cast<int>(kind)];
    if (ring.base == nullptr || ring.control->head.load(std::memory_order_acquire) == ring.head) return {};
    const std::byte* slot = ring.slot(ring.head % shape_.slots);
    std::uint64_t length;
    std::memcpy(&length, slot, kLength);
    return {slot + kLength, static_cast<std::size_t>(length)};
  }
  // Frees the slot peek() returned: the producer may write it again. With
  // `evict`, the slot's lines are first evicted from every cache
  // (evict_from_caches): the producer's next writes there then take no
  // line back from this core's cache.
  void consume(int source, Kind kind, bool evict = false) noexcept {
    Ring& ring = in_[static_cast<std::size_t>(source)].rings[static_cast<int>(kind)];
    if (evict) {
      const std::byte* slot = ring.slot(ring.head % shape_.slots);
      std::uint64_t length;
      std::memcpy(&length, slot, kLength);
      evict_from_caches(slot, kLength + length);
    }
    ring.control->tail.store(++ring.head, std::memory_order_release);
  }
  // Co-located ranks whose rings into this rank exist (world ranks).
  const std::vector<int>& sources() const noexcept { return sources_; }
  // Bytes of this rank's segment (its inbound rings).
  std::size_t memory_bytes() const noexcept { return segment_.own().size(); }
  // Segment bytes for `peers` inbound peers with this shape (the accounting).
  static std::size_t segment_bytes(Shape shape, int peers);

  static constexpr std::size_t kLength = 8;  // a slot starts with the batch's byte length

  // Whether evict_from_caches() does anything on this CPU (x86-64 with
  // CLFLUSHOPT).
  static bool can_evict() noexcept;
  // Writes back and invalidates the cache lines of [p, p + n) in every cache
  // (CLFLUSHOPT, then a store fence so the eviction is ordered before the
  // release store that follows); a no-op where can_evict() is false.
  static void evict_from_caches(const std::byte* p, std::size_t n) noexcept;

 private:
  // Written by the producer (head) and the consumer (tail), on their own lines.
  struct alignas(64) Control {
    std::atomic<std::uint64_t> head{0};
    alignas(64) std::atomic<std::uint64_t> tail{0};
  };
  // One end of one ring: `head` counts the batches this end has published
  // (producer) or consumed (consumer).
  struct Ring {
    Control* control = nullptr;
    std::byte* base = nullptr;  // slot 0
    std::size_t slot_bytes = 0;
    std::uint64_t head = 0;
    std::uint64_t cached_tail = 0;  // producer: the consumer's tail as last read
    std::byte* slot(std::uint64_t i) const noexcept { return base + i * slot_bytes; }
  };
  struct Peer {
    std::byte* base = nullptr;  // this pair's rings in the receiver's segment; null: not reached
    Ring rings[2];
  };
  static std::size_t pair_bytes(Shape shape);
  static Peer locate(std::byte* segment, std::size_t pair, Shape shape);

  Shape shape_;
  NodeSegment segment_;
  std::vector<Peer> out_;  // by world rank: rings this rank writes (in the peer's segment)
  std::vector<Peer> in_;   // by world rank: rings this rank reads (in its own segment)
  std::vector<int> sources_;
};

}  // namespace tessera::comm
