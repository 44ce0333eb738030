// RecordExchange: the aggregation engine under every aggregator. Fixed-size
// records bound for other ranks are appended to one buffer per destination;
// a full buffer travels as one MPI message (non-blocking) and is handled at
// the destination as a batch. An exchange may carry replies: each request
// batch gets one reply batch back, in the same order, which the origin matches
// with "side" records it kept locally (e.g. where to store fetched values).
//
// Progress: a rank that waits for a free buffer serves incoming batches and
// replies meanwhile, so buffers filling in both directions never deadlock.
// Termination: flush() exchanges per-destination batch counts
// (MPI_Ireduce_scatter_block), then each rank serves until it has handled
// every batch sent to it and received every reply it is owed.
//
// Not thread-safe: one exchange belongs to one thread of one rank.
#pragma once
#include <mpi.h>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <vector>

#include "tessera/comm/options.hpp"

namespace tessera::comm {

class RecordExchange {
 public:
  // At the destination, for each arriving batch of `count` records. With
  // replies, `reply` has room for count * reply_bytes; otherwise it is null.
  using RequestHandler = std::function<void(int source, const std::byte* records, std::size_t count, std::byte* reply)>;
  // At the origin, when the reply to one of its batches arrives; `side` holds
  // the side records pushed with the requests, in the same order.
  using ReplyHandler = std::function<void(const std::byte* replies, const std::byte* side, std::size_t count)>;

  struct Shape {
    std::size_t record_bytes = 0;  // sent per record
    std::size_t reply_bytes = 0;   // returned per record; 0: no replies
    std::size_t side_bytes = 0;    // kept at the origin per record until its reply
  };

  struct Stats {
    std::uint64_t batches_sent = 0;
    std::uint64_t records_sent = 0;
    std::uint64_t batches_received = 0;
  };

  // Collective over `comm` (duplicates it, so traffic never mixes with others).
  RecordExchange(MPI_Comm comm, Shape shape, const AggregationOptions& options, RequestHandler on_request,
                 ReplyHandler on_reply = {});
  // Collective: flushes what is still buffered, unless an exception is unwinding.
  ~RecordExchange();
  RecordExchange(const RecordExchange&) = delete;
  RecordExchange& operator=(const RecordExchange&) = delete;

  // Room for the next record to `dest` (never this rank). Write exactly
  // record_bytes there before the next call.
  std::byte* push(int dest) {
    Outbox& o = outbox_[static_cast<std::size_t>(dest)];
    if (o.count == capacity_) next_batch(dest);
    return o.records + static_cast<std::size_t>(o.count++) * shape_.record_bytes;
  }
  // Same, plus room for the record's side data (exchanges with replies).
  std::byte* push(int dest, std::byte*& side) {
    Outbox& o = outbox_[static_cast<std::size_t>(dest)];
    if (o.count == capacity_) next_batch(dest);
    side = o.side + static_cast<std::size_t>(o.count) * shape_.side_bytes;
    return o.records + static_cast<std::size_t>(o.count++) * shape_.record_bytes;
  }

  // Serves what has arrived and retires completed sends. True if it did work.
  bool progress();
  // Collective: sends every partial buffer and returns once every record
  // pushed anywhere before the call has been handled and every reply received.
  void flush();

  int rank() const noexcept { return rank_; }
  int size() const noexcept { return size_; }
  std::size_t capacity_records() const noexcept { return capacity_; }
  const Stats& stats() const noexcept { return stats_; }
  const AggregationOptions& options() const noexcept { return options_; }
  // Bytes this exchange holds for buffers on this rank (send + receive).
  std::size_t memory_bytes() const noexcept;

 private:
  struct Header {
    std::uint32_t ticket;  // the origin's batch slot, echoed in the reply
    std::uint32_t count;
  };
  static constexpr std::size_t kHeader = sizeof(Header);
  static constexpr int kRequestTag = 1;
  static constexpr int kReplyTag = 2;

  struct Outbox {
    std::byte* records = nullptr;
    std::byte* side = nullptr;
    std::uint32_t count = 0;
  };
  struct Batch {
    std::vector<std::byte> data;  // header + records
    std::vector<std::byte> side;
    bool sending = false;         // Isend not yet complete
    bool awaiting_reply = false;
  };
  struct ReplySlot {
    std::vector<std::byte> data;
    bool busy = false;
  };

  void next_batch(int dest);
  void send_current(int dest);
  int free_batch(int dest) const;
  void handle_request(int source, const std::byte* msg, int bytes);
  void handle_reply(const std::byte* msg, int bytes);
  bool idle() const;

  MPI_Comm comm_ = MPI_COMM_NULL;
  int rank_ = 0, size_ = 1;
  Shape shape_;
  AggregationOptions options_;
  RequestHandler on_request_;
  ReplyHandler on_reply_;
  std::uint32_t capacity_ = 1;  // records per batch
  int per_dest_ = 2;            // batches per destination: 1 filling + in flight

  std::vector<Outbox> outbox_;        // by destination
  std::vector<int> current_;          // batch being filled per destination, -1: none
  std::vector<Batch> batches_;        // destination d owns [d*per_dest_, (d+1)*per_dest_)
  std::vector<MPI_Request> send_reqs_;
  std::vector<int> sent_to_;          // request batches sent per destination since flush
  std::uint64_t received_ = 0;        // request batches handled since flush
  int in_flight_ = 0;                 // batches sent or awaiting a reply

  std::vector<std::vector<std::byte>> recv_bufs_;  // requests then replies
  std::vector<MPI_Request> recv_reqs_;
  std::size_t request_slots_ = 0;
  std::vector<ReplySlot> reply_slots_;
  std::vector<MPI_Request> reply_reqs_;
  int replies_sending_ = 0;

  std::vector<int> completed_;
  std::vector<MPI_Status> statuses_;
  Stats stats_;
};

}  // namespace tessera::comm
