#include <gtest/gtest.h>

#include "tessera/array/distribution.hpp"
#include "tessera/runtime/error.hpp"

using namespace tessera;

namespace {
// owner() against the offsets, by brute force.
void expect_consistent(const Distribution& d) {
  for (std::uint64_t i = 0; i < d.size(); ++i) {
    int o = d.owner(i);
    ASSERT_GE(o, 0);
    ASSERT_LT(o, d.ranks());
    ASSERT_GE(i, d.begin(o)) << "index " << i;
    ASSERT_LT(i, d.end(o)) << "index " << i;
    ASSERT_EQ(d.local_offset(i, o), i - d.begin(o));
  }
}
}  // namespace

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
