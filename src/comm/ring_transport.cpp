#include "tessera/comm/ring_transport.hpp"

#include <algorithm>
#include <cstring>

namespace tessera::comm {

RingTransport::RingTransport(Runtime& rt, std::uint32_t slots, std::size_t request_bytes, std::size_t reply_bytes)
    : rings_(rt, {slots, kChannelByte + request_bytes, reply_bytes}),
      evict_requests_(reply_bytes == 0 && SameNodeRings::can_evict()),
      held_(2 * static_cast<std::size_t>(rt.size()), 0) {}

Outbox RingTransport::acquire(int dest, Channel channel) {
  std::byte* room = rings_.room(dest, kind_of(channel));
  if (!room) return {};  // the ring is full: flow control
  return {channel == Channel::reply ? room : room + kChannelByte, 0};
}

void RingTransport::send(int dest, Channel channel, Outbox box, std::size_t bytes, bool) {
  if (channel != Channel::reply) {
    const auto c = static_cast<std::uint64_t>(channel);
    std::memcpy(box.data - kChannelByte, &c, sizeof c);
    bytes += kChannelByte;
  }
  // The batch is in the peer's ring already: one release store sends it.
  rings_.publish(dest, kind_of(channel), bytes);
}

bool RingTransport::poll_ring(Receiver& receiver, int source, Kind kind) {
  bool did = false;
  std::uint8_t& held = held_[static_cast<std::size_t>(source) * 2 + static_cast<std::size_t>(kind)];
  while (!held) {
    std::span<const std::byte> batch = rings_.peek(source, kind);
    if (batch.empty()) break;
    Arrival a{this, source, Channel::reply, batch, static_cast<std::uint32_t>(kind)};
    if (kind == Kind::request) {
      std::uint64_t c = 0;
      if (batch.size() >= kChannelByte) std::memcpy(&c, batch.data(), sizeof c);
      a.channel = c == static_cast<std::uint64_t>(Channel::forward) ? Channel::forward : Channel::request;
      a.data = batch.subspan(std::min(kChannelByte, batch.size()));
    }
    // Marked before the handler runs: it may serve, polling this ring again.
    held = 1;
    did = true;
    if (!receiver.arrived(a)) break;  // kept: released later
    held = 0;
    rings_.consume(source, kind, evicts(kind));
  }
  return did;
}

bool RingTransport::poll(Receiver& receiver) {
  bool did = false;
  // Replies first: they free the receiver's batches.
  for (int source : rings_.sources()) {
    did = poll_ring(receiver, source, Kind::reply) || did;
    did = poll_ring(receiver, source, Kind::request) || did;
  }
  return did;
}

void RingTransport::release(const Arrival& arrival) {
  const auto kind = static_cast<Kind>(arrival.id);
  held_[static_cast<std::size_t>(arrival.source) * 2 + arrival.id] = 0;
  rings_.consume(arrival.source, kind, evicts(kind));
}

}  // namespace tessera::comm
