#include <gtest/gtest.h>

#include "../test_util.hpp"
#include "tessera/array/dist_array.hpp"

using namespace tessera;

namespace {
struct Triple {
  double x, y, z;
};

class DistArrayTest : public testing::TestWithParam<StorageKind> {
 protected:
  StorageOptions storage() const {
    StorageOptions o;
    o.kind = GetParam();
    return o;
  }
};
}  // namespace

TEST_P(DistArrayTest, LocalViewMatchesDistribution) {
  auto& rt = Runtime::current();
  for (std::uint64_t n : {0ull, 1ull, 3ull, 1000ull, 12345ull}) {
    DistArray<std::uint64_t> a(rt, n, storage());
    EXPECT_EQ(a.size(), n);
    EXPECT_EQ(a.local().size(), a.distribution().count(rt.rank()));
    for (auto v : a.local()) EXPECT_EQ(v, 0u) << "arrays start zeroed";
    for (std::uint64_t i = a.local_begin(); i < a.local_end(); ++i) a.at(i) = test::value_of(i);
    // Every rank checks the total against the closed form.
    std::uint64_t mine = 0, total = 0, expect = 0;
    for (auto v : a.local()) mine += v;
    MPI_Allreduce(&mine, &total, 1, MPI_UINT64_T, MPI_SUM, rt.comm());
    for (std::uint64_t i = 0; i < n; ++i) expect += test::value_of(i);
    EXPECT_EQ(total, expect);
  }
}

TEST_P(DistArrayTest, CheckedAccessNamesOwnerAndRange) {
  auto& rt = Runtime::current();
  DistArray<double> a(rt, 10, storage());
  EXPECT_THROW(a.at(10), RangeError);
  for (std::uint64_t i = 0; i < 10; ++i) {
    if (a.is_local(i)) continue;
    try {
      a.at(i);
      FAIL() << "remote index must throw";
    } catch (const RangeError& e) {
      EXPECT_NE(std::string(e.what()).find("owned by rank " + std::to_string(a.owner(i))), std::string::npos)
          << e.what();
    }
  }
}

TEST_P(DistArrayTest, StructElementsAndWeightedDistribution) {
  auto& rt = Runtime::current();
  std::vector<std::uint64_t> sizes;
  for (int r = 0; r < rt.size(); ++r) sizes.push_back(r % 2 ? 0 : 7 + static_cast<std::uint64_t>(r));
  DistArray<Triple> a(rt, Distribution::weighted_block(sizes), storage());
  EXPECT_EQ(a.local().size(), sizes[static_cast<std::size_t>(rt.rank())]);
  for (auto& t : a.local()) t = {1, 2, 3};
  for (auto& t : a.local()) EXPECT_EQ(t.y, 2);
  EXPECT_THROW(DistArray<int>(rt, Distribution::block(5, rt.size() + 1), storage()), MismatchError);
}

INSTANTIATE_TEST_SUITE_P(Storages, DistArrayTest, testing::Values(StorageKind::heap, StorageKind::shared, StorageKind::colocale),
                         [](const auto& info) { return std::string(storage_kind_name(info.param)); });

// A Map binds a distribution to its runtime: it gives this rank's range and
// the communicator, and arrays built over it report the same map.
TEST(Map, CarriesRuntimeAndLocalRange) {
  auto& rt = Runtime::current();
  std::vector<std::uint64_t> sizes;
  for (int r = 0; r < rt.size(); ++r) sizes.push_back(r == 0 ? 0 : 3 + static_cast<std::uint64_t>(r));  // rank 0 empty
  Map m(rt, Distribution::weighted_block(sizes));
  EXPECT_EQ(&m.runtime(), &rt);
  EXPECT_EQ(m.comm(), rt.comm());
  EXPECT_EQ(m.rank(), rt.rank());
  EXPECT_EQ(m.local_size(), sizes[static_cast<std::size_t>(rt.rank())]);
  EXPECT_EQ(m.local_begin(), m.distribution().begin(rt.rank()));
  for (std::uint64_t i = 0; i < m.size(); ++i) EXPECT_EQ(m.is_local(i), m.owner(i) == rt.rank());
  DistArray<double> a(m);
  EXPECT_TRUE(a.map() == m);
  EXPECT_EQ(a.local().size(), m.local_size());
  EXPECT_EQ(a.local_begin(), m.local_begin());
  EXPECT_FALSE(Map::block(rt, m.size() + 1) == m);
  EXPECT_THROW(Map(rt, Distribution::block(5, rt.size() + 1)), MismatchError);
}
