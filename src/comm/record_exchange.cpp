// RecordExchange: construction, the transports, direct routing's batches,
// progress and termination. Multi-hop (grid, node-first) batches are in
// routed_exchange.cpp.
#include "tessera/comm/record_exchange.hpp"

#include <algorithm>
#include <cstddef>
#include <cstring>
#include <exception>

#include "exchange_internal.hpp"
#include "tessera/comm/routing.hpp"
#include "tessera/runtime/error.hpp"
#include "tessera/runtime/wait.hpp"

namespace tessera::comm {

using detail::settle_round;

void RecordExchange::on_idle() {
  // Only a grid-routed exchange with replies can hold a request another rank
  // waits for in a partial buffer.
  if (routed_ && shape_.reply_bytes) release_forwarded();
}

RecordExchange::RecordExchange(Runtime& rt, Shape shape, const AggregationOptions& options,
                               RequestHandler on_request, ReplyHandler on_reply)
    : engine_(rt.progress()),
      shape_(shape),
      options_(options.resolved()),
      on_request_(std::move(on_request)),
      on_reply_(std::move(on_reply)) {
  if (shape_.record_bytes == 0) throw ConfigError("aggregation records must have at least one byte");
  if (shape_.reply_bytes > 0 && !on_reply_) throw ConfigError("an exchange with replies needs a reply handler");
  // Collective, and a peer may still be pushing into another exchange,
  // waiting for this rank's replies, before it gets here: serve meanwhile.
  MPI_Request req;
  TESSERA_MPI(MPI_Comm_idup(rt.comm(), &comm_, &req));
  engine_.wait_serving(req);
  TESSERA_MPI(MPI_Comm_rank(comm_, &rank_));
  TESSERA_MPI(MPI_Comm_size(comm_, &size_));
  stats_.batches_to.assign(static_cast<std::size_t>(size_), 0);

  buffer_bytes_ = options_.buffer_bytes;
  if (options_.buffer_bytes == AggregationOptions::kAutoBufferBytes) {
    // Every rank must use the same size (receive buffers are sized by it).
    std::size_t mine = options_.buffer_bytes_for(size_, shape_.record_bytes, shape_.reply_bytes);
    MPI_Request agree;
    TESSERA_MPI(MPI_Iallreduce(&mine, &buffer_bytes_, 1, MPI_UINT64_T, MPI_MAX, comm_, &agree));
    engine_.wait_serving(agree);
  }
  round_start_ = MPI_Wtime();
  const std::size_t rb = shape_.record_bytes, qb = shape_.reply_bytes;
  const std::unique_ptr<Routing> routing = make_routing(rt, options_.routing, rank_, size_);
  routed_ = routing->multi_hop();
  if (routed_) {
    setup_routes(*routing);
    // With replies a forward batch is busy for a round trip over two hops
    // (and until the intermediate's final batches carrying it fill): one
    // more batch keeps the origin pushing meanwhile (AggregationOptions
    // counts it).
    setup_transports(rt, {kHeader + cap_bytes_, kHeader + cap_bytes_, qb ? kHeader + max_records_ * qb : 0},
                     qb ? 1 : 0);
  } else {
    capacity_ = static_cast<std::uint32_t>(std::clamp<std::size_t>(buffer_bytes_ / rb, 1, 1u << 24));
    per_dest_ = 1 + options_.max_in_flight;
    auto P = static_cast<std::size_t>(size_);
    outbox_.assign(P, Open{});  // cursor == end: the first push picks a batch
    current_.assign(P, -1);
    batches_.resize(P * static_cast<std::size_t>(per_dest_));
    sent_to_.assign(P, 0);
    setup_transports(rt, {kHeader + capacity_ * rb, 0, qb ? kHeader + capacity_ * qb : 0}, 0);
  }
  engine_.add(this);
}

// One batch's worth of records, like a buffer towards a peer; the push fast
// path (outbox_ or own_chunk_) fills it as any other destination's. Made at
// the first push to this rank: an aggregator that never takes the lane
// (a SrcAggregator read one index at a time) pays nothing for it.
void RecordExchange::setup_self_lane() {
  const auto cap = static_cast<std::size_t>(capacity_);
  self_records_.resize(cap * shape_.record_bytes);
  if (shape_.reply_bytes) {
    self_side_.resize(cap * (routed_ ? side_stride_ : shape_.side_bytes));
    self_replies_.resize(cap * shape_.reply_bytes);
  }
  rewind_self_lane();
}

// The lane's cursors back at its start (multi-hop: side records at the
// stride of its chunks, side_stride_).
void RecordExchange::rewind_self_lane() {
  const auto r = static_cast<std::size_t>(rank_);
  std::byte* records = self_records_.data();
  std::byte* end = records + self_records_.size();
  if (routed_)
    own_chunk_[r] = OwnChunk{records, end, self_side_.data(), nullptr};
  else
    outbox_[r] = Open{records, end, records, self_side_.data()};
}

void RecordExchange::apply_self_lane() {
  const auto r = static_cast<std::size_t>(rank_);
  const std::byte* cursor = routed_ ? own_chunk_[r].cursor : outbox_[r].cursor;
  const std::size_t n = static_cast<std::size_t>(cursor - self_records_.data()) / shape_.record_bytes;
  if (n == 0) return;
  if (!shape_.reply_bytes) {
    on_request_(rank_, self_records_.data(), n, nullptr);
  } else {
    on_request_(rank_, self_records_.data(), n, self_replies_.data());
    const std::byte* side = self_side_.data();
    if (routed_ && side_stride_ != shape_.side_bytes) {  // the reply handler reads them packed
      for (std::size_t k = 0; k < n; ++k)
        std::memcpy(side_scratch_.data() + k * shape_.side_bytes, side + k * side_stride_, shape_.side_bytes);
      side = side_scratch_.data();
    }
    on_reply_(self_replies_.data(), side, n);
  }
  ++stats_.self_batches;
  rewind_self_lane();
}

// MPI reaches every rank; the same-node rings (direct routing, unless
// switched off) take over the co-locales they reach.
void RecordExchange::setup_transports(Runtime& rt, std::array<std::size_t, kChannels> batch_bytes,
                                      int forward_extra) {
  via_.assign(static_cast<std::size_t>(size_), nullptr);
  if (size_ == 1) return;
  MpiTransport::Config c;
  c.bytes = batch_bytes;
  // At most min(P - 1, 8) batches of each channel arrive at once; more wait in MPI.
  const auto receives = static_cast<std::size_t>(std::min(size_ - 1, 8));
  for (int k = 0; k < kChannels; ++k) c.receives[static_cast<std::size_t>(k)] = batch_bytes[static_cast<std::size_t>(k)] ? receives : 0;
  c.per_destination = {per_dest_, per_dest_ + forward_extra, 0};  // replies: one shared pool
  mpi_ = std::make_unique<MpiTransport>(comm_, c);
  if (!routed_ && options_.same_node_rings && rt.node().size > 1) {
    ring_ = std::make_unique<RingTransport>(rt, static_cast<std::uint32_t>(per_dest_),
                                            batch_bytes[static_cast<std::size_t>(Channel::request)],
                                            batch_bytes[static_cast<std::size_t>(Channel::reply)]);
    transports_.push_back(ring_.get());
  }
  transports_.push_back(mpi_.get());
  for (int d = 0; d < size_; ++d)
    via_[static_cast<std::size_t>(d)] = ring_ && ring_->reaches(d) ? static_cast<Transport*>(ring_.get()) : mpi_.get();
}

RecordExchange::~RecordExchange() {
  if (std::uncaught_exceptions() == 0) {
    try {
      flush();
    } catch (const std::exception& e) {
      abort_job(e);
    }
  }
  engine_.remove(this);
  // The transports cancel their receives on comm_: before it is freed.
  transports_.clear();
  via_.clear();
  ring_.reset();
  mpi_.reset();
  if (comm_ != MPI_COMM_NULL) MPI_Comm_free(&comm_);
}

std::size_t RecordExchange::memory_bytes() const noexcept {
  std::size_t total = 0;
  for (const auto& b : batches_) total += b.side.capacity();
  for (const Transport* t : transports_) total += t->memory_bytes();
  total += side_scratch_.capacity() + self_records_.capacity() + self_side_.capacity() + self_replies_.capacity();
  return total;
}

// A batch ticket in [first, end) that is not open, not kept and not
// awaiting its reply.
int RecordExchange::free_batch(int first, int end) const {
  for (int b = first; b < end; ++b) {
    const Batch& batch = batches_[static_cast<std::size_t>(b)];
    if (!batch.out && !batch.awaiting_reply) return b;
  }
  return -1;
}

void RecordExchange::send_current(int dest) {
  auto d = static_cast<std::size_t>(dest);
  int b = current_[d];
  if (b < 0 || outbox_[d].cursor == outbox_[d].records) return;
  Batch& batch = batches_[static_cast<std::size_t>(b)];
  const auto count = static_cast<std::uint32_t>(static_cast<std::size_t>(outbox_[d].cursor - outbox_[d].records) / shape_.record_bytes);
  Header h{static_cast<std::uint32_t>(b), count};
  // The header goes just before the records (in the transport's outbox: for
  // the rings, the peer's slot, so the records are there already).
  std::memcpy(batch.out.data, &h, kHeader);
  const std::size_t bytes = kHeader + count * shape_.record_bytes;
  via_[d]->send(dest, Channel::request, batch.out, bytes, false);
  stats_.bytes_sent += bytes;
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
  outbox_[d] = Open{};  // cursor == end: the next push picks a batch
}

// The next batch to dest needs a free ticket (with replies: its side records
// wait there for the reply) and an outbox from dest's transport.
void RecordExchange::next_batch(int dest) {
  if (dest == rank_ && shape_.self_lane) {
    self_records_.empty() ? setup_self_lane() : apply_self_lane();  // first push here, or full
    return;
  }
  if (dest == rank_ || dest < 0 || dest >= size_)
    throw RangeError("aggregation destination " + std::to_string(dest) + " is not another rank of [0, " +
                     std::to_string(size_) + ")");
  send_current(dest);
  auto d = static_cast<std::size_t>(dest);
  Transport& via = *via_[d];
  const int first = dest * per_dest_, end = first + per_dest_;
  int b = free_batch(first, end);
  Outbox box = b >= 0 ? via.acquire(dest, Channel::request) : Outbox{};
  if (box) {
    engine_.progress_all();  // pushing also serves: keeps peers' buffers moving
  } else {
    // Every batch for dest is in flight: serve others until one comes back.
    engine_.serve_until([&] {
      if (b < 0) b = free_batch(first, end);
      return b >= 0 && static_cast<bool>(box = via.acquire(dest, Channel::request));
    });
  }
  Batch& batch = batches_[static_cast<std::size_t>(b)];
  if (batch.side.size() < capacity_ * shape_.side_bytes) batch.side.resize(capacity_ * shape_.side_bytes);
  batch.out = box;
  current_[d] = b;
  std::byte* records = box.data + kHeader;
  outbox_[d] = Open{records, records + static_cast<std::size_t>(capacity_) * shape_.record_bytes, records, batch.side.data()};
}

bool RecordExchange::arrived(const Arrival& a) {
  switch (a.channel) {
    case Channel::reply:
      routed_ ? handle_routed_reply(a.data) : handle_reply(a.data);
      return true;
    case Channel::forward:
      if (!routed_) throw Error("aggregation: forward batch from rank " + std::to_string(a.source) + " in a direct exchange");
      held_.push_back(HeldBatch{a});  // placed by drain_forward, then released
      ++received_fwd_;
      return false;
    case Channel::request:
      break;
  }
  if (routed_ ? handle_final(a) : handle_request(a)) return true;
  deferred_.push_back(a);  // its reply finds no room yet: kept in its buffer, retried
  return false;
}

bool RecordExchange::retry_deferred() {
  if (retrying_) return false;  // a handler below is serving
  retrying_ = true;
  struct Reset {
    bool& flag;
    ~Reset() { flag = false; }
  } reset{retrying_};
  bool did = false;
  for (std::size_t k = 0; k < deferred_.size();) {
    const Arrival a = deferred_[k];
    if (routed_ ? handle_final(a) : handle_request(a)) {
      deferred_.erase(deferred_.begin() + static_cast<std::ptrdiff_t>(k));
      a.from->release(a);
      did = true;
    } else {
      ++k;
    }
  }
  return did;
}

// A request batch of direct routing. With replies it is handled only once
// its reply has an outbox towards the origin (for the rings: a free slot in
// the origin's reply ring, which the origin drains whenever it serves), so
// nothing here waits.
bool RecordExchange::handle_request(const Arrival& a) {
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
  back.send(a.source, Channel::reply, reply, kHeader + h.count * shape_.reply_bytes, false);
  stats_.bytes_sent += kHeader + h.count * shape_.reply_bytes;
  return true;
}

void RecordExchange::handle_reply(std::span<const std::byte> msg) {
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

bool RecordExchange::progress() {
  if (size_ == 1) return false;
  bool did = false;
  for (Transport* t : transports_) did = t->poll(*this) || did;
  if (!deferred_.empty()) did = retry_deferred() || did;
  // Grid routing: place held forward batches after retiring sends, so the
  // buffers just freed take them at once.
  if (!held_.empty()) did = drain_forward() || did;
  return did;
}

bool RecordExchange::idle() const {
  if (awaiting_ > 0) return false;
  for (const Transport* t : transports_)
    if (t->busy()) return false;
  return true;
}

void RecordExchange::flush() {
  if (!self_records_.empty()) apply_self_lane();
  if (size_ == 1) return;
  // Auto size: the round's batch counts and fill time, read before this
  // flush's own traffic, and its rate decide the size the next exchange
  // starts from.
  const bool tune = options_.buffer_bytes == AggregationOptions::kAutoBufferBytes;
  std::uint64_t busiest = 0, batches = 0;
  if (tune)
    for (std::size_t r = 0; r < sent_to_.size(); ++r) {
      std::uint64_t n = static_cast<std::uint64_t>(sent_to_[r]) + (routed_ ? static_cast<std::uint64_t>(sent_fwd_to_[r]) : 0);
      busiest = std::max(busiest, n);
      batches += n;
    }
  const double filled = MPI_Wtime() - round_start_;
  if (routed_) {
    flush_routed();
  } else {
    for (int d = 0; d < size_; ++d) send_current(d);
    settle_round(engine_, comm_, sent_to_, received_, [&] { return idle(); });
    engine_.barrier_serving(comm_);
  }
  if (tune) {
    // Every rank climbs on the same figures (sums over the ranks), so they
    // all suggest the same size.
    const double round = std::max(MPI_Wtime() - round_start_, 1e-9);
    double mine[3] = {static_cast<double>(stats_.records_sent - tune_records_) / round,
                      busiest ? filled / static_cast<double>(busiest) : 0.0, static_cast<double>(batches)};
    double sum[3];
    MPI_Request req;
    TESSERA_MPI(MPI_Iallreduce(mine, sum, 3, MPI_DOUBLE, MPI_SUM, comm_, &req));
    engine_.wait_serving(req);
    agg_autotune::set_tuned(agg_autotune::climb(buffer_bytes_, static_cast<std::uint64_t>(sum[2]),
                                                sum[1] / static_cast<double>(size_), sum[0]));
    tune_records_ = stats_.records_sent;
  }
  round_start_ = MPI_Wtime();
}

}  // namespace tessera::comm
