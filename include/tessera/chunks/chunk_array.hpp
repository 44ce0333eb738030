// ChunkArray<C>: over-decomposition after Charm++ chare arrays. N chunks of a
// user type C (N >> ranks), each with a global id, live on the ranks named by
// a Placement (the location table, the same on every rank). The program
// iterates over this rank's chunks, sends messages between chunks by id, and
// at sync points lets a load balancer migrate chunks.
//
// Messages: send() buffers a message for chunk `to` on this rank; exchange()
// (collective, the step barrier) routes every buffered message to the rank
// that owns `to` at that moment and runs the handler on the destination
// chunk. Messages to local chunks never touch MPI; the rest travel in one
// all-to-all per step (comm/bulk_exchange). quiesce() repeats exchange rounds
// until no rank has anything buffered (handlers may send).
// Migration: migrate() moves chunks (serialize -> bulk exchange -> rebuild);
// messages buffered but not yet exchanged are routed by the new table, so a
// migration never loses or duplicates one.
#pragma once
#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "tessera/chunks/archive.hpp"
#include "tessera/chunks/balance.hpp"
#include "tessera/chunks/measurement.hpp"
#include "tessera/chunks/placement.hpp"
#include "tessera/runtime/error.hpp"
#include "tessera/runtime/trace.hpp"

namespace tessera::chunks {

// A delivered message; its payload lives until the handler returns.
struct Message {
  std::uint64_t from = 0;
  std::uint64_t to = 0;
  std::uint32_t tag = 0;
  std::span<const std::byte> payload;

  template <class T>
  std::size_t count() const noexcept {
    return payload.size() / sizeof(T);
  }
  // Copies the payload into `out` (which must hold count<T>() values).
  template <class T>
  void copy_to(std::span<T> out) const {
    static_assert(std::is_trivially_copyable_v<T>);
    if (out.size() * sizeof(T) < payload.size())
      throw RangeError("chunk message: payload of " + std::to_string(payload.size()) + " bytes does not fit " +
                       std::to_string(out.size()) + " values");
    if (!payload.empty()) std::memcpy(out.data(), payload.data(), payload.size());
  }
};

// A message to be filled in place: `count` values for chunk `to`.
struct Outgoing {
  std::uint64_t to = 0;
  std::uint32_t tag = 0;
  std::size_t count = 0;
};

// The non-template machinery of ChunkArray: location table, message
// buffers and routing, the bulk exchange of migrating chunks.
class ChunkRouter {
 public:
  ChunkRouter(MPI_Comm comm, std::size_t chunks, Placement placement);
  ChunkRouter(const ChunkRouter&) = delete;
  ChunkRouter& operator=(const ChunkRouter&) = delete;

  int rank() const noexcept { return rank_; }
  int ranks() const noexcept { return size_; }
  MPI_Comm comm() const noexcept { return comm_; }
  std::size_t size() const noexcept { return placement_.size(); }
  const Placement& placement() const noexcept { return placement_; }
  int owner(std::uint64_t chunk) const {
    check_chunk(chunk, "owner");
    return placement_[chunk];
  }
  // Throws RangeError naming `what` when `chunk` is not an id of this array.
  void check_chunk(std::uint64_t chunk, const char* what) const {
    if (chunk >= placement_.size()) throw_bad_chunk(chunk, what);
  }

  // Room for a payload of `bytes` to chunk `to`, valid until the next send.
  std::byte* append(std::uint64_t from, std::uint64_t to, std::uint32_t tag, std::size_t bytes);
  // Room for each of `messages` (count x value_bytes each) in rooms[k], all
  // valid together until the next send or exchange.
  void append_all(std::uint64_t from, std::span<const Outgoing> messages, std::size_t value_bytes,
                  std::span<std::byte*> rooms);
  // Collective: routes every buffered message; calls deliver(message) for
  // each message to a chunk of this rank (payloads stay valid until the next
  // exchange or migration). Returns messages delivered here.
  std::uint64_t exchange(const std::function<void(const Message&)>& deliver);
  // Collective: true when some rank has messages buffered.
  bool any_pending() const;

  // Collective: throws RangeError on every rank when `placement` is not a
  // valid table for this array on some rank.
  void agree_placement(const Placement& placement, const std::string& what) const;
  // Collective: ships `leaving` (chunk id, its bytes) to their owners under
  // `next`, installs `next` as the location table, re-routes buffered
  // messages, and returns the chunks that arrived here (id, bytes).
  struct Packed {
    std::uint64_t id = 0;
    std::vector<std::byte> bytes;
  };
  std::vector<Packed> migrate(const Placement& next, std::vector<Packed> leaving, std::uint64_t& bytes_moved);

  LoadDatabase& measurements() noexcept { return db_; }
  const LoadDatabase& measurements() const noexcept { return db_; }

 private:
  [[noreturn]] void throw_bad_chunk(std::uint64_t chunk, const char* what) const;
  void reroute();

  MPI_Comm comm_ = MPI_COMM_NULL;
  int rank_ = 0, size_ = 1;
  Placement placement_;
  // Outboxes grow without zero-filling: every byte is written by the sender.
  struct RawByte {
    std::byte value;
    RawByte() noexcept {}  // NOLINT: deliberately leaves the byte unset
  };
  using Box = std::vector<RawByte>;
  std::byte* grow(Box& box, std::size_t bytes);
  std::vector<Box> outbox_;  // by destination rank
  Box delivered_local_;       // the last exchange's messages (the local box, swapped out)
  std::vector<std::byte> delivered_remote_;
  std::vector<std::size_t> reserve_scratch_;  // append_all's bytes per destination
  LoadDatabase db_;
};

// CPU seconds used by the calling thread.
double thread_cpu_seconds() noexcept;

template <Serializable C>
class ChunkArray {
 public:
  // `make(id)` builds chunk `id` on its owner. An empty placement means
  // block_placement. Collective over `comm`.
  ChunkArray(MPI_Comm comm, std::size_t chunks, const std::function<C(std::uint64_t)>& make, Placement placement = {})
      : router_(comm, chunks, std::move(placement)), slot_of_(chunks, -1) {
    for (std::uint64_t id = 0; id < chunks; ++id)
      if (router_.placement()[id] == router_.rank()) add_local(id, std::make_unique<C>(make(id)));
  }

  std::size_t size() const noexcept { return router_.size(); }
  int rank() const noexcept { return router_.rank(); }
  int ranks() const noexcept { return router_.ranks(); }
  MPI_Comm comm() const noexcept { return router_.comm(); }
  const Placement& placement() const noexcept { return router_.placement(); }
  int owner(std::uint64_t chunk) const { return router_.owner(chunk); }
  // This rank's chunk ids, ascending.
  const std::vector<std::uint64_t>& local_ids() const noexcept { return ids_; }
  bool is_local(std::uint64_t chunk) const { return slot_of_.at(chunk) >= 0; }
  C& local(std::uint64_t chunk) {
    router_.check_chunk(chunk, "local");
    if (slot_of_[chunk] < 0)
      throw RangeError("chunk " + std::to_string(chunk) + " is on rank " + std::to_string(owner(chunk)) +
                       ", not on rank " + std::to_string(rank()));
    return *chunks_[static_cast<std::size_t>(slot_of_[chunk])];
  }

  // Runs fn(id, chunk) for each local chunk in id order; its CPU time is the
  // chunk's compute load in the measurement database. CPU time, not wall
  // time: with ranks sharing cores, wall time would charge a chunk for the
  // time its rank was descheduled, and the balancer would chase that noise.
  template <class F>
  void for_each(F&& fn) {
    double t0 = thread_cpu_seconds();  // one clock read per chunk: each end starts the next
    for (std::size_t s = 0; s < ids_.size(); ++s) {
      fn(ids_[s], *chunks_[s]);
      double t1 = thread_cpu_seconds();
      router_.measurements().add_compute(ids_[s], t1 - t0);
      t0 = t1;
    }
  }
  // Ends a measured step (the per-step figures of the database).
  void end_step() { router_.measurements().end_step(); }

  // Buffers `values` for chunk `to`; delivered by the next exchange().
  template <class T>
  void send(std::uint64_t from, std::uint64_t to, std::uint32_t tag, std::span<const T> values) {
    static_assert(std::is_trivially_copyable_v<T>);
    auto bytes = values.size_bytes();
    std::byte* at = router_.append(from, to, tag, bytes);
    if (bytes) std::memcpy(at, values.data(), bytes);
  }
  // Room for `count` values to chunk `to`, to be filled in place (saves a
  // copy); valid until the next send.
  template <class T>
  std::span<T> send_buffer(std::uint64_t from, std::uint64_t to, std::uint32_t tag, std::size_t count) {
    static_assert(std::is_trivially_copyable_v<T> && alignof(T) <= 8);
    return {reinterpret_cast<T*>(router_.append(from, to, tag, count * sizeof(T))), count};
  }
  // Room for several messages at once, out[k] for messages[k], all valid
  // until the next send or exchange: a chunk can fill its messages while it
  // computes (a stencil's faces, row by row while they are in cache).
  template <class T>
  void send_buffers(std::uint64_t from, std::span<const Outgoing> messages, std::span<std::span<T>> out) {
    static_assert(std::is_trivially_copyable_v<T> && alignof(T) <= 8);
    if (out.size() < messages.size()) throw RangeError("send_buffers: fewer spans than messages");
    std::byte* rooms[16];
    std::vector<std::byte*> many(messages.size() > 16 ? messages.size() : 0);
    std::span<std::byte*> room = many.empty() ? std::span<std::byte*>(rooms, messages.size()) : std::span<std::byte*>(many);
    router_.append_all(from, messages, sizeof(T), room);
    for (std::size_t k = 0; k < messages.size(); ++k) out[k] = {reinterpret_cast<T*>(room[k]), messages[k].count};
  }
  // Collective: delivers every buffered message: handler(chunk, message).
  template <class H>
  void exchange(H&& handler) {
    router_.exchange([&](const Message& m) { handler(local(m.to), m); });
  }
  // Collective: delivers every buffered message, then for each local chunk
  // (id order) runs handler(chunk, message) for its messages and then
  // compute(id, chunk), timed together as the chunk's load. Delivering just
  // before computing finds the chunk's data in cache (the ghost-exchange
  // then sweep step of a stencil).
  template <class H, class F>
  void exchange_and_compute(H&& handler, F&& compute) {
    inbox_.resize(ids_.size());
    for (auto& box : inbox_) box.clear();
    router_.exchange([&](const Message& m) {
      local(m.to);  // checks that the chunk lives here
      inbox_[static_cast<std::size_t>(slot_of_[m.to])].push_back(m);
    });
    for_each([&](std::uint64_t id, C& chunk) {
      for (const Message& m : inbox_[static_cast<std::size_t>(slot_of_[id])]) handler(chunk, m);
      compute(id, chunk);
    });
  }
  // Collective: exchange rounds until no rank has a message buffered.
  template <class H>
  void quiesce(H&& handler) {
    while (router_.any_pending()) exchange(handler);
  }

  // Collective: moves chunks so that chunk c lives on next[c] (every rank
  // passes the same table). Returns the bytes this rank sent.
  std::uint64_t migrate(const Placement& next) {
    trace::Span traced(trace::Category::balance, "migrate chunks");
    router_.agree_placement(next, "migrate: the new placement");  // every rank throws together
    std::vector<ChunkRouter::Packed> leaving;
    for (std::size_t s = 0; s < ids_.size(); ++s)
      if (next[ids_[s]] != rank()) {
        leaving.push_back({ids_[s], {}});
        pack_chunk(*chunks_[s], leaving.back().bytes);
        trace::instant(trace::Category::balance, "migrate chunk",
                       {{"chunk", static_cast<std::int64_t>(ids_[s])}, {"from", rank()}, {"to", next[ids_[s]]},
                        {"bytes", static_cast<std::int64_t>(leaving.back().bytes.size())}});
      }
    std::uint64_t bytes_moved = 0;
    auto arrived = router_.migrate(next, std::move(leaving), bytes_moved);
    std::vector<std::unique_ptr<C>> kept;
    std::vector<std::uint64_t> kept_ids;
    for (std::size_t s = 0; s < ids_.size(); ++s) {
      slot_of_[ids_[s]] = -1;
      if (next[ids_[s]] == rank()) {
        kept.push_back(std::move(chunks_[s]));
        kept_ids.push_back(ids_[s]);
      }
    }
    chunks_.clear();
    ids_.clear();
    for (std::size_t s = 0; s < kept.size(); ++s) add_local(kept_ids[s], std::move(kept[s]));
    for (auto& p : arrived) {
      auto chunk = std::make_unique<C>();
      unpack_chunk(*chunk, p.bytes.data(), p.bytes.size());
      add_local(p.id, std::move(chunk));
    }
    sort_local();
    return bytes_moved;
  }

  // Collective sync point: measures, decides with `strategy` on rank 0,
  // migrates, resets the measurements; returns what happened (on every rank).
  BalanceReport at_sync(Strategy strategy, const HopDistance& hops = same_rank_hops, double tolerance = 1.05);

  LoadDatabase& measurements() noexcept { return router_.measurements(); }

 private:
  void add_local(std::uint64_t id, std::unique_ptr<C> chunk) {
    slot_of_[id] = static_cast<std::int64_t>(ids_.size());
    ids_.push_back(id);
    chunks_.push_back(std::move(chunk));
  }
  void sort_local() {
    std::vector<std::size_t> order(ids_.size());
    for (std::size_t s = 0; s < order.size(); ++s) order[s] = s;
    std::sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) { return ids_[a] < ids_[b]; });
    std::vector<std::unique_ptr<C>> chunks;
    std::vector<std::uint64_t> ids;
    for (auto s : order) {
      chunks.push_back(std::move(chunks_[s]));
      ids.push_back(ids_[s]);
    }
    chunks_.clear();
    ids_.clear();
    for (std::size_t s = 0; s < ids.size(); ++s) add_local(ids[s], std::move(chunks[s]));
  }

  ChunkRouter router_;
  std::vector<std::int64_t> slot_of_;  // by chunk id: index into ids_/chunks_, or -1
  std::vector<std::uint64_t> ids_;
  std::vector<std::unique_ptr<C>> chunks_;
  std::vector<std::vector<Message>> inbox_;  // by slot, for exchange_and_compute
};

// The decision half of at_sync, shared by every ChunkArray: gathers the
// database, decides on rank 0, broadcasts the new placement; fills the
// report's load and hop-bytes figures.
Placement decide_balance(MPI_Comm comm, const LoadDatabase& db, const Placement& current, Strategy strategy,
                         const HopDistance& hops, double tolerance, BalanceReport& report);
// Fills chunks_moved, bytes_moved, migrate time (sums over ranks) collectively.
void finish_balance_report(MPI_Comm comm, const Placement& before, const Placement& after,
                           std::uint64_t bytes_sent_here, double migrate_seconds, BalanceReport& report);

template <Serializable C>
BalanceReport ChunkArray<C>::at_sync(Strategy strategy, const HopDistance& hops, double tolerance) {
  trace::Span traced(trace::Category::balance, "load balance");
  BalanceReport report;
  Placement before = placement();
  Placement next = decide_balance(comm(), measurements(), before, strategy, hops, tolerance, report);
  auto t0 = std::chrono::steady_clock::now();
  std::uint64_t sent = next == before ? 0 : migrate(next);
  double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  finish_balance_report(comm(), before, next, sent, seconds, report);
  measurements().reset();
  if (traced.on() && report.average_load > 0)
    traced.arg("strategy", trace::intern(to_string(strategy)))
        .arg("chunks_moved", report.chunks_moved)
        .arg("bytes_moved", report.bytes_moved)
        .arg("imbalance_before", report.max_load_before / report.average_load)
        .arg("imbalance_after", report.max_load_after / report.average_load);
  return report;
}

}  // namespace tessera::chunks
