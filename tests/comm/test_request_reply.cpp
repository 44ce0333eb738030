// request_reply, RequestPlan and deliver against a serial reference: every
// rank regenerates every rank's requests (seeded by rank), so it knows what
// it must receive (grouped by source rank, each source's in order) and what
// each of its requests must be answered. Uneven shares on purpose: rank 0
// many, rank 1 none, the last rank (at 3+ ranks) few; owners random, all on
// one rank, or already grouped (sorted).
#include <gtest/gtest.h>

#include <algorithm>
#include <climits>
#include <string>
#include <vector>

#include "../test_util.hpp"
#include "tessera/comm/request_reply.hpp"

using namespace tessera;
using test::SplitMix64;

namespace {

Runtime& rt() { return Runtime::current(); }

struct Ask {
  std::uint64_t key;
  std::uint32_t origin, serial;  // who asked, and its request number there
  bool operator==(const Ask&) const = default;
};
struct Answer {  // 12 bytes: travels as a built MPI type, not a predefined one
  std::uint32_t hi, lo, server;
  bool operator==(const Answer&) const = default;
};

enum class Shape { random, all_to_last, grouped };
const char* name_of(Shape s) {
  return s == Shape::random ? "random owners" : s == Shape::all_to_last ? "all to the last rank" : "grouped owners";
}
constexpr std::uint64_t kKeys = std::uint64_t{1} << 40;

std::uint64_t mix(std::uint64_t x) { return splitmix64(x); }  // a hash of x (the stream advances a copy)

std::size_t share_of(int r, int size) {
  if (r == 1) return 0;
  if (size >= 3 && r == size - 1) return 7;
  return r == 0 ? 3000 : 500;
}

int owner_of(Shape s, std::uint64_t key, int size) {
  switch (s) {
    case Shape::random: return static_cast<int>(mix(key) % static_cast<std::uint64_t>(size));
    case Shape::all_to_last: return size - 1;
    case Shape::grouped: return static_cast<int>(key / (kKeys / static_cast<std::uint64_t>(size) + 1));
  }
  return 0;
}

std::vector<Ask> requests_of(int r, int size, Shape s) {
  SplitMix64 g(0x5eed + 7919 * static_cast<std::uint64_t>(r) + static_cast<std::uint64_t>(s));
  std::vector<Ask> out(share_of(r, size));
  for (auto& a : out) a.key = g.below(kKeys);
  if (s == Shape::grouped) std::sort(out.begin(), out.end(), [](const Ask& a, const Ask& b) { return a.key < b.key; });
  for (std::size_t k = 0; k < out.size(); ++k) out[k].origin = static_cast<std::uint32_t>(r), out[k].serial = static_cast<std::uint32_t>(k);
  return out;
}

// What the owner answers: depends on the request and on who answers it.
Answer answer_of(const Ask& a, int server) {
  std::uint64_t h = mix(a.key ^ (std::uint64_t{a.origin} << 40));
  return {static_cast<std::uint32_t>(h >> 32), static_cast<std::uint32_t>(h), static_cast<std::uint32_t>(server)};
}

// The serial reference: every rank's requests to `me`, by source rank, each source's in order.
std::vector<Ask> expected_received(Shape s, int me, int size) {
  std::vector<Ask> out;
  for (int r = 0; r < size; ++r)
    for (const Ask& a : requests_of(r, size, s))
      if (owner_of(s, a.key, size) == me) out.push_back(a);
  return out;
}

const Shape kShapes[] = {Shape::random, Shape::all_to_last, Shape::grouped};

}  // namespace

TEST(RequestReply, RepliesComeBackInRequestOrder) {
  const int P = rt().size(), me = rt().rank();
  for (Shape s : kShapes) {
    SCOPED_TRACE(name_of(s));
    const auto mine = requests_of(me, P, s);
    auto owner = [&](const Ask& a) { return owner_of(s, a.key, P); };
    std::size_t served = 0, misrouted = 0;
    auto got = comm::request_reply(rt().comm(), std::span<const Ask>(mine), owner, [&](const Ask& a) {
      ++served;
      misrouted += owner(a) != me;
      return answer_of(a, me);
    });
    EXPECT_EQ(served, expected_received(s, me, P).size());
    EXPECT_EQ(misrouted, 0u);
    ASSERT_EQ(got.size(), mine.size());
    for (std::size_t k = 0; k < mine.size(); ++k)
      ASSERT_EQ(got[k], answer_of(mine[k], owner(mine[k]))) << "request " << k;
  }
}

TEST(RequestReply, SameTypeAnswersInPlace) {
  const int P = rt().size(), me = rt().rank();
  for (Shape s : kShapes) {
    SCOPED_TRACE(name_of(s));
    std::vector<std::uint64_t> keys;
    for (const Ask& a : requests_of(me, P, s)) keys.push_back(a.key);
    auto owner = [&](std::uint64_t k) { return owner_of(s, k, P); };
    auto got = comm::request_reply(rt().comm(), std::span<const std::uint64_t>(keys), owner,
                                   [&](std::uint64_t k) { return k * 3 + static_cast<std::uint64_t>(me); });
    ASSERT_EQ(got.size(), keys.size());
    for (std::size_t k = 0; k < keys.size(); ++k)
      ASSERT_EQ(got[k], keys[k] * 3 + static_cast<std::uint64_t>(owner(keys[k]))) << "request " << k;
  }
}

TEST(RequestReply, NoRequestsAnywhere) {
  std::vector<std::uint64_t> none;
  std::size_t served = 0;
  auto got = comm::request_reply(rt().comm(), std::span<const std::uint64_t>(none), [](std::uint64_t) { return 0; },
                                 [&](std::uint64_t k) { return ++served, k; });
  EXPECT_TRUE(got.empty());
  EXPECT_EQ(served, 0u);
}

TEST(RequestPlan, ReceivesBySourceAndRepliesAsOftenAsAsked) {
  const int P = rt().size(), me = rt().rank();
  for (Shape s : kShapes) {
    SCOPED_TRACE(name_of(s));
    const auto mine = requests_of(me, P, s);
    auto owner = [&](const Ask& a) { return owner_of(s, a.key, P); };
    comm::RequestPlan<Ask> plan(rt().comm(), std::span<const Ask>(mine), owner);
    const auto want = expected_received(s, me, P);
    ASSERT_EQ(std::vector<Ask>(plan.received().begin(), plan.received().end()), want);
    EXPECT_EQ(plan.requests(), mine.size());

    // Two rounds of replies of different types over the one routing.
    std::vector<Answer> answers;
    for (const Ask& a : plan.received()) answers.push_back(answer_of(a, me));
    auto first = plan.reply<Answer>(answers);
    std::vector<double> scaled(want.size());
    for (std::size_t j = 0; j < want.size(); ++j) scaled[j] = 0.5 * static_cast<double>(want[j].key % 1000) + me;
    std::vector<double> second(mine.size());
    plan.reply<double>(scaled, second);
    for (std::size_t k = 0; k < mine.size(); ++k) {
      ASSERT_EQ(first[k], answer_of(mine[k], owner(mine[k]))) << "request " << k;
      ASSERT_EQ(second[k], 0.5 * static_cast<double>(mine[k].key % 1000) + owner(mine[k])) << "request " << k;
    }

    // The other way: a value per request arrives beside the request at its owner.
    std::vector<std::uint64_t> values(mine.size()), arrived(want.size());
    for (std::size_t k = 0; k < mine.size(); ++k) values[k] = mine[k].key ^ mine[k].serial;
    plan.send<std::uint64_t>(values, arrived);
    for (std::size_t j = 0; j < want.size(); ++j) ASSERT_EQ(arrived[j], want[j].key ^ want[j].serial) << "received " << j;

    // The received requests handed over; the routing still replies.
    auto taken = plan.take_received();
    EXPECT_EQ(taken, want);
    EXPECT_TRUE(plan.received().empty());
    auto third = plan.reply<Answer>(answers);
    EXPECT_EQ(third, first);
  }
}

TEST(RequestPlan, WrongLengthsAreRefusedBeforeSending) {
  const int P = rt().size(), me = rt().rank();
  for (Shape s : {Shape::random, Shape::grouped}) {
    SCOPED_TRACE(name_of(s));
    const auto mine = requests_of(me, P, s);
    comm::RequestPlan<Ask> plan(rt().comm(), std::span<const Ask>(mine), [&](const Ask& a) { return owner_of(s, a.key, P); });
    std::vector<Answer> answers(plan.received().size()), too_many(mine.size() + 1);
    EXPECT_THROW(plan.reply<Answer>(answers, too_many), MismatchError);
    std::vector<Answer> out(mine.size()), short_answers(plan.received().size() + 1);
    EXPECT_THROW(plan.reply<Answer>(short_answers, out), MismatchError);
    // Every rank threw before communicating: the plan still works.
    plan.reply<Answer>(answers, out);
  }
}

TEST(Deliver, RecordsArriveBySourceInOrder) {
  const int P = rt().size(), me = rt().rank();
  for (Shape s : kShapes) {
    SCOPED_TRACE(name_of(s));
    const auto mine = requests_of(me, P, s);
    auto got = comm::deliver<Ask>(rt().comm(), mine, [&](const Ask& a) { return owner_of(s, a.key, P); });
    EXPECT_EQ(got, expected_received(s, me, P));
  }
}

TEST(Deliver, InPlaceFormGroupsWithoutACopyAndFreesItsInput) {
  const int P = rt().size(), me = rt().rank();
  auto by_source = [](const Ask& a, const Ask& b) { return a.origin != b.origin ? a.origin < b.origin : a.serial < b.serial; };
  for (Shape s : kShapes) {
    SCOPED_TRACE(name_of(s));
    auto mine = requests_of(me, P, s);
    auto got = comm::deliver(rt().comm(), std::move(mine), [&](const Ask& a) { return owner_of(s, a.key, P); });
    EXPECT_EQ(mine.capacity(), 0u);
    auto want = expected_received(s, me, P);
    // Grouped by source rank; within a source the order is not kept.
    for (std::size_t j = 1; j < got.size(); ++j) ASSERT_LE(got[j - 1].origin, got[j].origin) << "received " << j;
    std::sort(got.begin(), got.end(), by_source);
    EXPECT_EQ(got, want);
  }
}

TEST(RequestReply, AnOwnerOutOfRangeThrowsOnEveryRank) {
  const int P = rt().size(), me = rt().rank();
  auto mine = requests_of(me, P, Shape::random);
  const int bad = P - 1 == 1 ? 0 : P - 1;  // a rank with requests
  auto owner = [&](const Ask& a) { return me == bad && a.serial == 3 ? P : owner_of(Shape::random, a.key, P); };
  try {
    comm::request_reply(rt().comm(), std::span<const Ask>(mine), owner, [&](const Ask& a) { return answer_of(a, me); });
    ADD_FAILURE() << "no error";
  } catch (const RangeError& e) {
    const std::string what = e.what();
    if (me == bad)
      EXPECT_NE(what.find("request 3 of this rank names owner rank " + std::to_string(P)), std::string::npos) << what;
    else
      EXPECT_NE(what.find("on rank " + std::to_string(bad)), std::string::npos) << what;
  }
  // Nothing was sent: the next exchange runs normally.
  auto got = comm::deliver<Ask>(rt().comm(), mine, [&](const Ask& a) { return owner_of(Shape::random, a.key, P); });
  EXPECT_EQ(got, expected_received(Shape::random, me, P));
}

TEST(AlltoallPlan, CountsBeyondIntAreRefusedOnEveryRank) {
  const int P = rt().size(), me = rt().rank();
  const auto Pu = static_cast<std::size_t>(P);
  // One rank sends more than INT_MAX records in all (no payload is needed to plan it).
  std::vector<std::uint64_t> counts(Pu, 1);
  if (me == 0) counts[Pu - 1] = std::uint64_t{INT_MAX} + 1;
  EXPECT_THROW(comm::AlltoallPlan(rt().comm(), counts), ConfigError);
  // Every rank within limits, but one receives more than INT_MAX in all.
  if (P > 1) {
    std::vector<std::uint64_t> to_zero(Pu, 0);
    to_zero[0] = std::uint64_t{INT_MAX} / 2 + 1;
    try {
      comm::AlltoallPlan plan(rt().comm(), to_zero);
      ADD_FAILURE() << "no error";
    } catch (const ConfigError& e) {
      const std::string what = e.what();
      EXPECT_NE(what.find(me == 0 ? "this rank would receive" : "on rank 0"), std::string::npos) << what;
    }
  }
  // A count per rank, no more, no less.
  std::vector<std::uint64_t> short_counts(me == 0 ? Pu + 1 : Pu, 0);
  EXPECT_THROW(comm::AlltoallPlan(rt().comm(), short_counts), MismatchError);
  // Within limits: counts as sent.
  std::vector<std::uint64_t> fine(Pu);
  for (std::size_t r = 0; r < Pu; ++r) fine[r] = static_cast<std::uint64_t>(me) * 10 + r;
  comm::AlltoallPlan plan(rt().comm(), fine);
  for (int r = 0; r < P; ++r) EXPECT_EQ(plan.received_from(r), static_cast<std::uint64_t>(r) * 10 + static_cast<std::uint64_t>(me));
}
