// The sorting benchmarks (issue 13): the three ISx kernels against a serial
// std::sort of every rank's regenerated keys, and the ISx and argsort
// verifiers fed right and wrong answers (an unsorted pair across a rank
// boundary, a lost key, a key replaced by another, a duplicated index, a
// wrong gathered value): a verifier that cannot fail proves nothing.
#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>
#include <string>
#include <vector>

#include "tessera/array/distribution.hpp"
#include "tessera/bench/sort.hpp"
#include "tessera/runtime/collective.hpp"

using namespace tessera;
using namespace tessera::bench;

namespace {
Runtime& rt() { return Runtime::current(); }
int last_rank() { return rt().size() - 1; }

// Uneven shares: rank 1 has no keys at all.
std::uint64_t keys_of_rank(int r) { return r == 1 ? 0 : 1500 + 100 * static_cast<std::uint64_t>(r); }

// This rank's bucket of the serial sort of every rank's keys.
std::vector<std::uint32_t> reference_bucket(std::uint64_t max_key) {
  std::vector<std::uint32_t> all;
  for (int r = 0; r < rt().size(); ++r) {
    auto k = isx_keys(r, keys_of_rank(r), max_key);
    all.insert(all.end(), k.begin(), k.end());
  }
  std::sort(all.begin(), all.end());
  const std::uint64_t P = static_cast<std::uint64_t>(rt().size()), width = (max_key + P - 1) / P;
  const std::uint64_t lo = width * static_cast<std::uint64_t>(rt().rank()), hi = lo + width;
  std::vector<std::uint32_t> mine;
  for (std::uint32_t k : all)
    if (k >= lo && k < hi) mine.push_back(k);
  return mine;
}
}  // namespace

TEST(Isx, KernelsMatchSerialSort) {
  // Many duplicates; a range the ranks do not divide; a wide range (ISx's 2^28
  // would make the alltoallv kernel count over a 1 GiB array at 1 rank).
  for (std::uint64_t max_key : {std::uint64_t{64}, std::uint64_t{1001}, std::uint64_t{1} << 22}) {
    SCOPED_TRACE("max_key " + std::to_string(max_key));
    auto keys = isx_keys(rt().rank(), keys_of_rank(rt().rank()), max_key);
    auto want = reference_bucket(max_key);

    std::vector<std::uint32_t> counts;
    isx_sort_alltoallv(rt(), keys, max_key, counts);
    auto expanded = isx_expand_counts(rt(), counts, max_key);
    EXPECT_EQ(expanded, want) << "alltoallv";
    EXPECT_TRUE(check_isx(rt(), keys, expanded).ok);

    std::vector<std::uint32_t> sorted, scratch;
    isx_sort_bulk(rt(), keys, max_key, sorted, scratch);
    EXPECT_EQ(sorted, want) << "bulk exchange";

    AggregationOptions tiny;
    tiny.buffer_bytes = 40;  // ten keys per batch: many batches
    for (const AggregationOptions& agg : {AggregationOptions{}, tiny}) {
      isx_sort_aggregated(rt(), keys, max_key, sorted, scratch, agg.resolved());
      EXPECT_EQ(sorted, want) << "aggregated, " << agg.resolved().buffer_bytes << " B buffers";
      Verdict v = check_isx(rt(), keys, sorted);
      EXPECT_TRUE(v.ok) << v.found;
    }
  }
}

TEST(Isx, VerifierRejectsWrongAnswers) {
  const std::uint64_t max_key = 1u << 20;
  auto keys = isx_keys(rt().rank(), keys_of_rank(rt().rank()), max_key);
  auto right = reference_bucket(max_key);
  ASSERT_TRUE(check_isx(rt(), keys, right).ok);

  // An unsorted pair across a rank boundary: rank 0's last and the next
  // rank's first key swapped. Each rank stays sorted; count and checksum hold.
  if (rt().size() >= 2) {
    auto first_of_1 = broadcast(rt().comm(), rt().rank() == 1 ? right.front() : 0u, 1);
    auto last_of_0 = broadcast(rt().comm(), rt().rank() == 0 ? right.back() : 0u, 0);
    ASSERT_LT(last_of_0, first_of_1);
    auto swapped = right;
    if (rt().rank() == 0) swapped.back() = first_of_1;
    if (rt().rank() == 1) swapped.front() = last_of_0;
    Verdict v = check_isx(rt(), keys, swapped);
    EXPECT_FALSE(v.ok);
    EXPECT_NE(v.found.find("checksum kept, 0 pairs out of order within ranks, 1 across"), std::string::npos) << v.found;
  }
  // An unsorted pair within a rank.
  auto unsorted = right;
  if (rt().rank() == 0) std::swap(unsorted[10], unsorted[11 + unsorted.size() / 2]);
  EXPECT_FALSE(check_isx(rt(), keys, unsorted).ok);
  // A lost key.
  auto lost = right;
  if (rt().rank() == last_rank()) lost.pop_back();
  const std::uint64_t total = all_reduce<std::uint64_t>(rt().comm(), keys.size(), MPI_SUM);
  Verdict v = check_isx(rt(), keys, lost);
  EXPECT_FALSE(v.ok);
  EXPECT_EQ(v.found.rfind(std::to_string(total - 1) + " of " + std::to_string(total) + " keys", 0), 0u) << v.found;
  // A key replaced by its neighbour: sorted, same count, another checksum.
  auto replaced = right;
  if (rt().rank() == 0) replaced[100] = replaced[99] == replaced[100] ? replaced[100] + 1 : replaced[99];
  if (rt().rank() == 0) std::sort(replaced.begin(), replaced.end());
  Verdict r = check_isx(rt(), keys, replaced);
  EXPECT_FALSE(r.ok);
  EXPECT_NE(r.found.find("checksum changed"), std::string::npos) << r.found;
}

namespace {
// This rank's part of the stable argsort of argsort_key(i, 6) (many ties).
std::vector<std::uint64_t> argsort_reference(std::uint64_t n) {
  std::vector<std::uint64_t> perm(n);
  std::iota(perm.begin(), perm.end(), std::uint64_t{0});
  std::stable_sort(perm.begin(), perm.end(),
                   [](std::uint64_t a, std::uint64_t b) { return argsort_key(a, 6) < argsort_key(b, 6); });
  Distribution d = Distribution::block(n, rt().size());
  return {perm.begin() + static_cast<std::ptrdiff_t>(d.begin(rt().rank())),
          perm.begin() + static_cast<std::ptrdiff_t>(d.end(rt().rank()))};
}
}  // namespace

TEST(Argsort, VerifierRejectsWrongAnswers) {
  const std::uint64_t n = 301 * static_cast<std::uint64_t>(rt().size()) + 2;
  auto key_of = [](std::uint64_t i) { return argsort_key(i, 6); };
  auto right = argsort_reference(n);
  std::vector<std::uint64_t> gathered(right.size());
  for (std::size_t j = 0; j < right.size(); ++j) gathered[j] = key_of(right[j]);
  Verdict ok = check_argsort(rt(), n, right, key_of, gathered);
  EXPECT_TRUE(ok.ok) << ok.found;

  // A duplicated index (and so a missing one).
  auto duplicated = right;
  if (rt().rank() == last_rank()) duplicated[5] = duplicated[4];
  Verdict d = check_argsort(rt(), n, duplicated, key_of);
  EXPECT_FALSE(d.ok);
  EXPECT_NE(d.found.find("1 duplicated, 1 missing"), std::string::npos) << d.found;

  // An unsorted pair across a rank boundary: rank 0's last and rank 1's
  // first swapped (a permutation still, each rank still in order).
  if (rt().size() >= 2) {
    auto first_of_1 = broadcast(rt().comm(), rt().rank() == 1 ? right.front() : std::uint64_t{0}, 1);
    auto last_of_0 = broadcast(rt().comm(), rt().rank() == 0 ? right.back() : std::uint64_t{0}, 0);
    auto swapped = right;
    if (rt().rank() == 0) swapped.back() = first_of_1;
    if (rt().rank() == 1) swapped.front() = last_of_0;
    Verdict s = check_argsort(rt(), n, swapped, key_of);
    EXPECT_FALSE(s.ok);
    EXPECT_NE(s.found.find("0 duplicated, 0 missing, 0 out of order within ranks, 1 across"), std::string::npos)
        << s.found;
  }
  // Two tied keys in the wrong (unstable) order within a rank.
  auto unstable = right;
  if (rt().rank() == 0) {
    std::size_t j = 0;
    while (key_of(unstable[j]) != key_of(unstable[j + 1])) ++j;
    std::swap(unstable[j], unstable[j + 1]);
  }
  EXPECT_FALSE(check_argsort(rt(), n, unstable, key_of).ok);
  // An index out of range, a missing entry, a wrong gathered value.
  auto out_of_range = right;
  if (rt().rank() == 0) out_of_range[0] = n;
  EXPECT_FALSE(check_argsort(rt(), n, out_of_range, key_of).ok);
  auto short_perm = right;
  if (rt().rank() == last_rank()) short_perm.pop_back();
  EXPECT_FALSE(check_argsort(rt(), n, short_perm, key_of).ok);
  auto wrong_value = gathered;
  if (rt().rank() == last_rank()) wrong_value.back() += 1;
  Verdict g = check_argsort(rt(), n, right, key_of, wrong_value);
  EXPECT_FALSE(g.ok);
  EXPECT_NE(g.found.find("1 wrong gathered values"), std::string::npos) << g.found;
}
