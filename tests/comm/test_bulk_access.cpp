// The bulk forms gather / scatter / update against serial references: every
// rank regenerates every rank's index array (seeded by rank) and computes what
// its own part must hold. Uneven shares on purpose: rank 0 has many indices,
// rank 1 none, the last rank (at 3+ ranks) few.
#include <gtest/gtest.h>

#include <algorithm>
#include <set>
#include <string>

#include "../test_util.hpp"
#include "aggregation_setup.hpp"
#include "tessera/comm/bulk_access.hpp"

using namespace tessera;
using test::SplitMix64;

namespace {

using test::Setup;

const Setup kSetups[] = {
    {"Heap", StorageKind::heap, 0, 0},
    {"HeapTinyBuffers", StorageKind::heap, 0, 48},  // a few records per batch: many batches
    {"SharedMpi", StorageKind::shared, 0, 256},
    {"SharedDirect", StorageKind::shared, 1, 0},
};

class BulkAccess : public test::AggregationFixture {};

std::uint64_t share_of(int r, int size) {
  if (r == 1) return 0;                      // an empty index array
  if (size >= 3 && r == size - 1) return 7;  // a few
  return r == 0 ? 3000 : 400;
}

// Rank r's indices into an array of n: uniform, so duplicates are frequent.
std::vector<std::uint64_t> indices_of(int r, int size, std::uint64_t n, std::uint64_t salt) {
  SplitMix64 g(salt * 1000003 + static_cast<std::uint64_t>(r));
  std::vector<std::uint64_t> out(n ? share_of(r, size) : 0);
  for (auto& i : out) i = g.below(n);
  return out;
}
std::vector<std::int64_t> values_of(int r, std::size_t count, std::uint64_t salt) {
  SplitMix64 g(salt * 7919 + static_cast<std::uint64_t>(r));
  std::vector<std::int64_t> out(count);
  for (auto& v : out) v = static_cast<std::int64_t>(g.below(1000)) - 500;
  return out;
}

template <class T>
void fill_by_index(DistArray<T>& a) {
  for (std::uint64_t i = a.local_begin(); i < a.local_end(); ++i) a.at(i) = static_cast<T>(test::value_of(i));
}

}  // namespace

TEST_P(BulkAccess, GatherReadsWhatTheOwnersHold) {
  for (std::uint64_t n : {std::uint64_t{1}, std::uint64_t{5}, std::uint64_t{4099}}) {
    DistArray<std::uint64_t> a(rt(), n, storage());
    fill_by_index(a);
    MPI_Barrier(rt().comm());
    auto idx = indices_of(rt().rank(), rt().size(), n, 1);
    std::vector<std::uint64_t> out(idx.size(), 0);
    gather(a, idx, out, options());
    for (std::size_t k = 0; k < idx.size(); ++k) ASSERT_EQ(out[k], test::value_of(idx[k])) << "n " << n << " k " << k;
    // The form that returns a new vector gives the same.
    EXPECT_EQ(gather(a, idx, options()), out);
  }
}

TEST_P(BulkAccess, ScatterWritesOneOfTheValuesGivenForEachIndex) {
  const std::uint64_t n = 1000;
  DistArray<std::int64_t> a(rt(), n, storage());
  for (auto& v : a.local()) v = -1'000'000;  // outside the value range: "never written"
  MPI_Barrier(rt().comm());
  auto idx = indices_of(rt().rank(), rt().size(), n, 2);
  scatter(a, idx, values_of(rt().rank(), idx.size(), 2), options());

  std::vector<std::set<std::int64_t>> allowed(n);  // duplicates: any one of the values may win
  for (int r = 0; r < rt().size(); ++r) {
    auto ri = indices_of(r, rt().size(), n, 2);
    auto rv = values_of(r, ri.size(), 2);
    for (std::size_t k = 0; k < ri.size(); ++k) allowed[ri[k]].insert(rv[k]);
  }
  for (std::uint64_t i = a.local_begin(); i < a.local_end(); ++i) {
    if (allowed[i].empty())
      ASSERT_EQ(a.at(i), -1'000'000) << "index " << i << " was never scattered to";
    else
      ASSERT_TRUE(allowed[i].count(a.at(i))) << "index " << i << " holds " << a.at(i);
  }
}

TEST_P(BulkAccess, ScatterOfAPermutationWritesEveryElement) {
  const std::uint64_t n = 3001;
  DistArray<std::uint64_t> a(rt(), n, storage());
  std::vector<std::uint64_t> idx, values;  // rank r takes positions r, r+P, ...; rank 1 none
  if (rt().rank() != 1 || rt().size() == 1)
    for (std::uint64_t k = static_cast<std::uint64_t>(rt().rank()); k < n; k += static_cast<std::uint64_t>(rt().size())) {
      idx.push_back((k * 7919) % n);
      values.push_back(test::value_of(idx.back()));
    }
  if (rt().rank() == 0 && rt().size() > 1)  // rank 0 also does rank 1's share
    for (std::uint64_t k = 1; k < n; k += static_cast<std::uint64_t>(rt().size())) {
      idx.push_back((k * 7919) % n);
      values.push_back(test::value_of(idx.back()));
    }
  scatter(a, idx, values, options());
  for (std::uint64_t i = a.local_begin(); i < a.local_end(); ++i) ASSERT_EQ(a.at(i), test::value_of(i)) << i;
}

TEST_P(BulkAccess, UpdateFoldsInEveryDuplicate) {
  const std::uint64_t n = 777;
  DistArray<std::int64_t> sum(rt(), n, storage()), low(rt(), n, storage()), scaled(rt(), n, storage());
  for (auto& v : low.local()) v = 1'000'000;
  MPI_Barrier(rt().comm());
  auto idx = indices_of(rt().rank(), rt().size(), n, 3);
  auto values = values_of(rt().rank(), idx.size(), 3);
  update(sum, idx, values, ops::Add{}, options());
  update(low, idx, values, ops::Min{}, options());
  const std::int64_t factor = 3;  // a lambda with a capture: no default constructor
  update(scaled, idx, values, [factor](std::int64_t cur, std::int64_t v) { return cur + factor * v; }, options());

  std::vector<std::int64_t> want_sum(n, 0), want_low(n, 1'000'000), want_scaled(n, 0);
  for (int r = 0; r < rt().size(); ++r) {
    auto ri = indices_of(r, rt().size(), n, 3);
    auto rv = values_of(r, ri.size(), 3);
    for (std::size_t k = 0; k < ri.size(); ++k) {
      want_sum[ri[k]] += rv[k];
      want_low[ri[k]] = std::min(want_low[ri[k]], rv[k]);
      want_scaled[ri[k]] += factor * rv[k];
    }
  }
  for (std::uint64_t i = sum.local_begin(); i < sum.local_end(); ++i) {
    ASSERT_EQ(sum.at(i), want_sum[i]) << i;
    ASSERT_EQ(low.at(i), want_low[i]) << i;
    ASSERT_EQ(scaled.at(i), want_scaled[i]) << i;
  }
}

TEST_P(BulkAccess, EveryRankEmpty) {
  DistArray<std::uint64_t> a(rt(), 0, storage()), b(rt(), 10, storage());
  std::vector<std::uint64_t> none;
  EXPECT_TRUE(gather(a, none, options()).empty());
  scatter(b, none, none, options());
  update(b, none, none, ops::Add{}, options());
  for (auto v : b.local()) EXPECT_EQ(v, 0u);
}

INSTANTIATE_TEST_SUITE_P(Setups, BulkAccess, testing::ValuesIn(kSetups),
                         [](const auto& info) { return std::string(info.param.name); });

// The last rank passes one index past the end; every rank must throw (none
// may hang in the aggregation), the message names the index, nothing is
// written, and the runtime stays usable.
TEST(BulkAccessErrors, OutOfRangeIndexThrowsOnEveryRank) {
  auto& rt = Runtime::current();
  const std::uint64_t n = 50;
  DistArray<std::int64_t> a(rt, n);
  const int bad_rank = rt.size() - 1;
  std::vector<std::uint64_t> idx{0, 1, 2};
  if (rt.rank() == bad_rank) idx.push_back(n + 3);
  std::vector<std::int64_t> values(idx.size(), 9);
  std::vector<std::int64_t> out(idx.size());

  auto expect_range_error = [&](const char* operation, const auto& call) {
    try {
      call();
      ADD_FAILURE() << operation << " accepted index " << n + 3;
    } catch (const RangeError& e) {
      std::string what = e.what();
      EXPECT_NE(what.find(operation), std::string::npos) << what;
      EXPECT_NE(what.find("index 53"), std::string::npos) << what;
      EXPECT_NE(what.find("[0, 50)"), std::string::npos) << what;
      if (rt.rank() != bad_rank) {
        EXPECT_NE(what.find("on rank " + std::to_string(bad_rank)), std::string::npos) << what;
      }
    }
  };
  expect_range_error("gather", [&] { gather(a, idx, out); });
  expect_range_error("scatter", [&] { scatter(a, idx, values); });
  expect_range_error("update", [&] { update(a, idx, values, ops::Add{}); });
  for (auto v : a.local()) EXPECT_EQ(v, 0) << "a rejected call wrote nothing";

  // Still usable: a correct call afterwards completes on every rank.
  std::vector<std::uint64_t> good{n - 1};
  update(a, good, std::vector<std::int64_t>{1});
  if (a.is_local(n - 1)) {
    EXPECT_EQ(a.at(n - 1), rt.size());
  }
}

TEST(BulkAccessErrors, LengthMismatchThrowsOnEveryRank) {
  auto& rt = Runtime::current();
  DistArray<std::uint64_t> a(rt, 10);
  std::vector<std::uint64_t> idx{1, 2};
  std::vector<std::uint64_t> values(rt.rank() == 0 ? 1 : 2, 5);  // rank 0 is one value short
  EXPECT_THROW(scatter(a, idx, values), MismatchError);
  EXPECT_THROW(update(a, idx, values, ops::Max{}), MismatchError);
  std::vector<std::uint64_t> out(rt.rank() == 0 ? 3 : 2);
  EXPECT_THROW(gather(a, idx, out), MismatchError);
}
