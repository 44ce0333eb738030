// RoutedExchange: the engine of multi-hop routing (grid, node-first). The
// routes come from a Routing policy (routing.hpp), the batches travel over
// the transports ExchangeEngine set up, like direct ones.
#include <algorithm>
#include <cstddef>
#include <cstring>

#include "exchange_engine.hpp"
#include "exchange_internal.hpp"
#include "tessera/comm/routing.hpp"
#include "tessera/runtime/error.hpp"
#include "tessera/runtime/wait.hpp"

namespace tessera::comm::detail {

// A routed batch: header, then chunks [ChunkHeader][capacity records], the
// first `count` records of each used. Only the last chunk is trimmed to its
// count when sent; the others may have room left (an own chunk open when its
// batch filled). Replies are compact: the records' replies in chunk order.
// Side data is indexed by record position = the chunk's first position (sum
// of the capacities before it) + index in the chunk. For a forwarded run the
// side of its first position holds [u32 reply slot][u32 reply position].

namespace {
// Chunks per destination a batch holds room for: a chunk left partly empty
// when its batch is sent costs at most 1/8 of a batch per destination.
constexpr std::size_t kChunksPerDestination = 8;
}  // namespace

RoutedExchange::RoutedExchange(Runtime& rt, Shape shape, const AggregationOptions& options, RequestHandler on_request,
                               ReplyHandler on_reply, const Routing& routing)
    : ExchangeEngine(rt, shape, options, std::move(on_request), std::move(on_reply)) {
  setup_routes(routing);
  // With replies a forward batch is busy for a round trip over two hops
  // (and until the intermediate's final batches carrying it fill): one more
  // batch keeps the origin pushing meanwhile (AggregationOptions counts it).
  // Over MPI only: the replies walk the request batch, which the rings do
  // not keep.
  const std::size_t qb = shape_.reply_bytes;
  setup_transports(rt, {kHeader + cap_bytes_, kHeader + cap_bytes_, qb ? kHeader + max_records_ * qb : 0}, qb ? 1 : 0,
                   false);
  start();
}

// A forward batch stays in its buffer until drain_forward has placed it.
bool RoutedExchange::accept_forward(const Arrival& a) {
  held_.push_back(HeldBatch{a});
  ++received_fwd_;
  return false;
}

bool RoutedExchange::progress_more() { return !held_.empty() && drain_forward(); }

std::uint64_t RoutedExchange::sent_this_round(std::size_t r) const {
  return static_cast<std::uint64_t>(sent_to_[r]) + static_cast<std::uint64_t>(sent_fwd_to_[r]);
}

// Only an exchange with replies can hold a request another rank waits for
// in a partial buffer.
void RoutedExchange::on_idle() { release_forwarded(); }

void RoutedExchange::setup_routes(const Routing& routing) {
  const int P = size_;
  auto slot_for = [&](int rank, bool forward) {
    for (std::size_t k = 0; k < slots_.size(); ++k)
      if (slots_[k].rank == rank && slots_[k].forward == forward) return static_cast<int>(k);
    slots_.push_back({rank, forward, 1, {}});
    return static_cast<int>(slots_.size() - 1);
  };
  own_slot_.assign(static_cast<std::size_t>(P), -1);
  fwd_slot_.assign(static_cast<std::size_t>(P), -1);
  for (int d = 0; d < P; ++d) {
    if (d == rank_) continue;
    const Routing::Hop hop = routing.first_hop(d);
    int own = slot_for(hop.rank, hop.forward);
    own_slot_[static_cast<std::size_t>(d)] = own;
    slots_[static_cast<std::size_t>(own)].own_dests.push_back(d);
    if (int next = routing.forwards_to(d); next >= 0) fwd_slot_[static_cast<std::size_t>(d)] = slot_for(next, false);
  }
  const auto S = slots_.size();
  const std::size_t rb = shape_.record_bytes;
  cap_bytes_ = std::max(buffer_bytes_, kChunkHeader + rb);
  max_records_ = cap_bytes_ / rb;
  capacity_ = static_cast<std::uint32_t>((cap_bytes_ - kChunkHeader) / rb);
  for (Slot& slot : slots_)
    slot.chunk_records = static_cast<std::uint32_t>(std::max<std::size_t>(
        1, max_records_ / (kChunksPerDestination * std::max<std::size_t>(slot.own_dests.size(), 1))));
  side_stride_ = shape_.reply_bytes ? std::max<std::size_t>(shape_.side_bytes, 8) : 0;
  per_dest_ = 1 + options_.max_in_flight;
  slot_batches_.assign(S + 1, 0);
  // With replies a forward batch is busy for a round trip over two hops:
  // one batch more (see the constructor).
  const int forward_extra = shape_.reply_bytes ? 1 : 0;
  for (std::size_t k = 0; k < S; ++k)
    slot_batches_[k + 1] = slot_batches_[k] + per_dest_ + (slots_[k].forward ? forward_extra : 0);
  for (std::size_t k = 0; k < S; ++k)
    for (int b = slot_batches_[k]; b < slot_batches_[k + 1]; ++b) batch_slot_.push_back(static_cast<int>(k));
  chunk_at_.assign(static_cast<std::size_t>(P), nullptr);
  routed_out_.assign(S, RoutedOutbox{});
  current_.assign(S, -1);
  batches_.resize(static_cast<std::size_t>(slot_batches_[S]));
  sent_fwd_to_.assign(static_cast<std::size_t>(P), 0);
  if (shape_.reply_bytes && side_stride_ != shape_.side_bytes) side_scratch_.resize(max_records_ * shape_.side_bytes);
}

bool RoutedExchange::has_room(int slot) const {
  auto s = static_cast<std::size_t>(slot);
  return current_[s] >= 0 &&
         static_cast<std::size_t>(routed_out_[s].end - routed_out_[s].tail) >= kChunkHeader + shape_.record_bytes;
}

void RoutedExchange::close_chunk(int dest) {
  const auto d = static_cast<std::size_t>(dest);
  std::byte* header = chunk_at_[d];
  auto n = static_cast<std::uint32_t>(static_cast<std::size_t>(lanes_[d].cursor - (header + kChunkHeader)) / shape_.record_bytes);
  store<std::uint32_t>(header + offsetof(ChunkHeader, count), n);
  routed_out_[static_cast<std::size_t>(own_slot_[d])].count += n;
  lanes_[d] = ExchangeLane{};
  chunk_at_[d] = nullptr;
}

// A new own chunk towards dest, carved from its slot's open batch (a new
// batch when that one is full).
void RoutedExchange::open_lane(int dest) {
  const auto d = static_cast<std::size_t>(dest);
  const int slot = own_slot_[d];
  const Slot& to = slots_[static_cast<std::size_t>(slot)];
  if (chunk_at_[d]) close_chunk(dest);  // full
  // Serving while waiting may carve forwarded runs into this slot: re-check.
  while (!has_room(slot)) open_batch(slot, true);
  RoutedOutbox& o = routed_out_[static_cast<std::size_t>(slot)];
  const std::size_t rb = shape_.record_bytes;
  auto capacity = static_cast<std::uint32_t>(
      std::min<std::size_t>(to.chunk_records, static_cast<std::size_t>(o.end - o.tail - kChunkHeader) / rb));
  ChunkHeader header{static_cast<std::uint32_t>(to.forward ? dest : rank_), 0, capacity, 0};
  std::memcpy(o.tail, &header, kChunkHeader);
  chunk_at_[d] = o.tail;
  std::byte* records = o.tail + kChunkHeader;
  lanes_[d] = ExchangeLane{records, records + capacity * rb, o.side + o.positions * side_stride_};
  o.last = o.tail;
  o.tail = lanes_[d].end;
  o.positions += capacity;
}

std::byte* RoutedExchange::carve_run(int slot, int origin, std::uint32_t want, std::uint32_t& granted,
                                     std::byte*& side) {
  if (!has_room(slot) && (!open_batch(slot, false) || !has_room(slot))) {
    granted = 0;
    return nullptr;  // every batch towards that rank is in flight: resume later
  }
  RoutedOutbox& o = routed_out_[static_cast<std::size_t>(slot)];
  const std::size_t rb = shape_.record_bytes;
  granted = static_cast<std::uint32_t>(
      std::min<std::size_t>(want, static_cast<std::size_t>(o.end - o.tail - kChunkHeader) / rb));
  ChunkHeader header{static_cast<std::uint32_t>(origin), granted, granted, 0};
  std::memcpy(o.tail, &header, kChunkHeader);
  std::byte* run = o.tail + kChunkHeader;
  side = o.side + o.positions * side_stride_;
  o.last = o.tail;
  o.tail = run + granted * rb;
  o.positions += granted;
  o.count += granted;
  o.holds_forwarded = true;
  return run;
}

// A batch towards a slot's rank needs a free ticket of the slot and an outbox
// from that rank's transport.
bool RoutedExchange::open_batch(int slot, bool blocking) {
  auto s = static_cast<std::size_t>(slot);
  send_routed(slot);
  const Slot& to = slots_[s];
  Transport& via = *via_[static_cast<std::size_t>(to.rank)];
  const Channel channel = to.forward ? Channel::forward : Channel::request;
  Backoff backoff;
  unsigned idle = 0;
  for (;;) {
    // Serving below may have opened a batch here already (forwarding).
    if (current_[s] >= 0) {
      if (has_room(slot)) return true;
      send_routed(slot);
      if (current_[s] >= 0) {  // nothing in it to send: start it over
        Batch& batch = batches_[static_cast<std::size_t>(current_[s])];
        routed_out_[s] = RoutedOutbox{batch.out.data + kHeader, batch.out.data + kHeader + cap_bytes_, batch.side.data()};
        return true;
      }
    }
    const int b = free_batch(slot_batches_[s], slot_batches_[s + 1]);
    Outbox box = b >= 0 ? via.acquire(to.rank, channel) : Outbox{};
    if (box) {
      Batch& batch = batches_[static_cast<std::size_t>(b)];
      if (batch.side.size() < max_records_ * side_stride_) batch.side.resize(max_records_ * side_stride_);
      batch.out = box;
      current_[s] = b;
      routed_out_[s] = RoutedOutbox{box.data + kHeader, box.data + kHeader + cap_bytes_, batch.side.data()};
      if (blocking) progress_.progress_all();  // pushing also serves: keeps peers' buffers moving
      return true;
    }
    if (!blocking) return false;
    progress_.serve_once(backoff, idle);
  }
}

void RoutedExchange::send_routed(int slot) {
  auto s = static_cast<std::size_t>(slot);
  int b = current_[s];
  if (b < 0) return;
  const Slot& to = slots_[s];
  for (int d : to.own_dests)
    if (chunk_at_[static_cast<std::size_t>(d)]) close_chunk(d);
  RoutedOutbox& o = routed_out_[s];
  if (o.count == 0) return;
  // Trim the last chunk: the message ends with its last record.
  auto used = load<std::uint32_t>(o.last + offsetof(ChunkHeader, count));
  store<std::uint32_t>(o.last + offsetof(ChunkHeader, capacity), used);
  o.tail = o.last + kChunkHeader + used * shape_.record_bytes;
  Batch& batch = batches_[static_cast<std::size_t>(b)];
  Header h{static_cast<std::uint32_t>(b), o.count};
  std::memcpy(batch.out.data, &h, kHeader);
  // With replies the reply walks this batch's chunks: the transport keeps it.
  const bool keep = shape_.reply_bytes > 0;
  const auto bytes = static_cast<std::size_t>(o.tail - batch.out.data);
  send_batch(*via_[static_cast<std::size_t>(to.rank)], to.rank, to.forward ? Channel::forward : Channel::request,
             batch.out, bytes, o.count, keep);
  if (keep) {
    batch.awaiting_reply = true;
    ++awaiting_;
  } else {
    batch.out = {};
  }
  ++(to.forward ? sent_fwd_to_ : sent_to_)[static_cast<std::size_t>(to.rank)];
  ++stats_.batches_sent;
  ++stats_.batches_to[static_cast<std::size_t>(to.rank)];
  stats_.records_sent += o.count;
  current_[s] = -1;
  o = RoutedOutbox{};
}

void RoutedExchange::release_forwarded() {
  if (!shape_.reply_bytes) return;
  for (std::size_t s = 0; s < slots_.size(); ++s)
    if (routed_out_[s].holds_forwarded) send_routed(static_cast<int>(s));
}

namespace {
// One chunk of a received routed batch, checked against the batch's bounds.
struct ChunkAt {
  std::uint32_t tag, count, capacity;
  const std::byte* records;
  std::size_t next;  // offset of the chunk after it
};
ChunkAt read_chunk(const std::byte* msg, std::size_t offset, std::size_t bytes, std::size_t record_bytes,
                   std::size_t header_bytes, int source) {
  ChunkAt c{};
  if (bytes - offset < header_bytes) throw Error("aggregation: corrupt batch from rank " + std::to_string(source));
  c.tag = load<std::uint32_t>(msg + offset);
  c.count = load<std::uint32_t>(msg + offset + 4);
  c.capacity = load<std::uint32_t>(msg + offset + 8);
  c.records = msg + offset + header_bytes;
  if (c.count > c.capacity || (bytes - offset - header_bytes) / record_bytes < c.capacity)
    throw Error("aggregation: corrupt batch from rank " + std::to_string(source));
  c.next = offset + header_bytes + c.capacity * record_bytes;
  return c;
}
}  // namespace

// A final batch: handled whole once its reply has an outbox (false until then).
bool RoutedExchange::handle_request(const Arrival& a) {
  const int source = a.source;
  const std::byte* msg = a.data.data();
  const std::size_t bytes = a.data.size();
  Header h;
  if (bytes < kHeader) throw Error("aggregation: corrupt batch from rank " + std::to_string(source));
  std::memcpy(&h, msg, kHeader);
  if (h.count > max_records_) throw Error("aggregation: corrupt batch from rank " + std::to_string(source));
  const std::size_t rb = shape_.record_bytes, qb = shape_.reply_bytes;
  Transport& back = *via_[static_cast<std::size_t>(source)];
  Outbox reply;
  if (qb && !(reply = back.acquire(source, Channel::reply))) return false;
  std::byte* replies = qb ? reply.data + kHeader : nullptr;
  std::size_t position = 0;
  for (std::size_t offset = kHeader; offset < bytes;) {
    ChunkAt c = read_chunk(msg, offset, bytes, rb, kChunkHeader, source);
    if (c.tag >= static_cast<std::uint32_t>(size_) || position + c.count > h.count)
      throw Error("aggregation: corrupt batch from rank " + std::to_string(source));
    if (c.count) on_request_(static_cast<int>(c.tag), c.records, c.count, qb ? replies + position * qb : nullptr);
    position += c.count;
    offset = c.next;
  }
  if (position != h.count) throw Error("aggregation: corrupt batch from rank " + std::to_string(source));
  ++received_;
  ++stats_.batches_received;
  if (qb) {
    std::memcpy(reply.data, &h, kHeader);
    send_batch(back, source, Channel::reply, reply, kHeader + h.count * qb, h.count, false);
  }
  return true;
}

// A forward batch's reply is assembled in an outbox towards its origin,
// filled by its own chunks and by the replies of the final batches its other
// chunks went into.
int RoutedExchange::start_assembly(int origin) {
  Transport& back = *via_[static_cast<std::size_t>(origin)];
  Outbox out = back.acquire(origin, Channel::reply);
  if (!out) return -1;
  int i;
  if (free_assemblies_.empty()) {
    i = static_cast<int>(assemblies_.size());
    assemblies_.emplace_back();
  } else {
    i = free_assemblies_.back();
    free_assemblies_.pop_back();
  }
  assemblies_[static_cast<std::size_t>(i)] = Assembly{out, &back, origin, 0, 0};
  return i;
}

void RoutedExchange::finish_assembly(int i) {
  Assembly& a = assemblies_[static_cast<std::size_t>(i)];
  send_batch(*a.via, a.origin, Channel::reply, a.out, a.bytes,
             static_cast<std::uint32_t>((a.bytes - kHeader) / shape_.reply_bytes), false);
  a = Assembly{};
  free_assemblies_.push_back(i);
}

// Places held forward batches in arrival order, each resumed where it stopped.
bool RoutedExchange::drain_forward() {
  if (draining_) return false;
  draining_ = true;
  struct Reset {
    bool& flag;
    ~Reset() { flag = false; }
  } reset{draining_};
  const std::size_t qb = shape_.reply_bytes;
  bool did = false;
  while (!held_.empty()) {
    HeldBatch& held = held_.front();
    const int source = held.arrival.source;
    if (held.arrival.data.size() < kHeader)
      throw Error("aggregation: corrupt forward batch from rank " + std::to_string(source));
    Header h;
    std::memcpy(&h, held.arrival.data.data(), kHeader);
    if (!held.started) {
      if (h.count > max_records_)
        throw Error("aggregation: corrupt forward batch from rank " + std::to_string(source));
      if (qb) {
        held.pending = start_assembly(source);
        if (held.pending < 0) return did;  // no room for its reply yet: resume later
        Assembly& reply = assemblies_[static_cast<std::size_t>(held.pending)];
        std::memcpy(reply.out.data, &h, kHeader);
        reply.waiting = h.count;
        reply.bytes = kHeader + h.count * qb;
      }
      held.started = true;
      ++stats_.batches_received;
    }
    if (!place_chunks(held, h.count, did)) return did;
    if (qb && assemblies_[static_cast<std::size_t>(held.pending)].waiting == 0) finish_assembly(held.pending);
    const Arrival placed = held.arrival;
    held_.pop_front();
    placed.from->release(placed);
    did = true;
  }
  return did;
}

// A held forward batch's chunks from where it stopped: this rank's own are
// served from the receive buffer, the others copied, run by run, into the
// buffers towards their destinations. False while such a buffer is in flight
// (resume later); `did`: something was placed.
bool RoutedExchange::place_chunks(HeldBatch& held, std::uint32_t count, bool& did) {
  const std::size_t rb = shape_.record_bytes, qb = shape_.reply_bytes;
  const std::byte* msg = held.arrival.data.data();
  const std::size_t bytes = held.arrival.data.size();
  const int source = held.arrival.source;
  while (held.offset < bytes) {
    ChunkAt c = read_chunk(msg, held.offset, bytes, rb, kChunkHeader, source);
    if (held.position + c.count > count)
      throw Error("aggregation: corrupt forward batch from rank " + std::to_string(source));
    if (c.tag == static_cast<std::uint32_t>(rank_)) {
      if (c.count) {
        std::byte* replies = nullptr;
        if (qb) {
          Assembly& reply = assemblies_[static_cast<std::size_t>(held.pending)];
          replies = reply.out.data + kHeader + held.position * qb;
          reply.waiting -= c.count;
        }
        on_request_(source, c.records, c.count, replies);
      }
    } else {
      const int slot = c.tag < static_cast<std::uint32_t>(size_) ? fwd_slot_[c.tag] : -1;
      if (slot < 0)
        throw Error("aggregation: forward batch from rank " + std::to_string(source) + " names rank " +
                    std::to_string(c.tag) + ", which this rank does not route to");
      while (held.done < c.count) {
        std::uint32_t granted = 0;
        std::byte* side = nullptr;
        std::byte* run = carve_run(slot, source, c.count - held.done, granted, side);
        if (!run) return false;
        std::memcpy(run, c.records + held.done * rb, granted * rb);
        did = true;
        if (qb) {
          store<std::uint32_t>(side, static_cast<std::uint32_t>(held.pending));
          store<std::uint32_t>(side + 4, held.position + held.done);
        }
        held.done += granted;
      }
    }
    did = true;
    held.position += c.count;
    held.done = 0;
    held.offset = c.next;
  }
  if (held.position != count) throw Error("aggregation: corrupt forward batch from rank " + std::to_string(source));
  return true;
}

void RoutedExchange::handle_reply(std::span<const std::byte> msg) {
  Header h;
  if (msg.size() < kHeader) throw Error("aggregation: corrupt or unexpected reply batch");
  std::memcpy(&h, msg.data(), kHeader);
  const std::size_t qb = shape_.reply_bytes, rb = shape_.record_bytes;
  if (h.ticket >= batches_.size() || !batches_[h.ticket].awaiting_reply || msg.size() != kHeader + h.count * qb)
    throw Error("aggregation: corrupt or unexpected reply batch");
  Batch& batch = batches_[h.ticket];
  Header sent;
  std::memcpy(&sent, batch.out.data, kHeader);
  if (sent.count != h.count) throw Error("aggregation: reply batch does not match its request");
  const bool forward = slots_[static_cast<std::size_t>(batch_slot_[h.ticket])].forward;
  const std::byte* replies = msg.data() + kHeader;
  // Walk the request's chunks (this rank wrote them): replies are compact,
  // side data is by carved position.
  const std::byte* at = batch.out.data + kHeader;
  std::size_t position = 0, side_position = 0;
  while (position < h.count) {
    ChunkHeader c;
    std::memcpy(&c, at, kChunkHeader);
    const std::byte* side = batch.side.data() + side_position * side_stride_;
    if (forward || c.tag == static_cast<std::uint32_t>(rank_)) {  // forward batches hold only own records
      if (c.count) on_reply_(replies + position * qb, packed_side(side, c.count), c.count);
    } else {  // a forwarded run: its replies go into the forward batch's reply, in one piece
      auto pending = load<std::uint32_t>(side);
      auto where = load<std::uint32_t>(side + 4);
      if (pending >= assemblies_.size() || !assemblies_[pending].out)
        throw Error("aggregation: reply batch names a reply this rank is not assembling");
      Assembly& reply = assemblies_[pending];
      std::memcpy(reply.out.data + kHeader + where * qb, replies + position * qb, c.count * qb);
      reply.waiting -= c.count;
      if (reply.waiting == 0) finish_assembly(static_cast<int>(pending));
    }
    at += kChunkHeader + c.capacity * rb;
    position += c.count;
    side_position += c.capacity;
  }
  batch.awaiting_reply = false;
  --awaiting_;
  via_[static_cast<std::size_t>(slots_[static_cast<std::size_t>(batch_slot_[h.ticket])].rank)]->give_back(batch.out);
  batch.out = {};
}

void RoutedExchange::settle() {
  // Round 1: forward batches. Once every rank has placed every forward
  // batch it is owed, no record is left to forward.
  for (std::size_t s = 0; s < slots_.size(); ++s)
    if (slots_[s].forward) send_routed(static_cast<int>(s));
  settle_round(progress_, comm_, sent_fwd_to_, received_fwd_, [&] { return held_.empty(); });
  // Round 2: final batches, then every reply home.
  for (std::size_t s = 0; s < slots_.size(); ++s) send_routed(static_cast<int>(s));
  settle_round(progress_, comm_, sent_to_, received_, [&] { return idle(); });
  progress_.barrier_serving(comm_);
}

}  // namespace tessera::comm::detail
