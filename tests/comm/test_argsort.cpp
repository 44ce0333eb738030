// The distributed radix argsort against a serial std::stable_sort of the same
// keys (every rank computes the whole reference and checks its own part):
// duplicates, full 64-bit keys, keys that agree on every digit, fewer keys
// than ranks, odd digit widths, Heap and Shared scratch with and without the
// same-node path, tiny aggregation buffers; bad arguments throw on every rank.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <numeric>
#include <vector>

#include "../test_util.hpp"
#include "tessera/comm/argsort.hpp"

using namespace tessera;

namespace {
Runtime& rt() { return Runtime::current(); }

// The whole job's keys, the same on every rank.
std::vector<std::uint64_t> make_keys(std::uint64_t n, std::uint64_t seed, std::uint64_t modulus) {
  test::SplitMix64 g(seed);
  std::vector<std::uint64_t> keys(n);
  for (auto& k : keys) k = modulus ? g.next() % modulus : g.next();
  return keys;
}

void expect_argsort(const std::vector<std::uint64_t>& all, const ArgsortOptions& options, const char* what) {
  DistArray<std::uint64_t> keys(rt(), all.size());
  for (std::uint64_t i = keys.local_begin(); i < keys.local_end(); ++i) keys.at(i) = all[i];
  DistArray<std::uint64_t> perm(keys.map());
  ArgsortStats stats = argsort(keys, perm, options);

  std::vector<std::uint64_t> want(all.size());
  std::iota(want.begin(), want.end(), std::uint64_t{0});
  std::stable_sort(want.begin(), want.end(), [&](std::uint64_t a, std::uint64_t b) { return all[a] < all[b]; });
  for (std::uint64_t j = perm.local_begin(); j < perm.local_end(); ++j)
    ASSERT_EQ(perm.at(j), want[j]) << what << ": position " << j;
  EXPECT_EQ(stats.digits_sorted + stats.digits_skipped, (64 + options.digit_bits - 1) / options.digit_bits) << what;
}
}  // namespace

TEST(Argsort, MatchesStableSortWithDuplicates) {
  auto keys = make_keys(5000, 1, 97);  // many ties: stability decides the order
  expect_argsort(keys, {}, "16-bit digits");
  expect_argsort(keys, {.digit_bits = 3}, "3-bit digits");
  expect_argsort(keys, {.digit_bits = 11}, "11-bit digits");
  expect_argsort(keys, {.digit_bits = 4}, "4-bit digits: a middle pass between two scratch arrays");
}

TEST(Argsort, Full64BitKeys) {
  auto keys = make_keys(3001, 2, 0);
  keys[5] = ~std::uint64_t{0};
  keys[6] = 0;
  expect_argsort(keys, {.digit_bits = 13}, "64-bit keys, 13-bit digits (a partial last digit)");
}

TEST(Argsort, SkipsDigitsWhereAllKeysAgree) {
  std::vector<std::uint64_t> same(700, 0xdeadbeef00000000ull);
  DistArray<std::uint64_t> keys(rt(), same.size());
  for (std::uint64_t i = keys.local_begin(); i < keys.local_end(); ++i) keys.at(i) = same[i];
  DistArray<std::uint64_t> perm(keys.map());
  ArgsortStats stats = argsort(keys, perm);
  EXPECT_EQ(stats.digits_sorted, 0);
  for (std::uint64_t j = perm.local_begin(); j < perm.local_end(); ++j) EXPECT_EQ(perm.at(j), j);

  auto keys32 = make_keys(2000, 3, std::uint64_t{1} << 32);  // 32 significant bits: two 16-bit passes
  DistArray<std::uint64_t> k32(rt(), keys32.size());
  for (std::uint64_t i = k32.local_begin(); i < k32.local_end(); ++i) k32.at(i) = keys32[i];
  DistArray<std::uint64_t> p32(k32.map());
  EXPECT_EQ(argsort(k32, p32).digits_sorted, 2);
}

TEST(Argsort, FewerKeysThanRanksAndNone) {
  expect_argsort(make_keys(2, 4, 10), {}, "2 keys");
  expect_argsort({}, {}, "no keys");
}

TEST(Argsort, SharedScratchWithAndWithoutDirectPathAndTinyBuffers) {
  auto keys = make_keys(4000, 5, 1u << 20);
  ArgsortOptions shared{.digit_bits = 8, .scratch = StorageOptions::shared()};
  shared.aggregation.same_node_direct = 1;
  expect_argsort(keys, shared, "shared + direct");
  // The permutation in Shared storage too: the last pass writes co-locales' part directly.
  {
    DistArray<std::uint64_t> k(rt(), keys.size());
    for (std::uint64_t i = k.local_begin(); i < k.local_end(); ++i) k.at(i) = keys[i];
    DistArray<std::uint64_t> p(k.map(), StorageOptions::shared());
    argsort(k, p, shared);
    std::vector<std::uint64_t> want(keys.size());
    std::iota(want.begin(), want.end(), std::uint64_t{0});
    std::stable_sort(want.begin(), want.end(), [&](std::uint64_t a, std::uint64_t b) { return keys[a] < keys[b]; });
    for (std::uint64_t j = p.local_begin(); j < p.local_end(); ++j) ASSERT_EQ(p.at(j), want[j]);
  }
  shared.aggregation.same_node_direct = 0;
  shared.aggregation.buffer_bytes = 100;  // four records per batch
  expect_argsort(keys, shared, "shared, tiny buffers");
}

TEST(Argsort, BadArgumentsThrowOnEveryRank) {
  DistArray<std::uint64_t> keys(rt(), 100);
  DistArray<std::uint64_t> other(rt(), 101);
  EXPECT_THROW(argsort(keys, other), MismatchError);
  EXPECT_THROW(argsort(keys, keys), MismatchError);
  EXPECT_THROW(argsort(keys, {.digit_bits = 0}), ConfigError);
  EXPECT_THROW(argsort(keys, {.digit_bits = 21}), ConfigError);
}

TEST(Argsort, BulkScatterAggregationPicksLargerBuffersUnlessSet) {
  if (std::getenv("TESSERA_AGG_BUFFER_BYTES") || std::getenv("TESSERA_AGG_IN_FLIGHT")) GTEST_SKIP() << "set outside";
  AggregationOptions unset;
  AggregationOptions two = bulk_scatter_aggregation(unset, 2, std::uint64_t{256} << 20);
  EXPECT_EQ(two.max_in_flight, 4);
  EXPECT_EQ(two.buffer_bytes, std::size_t{1} << 20);
  AggregationOptions many = bulk_scatter_aggregation(unset, 1024, std::uint64_t{256} << 20);
  EXPECT_EQ(many.buffer_bytes, std::size_t{16} << 10) << "64 MiB over 1024 x 5 buffers, at the 16 KiB floor";
  AggregationOptions small = bulk_scatter_aggregation(unset, 2, 1000);
  EXPECT_EQ(small.buffer_bytes, kDefaultAggBufferBytes) << "not above one destination's share of the data";
  AggregationOptions given;
  given.buffer_bytes = 4096;
  given.max_in_flight = 2;
  AggregationOptions kept = bulk_scatter_aggregation(given, 2, std::uint64_t{256} << 20);
  EXPECT_EQ(kept.buffer_bytes, 4096u);
  EXPECT_EQ(kept.max_in_flight, 2);
  ::setenv("TESSERA_AGG_BUFFER_BYTES", "8K", 1);
  AggregationOptions from_environment = bulk_scatter_aggregation(unset, 2, std::uint64_t{256} << 20);
  ::unsetenv("TESSERA_AGG_BUFFER_BYTES");
  EXPECT_EQ(from_environment.buffer_bytes, 8192u);
}
