// The two aggregation engines behind RecordExchange, chosen once when the
// exchange is made (make_exchange_engine): DirectExchange (one hop, one batch
// per destination, direct_exchange.cpp) and
// RoutedExchange (grid or node-first routing, batches of chunks through an
// intermediate, routed_exchange.cpp). What both need lives in ExchangeEngine
// (record_exchange.cpp):
// the transports and their choice per destination, batch tickets, the lanes
// the pushes fill, the self lane, deferred requests, progress and the flush
// frame (auto buffer size). An engine's virtual calls are per batch (open a
// lane, handle an arrival, settle a flush), never per record: RecordExchange
// pushes into the lanes itself.
// Not thread-safe: one exchange belongs to one thread of one rank.
#pragma once
#include <mpi.h>

#include <array>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <memory>
#include <span>
#include <vector>

#include "tessera/comm/mpi_transport.hpp"
#include "tessera/comm/record_exchange.hpp"
#include "tessera/comm/ring_transport.hpp"
#include "tessera/comm/transport.hpp"
#include "tessera/runtime/progress.hpp"

namespace tessera::comm {

class Routing;

namespace detail {

class ExchangeEngine : public Progressable, private Receiver {
 public:
  using Shape = RecordExchange::Shape;
  using Stats = RecordExchange::Stats;
  using RequestHandler = RecordExchange::RequestHandler;
  using ReplyHandler = RecordExchange::ReplyHandler;

  virtual ~ExchangeEngine();
  ExchangeEngine(const ExchangeEngine&) = delete;
  ExchangeEngine& operator=(const ExchangeEngine&) = delete;

  // The push slow path, once per batch: the self lane applied, or dest's
  // lane given room (the next batch, a new chunk); then room for one record
  // (and its side data, if side is given) from the lane.
  std::byte* claim(int dest, std::byte** side);
  bool progress() final;
  void flush();

  ExchangeLane* lanes() noexcept { return lanes_.data(); }
  std::size_t lane_count() const noexcept { return lanes_.size(); }
  std::size_t side_stride() const noexcept { return side_stride_; }
  int rank() const noexcept { return rank_; }
  int size() const noexcept { return size_; }
  std::size_t capacity_records() const noexcept { return capacity_; }
  const Stats& stats() const noexcept { return stats_; }
  const Shape& shape() const noexcept { return shape_; }
  const AggregationOptions& options() const noexcept { return options_; }
  std::size_t buffer_bytes() const noexcept { return buffer_bytes_; }
  std::size_t memory_bytes() const noexcept;
  std::size_t ring_memory_bytes() const noexcept { return ring_ ? ring_->memory_bytes() : 0; }
  bool uses_ring(int rank) const noexcept {
    return ring_ != nullptr && via_.at(static_cast<std::size_t>(rank)) == static_cast<const Transport*>(ring_.get());
  }
  virtual bool routed() const noexcept = 0;
  virtual std::size_t destinations() const noexcept = 0;

 protected:
  struct Header {
    std::uint32_t ticket;  // the origin's batch slot, echoed in the reply
    std::uint32_t count;
  };
  static constexpr std::size_t kHeader = sizeof(Header);
  // A batch ticket (the index echoed by its reply) and what it holds.
  struct Batch {
    Outbox out;                   // its buffer from the transport: open, or sent and kept
    std::vector<std::byte> side;  // side records until the reply
    bool awaiting_reply = false;
  };

  // Collective (duplicates the runtime's communicator, agrees on the auto
  // buffer size). The derived engine sets up its batches and transports,
  // then registers with the ProgressEngine (start()).
  ExchangeEngine(Runtime& rt, Shape shape, const AggregationOptions& options, RequestHandler on_request,
                 ReplyHandler on_reply);
  void start() { progress_.add(this); }
  // MPI for every rank; the same-node rings, when `rings` and the node has
  // co-locales, for those they reach.
  void setup_transports(Runtime& rt, std::array<std::size_t, kChannels> batch_bytes, int forward_extra, bool rings);

  // Gives dest's lane room for at least one record (dest: another rank).
  virtual void open_lane(int dest) = 0;
  // A request (or final) batch: true once handled; false while its reply
  // finds no outbox (kept in its buffer, retried).
  virtual bool handle_request(const Arrival& a) = 0;
  virtual void handle_reply(std::span<const std::byte> msg) = 0;
  // A forward batch (multi-hop only): kept until placed (false), or thrown on.
  virtual bool accept_forward(const Arrival& a);
  // Work beyond polling the transports (placing held forward batches).
  virtual bool progress_more() { return false; }
  // Batches sent to rank r this round (the auto size's figures).
  virtual std::uint64_t sent_this_round(std::size_t r) const { return static_cast<std::uint64_t>(sent_to_[r]); }
  // Sends every partial batch and serves until every batch is handled and
  // every reply back (flush's collective rounds).
  virtual void settle() = 0;

  // Every batch leaves through here: the transport's send, the exchange's
  // stats, the runtime's CommCounters and, when tracing, a "send batch"
  // event with its flow arrow.
  void send_batch(Transport& via, int dest, Channel channel, Outbox box, std::size_t bytes, std::uint32_t records,
                  bool keep);
  // A batch ticket in [first, end) that is not open, not kept and not awaiting its reply.
  int free_batch(int first, int end) const;
  bool idle() const;
  // The caller's side records, packed to side_bytes (multi-hop keeps them at side_stride_).
  const std::byte* packed_side(const std::byte* side, std::size_t n);

  ProgressEngine& progress_;
  MPI_Comm comm_ = MPI_COMM_NULL;
  int rank_ = 0, size_ = 1;
  Shape shape_;
  AggregationOptions options_;
  RequestHandler on_request_;
  ReplyHandler on_reply_;
  std::uint32_t capacity_ = 1;    // records per batch (multi-hop: per own chunk at most)
  int per_dest_ = 2;              // batches per destination: 1 filling + in flight
  std::size_t buffer_bytes_ = 0;
  std::size_t side_stride_ = 0;   // side bytes per record position in a batch

  std::vector<ExchangeLane> lanes_;  // by destination rank: where the next record goes
  std::vector<int> current_;          // batch being filled per destination (multi-hop: per slot), -1: none
  std::vector<Batch> batches_;
  std::vector<int> sent_to_;          // request (final) batches sent per rank since flush
  std::uint64_t received_ = 0;        // request (final) batches handled since flush
  int awaiting_ = 0;                  // batches awaiting their reply
  Stats stats_;
  CommCounters& counters_;  // the runtime's, for every exchange
  // Trace flow ids: this exchange's number in the job (exchanges are made
  // collectively, in the same order everywhere) and the batches sent to and
  // received from each rank per channel (FIFO per pair and channel, so the
  // k-th sent is the k-th received).
  std::uint32_t trace_number_ = 0;
  std::vector<std::uint64_t> sent_seq_, received_seq_;  // [channel * size_ + rank]

  // Transports: MPI for every rank, the same-node rings for the co-locales
  // they reach; via_ is the choice per destination (and for replies to it).
  std::unique_ptr<MpiTransport> mpi_;
  std::unique_ptr<RingTransport> ring_;
  std::vector<Transport*> via_;         // by rank
  std::vector<Transport*> transports_;  // polled in this order
  std::vector<std::byte> side_scratch_;  // packed_side's

 private:
  bool arrived(const Arrival& arrival) final;
  bool retry_deferred();
  void setup_self_lane();
  void apply_self_lane();
  void rewind_self_lane();

  std::deque<Arrival> deferred_;  // requests whose reply has no room yet
  bool retrying_ = false;
  // The self lane's records (empty without one): lanes_[rank_] points into it.
  std::vector<std::byte> self_records_;
  // With replies: the self lane's side records and the replies its handler writes.
  std::vector<std::byte> self_side_, self_replies_;
  double round_start_ = 0;          // auto buffer size: when this round's pushes began
  std::uint64_t tune_records_ = 0;  // records_sent when the round began
};

// Direct routing: every record straight to its destination, one batch being
// filled per destination (its lane is the batch's room).
class DirectExchange final : public ExchangeEngine {
 public:
  DirectExchange(Runtime& rt, Shape shape, const AggregationOptions& options, RequestHandler on_request,
                 ReplyHandler on_reply);
  bool routed() const noexcept override { return false; }
  std::size_t destinations() const noexcept override { return static_cast<std::size_t>(size_ > 1 ? size_ - 1 : 0); }

 private:
  void open_lane(int dest) override;
  bool handle_request(const Arrival& a) override;
  void handle_reply(std::span<const std::byte> msg) override;
  void settle() override;
  void send_current(int dest);
};

// Multi-hop routing (grid, node-first): see record_exchange.hpp's header
// comment for the batch format and the two-round flush.
class RoutedExchange final : public ExchangeEngine {
 public:
  RoutedExchange(Runtime& rt, Shape shape, const AggregationOptions& options, RequestHandler on_request,
                 ReplyHandler on_reply, const Routing& routing);
  bool routed() const noexcept override { return true; }
  std::size_t destinations() const noexcept override { return slots_.size(); }
  void on_idle() override;

 private:
  // A forward batch's reply being assembled at the intermediate.
  struct Assembly {
    Outbox out;
    Transport* via = nullptr;
    int origin = -1;
    std::uint32_t waiting = 0;  // records whose reply has not come back yet
    std::size_t bytes = 0;
  };
  // A buffer towards one neighbour, of one kind.
  struct Slot {
    int rank;
    bool forward;                     // chunks tagged with their final destination; else with their origin
    std::uint32_t chunk_records = 1;  // capacity of a chunk of this rank's own records
    std::vector<int> own_dests;       // destinations of this rank's own records that go through this slot
  };
  // Chunk header in a routed batch; `capacity` records of room follow it, the
  // first `count` of them used. tag: final destination (forward batches) or
  // origin (final batches).
  struct ChunkHeader {
    std::uint32_t tag;
    std::uint32_t count;
    std::uint32_t capacity;
    std::uint32_t unused;  // keeps records 8-byte aligned
  };
  static constexpr std::size_t kChunkHeader = sizeof(ChunkHeader);
  // The open batch of a slot: chunks are carved from its tail.
  struct RoutedOutbox {
    std::byte* tail = nullptr;  // next free byte (valid while the slot has a current batch)
    std::byte* end = nullptr;
    std::byte* side = nullptr;    // side data of record position 0
    std::byte* last = nullptr;    // header of the chunk carved last (trimmed when sent)
    std::uint32_t positions = 0;  // record positions carved so far: the next chunk's side index
    std::uint32_t count = 0;      // records in closed chunks and forwarded runs
    bool holds_forwarded = false;
  };
  // A received forward batch not yet fully placed; the transport keeps its buffer.
  struct HeldBatch {
    Arrival arrival;
    std::size_t offset = kHeader;  // the chunk being placed
    std::uint32_t done = 0;        // its records placed so far
    std::uint32_t position = 0;    // reply position of its first record
    int pending = -1;              // reply being assembled, with replies
    bool started = false;
  };

  void open_lane(int dest) override;
  bool handle_request(const Arrival& a) override;  // a final batch
  void handle_reply(std::span<const std::byte> msg) override;
  bool accept_forward(const Arrival& a) override;
  bool progress_more() override;
  std::uint64_t sent_this_round(std::size_t r) const override;
  void settle() override;

  void setup_routes(const Routing& routing);
  void close_chunk(int dest);
  bool open_batch(int slot, bool blocking);
  bool has_room(int slot) const;
  std::byte* carve_run(int slot, int origin, std::uint32_t want, std::uint32_t& granted, std::byte*& side);
  void send_routed(int slot);
  bool drain_forward();
  bool place_chunks(HeldBatch& held, std::uint32_t count, bool& did);
  int start_assembly(int origin);
  void finish_assembly(int i);
  void release_forwarded();

  std::vector<Slot> slots_;
  std::vector<int> own_slot_;          // by destination rank: where this rank's own records go
  std::vector<int> fwd_slot_;          // by final destination: where forwarded records go; -1: never
  std::vector<std::byte*> chunk_at_;   // by destination rank: header of its open own chunk, null: none
  std::vector<int> slot_batches_;      // slot s owns batches [slot_batches_[s], slot_batches_[s + 1])
  std::vector<int> batch_slot_;        // by batch: its slot
  std::vector<RoutedOutbox> routed_out_;  // by slot
  std::vector<int> sent_fwd_to_;       // forward batches sent per rank since flush
  std::uint64_t received_fwd_ = 0;
  std::deque<HeldBatch> held_;
  bool draining_ = false;
  std::vector<Assembly> assemblies_;
  std::vector<int> free_assemblies_;
  std::size_t cap_bytes_ = 0;    // payload bytes of one batch
  std::size_t max_records_ = 0;  // records one batch can hold at most
};

// The engine `options` name (direct or multi-hop routing).
std::unique_ptr<ExchangeEngine> make_exchange_engine(Runtime& rt, RecordExchange::Shape shape,
                                                     const AggregationOptions& options,
                                                     RecordExchange::RequestHandler on_request,
                                                     RecordExchange::ReplyHandler on_reply);

}  // namespace detail
}  // namespace tessera::comm
