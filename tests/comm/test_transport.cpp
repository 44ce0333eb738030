// The transports of the aggregation engine through one test each: MPI
// point-to-point (every rank) and the same-node rings (co-locales). Every rank
// sends batches to every peer the transport serves and checks what arrives
// against what the sender wrote; flow control (no outbox while every buffer
// towards a rank is in use) and a batch the receiver keeps (released later,
// nothing lost or repeated) behave the same through both.
#include <gtest/gtest.h>

#include <cstring>
#include <memory>
#include <vector>

#include "../test_util.hpp"
#include "tessera/comm/mpi_transport.hpp"
#include "tessera/comm/ring_transport.hpp"
#include "tessera/runtime/runtime.hpp"
#include "tessera/runtime/wait.hpp"

namespace tessera {
namespace {

using comm::Arrival;
using comm::Channel;
using test::SplitMix64;

constexpr std::size_t kMaxBytes = 200;
constexpr int kPerDestination = 2;

// The k-th batch from `source` to `dest`: 8 bytes of k, then bytes that are a
// function of all three, so the receiver recomputes what it must see.
std::size_t batch_length(int source, int dest, std::uint64_t k) {
  SplitMix64 g(static_cast<std::uint64_t>(source) * 1000003u + static_cast<std::uint64_t>(dest) * 7919u + k);
  return 8 + g.below(kMaxBytes - 8 + 1);
}
std::byte batch_byte(int source, std::uint64_t k, std::size_t at) {
  return static_cast<std::byte>((static_cast<std::uint64_t>(source) * 31u + k * 7u + at) & 0xff);
}
void write_batch(std::byte* out, int source, int dest, std::uint64_t k) {
  std::memcpy(out, &k, 8);
  for (std::size_t i = 8; i < batch_length(source, dest, k); ++i) out[i] = batch_byte(source, k, i);
}

// Checks every batch; keeps every third one (released after the poll).
struct Checker final : comm::Receiver {
  int me = 0;
  std::uint64_t batches = 0;
  std::vector<std::vector<int>> seen;  // by source, by batch: times it arrived
  std::vector<Arrival> kept;
  std::uint64_t errors = 0, received = 0;

  bool arrived(const Arrival& a) override {
    if (a.channel != Channel::request || a.data.size() < 8) {
      ++errors;
      return true;
    }
    std::uint64_t k;
    std::memcpy(&k, a.data.data(), 8);
    if (k >= batches || a.data.size() != batch_length(a.source, me, k)) {
      ++errors;
      return true;
    }
    for (std::size_t i = 8; i < a.data.size(); ++i) errors += a.data[i] != batch_byte(a.source, k, i);
    ++seen[static_cast<std::size_t>(a.source)][k];
    ++received;
    if (k % 3 == 1) {
      kept.push_back(a);
      return false;
    }
    return true;
  }
  bool release_kept() {
    for (const Arrival& a : kept) a.from->release(a);
    bool did = !kept.empty();
    kept.clear();
    return did;
  }
};

void exchange_through(Runtime& rt, comm::Transport& t, const std::vector<int>& peers, std::uint64_t batches) {
  Checker check;
  check.me = rt.rank();
  check.batches = batches;
  check.seen.assign(static_cast<std::size_t>(rt.size()), std::vector<int>(batches, 0));

  // Flow control: the first peer's buffers, all sent and none retired or
  // consumed (nobody polls before the barrier), leave no outbox.
  const int first = peers.front();
  for (std::uint64_t k = 0; k < kPerDestination; ++k) {
    comm::Outbox box = t.acquire(first, Channel::request);
    ASSERT_TRUE(box) << "buffer " << k << " towards rank " << first;
    write_batch(box.data, rt.rank(), first, k);
    t.send(first, Channel::request, box, batch_length(rt.rank(), first, k), false);
  }
  EXPECT_FALSE(t.acquire(first, Channel::request)) << "every buffer towards rank " << first << " is in use";
  barrier(rt.comm());

  std::vector<std::uint64_t> sent(static_cast<std::size_t>(rt.size()), 0);
  sent[static_cast<std::size_t>(first)] = kPerDestination;
  const std::uint64_t want = batches * peers.size();
  Backoff backoff;
  for (;;) {
    bool did = false, more = false;
    for (int p : peers) {
      auto& n = sent[static_cast<std::size_t>(p)];
      if (n == batches) continue;
      more = true;
      if (comm::Outbox box = t.acquire(p, Channel::request)) {
        write_batch(box.data, rt.rank(), p, n);
        t.send(p, Channel::request, box, batch_length(rt.rank(), p, n), false);
        ++n;
        did = true;
      }
    }
    did = t.poll(check) || did;
    did = check.release_kept() || did;
    if (!more && check.received == want && !t.busy()) break;
    did ? backoff.reset() : backoff.idle();
  }
  EXPECT_EQ(check.errors, 0u);
  for (int p : peers)
    for (std::uint64_t k = 0; k < batches; ++k)
      ASSERT_EQ(check.seen[static_cast<std::size_t>(p)][k], 1) << "batch " << k << " from rank " << p;
  barrier(rt.comm());  // nobody tears down buffers another rank still writes
}

TEST(Transport, MpiDeliversEveryBatchOnceUnderFlowControl) {
  auto& rt = Runtime::current();
  if (rt.size() < 2) GTEST_SKIP() << "needs a remote rank";
  MPI_Comm comm;
  MPI_Comm_dup(rt.comm(), &comm);
  {
    comm::MpiTransport::Config c;
    c.bytes = {kMaxBytes, 0, 0};
    c.per_destination = {kPerDestination, 0, 0};
    c.receives = {2, 0, 0};
    comm::MpiTransport t(comm, c);
    std::vector<int> peers;
    for (int r = 1; r < rt.size(); ++r) peers.push_back((rt.rank() + r) % rt.size());
    exchange_through(rt, t, peers, 500);
    EXPECT_GT(t.memory_bytes(), 0u);
  }
  MPI_Comm_free(&comm);
}

TEST(Transport, RingsDeliverEveryBatchOnceUnderFlowControl) {
  auto& rt = Runtime::current();
  if (rt.node().size < 2) GTEST_SKIP() << "needs two ranks on a node";
  comm::RingTransport t(rt, kPerDestination, kMaxBytes, 0);
  // No replies: consumed requests are evicted where the CPU can (so this test runs that path here).
  EXPECT_EQ(t.evicts_requests(), comm::SameNodeRings::can_evict());
  {
    comm::RingTransport with_replies(rt, kPerDestination, kMaxBytes, kMaxBytes);
    EXPECT_FALSE(with_replies.evicts_requests()) << "with replies the requester waits: no eviction on its path";
  }
  std::vector<int> peers;
  for (int r : rt.node().world_ranks)
    if (r != rt.rank()) {
      ASSERT_TRUE(t.reaches(r)) << "rank " << rt.rank() << " cannot map rank " << r;
      peers.push_back(r);
    }
  exchange_through(rt, t, peers, 500);
}

}  // namespace
}  // namespace tessera
