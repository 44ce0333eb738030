// The same-node transport alone (SameNodeRings), between the co-located ranks
// of the job, against what each producer wrote: wrap-around over many
// batches, a full ring, a slow consumer, every pair at once.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>
#include <vector>

#include "tessera/comm/same_node_rings.hpp"
#include "tessera/runtime/runtime.hpp"
#include "../test_util.hpp"
#include "tessera/runtime/wait.hpp"

namespace tessera {
namespace {

using Kind = comm::SameNodeRings::Kind;
using test::SplitMix64;

std::vector<int> co_locales(const Runtime& rt) {
  std::vector<int> out;
  for (int r : rt.node().world_ranks)
    if (r != rt.rank()) out.push_back(r);
  return out;
}

// The k-th batch from `source` to `dest`: its length and its bytes, a function
// of all three, so the consumer recomputes what it must see.
std::size_t batch_length(int source, int dest, std::uint64_t k, std::size_t max) {
  SplitMix64 g(static_cast<std::uint64_t>(source) * 1000003u + static_cast<std::uint64_t>(dest) * 7919u + k);
  return 1 + g.below(max);
}
std::byte batch_byte(int source, std::uint64_t k, std::size_t at) {
  return static_cast<std::byte>((static_cast<std::uint64_t>(source) * 31u + k * 7u + at) & 0xff);
}

// Every rank sends `batches` batches to every co-locale through 2-slot rings
// (so the rings wrap around many times) while consuming its own; every batch
// arrives once, in order, whole. With `evict`, each consumed slot is evicted
// from the caches before it is freed.
void exchange_all(Runtime& rt, std::uint32_t slots, std::uint64_t batches, std::size_t max_bytes,
                  unsigned slow_consumer_us, bool evict = false) {
  comm::SameNodeRings rings(rt, {slots, max_bytes, max_bytes});
  auto peers = co_locales(rt);
  for (int p : peers) ASSERT_TRUE(rings.reaches(p)) << "rank " << rt.rank() << " cannot map rank " << p;
  std::vector<std::uint64_t> sent(static_cast<std::size_t>(rt.size()), 0), got(sent.size(), 0);
  std::uint64_t errors = 0;
  auto consume = [&](Kind kind) {
    bool did = false;
    for (int s : rings.sources()) {
      for (auto b = rings.peek(s, kind); !b.empty(); b = rings.peek(s, kind)) {
        std::uint64_t k = got[static_cast<std::size_t>(s)]++;
        std::size_t want = batch_length(s, rt.rank(), k, max_bytes);
        if (b.size() != want) ++errors;
        for (std::size_t i = 0; i < std::min(want, b.size()); ++i) errors += b[i] != batch_byte(s, k, i);
        if (slow_consumer_us) ::usleep(slow_consumer_us);
        rings.consume(s, kind, evict);
        did = true;
      }
    }
    return did;
  };
  bool more = true;
  Backoff backoff;
  while (more) {
    bool did = false;
    more = false;
    for (int p : peers) {
      auto& n = sent[static_cast<std::size_t>(p)];
      if (n == batches) continue;
      more = true;
      if (std::byte* room = rings.room(p, Kind::request)) {
        std::size_t len = batch_length(rt.rank(), p, n, max_bytes);
        for (std::size_t i = 0; i < len; ++i) room[i] = batch_byte(rt.rank(), n, i);
        rings.publish(p, Kind::request, len);
        ++n;
        did = true;
      }
    }
    did = consume(Kind::request) || did;
    did ? backoff.reset() : backoff.idle();
  }
  // Drain what co-locales still send.
  std::uint64_t want_total = batches * peers.size();
  auto total = [&] {
    std::uint64_t t = 0;
    for (auto g : got) t += g;
    return t;
  };
  while (total() < want_total) consume(Kind::request) ? backoff.reset() : backoff.idle();
  EXPECT_EQ(errors, 0u);
  for (int p : peers) EXPECT_EQ(got[static_cast<std::size_t>(p)], batches) << "from rank " << p;
  barrier(rt.comm());  // nobody unmaps a ring another rank still writes
}

TEST(SameNodeRings, WrapAroundKeepsEveryBatchInOrderAndWhole) {
  auto& rt = Runtime::current();
  if (rt.node().size < 2) GTEST_SKIP() << "needs two ranks on a node";
  exchange_all(rt, 2, 3000, 200, 0);
}

TEST(SameNodeRings, EvictedSlotsKeepEveryBatchInOrderAndWhole) {
  auto& rt = Runtime::current();
  if (rt.node().size < 2) GTEST_SKIP() << "needs two ranks on a node";
  exchange_all(rt, 2, 3000, 200, 0, true);
  exchange_all(rt, 1, 300, 4096, 0, true);
}

TEST(SameNodeRings, EvictingLeavesTheBytes) {
  std::vector<std::byte> bytes(10000);
  for (std::size_t i = 0; i < bytes.size(); ++i) bytes[i] = batch_byte(3, 5, i);
  comm::SameNodeRings::evict_from_caches(bytes.data() + 3, bytes.size() - 3);  // unaligned start
  for (std::size_t i = 0; i < bytes.size(); ++i) ASSERT_EQ(bytes[i], batch_byte(3, 5, i)) << "byte " << i;
#if defined(__x86_64__)
  EXPECT_EQ(comm::SameNodeRings::can_evict(), static_cast<bool>(__builtin_cpu_supports("clflushopt")));
#else
  EXPECT_FALSE(comm::SameNodeRings::can_evict());
#endif
}

TEST(SameNodeRings, OneSlotRingsAndSlowConsumer) {
  auto& rt = Runtime::current();
  if (rt.node().size < 2) GTEST_SKIP() << "needs two ranks on a node";
  exchange_all(rt, 1, 200, 64, 50);
}

TEST(SameNodeRings, AFullRingGivesNoRoomUntilTheConsumerFreesASlot) {
  auto& rt = Runtime::current();
  if (rt.node().size < 2) GTEST_SKIP() << "needs two ranks on a node";
  comm::SameNodeRings rings(rt, {3, 16, 0});
  const int first = rt.node().world_ranks[0], second = rt.node().world_ranks[1];
  if (rt.rank() == first) {
    for (int k = 0; k < 3; ++k) {
      std::byte* room = rings.room(second, Kind::request);
      ASSERT_NE(room, nullptr) << "slot " << k;
      std::memset(room, k, 16);
      rings.publish(second, Kind::request, 16);
    }
    EXPECT_EQ(rings.room(second, Kind::request), nullptr) << "three slots, three batches: full";
  }
  barrier(rt.comm());
  if (rt.rank() == second) {
    auto b = rings.peek(first, Kind::request);
    ASSERT_EQ(b.size(), 16u);
    EXPECT_EQ(b[0], std::byte{0});
    rings.consume(first, Kind::request);
  }
  barrier(rt.comm());
  if (rt.rank() == first) {
    EXPECT_NE(rings.room(second, Kind::request), nullptr) << "one slot was freed";
  }
  if (rt.rank() == second) {
    for (int k = 1; k < 3; ++k) {
      auto b = rings.peek(first, Kind::request);
      ASSERT_EQ(b.size(), 16u);
      EXPECT_EQ(b[15], static_cast<std::byte>(k));
      rings.consume(first, Kind::request);
    }
    EXPECT_TRUE(rings.peek(first, Kind::request).empty());
    EXPECT_TRUE(rings.peek(first, Kind::reply).empty()) << "no reply rings in this shape";
  }
  barrier(rt.comm());
}

TEST(SameNodeRings, MemoryIsTheRingsOfTheCoLocalesOnly) {
  auto& rt = Runtime::current();
  comm::SameNodeRings::Shape shape{2, 1000, 500};
  comm::SameNodeRings rings(rt, shape);
  EXPECT_EQ(rings.memory_bytes(), comm::SameNodeRings::segment_bytes(shape, rt.node().size - 1));
  EXPECT_EQ(rings.sources().size(), static_cast<std::size_t>(rt.node().size - 1));
  for (int r = 0; r < rt.size(); ++r)
    if (!rt.is_colocal(r) || r == rt.rank()) {
      EXPECT_FALSE(rings.reaches(r)) << "rank " << r;
    }
}

}  // namespace
}  // namespace tessera
