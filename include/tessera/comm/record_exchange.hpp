// RecordExchange: the aggregation engine under every aggregator. Fixed-size
// records bound for other ranks are appended to one buffer per destination
// (per next hop with multi-hop routing); a full buffer travels as one batch
// and is handled at the destination as a batch. An exchange may carry
// replies: each request batch gets one reply batch back, in the same order,
// which the origin matches with "side" records it kept locally (e.g. where to
// store fetched values).
//
// Three parts, each behind an interface of its own:
// - Transports (transport.hpp): how a batch travels to one rank. MpiTransport
//   (non-blocking messages, any rank) and RingTransport (SameNodeRings, the
//   co-locales they reach; direct routing, unless
//   AggregationOptions::same_node_rings is 0). The choice is per destination
//   (via_); the transport hands out the outbox the records are pushed into
//   (for the rings: the slot in the receiver's memory) and says when none is
//   free (flow control).
// - Routing policies (routing.hpp): which rank a record goes to first.
//   Direct (direct_routing.cpp), grid (grid_routing.cpp) and node-first
//   (node_first_routing.cpp: the grid whose rows are the nodes and whose
//   columns are the ranks' indices on their node).
// - This engine: batch formats, tickets and side records, replies,
//   progress and termination. Direct batches here (record_exchange.cpp),
//   multi-hop ones in routed_exchange.cpp.
//
// Progress: a rank that waits for a free buffer serves incoming batches and
// replies meanwhile (every exchange of its Runtime's ProgressEngine), so
// buffers filling in both directions never deadlock. A request whose reply
// finds no outbox yet stays in its receive buffer (or ring slot) and is
// retried, so nothing waits inside a handler.
// Termination: flush() exchanges per-destination batch counts
// (MPI_Ireduce_scatter_block), then each rank serves until it has handled
// every batch sent to it and received every reply it is owed.
//
// Multi-hop routing (grid, node-first) bounds the buffers per rank to about
// 2 sqrt(P): a record first goes to the policy's first hop ("forward"
// batches), which passes it on ("final" batches). Routed batches are made of
// chunks: a header (tag, count, capacity) and records of one final
// destination (forward batches) or of one origin (final batches, so handlers
// still see the true source). The origin keeps one open chunk per
// destination (pushing is a pointer bump); the intermediate hands its own
// chunks to the handler straight from the receive buffer and copies each
// other chunk whole into its buffer towards the destination. A forward batch
// stays in its receive buffer until all its chunks are placed (that is the
// back-pressure; final batches never wait, so there is no cycle). Replies
// come back the same way: the intermediate assembles the reply of a forward
// batch from its own chunks' replies and, run by run, from the replies of the
// final batches its chunks went into. flush() runs twice: forward batches
// first (counts, then serve until all are placed), then final batches as
// above. A rank that waits with nothing to do sends the partial buffers that
// hold forwarded requests, so a peer waiting for those replies never waits
// forever. Multi-hop batches travel over MPI (their replies walk the request
// batch, which the rings do not keep).
//
// Not thread-safe: one exchange belongs to one thread of one rank.
#pragma once
#include <mpi.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <deque>
#include <array>
#include <functional>
#include <memory>
#include <new>
#include <string>
#include <tuple>
#include <type_traits>
#include <span>
#include <vector>

#include "tessera/comm/mpi_transport.hpp"
#include "tessera/comm/options.hpp"
#include "tessera/comm/ring_transport.hpp"
#include "tessera/comm/transport.hpp"
#include "tessera/runtime/progress.hpp"
#include "tessera/runtime/runtime.hpp"

namespace tessera::comm {

class Routing;

class RecordExchange : private Progressable, private Receiver {
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
    // push(rank()) is allowed too: such records fill a buffer of their own
    // (the self lane, allocated at the first such push), handed to the
    // request handler here when it is full and at flush, so a caller's
    // per-record loop needs no branch on the owner (random owners mispredict
    // it). With replies, the handler answers into a buffer of the lane's and
    // the reply handler takes those replies with the side records at once.
    bool self_lane = false;
  };

  struct Stats {
    std::uint64_t batches_sent = 0;
    std::uint64_t records_sent = 0;
    std::uint64_t batches_received = 0;
    // Self-lane batches handed to the handler here (never sent, not counted above).
    std::uint64_t self_batches = 0;
    // Bytes this rank handed to the transport (MPI or a ring): requests,
    // forwarded batches and replies, headers included.
    std::uint64_t bytes_sent = 0;
    // Batches sent to each rank of the communicator (the next hop, for grid
    // routing): with the ranks' nodes, what crossed between nodes.
    std::vector<std::uint64_t> batches_to;
  };

  // Collective over the runtime's ranks (duplicates its communicator, so
  // traffic never mixes with others); registers with its ProgressEngine.
  RecordExchange(Runtime& rt, Shape shape, const AggregationOptions& options, RequestHandler on_request,
                 ReplyHandler on_reply = {});
  // Collective: flushes what is still buffered, unless an exception is unwinding.
  ~RecordExchange();
  RecordExchange(const RecordExchange&) = delete;
  RecordExchange& operator=(const RecordExchange&) = delete;

  // Room for the next record to `dest` (never this rank, unless the shape
  // asks for the self lane). Write exactly record_bytes there before the next call.
  std::byte* push(int dest) {
    if (routed_) return push_routed_fast(dest, nullptr);
    Open& o = outbox_[static_cast<std::size_t>(dest)];
    if (o.cursor == o.end) next_batch(dest);
    std::byte* at = o.cursor;
    o.cursor += shape_.record_bytes;
    return at;
  }
  // Same, plus room for the record's side data (exchanges with replies).
  std::byte* push(int dest, std::byte*& side) {
    if (routed_) return push_routed_fast(dest, &side);
    Open& o = outbox_[static_cast<std::size_t>(dest)];
    if (o.cursor == o.end) next_batch(dest);
    side = o.side;
    o.side += shape_.side_bytes;
    std::byte* at = o.cursor;
    o.cursor += shape_.record_bytes;
    return at;
  }
  // Pushes one record per item: route(item) gives {destination, record}, a
  // Record of exactly record_bytes (trivially copyable). The same as push()
  // per item, but faster in a loop: a record written through push()'s
  // std::byte* may alias anything, so the caller's loop reloads every
  // cursor, bound and captured value after each; here the record is stored
  // as a Record, which the compiler knows leaves the cursors alone, and the
  // loop's state stays in registers (give route its state by value).
  // Destinations must be ranks of the exchange.
  template <class Record, class Item, class Route>
  void push_each(std::span<const Item> items, Route route) {
    static_assert(std::is_trivially_copyable_v<Record>, "records are copied as bytes");
    if (sizeof(Record) != shape_.record_bytes)
      throw ConfigError("aggregation: push_each with " + std::to_string(sizeof(Record)) + "-byte records into an exchange of " +
                        std::to_string(shape_.record_bytes) + "-byte records");
    if (routed_)
      push_lanes<Record>(own_chunk_.data(), items, route);
    else
      push_lanes<Record>(outbox_.data(), items, route);
  }

  // push_each over a generated stream: route(k) gives the k-th record as
  // {destination, fields...}, the Record built in place as Record{fields...}
  // (one field may be a whole Record). It is called once per k in [0, n) in
  // order, so it may keep state (a random stream advanced per call: nothing
  // is materialized, and a mutable lambda's state stays in registers like
  // push_each's). Give a struct Record as its fields: a Record returned
  // whole is copied through the stack (GCC: one 16-byte load over two 8-byte
  // stores, a failed store-to-load forward per record).
  template <class Record, class Route>
  void push_generated(std::size_t n, Route route) {
    static_assert(std::is_trivially_copyable_v<Record>, "records are copied as bytes");
    if (sizeof(Record) != shape_.record_bytes)
      throw ConfigError("aggregation: push_generated with " + std::to_string(sizeof(Record)) +
                        "-byte records into an exchange of " + std::to_string(shape_.record_bytes) + "-byte records");
    if (routed_)
      push_lanes_generated<Record>(own_chunk_.data(), n, route);
    else
      push_lanes_generated<Record>(outbox_.data(), n, route);
  }

  // push_each for exchanges with replies: route(item, k) (k: the item's
  // position) gives {destination, record, side}, a Record of exactly
  // record_bytes and a Side of exactly side_bytes (both trivially copyable;
  // a side that is an address is best given as std::uintptr_t: a pointer
  // store may alias the cursors, an integer's does not).
  template <class Record, class Side, class Item, class Route>
  void push_each_with_side(std::span<const Item> items, Route route) {
    static_assert(std::is_trivially_copyable_v<Record> && std::is_trivially_copyable_v<Side>, "records are copied as bytes");
    if (sizeof(Record) != shape_.record_bytes || sizeof(Side) != shape_.side_bytes)
      throw ConfigError("aggregation: push_each_with_side with " + std::to_string(sizeof(Record)) + "-byte records and " +
                        std::to_string(sizeof(Side)) + "-byte side records into an exchange of " +
                        std::to_string(shape_.record_bytes) + " and " + std::to_string(shape_.side_bytes));
    if (routed_)
      push_lanes_with_side<Record, Side>(own_chunk_.data(), side_stride_, items, route);
    else
      push_lanes_with_side<Record, Side>(outbox_.data(), shape_.side_bytes, items, route);
  }

  // Serves what has arrived and retires completed sends. True if it did work.
  bool progress() override;
  // Collective: sends every partial buffer and returns once every record
  // pushed anywhere before the call has been handled and every reply received.
  void flush();

  int rank() const noexcept { return rank_; }
  int size() const noexcept { return size_; }
  std::size_t capacity_records() const noexcept { return capacity_; }
  const Stats& stats() const noexcept { return stats_; }
  const Shape& shape() const noexcept { return shape_; }
  const AggregationOptions& options() const noexcept { return options_; }
  // Bytes this exchange holds for buffers on this rank (send + receive).
  std::size_t memory_bytes() const noexcept;
  // Of those, the same-node rings into this rank (their slots: one batch each).
  std::size_t ring_memory_bytes() const noexcept { return ring_ ? ring_->memory_bytes() : 0; }
  // The per-destination buffer size in use (the auto mode's choice, if auto).
  std::size_t buffer_bytes() const noexcept { return buffer_bytes_; }
  // Grid or node-first routing (multi-hop, over MPI).
  bool routed() const noexcept { return routed_; }
  // Whether batches to `rank` go through the same-node rings.
  bool uses_ring(int rank) const noexcept {
    return ring_ != nullptr && via_.at(static_cast<std::size_t>(rank)) == static_cast<const Transport*>(ring_.get());
  }
  // Ranks this rank keeps send buffers for (P-1 direct; grid: row + column).
  std::size_t destinations() const noexcept { return routed_ ? slots_.size() : static_cast<std::size_t>(size_ > 1 ? size_ - 1 : 0); }

 private:
  struct Header {
    std::uint32_t ticket;  // the origin's batch slot, echoed in the reply
    std::uint32_t count;
  };
  static constexpr std::size_t kHeader = sizeof(Header);

  // Direct routing: the batch being filled towards one destination, as
  // cursor and end: push compares two pointers (no count times record
  // size), and push_each serves it and OwnChunk alike.
  struct Open {
    std::byte* cursor = nullptr;   // next record; cursor == end: full or no batch (next_batch)
    std::byte* end = nullptr;
    std::byte* records = nullptr;  // the batch's first record
    std::byte* side = nullptr;     // side data of the next record
  };
  // A batch ticket (the index echoed by its reply) and what it holds.
  struct Batch {
    Outbox out;                   // its buffer from the transport: open, or sent and kept
    std::vector<std::byte> side;  // side records until the reply
    bool awaiting_reply = false;
  };
  // Grid routing: a forward batch's reply being assembled at the intermediate.
  struct Assembly {
    Outbox out;
    Transport* via = nullptr;
    int origin = -1;
    std::uint32_t waiting = 0;  // records whose reply has not come back yet
    std::size_t bytes = 0;
  };
  // Grid routing: a buffer towards one neighbour, of one kind.
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
  // This rank's open chunk towards one destination: the push fast path.
  struct OwnChunk {
    std::byte* cursor = nullptr;  // next record; cursor == end: closed or full (slow path)
    std::byte* end = nullptr;
    std::byte* side = nullptr;    // side data of the next record
    std::byte* header = nullptr;  // null: no chunk open
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

  // Grid routing's fast path: room in this rank's open chunk towards dest
  // (invalid dests and this rank never have one); else the slow path.
  std::byte* push_routed_fast(int dest, std::byte** side) {
    if (static_cast<unsigned>(dest) < own_chunk_.size()) {
      OwnChunk& c = own_chunk_[static_cast<std::size_t>(dest)];
      if (c.cursor != c.end) {
        std::byte* at = c.cursor;
        c.cursor += shape_.record_bytes;
        if (side) {
          *side = c.side;
          c.side += side_stride_;
        }
        return at;
      }
    }
    return push_routed(dest, side);
  }
  // The claim-or-spill core under every push loop: room for one record in
  // dest's lane (cursor and end first, then side) by a pointer bump, or,
  // once per batch, the slow path push(): the next batch, the self lane
  // applied, a new chunk. With `side`, the lane's side cursor advances by
  // `side_stride` too. Inlined with a constant record size and a null or
  // local side, it compiles to the bare bump.
  template <class Lane>
  [[gnu::always_inline]] std::byte* claim(Lane* lanes, int dest, std::size_t record_bytes, std::size_t side_stride,
                                          std::byte** side) {
    Lane& lane = lanes[dest];
    std::byte* at = lane.cursor;
    if (at != lane.end) [[likely]] {
      lane.cursor = at + record_bytes;
      if (side) {
        *side = lane.side;
        lane.side += side_stride;
      }
      return at;
    }
    return side ? push(dest, *side) : push(dest);
  }
  // push_each's loop over Open or OwnChunk lanes.
  template <class Record, class Lane, class Item, class Route>
  void push_lanes(Lane* lanes, std::span<const Item> items, Route& route) {
    for (const Item& item : items) {
      const auto [dest, record] = route(item);
      std::byte* at = claim(lanes, dest, sizeof(Record), 0, nullptr);
      std::construct_at(reinterpret_cast<Record*>(at), record);  // a Record store: aliases no cursor
    }
  }
  // push_generated's loop: push_lanes' with the item made by route(k).
  // The generator is copied into the loop's frame: its state (advanced per
  // record) is then a local whose address never escapes, kept in registers
  // though a Record store could otherwise alias it.
  template <class Record, class Lane, class Route>
  void push_lanes_generated(Lane* lanes, const std::size_t n, Route& route) {
    Route generate = std::move(route);
    for (std::size_t k = 0; k < n; ++k) {
      const auto routed = generate(k);
      std::byte* at = claim(lanes, std::get<0>(routed), sizeof(Record), 0, nullptr);
      std::apply([at](const auto&, const auto&... fields) { ::new (static_cast<void*>(at)) Record{fields...}; }, routed);
    }
  }
  // push_each_with_side's loop: the side advances by `stride` (direct:
  // side_bytes; multi-hop: side_stride_).
  template <class Record, class Side, class Lane, class Item, class Route>
  void push_lanes_with_side(Lane* lanes, const std::size_t stride, std::span<const Item> items, Route& route) {
    const std::size_t n = items.size();
    const Item* in = items.data();
    for (std::size_t k = 0; k < n; ++k) {
      const auto [dest, record, side] = route(in[k], k);
      std::byte* s = nullptr;
      std::byte* at = claim(lanes, dest, sizeof(Record), stride, &s);
      std::construct_at(reinterpret_cast<Record*>(at), record);
      std::construct_at(reinterpret_cast<Side*>(s), side);
    }
  }
  void next_batch(int dest);
  void send_current(int dest);
  void setup_self_lane();
  void apply_self_lane();
  void rewind_self_lane();
  void setup_transports(Runtime& rt, std::array<std::size_t, kChannels> batch_bytes, int forward_extra);
  // Transports hand arrived batches here (Receiver).
  bool arrived(const Arrival& arrival) override;
  bool retry_deferred();
  int free_batch(int first, int end) const;
  // Direct routing.
  bool handle_request(const Arrival& a);
  void handle_reply(std::span<const std::byte> msg);
  // Grid routing.
  void setup_routes(const Routing& routing);
  std::byte* push_routed(int dest, std::byte** side);
  void close_chunk(int dest);
  bool open_batch(int slot, bool blocking);
  bool has_room(int slot) const;
  std::byte* carve_run(int slot, int origin, std::uint32_t want, std::uint32_t& granted, std::byte*& side);
  void send_routed(int slot);
  bool drain_forward();
  bool handle_final(const Arrival& a);
  void handle_routed_reply(std::span<const std::byte> msg);
  void reply_own(const std::byte* replies, const std::byte* side, std::size_t n);
  int start_assembly(int origin);
  void finish_assembly(int i);
  void release_forwarded();
  void flush_routed();
  void on_idle() override;
  bool idle() const;

  ProgressEngine& engine_;
  MPI_Comm comm_ = MPI_COMM_NULL;
  int rank_ = 0, size_ = 1;
  Shape shape_;
  AggregationOptions options_;
  RequestHandler on_request_;
  ReplyHandler on_reply_;
  std::uint32_t capacity_ = 1;  // records per batch
  int per_dest_ = 2;            // batches per destination: 1 filling + in flight

  std::vector<Open> outbox_;          // by destination (direct routing)
  std::vector<int> current_;          // batch being filled per destination (grid: per slot), -1: none
  std::vector<Batch> batches_;        // destination d owns [d*per_dest_, (d+1)*per_dest_) (grid: slot_batches_)
  std::vector<int> sent_to_;          // request batches sent per destination since flush
  std::uint64_t received_ = 0;        // request batches handled since flush
  int awaiting_ = 0;                  // batches awaiting their reply

  // Transports: MPI for every rank, the same-node rings for the co-locales
  // they reach; via_ is the choice per destination (and for replies to it).
  std::unique_ptr<MpiTransport> mpi_;
  std::unique_ptr<RingTransport> ring_;
  std::vector<Transport*> via_;        // by rank
  std::vector<Transport*> transports_;  // polled in this order
  std::deque<Arrival> deferred_;       // requests whose reply has no room yet
  bool retrying_ = false;
  std::vector<Assembly> assemblies_;
  std::vector<int> free_assemblies_;
  Stats stats_;

  std::size_t buffer_bytes_ = 0;
  // The self lane's records (empty without one): outbox_[rank_] (direct
  // routing) or own_chunk_[rank_] (multi-hop) points into it.
  std::vector<std::byte> self_records_;
  // With replies: the self lane's side records and the replies its handler writes.
  std::vector<std::byte> self_side_, self_replies_;

  // Grid routing state (empty with direct routing).
  bool routed_ = false;
  std::vector<Slot> slots_;
  std::vector<int> own_slot_;   // by destination rank: where this rank's own records go
  std::vector<int> fwd_slot_;   // by final destination: where forwarded records go; -1: never
  std::vector<OwnChunk> own_chunk_;       // by destination rank
  std::vector<int> slot_batches_;         // slot s owns batches [slot_batches_[s], slot_batches_[s + 1])
  std::vector<int> batch_slot_;           // by batch: its slot
  std::vector<RoutedOutbox> routed_out_;  // by slot
  std::vector<int> sent_fwd_to_;          // forward batches sent per rank since flush
  std::uint64_t received_fwd_ = 0;
  std::deque<HeldBatch> held_;
  bool draining_ = false;
  std::size_t cap_bytes_ = 0;     // payload bytes of one batch
  std::size_t max_records_ = 0;   // records one batch can hold at most
  std::size_t side_stride_ = 0;   // side bytes per record position (room for a forwarded run's reply address)
  std::vector<std::byte> side_scratch_;
  double round_start_ = 0;        // auto buffer size: when this round's pushes began
  std::uint64_t tune_records_ = 0;  // records_sent when the round began
};

}  // namespace tessera::comm
