#include "tessera/comm/record_exchange.hpp"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <exception>

#include "tessera/runtime/error.hpp"
#include "tessera/runtime/wait.hpp"

namespace tessera::comm {

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

// Waits for a non-blocking collective while serving every exchange.
void wait_serving(MPI_Request& request) {
  int done = 0;
  wait_until([&] { return done != 0; },
             [&] {
               bool did = progress_all();
               TESSERA_MPI(MPI_Test(&request, &done, MPI_STATUS_IGNORE));
               return did || done;
             });
}
}  // namespace

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

  capacity_ = static_cast<std::uint32_t>(
      std::clamp<std::size_t>(options_.buffer_bytes / shape_.record_bytes, 1, 1u << 24));
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
  if (comm_ != MPI_COMM_NULL) MPI_Comm_free(&comm_);
}

std::size_t RecordExchange::memory_bytes() const noexcept {
  std::size_t total = 0;
  for (const auto& b : batches_) total += b.data.capacity() + b.side.capacity();
  for (const auto& r : recv_bufs_) total += r.capacity();
  for (const auto& r : reply_slots_) total += r.data.capacity();
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
    wait_until([&] { return (b = free_batch(dest)) >= 0; }, progress_all);
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
    bool request = i < request_slots_;
    if (request)
      handle_request(st.MPI_SOURCE, recv_bufs_[i].data(), bytes);
    else
      handle_reply(recv_bufs_[i].data(), bytes);
    TESSERA_MPI(MPI_Irecv(recv_bufs_[i].data(), static_cast<int>(recv_bufs_[i].size()), MPI_BYTE, MPI_ANY_SOURCE,
                          request ? kRequestTag : kReplyTag, comm_, &recv_reqs_[i]));
    did = true;
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
  return did;
}

bool RecordExchange::idle() const { return in_flight_ == 0 && replies_sending_ == 0; }

void RecordExchange::flush() {
  if (size_ == 1) return;
  for (int d = 0; d < size_; ++d) send_current(d);

  // How many batches is every rank owed? One reduction answers all of them.
  int expected = 0;
  MPI_Request req;
  TESSERA_MPI(MPI_Ireduce_scatter_block(sent_to_.data(), &expected, 1, MPI_INT, MPI_SUM, comm_, &req));
  wait_serving(req);
  wait_until([&] { return received_ >= static_cast<std::uint64_t>(expected) && idle(); }, progress_all);
  received_ -= static_cast<std::uint64_t>(expected);
  std::fill(sent_to_.begin(), sent_to_.end(), 0);
  // No rank may start the next round (or read results through shared memory)
  // before every rank has applied this one. Other exchanges keep being served.
  TESSERA_MPI(MPI_Ibarrier(comm_, &req));
  wait_serving(req);
}

}  // namespace tessera::comm
