// chunks/: messaging and migration against a serial computation in the test,
// the Jacobi iterate bit-identical to the plain loop after migrations and
// load-balancing steps at 1-4 ranks, the strategies on synthetic loads with
// known optima, and bad input (chunk ids, placements, grids, strategies).
#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>
#include <string>

#include "../../src/bench/jacobi3d.hpp"
#include "../test_util.hpp"
#include "tessera/chunks/chunk_array.hpp"
#include "tessera/chunks/mapping.hpp"
#include "tessera/runtime/collective.hpp"
#include "tessera/runtime/splitmix64.hpp"

using namespace tessera;
using namespace tessera::chunks;
using tessera::test::expect_error;

namespace {
Runtime& rt() { return Runtime::current(); }

struct Counter {  // trivially copyable: the memcpy path
  std::uint64_t id = 0, sum = 0, count = 0;
};

struct Rich {  // vectors and a string: the serialize path
  std::uint64_t id = 0;
  std::vector<double> data;
  std::string name;
  std::vector<std::uint64_t> received;
  template <class A>
  void serialize(A& a) {
    a(id, data, name, received);
  }
};
Rich make_rich(std::uint64_t id) {
  Rich r;
  r.id = id;
  r.data.resize(id % 5 + 1);
  for (std::size_t k = 0; k < r.data.size(); ++k) r.data[k] = static_cast<double>(id) + 0.25 * static_cast<double>(k);
  r.name = "chunk-" + std::to_string(id);
  return r;
}

Placement random_placement(std::size_t n, std::uint64_t& state) {
  Placement p(n);
  for (auto& r : p) r = static_cast<int>(splitmix64(state) % static_cast<std::uint64_t>(rt().size()));
  return p;
}

}  // namespace

TEST(ChunkMessages, EveryMessageArrivesOnceWhateverThePlacement) {
  const std::uint64_t n = 37;
  std::uint64_t state = 11;
  for (int round = 0; round < 3; ++round) {
    Placement placement = round == 0 ? Placement{} : random_placement(n, state);
    ChunkArray<Counter> arr(rt().comm(), n, [](std::uint64_t id) { return Counter{id, 0, 0}; }, placement);
    arr.for_each([&](std::uint64_t id, Counter&) {
      std::uint64_t payload[2] = {id, id * id};
      arr.send<std::uint64_t>(id, (id * 7 + 3) % n, 1, payload);
      arr.send<std::uint64_t>(id, (id + 1) % n, 2, payload);
    });
    arr.exchange([](Counter& c, const Message& m) {
      std::uint64_t v[2];
      m.copy_to<std::uint64_t>(v);
      c.sum += v[0] + (m.tag == 2 ? v[1] : 0);
      ++c.count;
    });
    // The serial reference: who sends what to whom.
    std::vector<std::uint64_t> want_sum(n, 0), want_count(n, 0);
    for (std::uint64_t id = 0; id < n; ++id) {
      want_sum[(id * 7 + 3) % n] += id, ++want_count[(id * 7 + 3) % n];
      want_sum[(id + 1) % n] += id + id * id, ++want_count[(id + 1) % n];
    }
    std::uint64_t local = 0;
    arr.for_each([&](std::uint64_t id, Counter& c) {
      EXPECT_EQ(c.id, id);
      EXPECT_EQ(c.sum, want_sum[id]) << "chunk " << id;
      EXPECT_EQ(c.count, want_count[id]) << "chunk " << id;
      ++local;
    });
    EXPECT_EQ(all_reduce(rt().comm(), local, MPI_SUM), n);
  }
}

TEST(ChunkMessages, QuiesceEndsAfterHandlersStopSending) {
  // A token walks 3 * n hops from chunk to chunk, each handler sending it on.
  const std::uint64_t n = 10, hops = 30;
  ChunkArray<Counter> arr(rt().comm(), n, [](std::uint64_t id) { return Counter{id, 0, 0}; });
  if (arr.is_local(0)) {
    std::uint64_t left = hops;
    arr.send<std::uint64_t>(0, 1, 0, std::span<const std::uint64_t>(&left, 1));
  }
  arr.quiesce([&](Counter& c, const Message& m) {
    std::uint64_t left = 0;
    m.copy_to<std::uint64_t>(std::span<std::uint64_t>(&left, 1));
    ++c.count;
    if (--left > 0) arr.send<std::uint64_t>(c.id, (c.id + 1) % n, 0, std::span<const std::uint64_t>(&left, 1));
  });
  std::uint64_t visits = 0;
  arr.for_each([&](std::uint64_t, Counter& c) { visits += c.count; });
  EXPECT_EQ(all_reduce(rt().comm(), visits, MPI_SUM), hops);
}

TEST(ChunkMessages, SendBuffersStayValidTogetherUntilFilled) {
  // Each chunk takes rooms for 20 messages (to every chunk, local or not,
  // sizes 1..20) first and fills them afterwards, last room first: a room
  // that moved when a later one grew its box would deliver garbage.
  const std::uint64_t n = 20;
  ChunkArray<Counter> arr(rt().comm(), n, [](std::uint64_t id) { return Counter{id, 0, 0}; }, map_round_robin(n, rt().size()));
  arr.for_each([&](std::uint64_t id, Counter&) {
    std::vector<Outgoing> messages;
    for (std::uint64_t to = 0; to < n; ++to) messages.push_back({to, static_cast<std::uint32_t>(id), to + 1});
    std::vector<std::span<std::uint64_t>> rooms(n);
    arr.send_buffers<std::uint64_t>(id, messages, rooms);
    for (std::size_t m = n; m-- > 0;)
      for (std::size_t k = 0; k < rooms[m].size(); ++k) rooms[m][k] = id * 1000 + k;
  });
  arr.exchange([](Counter& c, const Message& m) {
    std::vector<std::uint64_t> v(m.count<std::uint64_t>());
    m.copy_to<std::uint64_t>(v);
    EXPECT_EQ(v.size(), c.id + 1);
    for (std::size_t k = 0; k < v.size(); ++k) EXPECT_EQ(v[k], m.from * 1000 + k);
    ++c.count;
  });
  arr.for_each([&](std::uint64_t, Counter& c) { EXPECT_EQ(c.count, n); });
}

TEST(ChunkMigration, ChunksAndPendingMessagesSurviveAnySequenceOfMigrations) {
  const std::uint64_t n = 23;
  ChunkArray<Rich> arr(rt().comm(), n, make_rich);
  std::uint64_t state = 5;
  for (int round = 0; round < 4; ++round) {
    // Sent before the migration, delivered after it: exactly once each.
    arr.for_each([&](std::uint64_t id, Rich&) {
      std::uint64_t v = id * 100 + static_cast<std::uint64_t>(round);
      arr.send<std::uint64_t>(id, (id + 5) % n, 0, std::span<const std::uint64_t>(&v, 1));
    });
    Placement next = random_placement(n, state);
    arr.migrate(next);
    EXPECT_EQ(arr.placement(), next);
    arr.exchange([](Rich& r, const Message& m) {
      std::uint64_t v = 0;
      m.copy_to<std::uint64_t>(std::span<std::uint64_t>(&v, 1));
      r.received.push_back(v);
    });
  }
  std::uint64_t local = 0;
  arr.for_each([&](std::uint64_t id, Rich& r) {
    ++local;
    EXPECT_EQ(arr.owner(id), rt().rank());
    Rich want = make_rich(id);
    EXPECT_EQ(r.id, id);
    EXPECT_EQ(r.data, want.data);
    EXPECT_EQ(r.name, want.name);
    std::uint64_t sender = (id + n - 5) % n;
    std::vector<std::uint64_t> expected;
    for (std::uint64_t round = 0; round < 4; ++round) expected.push_back(sender * 100 + round);
    EXPECT_EQ(r.received, expected) << "chunk " << id;
  });
  EXPECT_EQ(all_reduce(rt().comm(), local, MPI_SUM), n);
}

TEST(ChunkJacobi, BitIdenticalToThePlainLoopAfterMigrationsAndBalancing) {
  namespace jb = tessera::bench::jacobi;
  jb::Problem p{12, 9, false};
  const jb::Outcome plain = jb::run_plain(p);
  ASSERT_EQ(jb::check(p, plain).rfind("ok", 0), 0u) << jb::check(p, plain);
  ChunkGrid grid{3, 2, 2};
  auto mapping_of = [](const std::string& name, const ChunkGrid& g) {
    return name == "rnd" ? map_random(g.count(), rt().size(), 3) : name == "rr" ? map_round_robin(g.count(), rt().size()) : map_block(g.count(), rt().size());
  };
  struct Case {
    Strategy strategy;
    bool imbalance;
    int scramble_every;
    std::string mapping;
  };
  for (const Case& c : {Case{Strategy::none, false, 0, "block"}, Case{Strategy::greedy, true, 0, "rnd"},
                        Case{Strategy::refine, true, 0, "block"}, Case{Strategy::comm, true, 0, "rr"},
                        Case{Strategy::none, false, 2, "block"}}) {
    jb::Problem q = p;
    q.imbalance = c.imbalance;
    jb::Balancing lb{.strategy = c.strategy, .at_iteration = 3, .scramble_every = c.scramble_every};
    jb::Outcome o = jb::run_chunked(rt(), q, grid, mapping_of(c.mapping, grid), lb);
    std::string text = jb::check(q, o, &plain);
    EXPECT_EQ(text.rfind("ok", 0), 0u) << to_string(c.strategy) << ": " << text;
    EXPECT_EQ(o.checksum, plain.checksum) << to_string(c.strategy);
  }
}

TEST(ChunkJacobi, TheVerifierRejectsWrongIterates) {
  namespace jb = tessera::bench::jacobi;
  jb::Problem p{10, 5, false};
  jb::Outcome good = jb::run_plain(p);
  ASSERT_EQ(jb::check(p, good).rfind("ok", 0), 0u);
  jb::Outcome wrong = good;
  wrong.checksum ^= 1;  // one bit somewhere
  EXPECT_EQ(jb::check(p, wrong, &good).rfind("WRONG", 0), 0u);
  wrong = good;
  wrong.deviation = 1e-3;  // the iterate is off the theory
  EXPECT_EQ(jb::check(p, wrong).rfind("WRONG", 0), 0u);
  wrong = good;
  wrong.residual *= 1.01;
  EXPECT_EQ(jb::check(p, wrong).rfind("WRONG", 0), 0u);
  jb::Problem more = p;
  more.iterations = 6;  // the iterate of 5 sweeps claimed as 6
  EXPECT_EQ(jb::check(more, good).rfind("WRONG", 0), 0u);
}

TEST(Strategies, GreedyReachesTheOptimumOnKnownLoads) {
  BalanceInput in{.load = {7, 5, 4, 3, 1}, .current = {0, 0, 0, 0, 0}, .ranks = 2};
  auto out = greedy_balance(in);
  auto loads = rank_loads(in.load, out, 2);
  EXPECT_DOUBLE_EQ(std::max(loads[0], loads[1]), 10.0);  // 20 / 2
  BalanceInput equal{.load = std::vector<double>(8, 1.0), .current = Placement(8, 0), .ranks = 4};
  auto placed = greedy_balance(equal);
  auto loads8 = rank_loads(equal.load, placed, 4);
  for (double l : loads8) EXPECT_DOUBLE_EQ(l, 2.0);
  EXPECT_EQ(chunks_moved(equal.current, placed), 6u);  // what fits on its rank stays: only 6 of 8 must leave
}

TEST(Strategies, RefineMovesOnlyWhatItMust) {
  BalanceInput balanced{.load = {1, 1, 1, 1}, .current = {0, 1, 0, 1}, .ranks = 2};
  EXPECT_EQ(refine_balance(balanced), balanced.current);  // nothing to do: nothing moves
  BalanceInput piled{.load = std::vector<double>(8, 1.0), .current = Placement(8, 0), .ranks = 4};
  auto out = refine_balance(piled);
  auto loads = rank_loads(piled.load, out, 4);
  for (double l : loads) EXPECT_DOUBLE_EQ(l, 2.0);
  EXPECT_EQ(chunks_moved(piled.current, out), 6u);  // the minimum: 6 chunks must leave rank 0
  // One heavy chunk: moving the light ones off its rank is the best there is.
  BalanceInput heavy{.load = {6, 1, 1, 1, 1}, .current = {0, 0, 0, 1, 1}, .ranks = 2};
  auto h = rank_loads(heavy.load, refine_balance(heavy), 2);
  EXPECT_DOUBLE_EQ(std::max(h[0], h[1]), 6.0);
}

TEST(Strategies, CommAwareKeepsNeighboursTogether) {
  // A chain of 8 unit chunks, all on rank 0: the optimum on 2 ranks is two
  // runs of 4 (load 4 each, one edge cut); Greedy cuts almost every edge.
  BalanceInput in{.load = std::vector<double>(8, 1.0), .current = Placement(8, 0), .ranks = 2};
  for (std::uint64_t c = 0; c + 1 < 8; ++c) in.edges.push_back({c, c + 1, 100});
  auto out = comm_balance(in);
  auto loads = rank_loads(in.load, out, 2);
  EXPECT_DOUBLE_EQ(loads[0], 4.0);
  EXPECT_DOUBLE_EQ(loads[1], 4.0);
  EXPECT_DOUBLE_EQ(hop_bytes(in.edges, out, same_rank_hops), 100.0);
  // The chain through ids 0 4 1 5 2 6 3 7: Greedy keeps ids 0-3 where they
  // are and cuts every edge; the comm-aware strategy still cuts one.
  BalanceInput shuffled{.load = std::vector<double>(8, 1.0), .current = Placement(8, 0), .ranks = 2};
  const std::uint64_t chain[8] = {0, 4, 1, 5, 2, 6, 3, 7};
  for (int k = 0; k + 1 < 8; ++k) shuffled.edges.push_back({chain[k], chain[k + 1], 100});
  EXPECT_DOUBLE_EQ(hop_bytes(shuffled.edges, comm_balance(shuffled), same_rank_hops), 100.0);
  EXPECT_GT(hop_bytes(shuffled.edges, greedy_balance(shuffled), same_rank_hops), 100.0);
  // With a hop distance: rank 1 is 1 hop from rank 0, rank 2 is 5 hops away.
  // Half of a chain of 6 must leave rank 0 (tolerance 1.5: 3 per rank): the
  // optimum sends one run to the near rank (hop-bytes 10), not to the far one.
  BalanceInput far{.load = std::vector<double>(6, 1.0), .current = Placement(6, 0), .ranks = 3,
                   .hops = [](int a, int b) { return a == b ? 0.0 : (a == 2 || b == 2) ? 5.0 : 1.0; },
                   .tolerance = 1.5};
  for (std::uint64_t c = 0; c + 1 < 6; ++c) far.edges.push_back({c, c + 1, 10});
  auto f = comm_balance(far);
  EXPECT_DOUBLE_EQ(hop_bytes(far.edges, f, far.hops), 10.0);
  auto far_loads = rank_loads(far.load, f, 3);
  EXPECT_LE(*std::max_element(far_loads.begin(), far_loads.end()), 3.0);
}

TEST(Strategies, TimeShareBoundOfRanksOnCores) {
  // Loads 128, 80, 16, 16 (total 240) on a node of 2 cores. Unbound: the
  // busiest rank (128 > 240 / 2). Two ranks per core: core 0 does 208.
  // Balanced (60 each), two per core: 120 = 240 / 2.
  const std::vector<double> load{128, 80, 16, 16}, even(4, 60.0);
  const std::vector<RankCores> unbound(4, RankCores{0, 0b11});
  const std::vector<RankCores> paired{{0, 0b01}, {0, 0b01}, {0, 0b10}, {0, 0b10}};
  EXPECT_DOUBLE_EQ(time_share_bound(load, unbound), 128.0);
  EXPECT_DOUBLE_EQ(time_share_bound(load, paired), 208.0);
  EXPECT_DOUBLE_EQ(time_share_bound(even, paired), 120.0);
  // Three ranks on core 0, one on core 1: rank equality cannot reach 120.
  const std::vector<RankCores> lopsided{{0, 0b01}, {0, 0b01}, {0, 0b01}, {0, 0b10}};
  EXPECT_DOUBLE_EQ(time_share_bound(even, lopsided), 180.0);
  // Two nodes of one core each, unbound on each: per node.
  const std::vector<RankCores> nodes{{0, 0b1}, {0, 0b1}, {1, 0b1}, {1, 0b1}};
  EXPECT_DOUBLE_EQ(time_share_bound(load, nodes), 208.0);
  expect_error<RangeError>([&] { time_share_bound({1.0}, paired); }, "1 rank loads for 4 ranks");
}

TEST(ChunkErrors, BadInputGetsAClearError) {
  ChunkArray<Counter> arr(rt().comm(), 6, [](std::uint64_t id) { return Counter{id, 0, 0}; });
  std::uint64_t v = 1;
  expect_error<RangeError>([&] { arr.send<std::uint64_t>(0, 6, 0, std::span<const std::uint64_t>(&v, 1)); },
                           "chunk id 6 is out of range; the array has 6 chunks");
  expect_error<RangeError>([&] { arr.owner(99); }, "chunk id 99 is out of range");
  Placement bad(6, 0);
  bad[4] = rt().size();
  expect_error<RangeError>([&] { arr.migrate(bad); }, "puts chunk 4 on rank " + std::to_string(rt().size()));
  // A table bad on one rank only: every rank throws (none waits in the exchange).
  Placement bad_on_last = arr.placement();
  if (rt().rank() == rt().size() - 1) bad_on_last[0] = -1;
  expect_error<RangeError>([&] { arr.migrate(bad_on_last); }, "puts chunk 0 on rank -1");
  expect_error<RangeError>([&] { ChunkArray<Counter> a(rt().comm(), 6, [](std::uint64_t) { return Counter{}; }, Placement(5, 0)); },
                           "has 5 entries for 6 chunks");
  expect_error<ConfigError>([] { parse_strategy("fastest", "--lb"); }, "expected none, greedy, refine or comm");
  {  // a serialize that reads more than was written is named, not a crash
    std::vector<std::byte> bytes;
    Counter c{1, 2, 3};
    pack_chunk(c, bytes);
    Rich r;
    expect_error<FormatError>([&] { unpack_chunk(r, bytes.data(), bytes.size()); }, "chunk archive");
  }
  // Every rank still agrees after the errors: a normal exchange works.
  arr.exchange([](Counter&, const Message&) {});
}
