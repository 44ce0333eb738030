// RingTransport: aggregation batches to co-locales through SameNodeRings.
// The outbox for a destination is the free slot at the head of the ring in
// its memory: records are pushed straight into it and one release store
// sends it (no staging copy, no system call, no matching). Requests and
// replies have rings of their own; forward records (multi-hop routing) go
// over the request rings (a batch says what it holds). Flow control is the
// ring: no outbox while it is full. A batch the receiver keeps stays in its
// slot, and that source's ring on that channel delivers nothing after it
// until it is released. A sent batch is gone from this rank: keeps_sent() is
// false.
// Not thread-safe: one transport belongs to one exchange.
#pragma once
#include <cstddef>
#include <cstdint>
#include <vector>

#include "tessera/comm/same_node_rings.hpp"
#include "tessera/comm/transport.hpp"

namespace tessera::comm {

class RingTransport final : public Transport {
 public:
  // Collective over the runtime (even where a node has one rank).
  // request_bytes bounds request and forward batches, reply_bytes replies (0: none).
  RingTransport(Runtime& rt, std::uint32_t slots, std::size_t request_bytes, std::size_t reply_bytes);

  // Whether this rank's batches to `rank` can go through its rings.
  bool reaches(int rank) const noexcept { return rings_.reaches(rank); }
  // Whether consumed request slots are evicted from the caches (see evict_requests_).
  bool evicts_requests() const noexcept { return evict_requests_; }

  Outbox acquire(int dest, Channel channel) override;
  void send(int dest, Channel channel, Outbox box, std::size_t bytes, bool keep) override;
  void give_back(Outbox) override {}
  bool keeps_sent() const noexcept override { return false; }
  bool poll(Receiver& receiver) override;
  void release(const Arrival& arrival) override;
  bool busy() const noexcept override { return false; }
  std::size_t memory_bytes() const noexcept override { return rings_.memory_bytes(); }

 private:
  using Kind = SameNodeRings::Kind;
  static Kind kind_of(Channel c) noexcept { return c == Channel::reply ? Kind::reply : Kind::request; }
  // Forward and request batches share a ring: one byte before the batch says which.
  static constexpr std::size_t kChannelByte = 8;  // keeps the batch 8-byte aligned
  bool poll_ring(Receiver& receiver, int source, Kind kind);
  // Whether a consumed slot of `kind` is evicted before it is freed.
  bool evicts(Kind kind) const noexcept { return evict_requests_ && kind == Kind::request; }

  SameNodeRings rings_;
  // An exchange without replies (updates, counts, puts) evicts each request
  // slot it consumed from the caches before freeing it: the producer then
  // rewrites it without taking its lines back from this core (histogram
  // +12-27%, RA +30-65%, measured side by side). With replies the requester
  // waits on the reply and the eviction is on that path (indexgather -10-30%).
  bool evict_requests_ = false;
  std::vector<std::uint8_t> held_;  // by source * 2 + kind: a delivered batch not yet consumed
};

}  // namespace tessera::comm
