// Transport: how an aggregation batch travels to one rank. The engine
// (RecordExchange) picks one transport per destination rank and asks it for
//   - an outbox: a buffer for the next batch to that rank, written in place
//     (the same-node rings hand out the slot in the receiver's memory, so a
//     record is copied once, when pushed); none while the transport holds
//     back (flow control: every buffer towards that rank is in use);
//   - sending it (the first `bytes` of the outbox);
//   - polling: every batch that arrived, from any rank, handed to the
//     engine's Receiver, which consumes it at once or keeps it and releases
//     it later (back-pressure: a kept buffer is not refilled meanwhile).
// Three channels, so a full channel never blocks the one that drains it:
// requests (final records), forward records (multi-hop routing) and replies.
// A transport's calls are cheap per batch (one virtual call), never per record.
//
// Implementations: MpiTransport (non-blocking point-to-point messages, for
// any rank) and RingTransport (SameNodeRings, for co-locales). A new one
// implements this interface; RecordExchange::setup_transports says which
// ranks it serves.
// Not thread-safe: one transport belongs to one exchange.
#pragma once
#include <cstddef>
#include <cstdint>
#include <span>

namespace tessera::comm {

enum class Channel : int { request = 0, forward = 1, reply = 2 };
inline constexpr int kChannels = 3;

class Transport;

// A send buffer a transport handed out; `data` null: none free now.
struct Outbox {
  std::byte* data = nullptr;
  std::uint32_t id = 0;  // the transport's name for the buffer
  explicit operator bool() const noexcept { return data != nullptr; }
};

// A batch that arrived, valid until its transport takes it back.
struct Arrival {
  Transport* from = nullptr;
  int source = -1;
  Channel channel = Channel::request;
  std::span<const std::byte> data;
  std::uint32_t id = 0;  // the transport's name for the buffer
};

class Receiver {
 public:
  // True: done with the batch, its buffer goes back to the transport now.
  // False: the receiver keeps it and calls from->release(arrival) later;
  // meanwhile that buffer (a ring: that source's channel) takes nothing new.
  virtual bool arrived(const Arrival& arrival) = 0;

 protected:
  ~Receiver() = default;
};

class Transport {
 public:
  virtual ~Transport() = default;
  // The buffer for the next batch to `dest` on `channel` (as long as the
  // transport was configured for that channel); empty while flow control
  // holds it back. The rings hand out the slot at the ring's head: one open
  // outbox per (destination, channel) at a time; MPI any number up to its
  // limit.
  virtual Outbox acquire(int dest, Channel channel) = 0;
  // Sends the first `bytes` of `box` (acquired for dest and channel). keep:
  // the engine reads the batch again later (multi-hop replies walk their
  // request), so the buffer stays as it is until give_back(box); only where
  // keeps_sent().
  virtual void send(int dest, Channel channel, Outbox box, std::size_t bytes, bool keep) = 0;
  virtual void give_back(Outbox box) = 0;
  virtual bool keeps_sent() const noexcept = 0;
  // Delivers what has arrived to `receiver` and retires completed sends;
  // true if it did anything.
  virtual bool poll(Receiver& receiver) = 0;
  // Takes back a batch the receiver kept.
  virtual void release(const Arrival& arrival) = 0;
  // Sends not yet complete (their buffers are still in use).
  virtual bool busy() const noexcept = 0;
  // Bytes of buffers this transport holds on this rank.
  virtual std::size_t memory_bytes() const noexcept = 0;
};

}  // namespace tessera::comm
