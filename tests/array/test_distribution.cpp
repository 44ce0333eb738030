#include <gtest/gtest.h>

#include <type_traits>

#include "tessera/array/distribution.hpp"
#include "tessera/runtime/error.hpp"

using namespace tessera;

namespace {
// The locator with_locator() chooses, against owner() and local_offset().
void expect_locator_agrees(const Distribution& d, std::uint64_t i) {
  d.with_locator([&](const auto where) {
    const int o = where.owner(i);
    ASSERT_EQ(o, d.owner(i)) << "index " << i << " of " << d.size() << " on " << d.ranks();
    ASSERT_EQ(where.local_offset(i, o), d.local_offset(i, o)) << "index " << i;
  });
}
// owner() against the offsets, by brute force.
void expect_consistent(const Distribution& d) {
  for (std::uint64_t i = 0; i < d.size(); ++i) {
    int o = d.owner(i);
    ASSERT_GE(o, 0);
    ASSERT_LT(o, d.ranks());
    ASSERT_GE(i, d.begin(o)) << "index " << i;
    ASSERT_LT(i, d.end(o)) << "index " << i;
    ASSERT_EQ(d.local_offset(i, o), i - d.begin(o));
    expect_locator_agrees(d, i);
  }
}
bool gets_even_locator(const Distribution& d) {
  return d.with_locator([](const auto where) {
    return std::is_same_v<std::remove_cv_t<decltype(where)>, Distribution::EvenLocator>;
  });
}
}  // namespace

TEST(Distribution, EvenBlockGetsTheEvenLocator) {
  EXPECT_TRUE(gets_even_locator(Distribution::block(4000, 4)));
  EXPECT_TRUE(gets_even_locator(Distribution::block(6, 3)));
  EXPECT_TRUE(gets_even_locator(Distribution::weighted_block({7, 7, 7})));
  EXPECT_FALSE(gets_even_locator(Distribution::block(4001, 4))) << "uneven: the general locator";
  EXPECT_FALSE(gets_even_locator(Distribution::block(4, 4))) << "one element each: no multiply-high";
  EXPECT_FALSE(gets_even_locator(Distribution::block(0, 2)));
  EXPECT_FALSE(gets_even_locator(Distribution::weighted_block({5, 0, 3})));
  for (int p : {1, 2, 3, 4, 7, 1000})
    for (std::uint64_t base : {std::uint64_t{2}, std::uint64_t{1000}, (std::uint64_t{1} << 32) + 1, std::uint64_t{1} << 44}) {
      const std::uint64_t n = base * static_cast<std::uint64_t>(p);
      const auto d = Distribution::block(n, p);
      // The multiply-high is exact for every index while n * base < 2^64.
      const bool exact = static_cast<unsigned __int128>(n) * base < (static_cast<unsigned __int128>(1) << 64);
      ASSERT_EQ(gets_even_locator(d), exact) << base << " x " << p;
      for (int r = 0; r < p; ++r)
        for (std::uint64_t i : {d.begin(r), d.begin(r) + 1, d.end(r) - 2, d.end(r) - 1}) expect_locator_agrees(d, i);
    }
}

TEST(Distribution, BlockCoversEveryShape) {
  for (int p = 1; p <= 7; ++p)
    for (std::uint64_t n : {0ull, 1ull, 2ull, 3ull, 5ull, 6ull, 7ull, 13ull, 100ull, 1001ull}) {
      auto d = Distribution::block(n, p);
      EXPECT_EQ(d.size(), n);
      EXPECT_EQ(d.ranks(), p);
      std::uint64_t lo = n / static_cast<std::uint64_t>(p);
      for (int r = 0; r < p; ++r) {
        EXPECT_TRUE(d.count(r) == lo || d.count(r) == lo + 1);
        if (r > 0) {
          EXPECT_LE(d.count(r), d.count(r - 1)) << "larger parts come first";
        }
      }
      expect_consistent(d);
    }
}

TEST(Distribution, FewerElementsThanRanksLeavesEmptyRanks) {
  auto d = Distribution::block(2, 4);
  EXPECT_EQ(d.count(0), 1u);
  EXPECT_EQ(d.count(1), 1u);
  EXPECT_EQ(d.count(2), 0u);
  EXPECT_EQ(d.count(3), 0u);
  expect_consistent(d);
}

TEST(Distribution, WeightedBlockWithEmptyParts) {
  auto d = Distribution::weighted_block({0, 5, 0, 3, 0});
  EXPECT_FALSE(d.is_block());
  EXPECT_EQ(d.kind(), "weighted_block");
  EXPECT_EQ(d.size(), 8u);
  EXPECT_EQ(d.owner(0), 1);
  EXPECT_EQ(d.owner(4), 1);
  EXPECT_EQ(d.owner(5), 3);
  EXPECT_EQ(d.owner(7), 3);
  expect_consistent(d);
  // Weights equal to the block split are recognised as block.
  EXPECT_TRUE(Distribution::weighted_block({3, 3, 2}).is_block());
}

TEST(Distribution, CheckNamesTheIndexAndRange) {
  auto d = Distribution::block(10, 3);
  EXPECT_NO_THROW(d.check(9));
  try {
    d.check(10);
    FAIL();
  } catch (const RangeError& e) {
    EXPECT_NE(std::string(e.what()).find("10"), std::string::npos);
    EXPECT_NE(std::string(e.what()).find("[0, 10)"), std::string::npos) << e.what();
  }
  EXPECT_THROW(Distribution::block(10, 0), ConfigError);
  EXPECT_THROW(Distribution::weighted_block({}), ConfigError);
}

// The multiply-by-reciprocal divide against the hardware's, at the edges of
// every quotient and at random, where it claims to be exact and where it
// falls back (limit * divisor >= 2^64).
TEST(FastDivisor, AgreesWithDivisionEverywhereItIsUsed) {
  std::uint64_t state = 12345;
  auto next = [&] {
    state += 0x9e3779b97f4a7c15ull;
    std::uint64_t z = state;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  };
  for (std::uint64_t d : {1ull, 2ull, 3ull, 7ull, 10ull, 1000ull, 65536ull, 100003ull, (1ull << 31) - 1, 1ull << 32,
                          (1ull << 40) + 3, ~0ull}) {
    for (std::uint64_t limit : {1000ull, 1ull << 20, 1ull << 32, 1ull << 44, ~0ull}) {
      FastDivisor f(d, limit);
      auto expect_at = [&](std::uint64_t i) {
        if (i < limit) {
          ASSERT_EQ(f.divide(i), i / d) << i << " / " << d << " (limit " << limit << ")";
        }
      };
      for (std::uint64_t q = 0; q < 64; ++q)
        for (std::uint64_t off : {0ull, 1ull}) {
          if (q * d / d != q) continue;  // q * d wraps
          expect_at(q * d - off);
          expect_at(q * d + off);
        }
      for (int k = 0; k < 2000; ++k) expect_at(next() % limit);
      expect_at(limit - 1);
    }
  }
  EXPECT_THROW(FastDivisor(0, 10), ConfigError);
}

TEST(Distribution, BlockOwnerOfLargeArrays) {
  for (std::uint64_t n : {(std::uint64_t{1} << 33) + 7, (std::uint64_t{1} << 40) + 12345, std::uint64_t{3} << 50})
    for (int p : {1, 3, 4, 7, 1000}) {
      auto d = Distribution::block(n, p);
      for (std::uint64_t i : {std::uint64_t{0}, n - 1, n / 2, n / 3, n / 7 + 1})
        for (std::uint64_t j : {i, i > 0 ? i - 1 : std::uint64_t{0}, std::min(i + 1, n - 1)}) {
          int o = d.owner(j);
          ASSERT_GE(j, d.begin(o)) << n << " " << p << " " << j;
          ASSERT_LT(j, d.end(o)) << n << " " << p << " " << j;
          expect_locator_agrees(d, j);
        }
      for (int r = 0; r < p; ++r) {
        ASSERT_EQ(d.owner(d.begin(r)), r);
        ASSERT_EQ(d.owner(d.end(r) - 1), r);
      }
    }
}
