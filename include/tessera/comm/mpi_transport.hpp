// MpiTransport: aggregation batches as non-blocking MPI point-to-point
// messages, one message per batch, one tag per channel. Send buffers are
// pooled per (destination, channel) up to a per-channel limit (the engine's
// batches in flight per destination: flow control), allocated on first use;
// a channel without a limit (replies: one per received request, bounded by
// the peers' requests in flight) shares one pool over all destinations.
// Receive buffers are posted per channel for any source; a batch the engine
// keeps keeps its receive buffer (not re-posted until released).
// Not thread-safe: one transport belongs to one exchange.
#pragma once
#include <mpi.h>

#include <array>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "tessera/comm/transport.hpp"

namespace tessera::comm {

class MpiTransport final : public Transport {
 public:
  struct Config {
    std::array<std::size_t, kChannels> bytes{};     // largest batch per channel; 0: channel unused
    std::array<int, kChannels> per_destination{};   // send buffers per destination; 0: one shared pool, no limit
    std::array<std::size_t, kChannels> receives{};  // receive buffers posted per channel
  };
  // `comm` stays the caller's; it must outlive the transport.
  MpiTransport(MPI_Comm comm, Config config);
  ~MpiTransport() override;
  MpiTransport(const MpiTransport&) = delete;
  MpiTransport& operator=(const MpiTransport&) = delete;

  Outbox acquire(int dest, Channel channel) override;
  void send(int dest, Channel channel, Outbox box, std::size_t bytes, bool keep) override;
  void give_back(Outbox box) override;
  bool keeps_sent() const noexcept override { return true; }
  bool poll(Receiver& receiver) override;
  void release(const Arrival& arrival) override;
  bool busy() const noexcept override { return sending_ > 0; }
  std::size_t memory_bytes() const noexcept override;

 private:
  struct SendBuffer {
    std::vector<std::byte> data;
    bool filling = false;  // handed out, not yet sent
    bool sending = false;  // Isend not yet complete
    bool kept = false;     // sent with keep, not yet given back
    int channel = 0;
    bool free() const noexcept { return !filling && !sending && !kept; }
  };
  struct Receive {
    std::vector<std::byte> data;
    Channel channel;
  };
  void post(std::size_t i);
  void retire(std::uint32_t id);

  MPI_Comm comm_;
  Config config_;
  std::vector<SendBuffer> sends_;
  std::vector<MPI_Request> send_reqs_;  // by send buffer
  // Send buffers by channel and destination (limited channels), free shared
  // buffers by channel (unlimited ones).
  std::array<std::vector<std::vector<std::uint32_t>>, kChannels> pools_;
  std::array<std::vector<std::uint32_t>, kChannels> shared_free_;
  int sending_ = 0;
  std::vector<Receive> receives_;
  std::vector<MPI_Request> recv_reqs_;
  std::vector<int> completed_;
  std::vector<MPI_Status> statuses_;
  // Completed receives being handed out: a handler may serve, polling again,
  // which appends its own above and truncates back (no allocation per poll).
  struct Done {
    std::size_t i;
    int source, bytes;
  };
  std::vector<Done> done_;
};

}  // namespace tessera::comm
