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
// - The engine: batch formats, tickets and side records, replies,
//   progress and termination. Two engines, chosen once when the exchange is
//   made (src/comm/exchange_engine.hpp): DirectExchange (direct_exchange.cpp)
//   and RoutedExchange (multi-hop, routed_exchange.cpp), over the same
//   transports. This class pushes records into the engine's lanes itself (a
//   pointer bump per record, the same code for both); the engine is called
//   once per batch, when a lane is full.
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
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <new>
#include <span>
#include <string>
#include <tuple>
#include <type_traits>
#include <vector>

#include "tessera/comm/options.hpp"
#include "tessera/runtime/error.hpp"
#include "tessera/runtime/runtime.hpp"

namespace tessera::comm {

namespace detail {
// This rank's room towards one destination, as cursor and end (push
// compares two pointers, no count times record size): a direct batch being
// filled, a multi-hop chunk, or the self lane. cursor == end: full or none
// yet (the engine's slow path).
struct ExchangeLane {
  std::byte* cursor = nullptr;
  std::byte* end = nullptr;
  std::byte* side = nullptr;  // side data of the next record
};
class ExchangeEngine;
}  // namespace detail

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
    if (static_cast<std::size_t>(static_cast<unsigned>(dest)) >= lane_count_) [[unlikely]]
      return spill(dest, nullptr);  // throws RangeError
    return claim(lanes_, dest, record_bytes_, 0, nullptr);
  }
  // Same, plus room for the record's side data (exchanges with replies).
  std::byte* push(int dest, std::byte*& side) {
    if (static_cast<std::size_t>(static_cast<unsigned>(dest)) >= lane_count_) [[unlikely]]
      return spill(dest, &side);
    return claim(lanes_, dest, record_bytes_, side_stride_, &side);
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
    if (sizeof(Record) != record_bytes_)
      throw ConfigError("aggregation: push_each with " + std::to_string(sizeof(Record)) + "-byte records into an exchange of " +
                        std::to_string(record_bytes_) + "-byte records");
    push_lanes<Record>(lanes_, items, route);
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
    if (sizeof(Record) != record_bytes_)
      throw ConfigError("aggregation: push_generated with " + std::to_string(sizeof(Record)) +
                        "-byte records into an exchange of " + std::to_string(record_bytes_) + "-byte records");
    push_lanes_generated<Record>(lanes_, n, route);
  }

  // push_each for exchanges with replies: route(item, k) (k: the item's
  // position) gives {destination, record, side}, a Record of exactly
  // record_bytes and a Side of exactly side_bytes (both trivially copyable;
  // a side that is an address is best given as std::uintptr_t: a pointer
  // store may alias the cursors, an integer's does not).
  template <class Record, class Side, class Item, class Route>
  void push_each_with_side(std::span<const Item> items, Route route) {
    static_assert(std::is_trivially_copyable_v<Record> && std::is_trivially_copyable_v<Side>, "records are copied as bytes");
    if (sizeof(Record) != record_bytes_ || sizeof(Side) != side_bytes_)
      throw ConfigError("aggregation: push_each_with_side with " + std::to_string(sizeof(Record)) + "-byte records and " +
                        std::to_string(sizeof(Side)) + "-byte side records into an exchange of " +
                        std::to_string(record_bytes_) + " and " + std::to_string(side_bytes_));
    push_lanes_with_side<Record, Side>(lanes_, side_stride_, items, route);
  }

  // Serves what has arrived and retires completed sends. True if it did work.
  bool progress();
  // Collective: sends every partial buffer and returns once every record
  // pushed anywhere before the call has been handled and every reply received.
  void flush();

  int rank() const noexcept;
  int size() const noexcept;
  std::size_t capacity_records() const noexcept;
  const Stats& stats() const noexcept;
  const Shape& shape() const noexcept;
  const AggregationOptions& options() const noexcept;
  // Bytes this exchange holds for buffers on this rank (send + receive).
  std::size_t memory_bytes() const noexcept;
  // Of those, the same-node rings into this rank (their slots: one batch each).
  std::size_t ring_memory_bytes() const noexcept;
  // The per-destination buffer size in use (the auto mode's choice, if auto).
  std::size_t buffer_bytes() const noexcept;
  // Grid or node-first routing (multi-hop, over MPI).
  bool routed() const noexcept;
  // Whether batches to `rank` go through the same-node rings.
  bool uses_ring(int rank) const noexcept;
  // Ranks this rank keeps send buffers for (P-1 direct; grid: row + column).
  std::size_t destinations() const noexcept;

 private:
  using Lane = detail::ExchangeLane;
  // The claim-or-spill core under every push: room for one record in dest's
  // lane by a pointer bump, or, once per batch, the engine's slow path
  // (spill: the next batch, the self lane applied, a new chunk). With
  // `side`, the lane's side cursor advances by `side_stride` too. Inlined
  // with a constant record size and a null or local side, it compiles to the
  // bare bump.
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
    return spill(dest, side);
  }
  // The engine's slow path (one virtual call per batch).
  std::byte* spill(int dest, std::byte** side);
  // push_each's loop.
  template <class Record, class Item, class Route>
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
  template <class Record, class Route>
  void push_lanes_generated(Lane* lanes, const std::size_t n, Route& route) {
    Route generate = std::move(route);
    for (std::size_t k = 0; k < n; ++k) {
      const auto routed = generate(k);
      std::byte* at = claim(lanes, std::get<0>(routed), sizeof(Record), 0, nullptr);
      std::apply([at](const auto&, const auto&... fields) { ::new (static_cast<void*>(at)) Record{fields...}; }, routed);
    }
  }
  // push_each_with_side's loop: the side advances by `stride` (the engine's:
  // side_bytes, or more for multi-hop).
  template <class Record, class Side, class Item, class Route>
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

  std::unique_ptr<detail::ExchangeEngine> engine_;
  // The engine's lanes and what the push paths read per record, copied here
  // once: the lanes never move after construction.
  Lane* lanes_ = nullptr;
  std::size_t lane_count_ = 0;
  std::size_t record_bytes_ = 0;
  std::size_t side_bytes_ = 0;
  std::size_t side_stride_ = 0;
};

}  // namespace tessera::comm
