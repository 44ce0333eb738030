#include "tessera/comm/record_exchange.hpp"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>

#include "tessera/runtime/error.hpp"
#include "tessera/runtime/wait.hpp"

namespace tessera::comm {

void release_forwarded_all();

namespace {
// Every live exchange of this process. A rank waiting on one exchange serves
// all of them: a peer may be blocked pushing into another aggregator that
// this rank will only flush later (several aggregators in use at once).
std::vector<RecordExchange*>& live_exchanges() {
  static std::vector<RecordExchange*> all;
  return all;
}

bool progress_all() {
  bool did = false;
  // Index loop: handlers never create or destroy exchanges, but stay safe.
  for (std::size_t i = 0; i < live_exchanges().size(); ++i) did = live_exchanges()[i]->progress() || did;
  return did;
}

// Live grid-routed exchanges with replies: only they can hold a request
// another rank waits for in a partial buffer.
int& routed_reply_exchanges() {
  static int n = 0;
  return n;
}
// Idle polls after which a waiting rank sends those partial buffers.
constexpr unsigned kReleaseAfterIdlePolls = 32;

// One poll of every exchange by a rank that waits: progress resets the
// backoff; an idle poll backs off and, every kReleaseAfterIdlePolls, sends
// the partial buffers holding forwarded requests (a peer may wait for them).
void serve_once(Backoff& backoff, unsigned& idle) {
  if (progress_all()) {
    backoff.reset();
    idle = 0;
  } else {
    if (routed_reply_exchanges() > 0 && ++idle % kReleaseAfterIdlePolls == 0) release_forwarded_all();
    backoff.idle();
  }
}

// Serves every exchange until done(). With only direct routing this is
// wait_until(done, progress_all).
template <class Done>
void serve_until(Done&& done) {
  Backoff backoff;
  unsigned idle = 0;
  while (!done()) serve_once(backoff, idle);
}

// Waits for a non-blocking collective while serving every exchange.
void wait_serving(MPI_Request& request) {
  int done = 0;
  serve_until([&] {
    if (!done) TESSERA_MPI(MPI_Test(&request, &done, MPI_STATUS_IGNORE));
    return done != 0;
  });
}

// Ends one round of one kind of batch: a reduction of `sent` (batches this
// rank sent to each rank) tells it how many it is owed; it serves until they
// have all been received and `done()` holds, then resets both counts.
template <class Done>
void settle_round(MPI_Comm comm, std::vector<int>& sent, std::uint64_t& received, Done&& done) {
  int expected = 0;
  MPI_Request req;
  TESSERA_MPI(MPI_Ireduce_scatter_block(sent.data(), &expected, 1, MPI_INT, MPI_SUM, comm, &req));
  wait_serving(req);
  serve_until([&] { return received >= static_cast<std::uint64_t>(expected) && done(); });
  received -= static_cast<std::uint64_t>(expected);
  std::fill(sent.begin(), sent.end(), 0);
}

// No rank may start its next round (or read results through shared memory)
// before every rank has applied this one. Other exchanges keep being served.
void barrier_serving(MPI_Comm comm) {
  MPI_Request req;
  TESSERA_MPI(MPI_Ibarrier(comm, &req));
  wait_serving(req);
}

template <class T>
T load(const std::byte* at) {
  T v;
  std::memcpy(&v, at, sizeof(T));
  return v;
}
template <class T>
void store(std::byte* at, T v) {
  std::memcpy(at, &v, sizeof(T));
}
}  // namespace

void release_forwarded_all() {
  for (std::size_t i = 0; i < live_exchanges().size(); ++i)
    if (live_exchanges()[i]->routed_) live_exchanges()[i]->release_forwarded();
}

RecordExchange::RecordExchange(MPI_Comm comm, Shape shape, const AggregationOptions& options,
                               RequestHandler on_request, ReplyHandler on_reply)
    : shape_(shape),
      options_(options.resolved()),
      on_request_(std::move(on_request)),
      on_reply_(std::move(on_reply)) {
  if (shape_.record_bytes == 0) throw ConfigError("aggregation records must have at least one byte");
  if (shape_.reply_bytes > 0 && !on_reply_) throw ConfigError("an exchange with replies needs a reply handler");
  MPI_Request req;
  TESSERA_MPI(MPI_Comm_idup(comm, &comm_, &req));
  wait(req);
  TESSERA_MPI(MPI_Comm_rank(comm_, &rank_));
  TESSERA_MPI(MPI_Comm_size(comm_, &size_));

  buffer_bytes_ = options_.buffer_bytes;
  if (options_.buffer_bytes == AggregationOptions::kAutoBufferBytes) {
    // Every rank must use the same size (receive buffers are sized by it).
    std::size_t mine = options_.buffer_bytes_for(size_);
    MPI_Request agree;
    TESSERA_MPI(MPI_Iallreduce(&mine, &buffer_bytes_, 1, MPI_UINT64_T, MPI_MAX, comm_, &agree));
    wait(agree);
  }
  round_start_ = MPI_Wtime();
  routed_ = options_.routing == AggregationRouting::grid && size_ > 1;
  if (routed_) {
    setup_routes();
    live_exchanges().push_back(this);
    if (shape_.reply_bytes) ++routed_reply_exchanges();
    return;
  }
  capacity_ = static_cast<std::uint32_t>(
      std::clamp<std::size_t>(buffer_bytes_ / shape_.record_bytes, 1, 1u << 24));
  per_dest_ = 1 + options_.max_in_flight;
  auto P = static_cast<std::size_t>(size_);
  outbox_.assign(P, Outbox{nullptr, nullptr, capacity_});  // full: the first push picks a batch
  current_.assign(P, -1);
  batches_.resize(P * static_cast<std::size_t>(per_dest_));
  send_reqs_.assign(batches_.size(), MPI_REQUEST_NULL);
  sent_to_.assign(P, 0);

  if (size_ > 1) {
    request_slots_ = static_cast<std::size_t>(std::min(size_ - 1, 8));
    std::size_t reply_slots = shape_.reply_bytes ? request_slots_ : 0;
    recv_bufs_.resize(request_slots_ + reply_slots);
    recv_reqs_.assign(recv_bufs_.size(), MPI_REQUEST_NULL);
    for (std::size_t i = 0; i < recv_bufs_.size(); ++i) {
      bool request = i < request_slots_;
      recv_tag_.push_back(request ? kRequestTag : kReplyTag);
      std::size_t bytes = kHeader + capacity_ * (request ? shape_.record_bytes : shape_.reply_bytes);
      recv_bufs_[i].resize(bytes);
      TESSERA_MPI(MPI_Irecv(recv_bufs_[i].data(), static_cast<int>(bytes), MPI_BYTE, MPI_ANY_SOURCE,
                            request ? kRequestTag : kReplyTag, comm_, &recv_reqs_[i]));
    }
  }
  live_exchanges().push_back(this);
}

RecordExchange::~RecordExchange() {
  auto& live = live_exchanges();
  if (std::uncaught_exceptions() == 0) {
    try {
      flush();
    } catch (const std::exception& e) {
      abort_job(e);
    }
  }
  for (auto& r : recv_reqs_) {
    if (r != MPI_REQUEST_NULL) {
      MPI_Cancel(&r);
      MPI_Wait(&r, MPI_STATUS_IGNORE);
    }
  }
  live.erase(std::remove(live.begin(), live.end(), this), live.end());
  if (routed_ && shape_.reply_bytes) --routed_reply_exchanges();
  if (comm_ != MPI_COMM_NULL) MPI_Comm_free(&comm_);
}

std::size_t RecordExchange::memory_bytes() const noexcept {
  std::size_t total = 0;
  for (const auto& b : batches_) total += b.data.capacity() + b.side.capacity();
  for (const auto& r : recv_bufs_) total += r.capacity();
  for (const auto& r : reply_slots_) total += r.data.capacity();
  total += scratch_.capacity() + reply_scratch_.capacity() + side_scratch_.capacity();
  return total;
}

int RecordExchange::free_batch(int dest) const {
  int first = dest * per_dest_;
  for (int b = first; b < first + per_dest_; ++b) {
    const Batch& batch = batches_[static_cast<std::size_t>(b)];
    if (!batch.sending && !batch.awaiting_reply && b != current_[static_cast<std::size_t>(dest)]) return b;
  }
  return -1;
}

void RecordExchange::send_current(int dest) {
  auto d = static_cast<std::size_t>(dest);
  int b = current_[d];
  if (b < 0 || outbox_[d].count == 0) return;
  Batch& batch = batches_[static_cast<std::size_t>(b)];
  Header h{static_cast<std::uint32_t>(b), outbox_[d].count};
  std::memcpy(batch.data.data(), &h, kHeader);
  int bytes = static_cast<int>(kHeader + outbox_[d].count * shape_.record_bytes);
  TESSERA_MPI(MPI_Isend(batch.data.data(), bytes, MPI_BYTE, dest, kRequestTag, comm_,
                        &send_reqs_[static_cast<std::size_t>(b)]));
  batch.sending = true;
  batch.awaiting_reply = shape_.reply_bytes > 0;
  ++in_flight_;
  ++sent_to_[d];
  ++stats_.batches_sent;
  stats_.records_sent += outbox_[d].count;
  current_[d] = -1;
  outbox_[d] = Outbox{nullptr, nullptr, capacity_};
}

void RecordExchange::next_batch(int dest) {
  if (dest == rank_ || dest < 0 || dest >= size_)
    throw RangeError("aggregation destination " + std::to_string(dest) + " is not another rank of [0, " +
                     std::to_string(size_) + ")");
  send_current(dest);
  int b = free_batch(dest);
  if (b < 0) {
    // Every batch for dest is in flight: serve others until one comes back.
    serve_until([&] { return (b = free_batch(dest)) >= 0; });
  } else {
    progress_all();  // pushing also serves: keeps peers' buffers moving
  }
  Batch& batch = batches_[static_cast<std::size_t>(b)];
  if (batch.data.empty()) {
    batch.data.resize(kHeader + capacity_ * shape_.record_bytes);
    batch.side.resize(capacity_ * shape_.side_bytes);
  }
  auto d = static_cast<std::size_t>(dest);
  current_[d] = b;
  outbox_[d] = Outbox{batch.data.data() + kHeader, batch.side.data(), 0};
}

void RecordExchange::handle_request(int source, const std::byte* msg, int bytes) {
  Header h;
  std::memcpy(&h, msg, kHeader);
  if (static_cast<std::size_t>(bytes) != kHeader + h.count * shape_.record_bytes)
    throw Error("aggregation: corrupt batch from rank " + std::to_string(source));
  ++received_;
  ++stats_.batches_received;
  if (!shape_.reply_bytes) {
    on_request_(source, msg + kHeader, h.count, nullptr);
    return;
  }
  auto slot = std::find_if(reply_slots_.begin(), reply_slots_.end(), [](const ReplySlot& s) { return !s.busy; });
  if (slot == reply_slots_.end()) {
    reply_slots_.emplace_back();
    reply_reqs_.push_back(MPI_REQUEST_NULL);
    slot = reply_slots_.end() - 1;
    slot->data.resize(kHeader + capacity_ * shape_.reply_bytes);
  }
  on_request_(source, msg + kHeader, h.count, slot->data.data() + kHeader);
  std::memcpy(slot->data.data(), &h, kHeader);
  auto i = static_cast<std::size_t>(slot - reply_slots_.begin());
  TESSERA_MPI(MPI_Isend(slot->data.data(), static_cast<int>(kHeader + h.count * shape_.reply_bytes), MPI_BYTE,
                        source, kReplyTag, comm_, &reply_reqs_[i]));
  slot->busy = true;
  ++replies_sending_;
}

void RecordExchange::handle_reply(const std::byte* msg, int bytes) {
  Header h;
  std::memcpy(&h, msg, kHeader);
  if (h.ticket >= batches_.size() || !batches_[h.ticket].awaiting_reply ||
      static_cast<std::size_t>(bytes) != kHeader + h.count * shape_.reply_bytes)
    throw Error("aggregation: corrupt or unexpected reply batch");
  Batch& batch = batches_[h.ticket];
  on_reply_(msg + kHeader, batch.side.data(), h.count);
  batch.awaiting_reply = false;
  if (!batch.sending) --in_flight_;
}

bool RecordExchange::progress() {
  if (size_ == 1) return false;
  bool did = false;
  int n = 0;
  completed_.resize(std::max({recv_reqs_.size(), send_reqs_.size(), reply_reqs_.size()}));
  statuses_.resize(completed_.size());

  TESSERA_MPI(MPI_Testsome(static_cast<int>(recv_reqs_.size()), recv_reqs_.data(), &n, completed_.data(),
                           statuses_.data()));
  for (int k = 0; k < n && n != MPI_UNDEFINED; ++k) {
    auto i = static_cast<std::size_t>(completed_[static_cast<std::size_t>(k)]);
    const MPI_Status& st = statuses_[static_cast<std::size_t>(k)];
    int bytes = 0;
    TESSERA_MPI(MPI_Get_count(&st, MPI_BYTE, &bytes));
    int tag = recv_tag_[i];
    did = true;
    if (tag == kForwardTag) {  // placed by drain_forward; its buffer is re-posted then
      held_.push_back(HeldBatch{i, st.MPI_SOURCE, static_cast<std::size_t>(bytes)});
      ++received_fwd_;
      continue;
    }
    if (tag == kRequestTag)
      routed_ ? handle_final(st.MPI_SOURCE, recv_bufs_[i].data(), bytes)
              : handle_request(st.MPI_SOURCE, recv_bufs_[i].data(), bytes);
    else
      routed_ ? handle_routed_reply(recv_bufs_[i].data(), bytes) : handle_reply(recv_bufs_[i].data(), bytes);
    TESSERA_MPI(MPI_Irecv(recv_bufs_[i].data(), static_cast<int>(recv_bufs_[i].size()), MPI_BYTE, MPI_ANY_SOURCE,
                          tag, comm_, &recv_reqs_[i]));
  }

  if (in_flight_ > 0) {
    TESSERA_MPI(MPI_Testsome(static_cast<int>(send_reqs_.size()), send_reqs_.data(), &n, completed_.data(),
                             MPI_STATUSES_IGNORE));
    for (int k = 0; k < n && n != MPI_UNDEFINED; ++k) {
      Batch& batch = batches_[static_cast<std::size_t>(completed_[static_cast<std::size_t>(k)])];
      batch.sending = false;
      if (!batch.awaiting_reply) --in_flight_;
      did = true;
    }
  }

  if (replies_sending_ > 0) {
    TESSERA_MPI(MPI_Testsome(static_cast<int>(reply_reqs_.size()), reply_reqs_.data(), &n, completed_.data(),
                             MPI_STATUSES_IGNORE));
    for (int k = 0; k < n && n != MPI_UNDEFINED; ++k) {
      reply_slots_[static_cast<std::size_t>(completed_[static_cast<std::size_t>(k)])].busy = false;
      --replies_sending_;
      did = true;
    }
  }
  // Grid routing: place held forward batches after retiring sends, so the
  // buffers just freed take them at once.
  if (!held_.empty()) did = drain_forward() || did;
  return did;
}

bool RecordExchange::idle() const { return in_flight_ == 0 && replies_sending_ == 0; }

void RecordExchange::flush() {
  if (size_ == 1) return;
  // Auto size: the round's batch counts and time, read before this flush's
  // own traffic, decide the size the next exchange starts from (agreed then).
  const bool tune = options_.buffer_bytes == AggregationOptions::kAutoBufferBytes;
  std::uint64_t busiest = 0, batches = 0;
  if (tune)
    for (std::size_t r = 0; r < sent_to_.size(); ++r) {
      std::uint64_t n = static_cast<std::uint64_t>(sent_to_[r]) + (routed_ ? static_cast<std::uint64_t>(sent_fwd_to_[r]) : 0);
      busiest = std::max(busiest, n);
      batches += n;
    }
  const double filled = MPI_Wtime() - round_start_;
  struct Tune {  // runs when the flush returns
    RecordExchange& x;
    bool on;
    std::uint64_t busiest, batches;
    double filled;
    ~Tune() {
      if (!on || std::uncaught_exceptions()) return;
      double round = MPI_Wtime() - x.round_start_;
      double rate = static_cast<double>(x.stats_.records_sent - x.tune_records_) / std::max(round, 1e-9);
      agg_autotune::set_tuned(agg_autotune::climb(x.buffer_bytes_, batches,
                                                  busiest ? filled / static_cast<double>(busiest) : 0, rate));
      x.tune_records_ = x.stats_.records_sent;
      x.round_start_ = MPI_Wtime();
    }
  } tune_after{*this, tune, busiest, batches, filled};
  if (routed_) {
    flush_routed();
    if (!tune) round_start_ = MPI_Wtime();
    return;
  }
  for (int d = 0; d < size_; ++d) send_current(d);

  settle_round(comm_, sent_to_, received_, [&] { return idle(); });
  barrier_serving(comm_);
  if (!tune) round_start_ = MPI_Wtime();
}


// ---- grid routing ---------------------------------------------------------
// Forward batch: header, then per record [u32 final destination][record].
// Final batch:   header, then runs [u32 origin][u32 n][n records].
// Side per record: the caller's side data for its own records; for a
// forwarded record [u32 reply slot][u32 position in the forward batch].

void RecordExchange::setup_routes() {
  const GridRoute grid = GridRoute::of(size_);
  const int me = rank_, P = size_;
  const int last_row_length = P - (grid.rows - 1) * grid.columns;
  auto slot_for = [&](int rank, bool forward) {
    for (std::size_t k = 0; k < slots_.size(); ++k)
      if (slots_[k].rank == rank && slots_[k].forward == forward) return static_cast<int>(k);
    slots_.push_back({rank, forward});
    return static_cast<int>(slots_.size() - 1);
  };
  own_slot_.assign(static_cast<std::size_t>(P), -1);
  fwd_slot_.assign(static_cast<std::size_t>(P), -1);
  for (int d = 0; d < P; ++d) {
    if (d == me) continue;
    bool same_row = grid.row(d) == grid.row(me), same_column = grid.column(d) == grid.column(me);
    int hop = grid.next_hop(P, me, d);
    // Same column: the record is final at d. Otherwise it goes as a forward
    // record (d itself delivers the ones of its own row).
    own_slot_[static_cast<std::size_t>(d)] = slot_for(hop, !(same_column && !same_row));
    if (same_column) fwd_slot_[static_cast<std::size_t>(d)] = own_slot_[static_cast<std::size_t>(d)];
    // Column-first intermediate of the short last row: forwards along its row.
    if (same_row && grid.row(me) < grid.rows - 1 && grid.column(me) < last_row_length &&
        grid.column(d) >= last_row_length)
      fwd_slot_[static_cast<std::size_t>(d)] = slot_for(d, false);
  }
  const auto S = slots_.size();
  const std::size_t rb = shape_.record_bytes;
  cap_bytes_ = std::max(buffer_bytes_, 8 + rb);
  max_records_ = cap_bytes_ / rb;
  capacity_ = static_cast<std::uint32_t>(cap_bytes_ / (4 + rb));
  side_stride_ = shape_.reply_bytes ? std::max<std::size_t>(shape_.side_bytes, 8) : 0;
  per_dest_ = 1 + options_.max_in_flight;
  routed_out_.assign(S, RoutedOutbox{});
  current_.assign(S, -1);
  batches_.resize(S * static_cast<std::size_t>(per_dest_));
  send_reqs_.assign(batches_.size(), MPI_REQUEST_NULL);
  sent_to_.assign(static_cast<std::size_t>(P), 0);
  sent_fwd_to_.assign(static_cast<std::size_t>(P), 0);
  scratch_.resize(max_records_ * rb);
  if (shape_.reply_bytes) {
    reply_scratch_.resize(max_records_ * shape_.reply_bytes);
    local_pos_.resize(max_records_);
    if (side_stride_ != shape_.side_bytes) side_scratch_.resize(max_records_ * shape_.side_bytes);
  }

  // Receive buffers: final batches, forward batches, replies.
  request_slots_ = static_cast<std::size_t>(std::min(P - 1, 8));
  const std::size_t forward_slots = request_slots_;
  const std::size_t reply_slots = shape_.reply_bytes ? request_slots_ : 0;
  for (std::size_t i = 0; i < request_slots_ + forward_slots + reply_slots; ++i) {
    int tag = i < request_slots_ ? kRequestTag : i < request_slots_ + forward_slots ? kForwardTag : kReplyTag;
    recv_tag_.push_back(tag);
    recv_bufs_.emplace_back(kHeader + (tag == kReplyTag ? max_records_ * shape_.reply_bytes : cap_bytes_));
  }
  recv_reqs_.assign(recv_bufs_.size(), MPI_REQUEST_NULL);
  for (std::size_t i = 0; i < recv_bufs_.size(); ++i)
    TESSERA_MPI(MPI_Irecv(recv_bufs_[i].data(), static_cast<int>(recv_bufs_[i].size()), MPI_BYTE, MPI_ANY_SOURCE,
                          recv_tag_[i], comm_, &recv_reqs_[i]));
}

std::byte* RecordExchange::push_routed(int dest, std::byte** side) {
  if (dest == rank_ || dest < 0 || dest >= size_)
    throw RangeError("aggregation destination " + std::to_string(dest) + " is not another rank of [0, " +
                     std::to_string(size_) + ")");
  return append(own_slot_[static_cast<std::size_t>(dest)], rank_, dest, side, true);
}

std::byte* RecordExchange::append(int slot, int origin, int final_dest, std::byte** side, bool blocking) {
  RoutedOutbox& o = routed_out_[static_cast<std::size_t>(slot)];
  const bool forward = slots_[static_cast<std::size_t>(slot)].forward;
  const std::size_t rb = shape_.record_bytes;
  for (;;) {
    std::size_t need = forward ? 4 + rb : (o.run_origin == origin ? rb : 8 + rb);
    if (static_cast<std::size_t>(o.end - o.cursor) >= need) break;
    if (!open_batch(slot, blocking)) return nullptr;
  }
  if (forward) {
    store<std::uint32_t>(o.cursor, static_cast<std::uint32_t>(final_dest));
    o.cursor += 4;
  } else if (o.run_origin != origin) {
    if (o.run_count) store<std::uint32_t>(o.run_count, o.run_records);
    store<std::uint32_t>(o.cursor, static_cast<std::uint32_t>(origin));
    o.run_count = o.cursor + 4;
    o.run_origin = origin;
    o.run_records = 0;
    o.cursor += 8;
  }
  if (!forward) ++o.run_records;
  if (origin != rank_) o.holds_forwarded = true;
  std::byte* at = o.cursor;
  o.cursor += rb;
  if (side) *side = o.side + static_cast<std::size_t>(o.count) * side_stride_;
  ++o.count;
  return at;
}

bool RecordExchange::open_batch(int slot, bool blocking) {
  auto s = static_cast<std::size_t>(slot);
  const std::size_t most = 8 + shape_.record_bytes;
  send_routed(slot);
  Backoff backoff;
  unsigned idle = 0;
  for (;;) {
    // Serving below may have opened a batch here already (forwarding).
    if (current_[s] >= 0) {
      if (static_cast<std::size_t>(routed_out_[s].end - routed_out_[s].cursor) >= most) return true;
      send_routed(slot);
    }
    int b = -1;
    for (int k = slot * per_dest_; k < (slot + 1) * per_dest_; ++k) {
      const Batch& batch = batches_[static_cast<std::size_t>(k)];
      if (!batch.sending && !batch.awaiting_reply) {
        b = k;
        break;
      }
    }
    if (b >= 0) {
      Batch& batch = batches_[static_cast<std::size_t>(b)];
      if (batch.data.empty()) {
        batch.data.resize(kHeader + cap_bytes_);
        batch.side.resize(max_records_ * side_stride_);
      }
      current_[s] = b;
      routed_out_[s] = RoutedOutbox{batch.data.data() + kHeader, batch.data.data() + kHeader + cap_bytes_,
                                    batch.side.data()};
      if (blocking) progress_all();  // pushing also serves: keeps peers' buffers moving
      return true;
    }
    if (!blocking) return false;
    serve_once(backoff, idle);
  }
}

void RecordExchange::send_routed(int slot) {
  auto s = static_cast<std::size_t>(slot);
  int b = current_[s];
  RoutedOutbox& o = routed_out_[s];
  if (b < 0 || o.count == 0) return;
  const Slot& to = slots_[s];
  if (o.run_count) store<std::uint32_t>(o.run_count, o.run_records);
  Batch& batch = batches_[static_cast<std::size_t>(b)];
  Header h{static_cast<std::uint32_t>(b), o.count};
  std::memcpy(batch.data.data(), &h, kHeader);
  int bytes = static_cast<int>(o.cursor - batch.data.data());
  TESSERA_MPI(MPI_Isend(batch.data.data(), bytes, MPI_BYTE, to.rank, to.forward ? kForwardTag : kRequestTag, comm_,
                        &send_reqs_[static_cast<std::size_t>(b)]));
  batch.sending = true;
  batch.awaiting_reply = shape_.reply_bytes > 0;
  ++in_flight_;
  ++(to.forward ? sent_fwd_to_ : sent_to_)[static_cast<std::size_t>(to.rank)];
  ++stats_.batches_sent;
  stats_.records_sent += o.count;
  current_[s] = -1;
  o = RoutedOutbox{};
}

void RecordExchange::release_forwarded() {
  if (!shape_.reply_bytes) return;
  for (std::size_t s = 0; s < slots_.size(); ++s)
    if (routed_out_[s].holds_forwarded) send_routed(static_cast<int>(s));
}

int RecordExchange::acquire_reply_slot(std::size_t bytes) {
  auto slot = std::find_if(reply_slots_.begin(), reply_slots_.end(), [](const ReplySlot& s) { return !s.busy; });
  if (slot == reply_slots_.end()) {
    reply_slots_.emplace_back();
    reply_reqs_.push_back(MPI_REQUEST_NULL);
    slot = reply_slots_.end() - 1;
  }
  if (slot->data.size() < bytes) slot->data.resize(kHeader + max_records_ * shape_.reply_bytes);
  slot->busy = true;
  slot->bytes = bytes;
  return static_cast<int>(slot - reply_slots_.begin());
}

void RecordExchange::send_reply_slot(int i, int dest) {
  ReplySlot& slot = reply_slots_[static_cast<std::size_t>(i)];
  TESSERA_MPI(MPI_Isend(slot.data.data(), static_cast<int>(slot.bytes), MPI_BYTE, dest, kReplyTag, comm_,
                        &reply_reqs_[static_cast<std::size_t>(i)]));
  ++replies_sending_;
}

void RecordExchange::handle_final(int source, const std::byte* msg, int bytes) {
  Header h;
  std::memcpy(&h, msg, kHeader);
  const std::size_t rb = shape_.record_bytes, qb = shape_.reply_bytes;
  int reply = -1;
  if (qb) {
    reply = acquire_reply_slot(kHeader + h.count * qb);
    std::memcpy(reply_slots_[static_cast<std::size_t>(reply)].data.data(), &h, kHeader);
  }
  const std::byte* at = msg + kHeader;
  const std::byte* end = msg + bytes;
  std::size_t position = 0;
  while (at < end) {
    if (end - at < 8) throw Error("aggregation: corrupt batch from rank " + std::to_string(source));
    auto origin = load<std::uint32_t>(at);
    auto n = load<std::uint32_t>(at + 4);
    if (static_cast<std::size_t>(end - at - 8) < n * rb || position + n > h.count || origin >= static_cast<std::uint32_t>(size_))
      throw Error("aggregation: corrupt batch from rank " + std::to_string(source));
    std::byte* out = qb ? reply_slots_[static_cast<std::size_t>(reply)].data.data() + kHeader + position * qb : nullptr;
    on_request_(static_cast<int>(origin), at + 8, n, out);
    at += 8 + n * rb;
    position += n;
  }
  if (position != h.count) throw Error("aggregation: corrupt batch from rank " + std::to_string(source));
  ++received_;
  ++stats_.batches_received;
  if (qb) send_reply_slot(reply, source);
}

bool RecordExchange::drain_forward() {
  if (draining_) return false;
  draining_ = true;
  struct Reset {
    bool& flag;
    ~Reset() { flag = false; }
  } reset{draining_};
  const std::size_t rb = shape_.record_bytes, qb = shape_.reply_bytes, stride = 4 + rb;
  bool did = false;
  while (!held_.empty()) {
    HeldBatch& held = held_.front();
    const std::byte* msg = recv_bufs_[held.recv].data();
    Header h;
    std::memcpy(&h, msg, kHeader);
    if (!held.started) {
      if (held.bytes != kHeader + h.count * stride)
        throw Error("aggregation: corrupt forward batch from rank " + std::to_string(held.source));
      held.started = true;
      ++stats_.batches_received;
      if (qb) {
        held.pending = acquire_reply_slot(kHeader + h.count * qb);
        ReplySlot& slot = reply_slots_[static_cast<std::size_t>(held.pending)];
        std::memcpy(slot.data.data(), &h, kHeader);
        slot.waiting = h.count;
        slot.origin = held.source;
      }
    }
    std::size_t local = 0;
    for (; held.next < h.count; ++held.next) {
      const std::byte* rec = msg + kHeader + held.next * stride;
      auto dest = load<std::uint32_t>(rec);
      if (dest == static_cast<std::uint32_t>(rank_)) {  // this rank's own: delivered below, in one call
        std::memcpy(scratch_.data() + local * rb, rec + 4, rb);
        if (qb) local_pos_[local] = held.next;
        ++local;
        continue;
      }
      int slot = dest < static_cast<std::uint32_t>(size_) ? fwd_slot_[dest] : -1;
      if (slot < 0) throw Error("aggregation: forward batch from rank " + std::to_string(held.source) +
                                " names rank " + std::to_string(dest) + ", which this rank does not route to");
      std::byte* side = nullptr;
      std::byte* at = append(slot, held.source, static_cast<int>(dest), qb ? &side : nullptr, false);
      if (!at) break;  // every buffer towards dest is in flight: resume later
      std::memcpy(at, rec + 4, rb);
      if (qb) {
        store<std::uint32_t>(side, static_cast<std::uint32_t>(held.pending));
        store<std::uint32_t>(side + 4, held.next);
      }
      did = true;
    }
    if (local > 0) {
      did = true;
      on_request_(held.source, scratch_.data(), local, qb ? reply_scratch_.data() : nullptr);
      if (qb) {
        ReplySlot& slot = reply_slots_[static_cast<std::size_t>(held.pending)];
        for (std::size_t k = 0; k < local; ++k)
          std::memcpy(slot.data.data() + kHeader + local_pos_[k] * qb, reply_scratch_.data() + k * qb, qb);
        slot.waiting -= static_cast<std::uint32_t>(local);
      }
    }
    if (held.next < h.count) break;
    if (qb && reply_slots_[static_cast<std::size_t>(held.pending)].waiting == 0)
      send_reply_slot(held.pending, held.source);
    std::size_t i = held.recv;
    held_.pop_front();
    TESSERA_MPI(MPI_Irecv(recv_bufs_[i].data(), static_cast<int>(recv_bufs_[i].size()), MPI_BYTE, MPI_ANY_SOURCE,
                          kForwardTag, comm_, &recv_reqs_[i]));
    did = true;
  }
  return did;
}

void RecordExchange::handle_routed_reply(const std::byte* msg, int bytes) {
  Header h;
  std::memcpy(&h, msg, kHeader);
  const std::size_t qb = shape_.reply_bytes;
  if (h.ticket >= batches_.size() || !batches_[h.ticket].awaiting_reply ||
      static_cast<std::size_t>(bytes) != kHeader + h.count * qb)
    throw Error("aggregation: corrupt or unexpected reply batch");
  Batch& batch = batches_[h.ticket];
  const Slot& to = slots_[h.ticket / static_cast<std::uint32_t>(per_dest_)];
  const std::byte* replies = msg + kHeader;
  auto own = [&](std::size_t position, std::size_t n) {
    const std::byte* side = batch.side.data() + position * side_stride_;
    if (side_stride_ != shape_.side_bytes) {  // the caller's side records are narrower: pack them
      for (std::size_t k = 0; k < n; ++k)
        std::memcpy(side_scratch_.data() + k * shape_.side_bytes, side + k * side_stride_, shape_.side_bytes);
      side = side_scratch_.data();
    }
    on_reply_(replies + position * qb, side, n);
  };
  if (to.forward) {  // forward batches hold only this rank's own records
    own(0, h.count);
  } else {
    const std::byte* at = batch.data.data() + kHeader;
    std::size_t position = 0;
    while (position < h.count) {
      auto origin = load<std::uint32_t>(at);
      auto n = load<std::uint32_t>(at + 4);
      if (origin == static_cast<std::uint32_t>(rank_)) {
        own(position, n);
      } else {
        for (std::size_t k = position; k < position + n; ++k) {
          const std::byte* side = batch.side.data() + k * side_stride_;
          auto pending = load<std::uint32_t>(side);
          auto where = load<std::uint32_t>(side + 4);
          ReplySlot& slot = reply_slots_[pending];
          std::memcpy(slot.data.data() + kHeader + where * qb, replies + k * qb, qb);
          if (--slot.waiting == 0) send_reply_slot(static_cast<int>(pending), slot.origin);
        }
      }
      at += 8 + n * shape_.record_bytes;
      position += n;
    }
  }
  batch.awaiting_reply = false;
  if (!batch.sending) --in_flight_;
}

void RecordExchange::flush_routed() {
  // Round 1: forward batches. Once every rank has placed every forward
  // batch it is owed, no record is left to forward.
  for (std::size_t s = 0; s < slots_.size(); ++s)
    if (slots_[s].forward) send_routed(static_cast<int>(s));
  settle_round(comm_, sent_fwd_to_, received_fwd_, [&] { return held_.empty(); });
  // Round 2: final batches, then every reply home.
  for (std::size_t s = 0; s < slots_.size(); ++s) send_routed(static_cast<int>(s));
  settle_round(comm_, sent_to_, received_, [&] { return idle(); });
  barrier_serving(comm_);
}

}  // namespace tessera::comm
