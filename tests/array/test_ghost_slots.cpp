#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <vector>

#include "tessera/array/ghost_slots.hpp"

using namespace tessera;

namespace {
// Every id of [0, space) against the sorted list: a ghost's slot is its
// position, everything else (owned ids included) is not contained.
void expect_matches_list(const std::vector<std::uint64_t>& ghosts, std::uint64_t begin, std::uint64_t end,
                         std::uint64_t space) {
  GhostSlots s(ghosts, begin, end);
  EXPECT_EQ(s.memory_bytes(), GhostSlots::bytes_for(ghosts, begin, end));
  for (std::uint64_t v = 0; v < space; ++v) {
    auto it = std::lower_bound(ghosts.begin(), ghosts.end(), v);
    const bool ghost = it != ghosts.end() && *it == v;
    ASSERT_EQ(s.contains(v), ghost) << "id " << v << ", owned [" << begin << ", " << end << ")";
    if (ghost) {
      ASSERT_EQ(s.slot(v), static_cast<std::size_t>(it - ghosts.begin())) << "id " << v;
      ASSERT_EQ(s.view().slot(v), s.slot(v));
    }
  }
}
}  // namespace

TEST(GhostSlots, SlotIsThePositionAmongTheGhosts) {
  // Both sides of the owned range, one side, none, word boundaries.
  expect_matches_list({3, 64, 65, 127, 400, 401, 1000}, 128, 400, 1100);
  expect_matches_list({0, 1, 63}, 64, 1000, 1100);
  expect_matches_list({1000, 1001, 1200}, 0, 1000, 1300);
  expect_matches_list({}, 0, 10, 20);
  expect_matches_list({5}, 6, 7, 20);
  std::mt19937_64 rng(7);
  for (int round = 0; round < 50; ++round) {
    const std::uint64_t space = 1 + rng() % 3000, begin = rng() % space, end = begin + rng() % (space - begin + 1);
    std::vector<std::uint64_t> ghosts;
    for (std::uint64_t v = 0; v < space; ++v)
      if ((v < begin || v >= end) && rng() % 5 == 0) ghosts.push_back(v);
    expect_matches_list(ghosts, begin, end, space);
  }
}

TEST(GhostSlots, SpansOnlyTheGhostsWithTheOwnedRangeCutOut) {
  // A slab of a mesh: one plane of ghosts on each side of a million owned ids.
  std::vector<std::uint64_t> ghosts;
  for (std::uint64_t v = 999'000; v < 1'000'000; ++v) ghosts.push_back(v);
  for (std::uint64_t v = 2'000'000; v < 2'001'000; ++v) ghosts.push_back(v);
  GhostSlots s(ghosts, 1'000'000, 2'000'000);
  EXPECT_LE(s.memory_bytes(), 2000 / 4 + 2 * 16);  // 0.25 byte per spanned id, not per id of the space
  EXPECT_EQ(s.slot(2'000'000), 1000u);
  EXPECT_FALSE(s.contains(1'500'000));
  EXPECT_FALSE(s.contains(998'999));
  EXPECT_FALSE(s.contains(2'001'000));
}
