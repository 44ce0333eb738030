// DirectExchange: every record straight to its destination. One batch is
// filled per destination at a time (its lane is the batch's room in the
// transport's outbox); with replies its side records wait in its ticket.
#include <algorithm>
#include <cstddef>
#include <cstring>

#include "exchange_engine.hpp"
#include "exchange_internal.hpp"
#include "tessera/runtime/error.hpp"

namespace tessera::comm::detail {

DirectExchange::DirectExchange(Runtime& rt, Shape shape, const AggregationOptions& options, RequestHandler on_request,
                               ReplyHandler on_reply)
    : ExchangeEngine(rt, shape, options, std::move(on_request), std::move(on_reply)) {
  const std::size_t rb = shape_.record_bytes, qb = shape_.reply_bytes;
  capacity_ = static_cast<std::uint32_t>(std::clamp<std::size_t>(buffer_bytes_ / rb, 1, 1u << 24));
  per_dest_ = 1 + options_.max_in_flight;
  side_stride_ = shape_.side_bytes;
  const auto P = static_cast<std::size_t>(size_);
  current_.assign(P, -1);
  batches_.resize(P * static_cast<std::size_t>(per_dest_));
  setup_transports(rt, {kHeader + capacity_ * rb, 0, qb ? kHeader + capacity_ * qb : 0}, 0, options_.same_node_rings != 0);
  start();
}

void DirectExchange::send_current(int dest) {
  const auto d = static_cast<std::size_t>(dest);
  const int b = current_[d];
  if (b < 0) return;
  Batch& batch = batches_[static_cast<std::size_t>(b)];
  const std::byte* records = batch.out.data + kHeader;
  if (lanes_[d].cursor == records) return;
  const auto count = static_cast<std::uint32_t>(static_cast<std::size_t>(lanes_[d].cursor - records) / shape_.record_bytes);
  Header h{static_cast<std::uint32_t>(b), count};
  // The header goes just before the records (in the transport's outbox: for
  // the rings, the peer's slot, so the records are there already).
  std::memcpy(batch.out.data, &h, kHeader);
  const std::size_t bytes = kHeader + count * shape_.record_bytes;
  send_batch(*via_[d], dest, Channel::request, batch.out, bytes, count, false);
  batch.out = {};
  if (shape_.reply_bytes) {
    batch.awaiting_reply = true;
    ++awaiting_;
  }
  ++sent_to_[d];
  ++stats_.batches_sent;
  ++stats_.batches_to[d];
  stats_.records_sent += count;
  current_[d] = -1;
  lanes_[d] = ExchangeLane{};  // cursor == end: the next push opens a batch
}

// The next batch to dest needs a free ticket (with replies: its side records
// wait there for the reply) and an outbox from dest's transport.
void DirectExchange::open_lane(int dest) {
  send_current(dest);
  const auto d = static_cast<std::size_t>(dest);
  Transport& via = *via_[d];
  const int first = dest * per_dest_, end = first + per_dest_;
  int b = free_batch(first, end);
  Outbox box = b >= 0 ? via.acquire(dest, Channel::request) : Outbox{};
  if (box) {
    progress_.progress_all();  // pushing also serves: keeps peers' buffers moving
  } else {
    // Every batch for dest is in flight: serve others until one comes back.
    progress_.serve_until([&] {
      if (b < 0) b = free_batch(first, end);
      return b >= 0 && static_cast<bool>(box = via.acquire(dest, Channel::request));
    });
  }
  Batch& batch = batches_[static_cast<std::size_t>(b)];
  if (batch.side.size() < capacity_ * shape_.side_bytes) batch.side.resize(capacity_ * shape_.side_bytes);
  batch.out = box;
  current_[d] = b;
  std::byte* records = box.data + kHeader;
  lanes_[d] = ExchangeLane{records, records + static_cast<std::size_t>(capacity_) * shape_.record_bytes, batch.side.data()};
}

// With replies a request is handled only once its reply has an outbox
// towards the origin (for the rings: a free slot in the origin's reply ring,
// which the origin drains whenever it serves), so nothing here waits.
bool DirectExchange::handle_request(const Arrival& a) {
  const std::byte* msg = a.data.data();
  Header h;
  if (a.data.size() < kHeader) throw Error("aggregation: corrupt batch from rank " + std::to_string(a.source));
  std::memcpy(&h, msg, kHeader);
  if (a.data.size() != kHeader + h.count * shape_.record_bytes)
    throw Error("aggregation: corrupt batch from rank " + std::to_string(a.source));
  if (!shape_.reply_bytes) {
    ++received_;
    ++stats_.batches_received;
    on_request_(a.source, msg + kHeader, h.count, nullptr);
    return true;
  }
  Transport& back = *via_[static_cast<std::size_t>(a.source)];
  Outbox reply = back.acquire(a.source, Channel::reply);
  if (!reply) return false;
  ++received_;
  ++stats_.batches_received;
  on_request_(a.source, msg + kHeader, h.count, reply.data + kHeader);
  std::memcpy(reply.data, &h, kHeader);
  send_batch(back, a.source, Channel::reply, reply, kHeader + h.count * shape_.reply_bytes, h.count, false);
  return true;
}

void DirectExchange::handle_reply(std::span<const std::byte> msg) {
  Header h;
  if (msg.size() < kHeader) throw Error("aggregation: corrupt or unexpected reply batch");
  std::memcpy(&h, msg.data(), kHeader);
  if (h.ticket >= batches_.size() || !batches_[h.ticket].awaiting_reply ||
      msg.size() != kHeader + h.count * shape_.reply_bytes)
    throw Error("aggregation: corrupt or unexpected reply batch");
  Batch& batch = batches_[h.ticket];
  on_reply_(msg.data() + kHeader, batch.side.data(), h.count);
  batch.awaiting_reply = false;
  --awaiting_;
}

void DirectExchange::settle() {
  for (int d = 0; d < size_; ++d) send_current(d);
  settle_round(progress_, comm_, sent_to_, received_, [&] { return idle(); });
  progress_.barrier_serving(comm_);
}

}  // namespace tessera::comm::detail
