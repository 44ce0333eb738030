// Message routing and chunk migration for ChunkArray: buffered messages to
// chunk ids, routed at exchange time by the location table, one bulk
// all-to-all per exchange for the messages that leave the rank.
#include <time.h>

#include <chrono>
#include <cstring>

#include "tessera/chunks/chunk_array.hpp"
#include "tessera/comm/bulk_exchange.hpp"
#include "tessera/runtime/collective.hpp"

namespace tessera::chunks {

namespace {
// On the wire: header, payload, padding to 8 bytes (payloads stay aligned).
struct WireHeader {
  std::uint64_t to;
  std::uint64_t from;
  std::uint32_t tag;
  std::uint32_t bytes;
};
constexpr std::size_t padded(std::size_t n) { return (n + 7) & ~std::size_t{7}; }

template <class F>
void for_each_message(const std::byte* buf, std::size_t size, F&& f) {
  std::size_t at = 0;
  while (at < size) {
    WireHeader h;
    std::memcpy(&h, buf + at, sizeof h);
    f(h, std::span<const std::byte>(buf + at + sizeof h, h.bytes));
    at += sizeof h + padded(h.bytes);
  }
}
template <class Buffer>
const std::byte* bytes_of(const Buffer& b) {
  return reinterpret_cast<const std::byte*>(b.data());
}

int comm_rank(MPI_Comm c) {
  int r = 0;
  TESSERA_MPI(MPI_Comm_rank(c, &r));
  return r;
}
int comm_size(MPI_Comm c) {
  int r = 0;
  TESSERA_MPI(MPI_Comm_size(c, &r));
  return r;
}
}  // namespace

double thread_cpu_seconds() noexcept {
  timespec t{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return static_cast<double>(t.tv_sec) + 1e-9 * static_cast<double>(t.tv_nsec);
}

ChunkRouter::ChunkRouter(MPI_Comm comm, std::size_t chunks, Placement placement)
    : comm_(comm), rank_(comm_rank(comm)), size_(comm_size(comm)), placement_(std::move(placement)), db_(chunks) {
  if (placement_.empty()) placement_ = block_placement(chunks, size_);
  agree(comm_, [&] { check_placement(placement_, chunks, size_, "the chunk placement"); });
  outbox_.resize(static_cast<std::size_t>(size_));
}

void ChunkRouter::throw_bad_chunk(std::uint64_t chunk, const char* what) const {
  throw RangeError(std::string("chunk array ") + what + ": chunk id " + std::to_string(chunk) +
                   " is out of range; the array has " + std::to_string(placement_.size()) + " chunks (0.." +
                   std::to_string(placement_.size() == 0 ? 0 : placement_.size() - 1) + ")");
}

void ChunkRouter::agree_placement(const Placement& placement, const std::string& what) const {
  agree(comm_, [&] { check_placement(placement, placement_.size(), size_, what); });
}

std::byte* ChunkRouter::grow(Box& box, std::size_t bytes) {
  std::size_t at = box.size();
  box.resize(at + bytes);
  return reinterpret_cast<std::byte*>(box.data() + at);
}

std::byte* ChunkRouter::append(std::uint64_t from, std::uint64_t to, std::uint32_t tag, std::size_t bytes) {
  check_chunk(to, "send");
  check_chunk(from, "send (sender)");
  if (bytes > 0xffffffffu) throw RangeError("chunk message of " + std::to_string(bytes) + " bytes exceeds 4 GiB");
  std::byte* at = grow(outbox_[static_cast<std::size_t>(placement_[to])], sizeof(WireHeader) + padded(bytes));
  WireHeader h{to, from, tag, static_cast<std::uint32_t>(bytes)};
  std::memcpy(at, &h, sizeof h);
  std::memset(at + sizeof h + bytes, 0, padded(bytes) - bytes);  // the padding goes on the wire: no stale bytes
  db_.add_bytes(from, to, bytes);
  return at + sizeof h;
}

void ChunkRouter::append_all(std::uint64_t from, std::span<const Outgoing> messages, std::size_t value_bytes,
                             std::span<std::byte*> rooms) {
  // Reserve each destination's box for all of them first: no append below
  // reallocates, so every room stays where it is.
  auto& extra = reserve_scratch_;
  extra.assign(outbox_.size(), 0);
  for (auto& m : messages) {
    check_chunk(m.to, "send");
    extra[static_cast<std::size_t>(placement_[m.to])] += sizeof(WireHeader) + padded(m.count * value_bytes);
  }
  for (std::size_t r = 0; r < outbox_.size(); ++r)
    if (extra[r] && outbox_[r].capacity() < outbox_[r].size() + extra[r])
      outbox_[r].reserve(std::max(outbox_[r].size() + extra[r], 2 * outbox_[r].capacity()));
  for (std::size_t k = 0; k < messages.size(); ++k)
    rooms[k] = append(from, messages[k].to, messages[k].tag, messages[k].count * value_bytes);
}

std::uint64_t ChunkRouter::exchange(const std::function<void(const Message&)>& deliver) {
  std::uint64_t delivered = 0;
  auto handle = [&](const WireHeader& h, std::span<const std::byte> payload) {
    if (placement_[h.to] != rank_)
      throw Error("chunk router: a message for chunk " + std::to_string(h.to) + " reached rank " +
                  std::to_string(rank_) + " but the chunk lives on rank " + std::to_string(placement_[h.to]));
    deliver(Message{h.from, h.to, h.tag, payload});
    ++delivered;
  };
  // Handlers may send: the outboxes are taken before anything is delivered,
  // and what they send waits for the next round. The delivered bytes stay
  // until the next exchange (Message payloads point into them); the local
  // box trades buffers with them, so its capacity is reused.
  delivered_local_.clear();
  delivered_local_.swap(outbox_[static_cast<std::size_t>(rank_)]);
  // The swapped-in box takes this round's size at once: grown by doubling
  // during the next step's sends, its copies would be charged to whichever
  // chunks happened to send then, and the balancer would move those.
  outbox_[static_cast<std::size_t>(rank_)].reserve(delivered_local_.size());
  delivered_remote_.clear();
  if (size_ > 1) {
    std::vector<std::uint64_t> counts(static_cast<std::size_t>(size_), 0), received_counts;
    std::size_t total = 0;
    for (int r = 0; r < size_; ++r)
      if (r != rank_) total += outbox_[static_cast<std::size_t>(r)].size();
    std::vector<std::byte> send;
    send.reserve(total);
    for (int r = 0; r < size_; ++r) {
      if (r == rank_) continue;
      auto& box = outbox_[static_cast<std::size_t>(r)];
      counts[static_cast<std::size_t>(r)] = box.size();
      send.insert(send.end(), bytes_of(box), bytes_of(box) + box.size());
      box.clear();
    }
    delivered_remote_ = comm::exchange_bytes(comm_, send, counts, 1, received_counts);
  }
  for_each_message(bytes_of(delivered_local_), delivered_local_.size(), handle);
  for_each_message(delivered_remote_.data(), delivered_remote_.size(), handle);
  return delivered;
}

bool ChunkRouter::any_pending() const {
  int mine = 0;
  for (auto& box : outbox_) mine |= box.empty() ? 0 : 1;
  return all_reduce(comm_, mine, MPI_MAX) != 0;
}

void ChunkRouter::reroute() {
  std::vector<Box> old(static_cast<std::size_t>(size_));
  old.swap(outbox_);
  for (auto& box : old)
    for_each_message(bytes_of(box), box.size(), [&](const WireHeader& h, std::span<const std::byte> payload) {
      std::byte* at = grow(outbox_[static_cast<std::size_t>(placement_[h.to])], sizeof h + padded(h.bytes));
      std::memcpy(at, &h, sizeof h);
      std::memset(at + sizeof h + h.bytes, 0, padded(h.bytes) - h.bytes);
      if (!payload.empty()) std::memcpy(at + sizeof h, payload.data(), payload.size());
    });
}

std::vector<ChunkRouter::Packed> ChunkRouter::migrate(const Placement& next, std::vector<Packed> leaving,
                                                      std::uint64_t& bytes_moved) {
  // Wire: id, byte count, bytes (padded), grouped by destination rank.
  std::vector<std::vector<std::byte>> by_dest(static_cast<std::size_t>(size_));
  bytes_moved = 0;
  for (auto& p : leaving) {
    auto& d = by_dest[static_cast<std::size_t>(next[p.id])];
    std::uint64_t head[2] = {p.id, p.bytes.size()};
    std::size_t at = d.size();
    d.resize(at + sizeof head + padded(p.bytes.size()));
    std::memcpy(d.data() + at, head, sizeof head);
    if (!p.bytes.empty()) std::memcpy(d.data() + at + sizeof head, p.bytes.data(), p.bytes.size());
    bytes_moved += p.bytes.size();
  }
  leaving.clear();
  std::vector<std::uint64_t> counts(static_cast<std::size_t>(size_)), received_counts;
  std::vector<std::byte> send;
  for (int r = 0; r < size_; ++r) {
    counts[static_cast<std::size_t>(r)] = by_dest[static_cast<std::size_t>(r)].size();
    send.insert(send.end(), by_dest[static_cast<std::size_t>(r)].begin(), by_dest[static_cast<std::size_t>(r)].end());
  }
  auto received = comm::exchange_bytes(comm_, send, counts, 1, received_counts);
  std::vector<Packed> arrived;
  for (std::size_t at = 0; at < received.size();) {
    std::uint64_t head[2];
    std::memcpy(head, received.data() + at, sizeof head);
    auto* data = received.data() + at + sizeof head;
    arrived.push_back({head[0], std::vector<std::byte>(data, data + head[1])});
    at += sizeof head + padded(head[1]);
  }
  placement_ = next;
  reroute();
  return arrived;
}

Placement decide_balance(MPI_Comm comm, const LoadDatabase& db, const Placement& current, Strategy strategy,
                         const HopDistance& hops, double tolerance, BalanceReport& report) {
  int rank = comm_rank(comm), ranks = comm_size(comm);
  BalanceInput in;
  in.load = db.gather_loads(comm);
  in.edges = db.gather_edges(comm, 0);
  in.current = current;
  in.ranks = ranks;
  in.hops = hops;
  in.tolerance = tolerance;
  report.strategy = strategy;
  Placement next = current;
  double figures[4] = {0, 0, 0, 0};  // decide seconds, hop-bytes before, after, (pad)
  if (rank == 0) {
    auto t0 = std::chrono::steady_clock::now();
    next = balance(strategy, in);
    figures[0] = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    figures[1] = hop_bytes(in.edges, current, hops);
    figures[2] = hop_bytes(in.edges, next, hops);
  }
  broadcast(comm, next.data(), next.size(), 0);
  broadcast(comm, figures, 4, 0);
  report.decide_seconds = figures[0];
  report.hop_bytes_before = figures[1];
  report.hop_bytes_after = figures[2];
  auto before = rank_loads(in.load, current, ranks);
  auto after = rank_loads(in.load, next, ranks);
  double total = 0;
  for (double l : in.load) total += l;
  report.average_load = total / ranks;
  report.max_load_before = *std::max_element(before.begin(), before.end());
  report.max_load_after = *std::max_element(after.begin(), after.end());
  return next;
}

void finish_balance_report(MPI_Comm comm, const Placement& before, const Placement& after,
                           std::uint64_t bytes_sent_here, double migrate_seconds, BalanceReport& report) {
  report.chunks_moved = chunks_moved(before, after);
  report.bytes_moved = all_reduce(comm, bytes_sent_here, MPI_SUM);
  report.migrate_seconds = all_reduce(comm, migrate_seconds, MPI_MAX);
}

}  // namespace tessera::chunks
