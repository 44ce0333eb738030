#include "tessera/comm/record_exchange.hpp"

#include <algorithm>
#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>

#include "tessera/runtime/error.hpp"
#include "tessera/runtime/wait.hpp"

namespace tessera::comm {

namespace {
// Ends one round of one kind of batch: a reduction of `sent` (batches this
// rank sent to each rank) tells it how many it is owed; it serves until they
// have all been received and `done()` holds, then resets both counts.
template <class Done>
void settle_round(ProgressEngine& engine, MPI_Comm comm, std::vector<int>& sent, std::uint64_t& received, Done&& done) {
  int expected = 0;
  MPI_Request req;
  TESSERA_MPI(MPI_Ireduce_scatter_block(sent.data(), &expected, 1, MPI_INT, MPI_SUM, comm, &req));
  engine.wait_serving(req);
  engine.serve_until([&] { return received >= static_cast<std::uint64_t>(expected) && done(); });
  received -= static_cast<std::uint64_t>(expected);
  std::fill(sent.begin(), sent.end(), 0);
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
  MPI_Request req;
  TESSERA_MPI(MPI_Comm_idup(rt.comm(), &comm_, &req));
  wait(req);
  TESSERA_MPI(MPI_Comm_rank(comm_, &rank_));
  TESSERA_MPI(MPI_Comm_size(comm_, &size_));
  stats_.batches_to.assign(static_cast<std::size_t>(size_), 0);
  ring_dest_.assign(static_cast<std::size_t>(size_), 0);

  buffer_bytes_ = options_.buffer_bytes;
  if (options_.buffer_bytes == AggregationOptions::kAutoBufferBytes) {
    // Every rank must use the same size (receive buffers are sized by it).
    std::size_t mine = options_.buffer_bytes_for(size_, shape_.record_bytes, shape_.reply_bytes);
    MPI_Request agree;
    TESSERA_MPI(MPI_Iallreduce(&mine, &buffer_bytes_, 1, MPI_UINT64_T, MPI_MAX, comm_, &agree));
    wait(agree);
  }
  round_start_ = MPI_Wtime();
  routed_ = options_.routing != AggregationRouting::direct && size_ > 1;
  if (routed_) {
    setup_routes(rt);
    engine_.add(this);
    return;
  }
  capacity_ = static_cast<std::uint32_t>(
      std::clamp<std::size_t>(buffer_bytes_ / shape_.record_bytes, 1, 1u << 24));
  per_dest_ = 1 + options_.max_in_flight;
  reply_slot_bytes_ = kHeader + capacity_ * shape_.reply_bytes;
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
  if (options_.same_node_rings && rt.node().size > 1) {
    rings_ = SameNodeRings(rt, {static_cast<std::uint32_t>(per_dest_), kHeader + capacity_ * shape_.record_bytes,
                                shape_.reply_bytes ? kHeader + capacity_ * shape_.reply_bytes : 0});
    for (int d = 0; d < size_; ++d) ring_dest_[static_cast<std::size_t>(d)] = rings_.reaches(d);
  }
  engine_.add(this);
}

RecordExchange::~RecordExchange() {
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
  engine_.remove(this);
  if (comm_ != MPI_COMM_NULL) MPI_Comm_free(&comm_);
}

std::size_t RecordExchange::memory_bytes() const noexcept {
  std::size_t total = 0;
  for (const auto& b : batches_) total += b.data.capacity() + b.side.capacity();
  for (const auto& r : recv_bufs_) total += r.capacity();
  for (const auto& r : reply_slots_) total += r.data.capacity();
  total += side_scratch_.capacity();
  total += rings_.memory_bytes();
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
  const std::size_t bytes = kHeader + outbox_[d].count * shape_.record_bytes;
  // The header goes just before the records: in the batch buffer, or in the peer's ring slot.
  std::byte* start = outbox_[d].records - kHeader;
  std::memcpy(start, &h, kHeader);
  if (ring_dest_[d]) {
    // The records are in the peer's ring already: one release store sends them.
    rings_.publish(dest, SameNodeRings::Kind::request, bytes);
  } else {
    TESSERA_MPI(MPI_Isend(start, static_cast<int>(bytes), MPI_BYTE, dest, kRequestTag, comm_,
                          &send_reqs_[static_cast<std::size_t>(b)]));
    batch.sending = true;
  }
  batch.awaiting_reply = shape_.reply_bytes > 0;
  if (batch.sending || batch.awaiting_reply) ++in_flight_;
  ++sent_to_[d];
  ++stats_.batches_sent;
  ++stats_.batches_to[d];
  stats_.records_sent += outbox_[d].count;
  stats_.bytes_sent += bytes;
  current_[d] = -1;
  outbox_[d] = Outbox{nullptr, nullptr, capacity_};
}

void RecordExchange::next_batch(int dest) {
  if (dest == rank_ || dest < 0 || dest >= size_)
    throw RangeError("aggregation destination " + std::to_string(dest) + " is not another rank of [0, " +
                     std::to_string(size_) + ")");
  send_current(dest);
  if (ring_dest_[static_cast<std::size_t>(dest)]) return open_ring_batch(dest);
  int b = free_batch(dest);
  if (b < 0) {
    // Every batch for dest is in flight: serve others until one comes back.
    engine_.serve_until([&] { return (b = free_batch(dest)) >= 0; });
  } else {
    engine_.progress_all();  // pushing also serves: keeps peers' buffers moving
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

// The next batch to a co-locale is written in place in its ring: it needs a
// free ring slot, and (with replies) a free batch to keep its side records
// until the reply comes back.
void RecordExchange::open_ring_batch(int dest) {
  auto d = static_cast<std::size_t>(dest);
  int b = free_batch(dest);
  std::byte* room = b >= 0 ? rings_.room(dest, SameNodeRings::Kind::request) : nullptr;
  if (room) {
    engine_.progress_all();  // pushing also serves: keeps peers' rings moving
  } else {
    engine_.serve_until([&] {
      if (b < 0) b = free_batch(dest);
      return b >= 0 && (room = rings_.room(dest, SameNodeRings::Kind::request)) != nullptr;
    });
  }
  Batch& batch = batches_[static_cast<std::size_t>(b)];
  if (batch.side.size() < capacity_ * shape_.side_bytes) batch.side.resize(capacity_ * shape_.side_bytes);
  current_[d] = b;
  outbox_[d] = Outbox{room + kHeader, batch.side.data(), 0};
}

// Serves the batches co-locales published in this rank's rings: replies
// first (they free this rank's batches), then requests, handled in place. A
// request whose reply finds no room in the origin's reply ring stays in its
// slot until there is room (the origin drains its reply rings whenever it
// serves), so nothing here waits.
bool RecordExchange::poll_rings() {
  using Kind = SameNodeRings::Kind;
  bool did = false;
  for (int source : rings_.sources()) {
    for (std::span<const std::byte> batch; !(batch = rings_.peek(source, Kind::reply)).empty();) {
      handle_reply(batch.data(), static_cast<int>(batch.size()));
      rings_.consume(source, Kind::reply);
      did = true;
    }
    for (std::span<const std::byte> batch; !(batch = rings_.peek(source, Kind::request)).empty();) {
      if (shape_.reply_bytes && ring_dest_[static_cast<std::size_t>(source)]) {
        std::byte* reply = rings_.room(source, Kind::reply);
        if (!reply) break;
        Header h;
        std::memcpy(&h, batch.data(), kHeader);
        if (batch.size() != kHeader + h.count * shape_.record_bytes)
          throw Error("aggregation: corrupt batch from rank " + std::to_string(source));
        ++received_;
        ++stats_.batches_received;
        on_request_(source, batch.data() + kHeader, h.count, reply + kHeader);
        std::memcpy(reply, &h, kHeader);
        rings_.publish(source, Kind::reply, kHeader + h.count * shape_.reply_bytes);
        stats_.bytes_sent += kHeader + h.count * shape_.reply_bytes;
      } else {
        // No replies, or replies through MPI (the origin's rings are not mapped here).
        handle_request(source, batch.data(), static_cast<int>(batch.size()));
      }
      rings_.consume(source, Kind::request);
      did = true;
    }
  }
  return did;
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
  int i = acquire_reply_slot();
  ReplySlot& slot = reply_slots_[static_cast<std::size_t>(i)];
  on_request_(source, msg + kHeader, h.count, slot.data.data() + kHeader);
  std::memcpy(slot.data.data(), &h, kHeader);
  slot.bytes = kHeader + h.count * shape_.reply_bytes;
  send_reply_slot(i, source);
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
  bool did = rings_.sources().empty() ? false : poll_rings();
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
      free_reply_slots_.push_back(completed_[static_cast<std::size_t>(k)]);
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


// ---- reply slots (both routings) -----------------------------------------

int RecordExchange::acquire_reply_slot() {
  if (free_reply_slots_.empty()) {
    reply_slots_.emplace_back();
    reply_slots_.back().data.resize(reply_slot_bytes_);
    reply_reqs_.push_back(MPI_REQUEST_NULL);
    return static_cast<int>(reply_slots_.size() - 1);
  }
  int i = free_reply_slots_.back();
  free_reply_slots_.pop_back();
  return i;
}

void RecordExchange::send_reply_slot(int i, int dest) {
  ReplySlot& slot = reply_slots_[static_cast<std::size_t>(i)];
  TESSERA_MPI(MPI_Isend(slot.data.data(), static_cast<int>(slot.bytes), MPI_BYTE, dest, kReplyTag, comm_,
                        &reply_reqs_[static_cast<std::size_t>(i)]));
  ++replies_sending_;
  stats_.bytes_sent += slot.bytes;
}

// ---- grid routing ---------------------------------------------------------
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

namespace {
// Node-first routing is the grid whose rows are the nodes and whose columns
// are the ranks' indices on their node: ranks numbered node by node ("grid
// positions") so that GridRoute's row-major arithmetic applies whatever the
// placement (by slot or round-robin over nodes). Needs every node to hold
// the same number of ranks.
struct NodeGrid {
  GridRoute grid;
  std::vector<int> position;  // by rank
  std::vector<int> rank_at;   // by grid position
};
NodeGrid node_grid(const NodeGroup& node, int ranks) {
  std::vector<int> per_node(static_cast<std::size_t>(node.count), 0);
  NodeGrid g;
  g.position.resize(static_cast<std::size_t>(ranks));
  std::vector<int> local(static_cast<std::size_t>(ranks));
  for (int r = 0; r < ranks; ++r) local[static_cast<std::size_t>(r)] = per_node[static_cast<std::size_t>(node.node_of_rank[static_cast<std::size_t>(r)])]++;
  for (int n : per_node)
    if (n != per_node[0])
      throw ConfigError("node-first aggregation routing needs the same number of ranks on every node; this job has " +
                        std::to_string(per_node[0]) + " on node 0 and " + std::to_string(n) +
                        " on another (use TESSERA_AGG_ROUTING=grid or direct)");
  g.grid.columns = per_node[0];
  g.grid.rows = node.count;
  g.rank_at.resize(static_cast<std::size_t>(ranks));
  for (int r = 0; r < ranks; ++r) {
    int p = node.node_of_rank[static_cast<std::size_t>(r)] * g.grid.columns + local[static_cast<std::size_t>(r)];
    g.position[static_cast<std::size_t>(r)] = p;
    g.rank_at[static_cast<std::size_t>(p)] = r;
  }
  return g;
}
}  // namespace

void RecordExchange::setup_routes(const Runtime& rt) {
  const int P = size_;
  // Grid arithmetic runs on grid positions: the rank itself for the square
  // grid, its node and index on the node for node-first.
  NodeGrid layout;
  if (options_.routing == AggregationRouting::node_first) {
    layout = node_grid(rt.node(), P);
  } else {
    layout.grid = GridRoute::of(P);
    for (int r = 0; r < P; ++r) layout.position.push_back(r), layout.rank_at.push_back(r);
  }
  const GridRoute& grid = layout.grid;
  auto at = [&](int rank) { return layout.position[static_cast<std::size_t>(rank)]; };
  const int me = at(rank_);
  const int last_row_length = P - (grid.rows - 1) * grid.columns;
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
    const int gd = at(d);
    bool same_row = grid.row(gd) == grid.row(me), same_column = grid.column(gd) == grid.column(me);
    int hop = layout.rank_at[static_cast<std::size_t>(grid.next_hop(P, me, gd))];
    // Same column: the record is final at d. Otherwise it goes as a forward
    // record (d itself delivers the ones of its own row).
    int own = slot_for(hop, !(same_column && !same_row));
    own_slot_[static_cast<std::size_t>(d)] = own;
    slots_[static_cast<std::size_t>(own)].own_dests.push_back(d);
    if (same_column) fwd_slot_[static_cast<std::size_t>(d)] = own;
    // Column-first intermediate of the short last row: forwards along its row.
    if (same_row && grid.row(me) < grid.rows - 1 && grid.column(me) < last_row_length &&
        grid.column(gd) >= last_row_length)
      fwd_slot_[static_cast<std::size_t>(d)] = slot_for(d, false);
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
  // With replies a forward batch is busy for a round trip over two hops (and
  // until the intermediate's final batches carrying it fill): one more batch
  // keeps the origin pushing meanwhile (AggregationOptions counts it).
  const int forward_extra = shape_.reply_bytes ? 1 : 0;
  for (std::size_t k = 0; k < S; ++k)
    slot_batches_[k + 1] = slot_batches_[k] + per_dest_ + (slots_[k].forward ? forward_extra : 0);
  for (std::size_t k = 0; k < S; ++k)
    for (int b = slot_batches_[k]; b < slot_batches_[k + 1]; ++b) batch_slot_.push_back(static_cast<int>(k));
  reply_slot_bytes_ = kHeader + max_records_ * shape_.reply_bytes;
  own_chunk_.assign(static_cast<std::size_t>(P), OwnChunk{});
  routed_out_.assign(S, RoutedOutbox{});
  current_.assign(S, -1);
  batches_.resize(static_cast<std::size_t>(slot_batches_[S]));
  send_reqs_.assign(batches_.size(), MPI_REQUEST_NULL);
  sent_to_.assign(static_cast<std::size_t>(P), 0);
  sent_fwd_to_.assign(static_cast<std::size_t>(P), 0);
  if (shape_.reply_bytes && side_stride_ != shape_.side_bytes) side_scratch_.resize(max_records_ * shape_.side_bytes);

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

bool RecordExchange::has_room(int slot) const {
  auto s = static_cast<std::size_t>(slot);
  return current_[s] >= 0 &&
         static_cast<std::size_t>(routed_out_[s].end - routed_out_[s].tail) >= kChunkHeader + shape_.record_bytes;
}

void RecordExchange::close_chunk(int dest) {
  OwnChunk& c = own_chunk_[static_cast<std::size_t>(dest)];
  auto n = static_cast<std::uint32_t>(static_cast<std::size_t>(c.cursor - (c.header + kChunkHeader)) / shape_.record_bytes);
  store<std::uint32_t>(c.header + offsetof(ChunkHeader, count), n);
  routed_out_[static_cast<std::size_t>(own_slot_[static_cast<std::size_t>(dest)])].count += n;
  c = OwnChunk{};
}

std::byte* RecordExchange::push_routed(int dest, std::byte** side) {
  if (dest == rank_ || dest < 0 || dest >= size_)
    throw RangeError("aggregation destination " + std::to_string(dest) + " is not another rank of [0, " +
                     std::to_string(size_) + ")");
  const auto d = static_cast<std::size_t>(dest);
  const int slot = own_slot_[d];
  const Slot& to = slots_[static_cast<std::size_t>(slot)];
  if (own_chunk_[d].header) close_chunk(dest);  // full
  // Serving while waiting may carve forwarded runs into this slot: re-check.
  while (!has_room(slot)) open_batch(slot, true);
  RoutedOutbox& o = routed_out_[static_cast<std::size_t>(slot)];
  const std::size_t rb = shape_.record_bytes;
  auto capacity = static_cast<std::uint32_t>(
      std::min<std::size_t>(to.chunk_records, static_cast<std::size_t>(o.end - o.tail - kChunkHeader) / rb));
  ChunkHeader header{static_cast<std::uint32_t>(to.forward ? dest : rank_), 0, capacity, 0};
  std::memcpy(o.tail, &header, kChunkHeader);
  OwnChunk& c = own_chunk_[d];
  c.header = o.tail;
  c.cursor = o.tail + kChunkHeader;
  c.end = c.cursor + capacity * rb;
  c.side = o.side + o.positions * side_stride_;
  o.last = o.tail;
  o.tail = c.end;
  o.positions += capacity;
  std::byte* at = c.cursor;
  c.cursor += rb;
  if (side) {
    *side = c.side;
    c.side += side_stride_;
  }
  return at;
}

std::byte* RecordExchange::carve_run(int slot, int origin, std::uint32_t want, std::uint32_t& granted,
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

bool RecordExchange::open_batch(int slot, bool blocking) {
  auto s = static_cast<std::size_t>(slot);
  send_routed(slot);
  Backoff backoff;
  unsigned idle = 0;
  for (;;) {
    // Serving below may have opened a batch here already (forwarding).
    if (current_[s] >= 0) {
      if (has_room(slot)) return true;
      send_routed(slot);
    }
    int b = -1;
    for (int k = slot_batches_[s]; k < slot_batches_[s + 1]; ++k) {
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
      if (blocking) engine_.progress_all();  // pushing also serves: keeps peers' buffers moving
      return true;
    }
    if (!blocking) return false;
    engine_.serve_once(backoff, idle);
  }
}

void RecordExchange::send_routed(int slot) {
  auto s = static_cast<std::size_t>(slot);
  int b = current_[s];
  if (b < 0) return;
  const Slot& to = slots_[s];
  for (int d : to.own_dests)
    if (own_chunk_[static_cast<std::size_t>(d)].header) close_chunk(d);
  RoutedOutbox& o = routed_out_[s];
  if (o.count == 0) return;
  // Trim the last chunk: the message ends with its last record.
  auto used = load<std::uint32_t>(o.last + offsetof(ChunkHeader, count));
  store<std::uint32_t>(o.last + offsetof(ChunkHeader, capacity), used);
  o.tail = o.last + kChunkHeader + used * shape_.record_bytes;
  Batch& batch = batches_[static_cast<std::size_t>(b)];
  Header h{static_cast<std::uint32_t>(b), o.count};
  std::memcpy(batch.data.data(), &h, kHeader);
  int bytes = static_cast<int>(o.tail - batch.data.data());
  TESSERA_MPI(MPI_Isend(batch.data.data(), bytes, MPI_BYTE, to.rank, to.forward ? kForwardTag : kRequestTag, comm_,
                        &send_reqs_[static_cast<std::size_t>(b)]));
  batch.sending = true;
  batch.awaiting_reply = shape_.reply_bytes > 0;
  ++in_flight_;
  ++(to.forward ? sent_fwd_to_ : sent_to_)[static_cast<std::size_t>(to.rank)];
  ++stats_.batches_sent;
  ++stats_.batches_to[static_cast<std::size_t>(to.rank)];
  stats_.records_sent += o.count;
  stats_.bytes_sent += static_cast<std::uint64_t>(bytes);
  current_[s] = -1;
  o = RoutedOutbox{};
}

void RecordExchange::release_forwarded() {
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

void RecordExchange::handle_final(int source, const std::byte* msg, int bytes) {
  Header h;
  if (static_cast<std::size_t>(bytes) < kHeader) throw Error("aggregation: corrupt batch from rank " + std::to_string(source));
  std::memcpy(&h, msg, kHeader);
  if (h.count > max_records_) throw Error("aggregation: corrupt batch from rank " + std::to_string(source));
  const std::size_t rb = shape_.record_bytes, qb = shape_.reply_bytes;
  int reply = -1;
  std::byte* replies = nullptr;
  if (qb) {
    reply = acquire_reply_slot();
    replies = reply_slots_[static_cast<std::size_t>(reply)].data.data() + kHeader;
  }
  std::size_t position = 0;
  for (std::size_t offset = kHeader; offset < static_cast<std::size_t>(bytes);) {
    ChunkAt c = read_chunk(msg, offset, static_cast<std::size_t>(bytes), rb, kChunkHeader, source);
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
    ReplySlot& slot = reply_slots_[static_cast<std::size_t>(reply)];
    std::memcpy(slot.data.data(), &h, kHeader);
    slot.bytes = kHeader + h.count * qb;
    send_reply_slot(reply, source);
  }
}

bool RecordExchange::drain_forward() {
  if (draining_) return false;
  draining_ = true;
  struct Reset {
    bool& flag;
    ~Reset() { flag = false; }
  } reset{draining_};
  const std::size_t rb = shape_.record_bytes, qb = shape_.reply_bytes;
  bool did = false;
  while (!held_.empty()) {
    HeldBatch& held = held_.front();
    const std::byte* msg = recv_bufs_[held.recv].data();
    Header h;
    std::memcpy(&h, msg, kHeader);
    if (!held.started) {
      if (held.bytes < kHeader || h.count > max_records_)
        throw Error("aggregation: corrupt forward batch from rank " + std::to_string(held.source));
      held.started = true;
      ++stats_.batches_received;
      if (qb) {
        held.pending = acquire_reply_slot();
        ReplySlot& slot = reply_slots_[static_cast<std::size_t>(held.pending)];
        std::memcpy(slot.data.data(), &h, kHeader);
        slot.waiting = h.count;
        slot.origin = held.source;
        slot.bytes = kHeader + h.count * qb;
      }
    }
    while (held.offset < held.bytes) {
      ChunkAt c = read_chunk(msg, held.offset, held.bytes, rb, kChunkHeader, held.source);
      if (held.position + c.count > h.count)
        throw Error("aggregation: corrupt forward batch from rank " + std::to_string(held.source));
      if (c.tag == static_cast<std::uint32_t>(rank_)) {  // this rank's own: served from the receive buffer
        if (c.count) {
          std::byte* replies = nullptr;
          if (qb) {
            ReplySlot& slot = reply_slots_[static_cast<std::size_t>(held.pending)];
            replies = slot.data.data() + kHeader + held.position * qb;
            slot.waiting -= c.count;
          }
          on_request_(held.source, c.records, c.count, replies);
        }
      } else {
        int slot = c.tag < static_cast<std::uint32_t>(size_) ? fwd_slot_[c.tag] : -1;
        if (slot < 0)
          throw Error("aggregation: forward batch from rank " + std::to_string(held.source) + " names rank " +
                      std::to_string(c.tag) + ", which this rank does not route to");
        while (held.done < c.count) {
          std::uint32_t granted = 0;
          std::byte* side = nullptr;
          std::byte* run = carve_run(slot, held.source, c.count - held.done, granted, side);
          if (!run) return did;  // every buffer towards that rank is in flight: resume later
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
    if (held.position != h.count)
      throw Error("aggregation: corrupt forward batch from rank " + std::to_string(held.source));
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

void RecordExchange::reply_own(const std::byte* replies, const std::byte* side, std::size_t n) {
  if (side_stride_ != shape_.side_bytes) {  // the caller's side records are narrower: pack them
    for (std::size_t k = 0; k < n; ++k)
      std::memcpy(side_scratch_.data() + k * shape_.side_bytes, side + k * side_stride_, shape_.side_bytes);
    side = side_scratch_.data();
  }
  on_reply_(replies, side, n);
}

void RecordExchange::handle_routed_reply(const std::byte* msg, int bytes) {
  Header h;
  std::memcpy(&h, msg, kHeader);
  const std::size_t qb = shape_.reply_bytes, rb = shape_.record_bytes;
  if (h.ticket >= batches_.size() || !batches_[h.ticket].awaiting_reply ||
      static_cast<std::size_t>(bytes) != kHeader + h.count * qb)
    throw Error("aggregation: corrupt or unexpected reply batch");
  Batch& batch = batches_[h.ticket];
  Header sent;
  std::memcpy(&sent, batch.data.data(), kHeader);
  if (sent.count != h.count) throw Error("aggregation: reply batch does not match its request");
  const bool forward = slots_[static_cast<std::size_t>(batch_slot_[h.ticket])].forward;
  const std::byte* replies = msg + kHeader;
  // Walk the request's chunks (this rank wrote them): replies are compact,
  // side data is by carved position.
  const std::byte* at = batch.data.data() + kHeader;
  std::size_t position = 0, side_position = 0;
  while (position < h.count) {
    ChunkHeader c;
    std::memcpy(&c, at, kChunkHeader);
    const std::byte* side = batch.side.data() + side_position * side_stride_;
    if (forward || c.tag == static_cast<std::uint32_t>(rank_)) {  // forward batches hold only own records
      if (c.count) reply_own(replies + position * qb, side, c.count);
    } else {  // a forwarded run: its replies go into the forward batch's reply, in one piece
      auto pending = load<std::uint32_t>(side);
      auto where = load<std::uint32_t>(side + 4);
      ReplySlot& slot = reply_slots_[pending];
      std::memcpy(slot.data.data() + kHeader + where * qb, replies + position * qb, c.count * qb);
      slot.waiting -= c.count;
      if (slot.waiting == 0) send_reply_slot(static_cast<int>(pending), slot.origin);
    }
    at += kChunkHeader + c.capacity * rb;
    position += c.count;
    side_position += c.capacity;
  }
  batch.awaiting_reply = false;
  if (!batch.sending) --in_flight_;
}

void RecordExchange::flush_routed() {
  // Round 1: forward batches. Once every rank has placed every forward
  // batch it is owed, no record is left to forward.
  for (std::size_t s = 0; s < slots_.size(); ++s)
    if (slots_[s].forward) send_routed(static_cast<int>(s));
  settle_round(engine_, comm_, sent_fwd_to_, received_fwd_, [&] { return held_.empty(); });
  // Round 2: final batches, then every reply home.
  for (std::size_t s = 0; s < slots_.size(); ++s) send_routed(static_cast<int>(s));
  settle_round(engine_, comm_, sent_to_, received_, [&] { return idle(); });
  engine_.barrier_serving(comm_);
}

}  // namespace tessera::comm
