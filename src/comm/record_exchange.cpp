// RecordExchange and what its two engines share (ExchangeEngine): the
// construction, the transports, the self lane, arrivals and deferred
// requests, progress and the flush frame. Direct batches are in
// direct_exchange.cpp, multi-hop ones in routed_exchange.cpp.
#include "tessera/comm/record_exchange.hpp"

#include <algorithm>
#include <cstddef>
#include <cstring>
#include <exception>

#include "exchange_engine.hpp"
#include "tessera/comm/routing.hpp"
#include "tessera/runtime/error.hpp"
#include "tessera/runtime/wait.hpp"

namespace tessera::comm {

// ---- RecordExchange: the pushes' lanes, the rest forwarded ----------------

RecordExchange::RecordExchange(Runtime& rt, Shape shape, const AggregationOptions& options,
                               RequestHandler on_request, ReplyHandler on_reply)
    : engine_(detail::make_exchange_engine(rt, shape, options, std::move(on_request), std::move(on_reply))),
      lanes_(engine_->lanes()),
      lane_count_(engine_->lane_count()),
      record_bytes_(shape.record_bytes),
      side_bytes_(shape.side_bytes),
      side_stride_(engine_->side_stride()) {}

RecordExchange::~RecordExchange() {
  if (std::uncaught_exceptions() == 0) {
    try {
      engine_->flush();
    } catch (const std::exception& e) {
      abort_job(e);
    }
  }
}

std::byte* RecordExchange::spill(int dest, std::byte** side) { return engine_->claim(dest, side); }
bool RecordExchange::progress() { return engine_->progress(); }
void RecordExchange::flush() { engine_->flush(); }
int RecordExchange::rank() const noexcept { return engine_->rank(); }
int RecordExchange::size() const noexcept { return engine_->size(); }
std::size_t RecordExchange::capacity_records() const noexcept { return engine_->capacity_records(); }
const RecordExchange::Stats& RecordExchange::stats() const noexcept { return engine_->stats(); }
const RecordExchange::Shape& RecordExchange::shape() const noexcept { return engine_->shape(); }
const AggregationOptions& RecordExchange::options() const noexcept { return engine_->options(); }
std::size_t RecordExchange::memory_bytes() const noexcept { return engine_->memory_bytes(); }
std::size_t RecordExchange::ring_memory_bytes() const noexcept { return engine_->ring_memory_bytes(); }
std::size_t RecordExchange::buffer_bytes() const noexcept { return engine_->buffer_bytes(); }
bool RecordExchange::routed() const noexcept { return engine_->routed(); }
bool RecordExchange::uses_ring(int rank) const noexcept { return engine_->uses_ring(rank); }
std::size_t RecordExchange::destinations() const noexcept { return engine_->destinations(); }

namespace detail {

std::unique_ptr<ExchangeEngine> make_exchange_engine(Runtime& rt, RecordExchange::Shape shape,
                                                     const AggregationOptions& options,
                                                     RecordExchange::RequestHandler on_request,
                                                     RecordExchange::ReplyHandler on_reply) {
  const AggregationOptions resolved = options.resolved();
  const std::unique_ptr<Routing> routing = make_routing(rt, resolved.routing, rt.rank(), rt.size());
  if (routing->multi_hop())
    return std::make_unique<RoutedExchange>(rt, shape, resolved, std::move(on_request), std::move(on_reply), *routing);
  return std::make_unique<DirectExchange>(rt, shape, resolved, std::move(on_request), std::move(on_reply));
}

// ---- ExchangeEngine -------------------------------------------------------

ExchangeEngine::ExchangeEngine(Runtime& rt, Shape shape, const AggregationOptions& options,
                               RequestHandler on_request, ReplyHandler on_reply)
    : progress_(rt.progress()),
      shape_(shape),
      options_(options),
      on_request_(std::move(on_request)),
      on_reply_(std::move(on_reply)),
      counters_(rt.comm_counters()) {
  static std::uint32_t exchanges_made = 0;  // this process's, alike on every rank
  trace_number_ = exchanges_made++;
  if (shape_.record_bytes == 0) throw ConfigError("aggregation records must have at least one byte");
  if (shape_.reply_bytes > 0 && !on_reply_) throw ConfigError("an exchange with replies needs a reply handler");
  // Collective, and a peer may still be pushing into another exchange,
  // waiting for this rank's replies, before it gets here: serve meanwhile.
  MPI_Request req;
  TESSERA_MPI(MPI_Comm_idup(rt.comm(), &comm_, &req));
  progress_.wait_serving(req);
  TESSERA_MPI(MPI_Comm_rank(comm_, &rank_));
  TESSERA_MPI(MPI_Comm_size(comm_, &size_));
  stats_.batches_to.assign(static_cast<std::size_t>(size_), 0);
  lanes_.assign(static_cast<std::size_t>(size_), ExchangeLane{});  // cursor == end: the first push opens one
  sent_to_.assign(static_cast<std::size_t>(size_), 0);
  sent_seq_.assign(static_cast<std::size_t>(kChannels * size_), 0);
  received_seq_.assign(static_cast<std::size_t>(kChannels * size_), 0);

  buffer_bytes_ = options_.buffer_bytes;
  if (options_.buffer_bytes == AggregationOptions::kAutoBufferBytes) {
    // Every rank must use the same size (receive buffers are sized by it).
    std::size_t mine = options_.buffer_bytes_for(size_, shape_.record_bytes, shape_.reply_bytes);
    MPI_Request agree;
    TESSERA_MPI(MPI_Iallreduce(&mine, &buffer_bytes_, 1, MPI_UINT64_T, MPI_MAX, comm_, &agree));
    progress_.wait_serving(agree);
  }
  round_start_ = MPI_Wtime();
}

ExchangeEngine::~ExchangeEngine() {
  progress_.remove(this);
  // The transports cancel their receives on comm_: before it is freed.
  transports_.clear();
  via_.clear();
  ring_.reset();
  mpi_.reset();
  if (comm_ != MPI_COMM_NULL) MPI_Comm_free(&comm_);
}

void ExchangeEngine::setup_transports(Runtime& rt, std::array<std::size_t, kChannels> batch_bytes, int forward_extra,
                                      bool rings) {
  via_.assign(static_cast<std::size_t>(size_), nullptr);
  if (size_ == 1) return;
  MpiTransport::Config c;
  c.bytes = batch_bytes;
  // At most min(P - 1, 8) batches of each channel arrive at once; more wait in MPI.
  const auto receives = static_cast<std::size_t>(std::min(size_ - 1, 8));
  for (int k = 0; k < kChannels; ++k) c.receives[static_cast<std::size_t>(k)] = batch_bytes[static_cast<std::size_t>(k)] ? receives : 0;
  c.per_destination = {per_dest_, per_dest_ + forward_extra, 0};  // replies: one shared pool
  mpi_ = std::make_unique<MpiTransport>(comm_, c);
  if (rings && rt.node().size > 1) {
    ring_ = std::make_unique<RingTransport>(rt, static_cast<std::uint32_t>(per_dest_),
                                            batch_bytes[static_cast<std::size_t>(Channel::request)],
                                            batch_bytes[static_cast<std::size_t>(Channel::reply)]);
    transports_.push_back(ring_.get());
  }
  transports_.push_back(mpi_.get());
  for (int d = 0; d < size_; ++d)
    via_[static_cast<std::size_t>(d)] = ring_ && ring_->reaches(d) ? static_cast<Transport*>(ring_.get()) : mpi_.get();
}

std::size_t ExchangeEngine::memory_bytes() const noexcept {
  std::size_t total = 0;
  for (const auto& b : batches_) total += b.side.capacity();
  for (const Transport* t : transports_) total += t->memory_bytes();
  total += side_scratch_.capacity() + self_records_.capacity() + self_side_.capacity() + self_replies_.capacity();
  return total;
}

std::byte* ExchangeEngine::claim(int dest, std::byte** side) {
  if (dest == rank_ && shape_.self_lane) {
    self_records_.empty() ? setup_self_lane() : apply_self_lane();  // first push here, or full
  } else {
    if (dest == rank_ || dest < 0 || dest >= size_)
      throw RangeError("aggregation destination " + std::to_string(dest) + " is not another rank of [0, " +
                       std::to_string(size_) + ")");
    open_lane(dest);
  }
  ExchangeLane& lane = lanes_[static_cast<std::size_t>(dest)];
  std::byte* at = lane.cursor;
  lane.cursor += shape_.record_bytes;
  if (side) {
    *side = lane.side;
    lane.side += side_stride_;
  }
  return at;
}

// One batch's worth of records, like a buffer towards a peer; the push fast
// path fills it as any other destination's lane. Made at the first push to
// this rank: an aggregator that never takes the lane (a SrcAggregator read
// one index at a time) pays nothing for it.
void ExchangeEngine::setup_self_lane() {
  const auto cap = static_cast<std::size_t>(capacity_);
  self_records_.resize(cap * shape_.record_bytes);
  if (shape_.reply_bytes) {
    self_side_.resize(cap * side_stride_);
    self_replies_.resize(cap * shape_.reply_bytes);
  }
  rewind_self_lane();
}

void ExchangeEngine::rewind_self_lane() {
  std::byte* records = self_records_.data();
  lanes_[static_cast<std::size_t>(rank_)] = ExchangeLane{records, records + self_records_.size(), self_side_.data()};
}

void ExchangeEngine::apply_self_lane() {
  const std::byte* cursor = lanes_[static_cast<std::size_t>(rank_)].cursor;
  const std::size_t n = static_cast<std::size_t>(cursor - self_records_.data()) / shape_.record_bytes;
  if (n == 0) return;
  if (!shape_.reply_bytes) {
    on_request_(rank_, self_records_.data(), n, nullptr);
  } else {
    on_request_(rank_, self_records_.data(), n, self_replies_.data());
    on_reply_(self_replies_.data(), packed_side(self_side_.data(), n), n);
  }
  ++stats_.self_batches;
  rewind_self_lane();
}

const std::byte* ExchangeEngine::packed_side(const std::byte* side, std::size_t n) {
  if (side_stride_ == shape_.side_bytes) return side;
  if (side_scratch_.size() < n * shape_.side_bytes) side_scratch_.resize(n * shape_.side_bytes);
  for (std::size_t k = 0; k < n; ++k)
    std::memcpy(side_scratch_.data() + k * shape_.side_bytes, side + k * side_stride_, shape_.side_bytes);
  return side_scratch_.data();
}

int ExchangeEngine::free_batch(int first, int end) const {
  for (int b = first; b < end; ++b) {
    const Batch& batch = batches_[static_cast<std::size_t>(b)];
    if (!batch.out && !batch.awaiting_reply) return b;
  }
  return -1;
}

bool ExchangeEngine::accept_forward(const Arrival& a) {
  throw Error("aggregation: forward batch from rank " + std::to_string(a.source) + " in a direct exchange");
}

namespace {
const char* const kChannelNames[kChannels] = {"request", "forward", "reply"};
}

void ExchangeEngine::send_batch(Transport& via, int dest, Channel channel, Outbox box, std::size_t bytes,
                                std::uint32_t records, bool keep) {
  trace::Span traced(trace::Category::comm, "send batch");
  const auto c = static_cast<std::size_t>(channel);
  const std::uint64_t k = sent_seq_[c * static_cast<std::size_t>(size_) + static_cast<std::size_t>(dest)]++;
  if (traced.on()) [[unlikely]]
    traced.arg("dst", dest).arg("records", records).arg("bytes", bytes).arg("channel", kChannelNames[c])
        .flow_out(trace::batch_flow_id(trace_number_, static_cast<int>(c), rank_, dest, k));
  via.send(dest, channel, box, bytes, keep);
  stats_.bytes_sent += bytes;
  counters_.sent(dest, records, bytes);
  // The rank's aggregation traffic over time: its slope is the send rate.
  if (traced.on()) [[unlikely]]
    trace::counter("aggregation bytes sent", "MiB", static_cast<double>(counters_.bytes_sent()) / (1024.0 * 1024.0));
}

bool ExchangeEngine::arrived(const Arrival& a) {
  // Every batch (request, forward or reply) starts with its Header.
  Header h{0, 0};
  if (a.data.size() >= kHeader) std::memcpy(&h, a.data.data(), kHeader);
  counters_.received(a.source, h.count, a.data.size());
  const auto c = static_cast<std::size_t>(a.channel);
  const std::uint64_t k = received_seq_[c * static_cast<std::size_t>(size_) + static_cast<std::size_t>(a.source)]++;
  trace::Span traced(trace::Category::comm, "handle batch");
  if (traced.on()) [[unlikely]]
    traced.arg("src", a.source).arg("records", h.count).arg("bytes", a.data.size()).arg("channel", kChannelNames[c])
        .flow_in(trace::batch_flow_id(trace_number_, static_cast<int>(c), a.source, rank_, k));
  switch (a.channel) {
    case Channel::reply:
      handle_reply(a.data);
      return true;
    case Channel::forward:
      return accept_forward(a);
    case Channel::request:
      break;
  }
  if (handle_request(a)) return true;
  deferred_.push_back(a);  // its reply finds no room yet: kept in its buffer, retried
  return false;
}

bool ExchangeEngine::retry_deferred() {
  if (retrying_) return false;  // a handler below is serving
  retrying_ = true;
  struct Reset {
    bool& flag;
    ~Reset() { flag = false; }
  } reset{retrying_};
  bool did = false;
  for (std::size_t k = 0; k < deferred_.size();) {
    const Arrival a = deferred_[k];
    if (handle_request(a)) {
      deferred_.erase(deferred_.begin() + static_cast<std::ptrdiff_t>(k));
      a.from->release(a);
      did = true;
    } else {
      ++k;
    }
  }
  return did;
}

bool ExchangeEngine::progress() {
  if (size_ == 1) return false;
  bool did = false;
  for (Transport* t : transports_) did = t->poll(*this) || did;
  if (!deferred_.empty()) did = retry_deferred() || did;
  // After retiring sends, so the buffers just freed take held batches at once.
  return progress_more() || did;
}

bool ExchangeEngine::idle() const {
  if (awaiting_ > 0) return false;
  for (const Transport* t : transports_)
    if (t->busy()) return false;
  return true;
}

void ExchangeEngine::flush() {
  if (!self_records_.empty()) apply_self_lane();
  if (size_ == 1) return;
  // Auto size: the round's batch counts and fill time, read before this
  // flush's own traffic, and its rate decide the size the next exchange
  // starts from.
  const bool tune = options_.buffer_bytes == AggregationOptions::kAutoBufferBytes;
  std::uint64_t busiest = 0, batches = 0;
  if (tune)
    for (std::size_t r = 0; r < sent_to_.size(); ++r) {
      const std::uint64_t n = sent_this_round(r);
      busiest = std::max(busiest, n);
      batches += n;
    }
  const double filled = MPI_Wtime() - round_start_;
  settle();
  if (tune) {
    // Every rank climbs on the same figures (sums over the ranks), so they
    // all suggest the same size.
    const double round = std::max(MPI_Wtime() - round_start_, 1e-9);
    double mine[3] = {static_cast<double>(stats_.records_sent - tune_records_) / round,
                      busiest ? filled / static_cast<double>(busiest) : 0.0, static_cast<double>(batches)};
    double sum[3];
    MPI_Request req;
    TESSERA_MPI(MPI_Iallreduce(mine, sum, 3, MPI_DOUBLE, MPI_SUM, comm_, &req));
    progress_.wait_serving(req);
    agg_autotune::set_tuned(agg_autotune::climb(buffer_bytes_, static_cast<std::uint64_t>(sum[2]),
                                                sum[1] / static_cast<double>(size_), sum[0]));
    tune_records_ = stats_.records_sent;
  }
  round_start_ = MPI_Wtime();
}

}  // namespace detail
}  // namespace tessera::comm
