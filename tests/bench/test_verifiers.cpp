// Every benchmark verifier accepts the right answer and rejects wrong ones: a
// verifier that cannot fail proves nothing. The right answers are computed
// here through the library's bulk forms (not by the benchmark kernels); the
// wrong ones differ in one place on one rank, and every rank must see the
// rejection (the verdict is collective).
#include <gtest/gtest.h>

#include <string>

#include "../test_util.hpp"
#include "tessera/bench/union_find.hpp"
#include "tessera/bench/verifiers.hpp"
#include "tessera/comm/bulk_access.hpp"
#include "tessera/graph/generators.hpp"
#include "tessera/linalg/edge_list_matrix.hpp"
#include "tessera/linalg/hitting_times.hpp"

using namespace tessera;
using namespace tessera::bench;

namespace {
Runtime& rt() { return Runtime::current(); }
int last_rank() { return rt().size() - 1; }
}  // namespace

TEST(Verifiers, RandomAccessRejectsOneFlippedWord) {
  const RaProblem p = RaProblem::for_job(rt().size(), 6);
  DistArray<std::uint64_t> table(rt(), p.table_words);
  for (std::uint64_t i = table.local_begin(); i < table.local_end(); ++i) table.at(i) = i;
  std::vector<std::uint64_t> idx, values;  // this rank's HPCC updates
  std::uint64_t ran = p.stream_start(rt().rank());
  for (std::uint64_t k = 0; k < p.updates_per_rank; ++k) {
    ran = RaProblem::next(ran);
    idx.push_back(p.index_of(ran));
    values.push_back(ran);
  }
  update(table, idx, values, ops::BitXor{});

  Verdict right = check_ra(rt(), p, table.local(), table.local_begin(), p.updates_per_rank);
  EXPECT_TRUE(right.ok) << right.found;
  EXPECT_FALSE(check_ra(rt(), p, table.local(), table.local_begin(), p.updates_per_rank - 1).ok)
      << "the table after every update is not the table after all but the last";

  std::vector<std::uint64_t> flipped(table.local().begin(), table.local().end());
  if (rt().rank() == last_rank() && !flipped.empty()) flipped.back() ^= std::uint64_t{1} << 40;
  Verdict wrong = check_ra(rt(), p, flipped, table.local_begin(), p.updates_per_rank);
  EXPECT_FALSE(wrong.ok);
  EXPECT_NE(wrong.found.find("1 of " + std::to_string(p.table_words)), std::string::npos) << wrong.found;
}

TEST(Verifiers, HistogramRejectsOneMiscount) {
  const std::uint64_t counts = 37 * static_cast<std::uint64_t>(rt().size()), per_rank = 500;
  DistArray<std::int64_t> table(rt(), counts);
  auto idx = histogram_indices(rt().rank(), per_rank, counts);
  update(table, idx, std::vector<std::int64_t>(idx.size(), 1), ops::Add{});

  Verdict right = check_histogram(rt(), table.local(), table.local_begin(), counts, per_rank);
  EXPECT_TRUE(right.ok) << right.found;

  std::vector<std::int64_t> miscount(table.local().begin(), table.local().end());
  if (rt().rank() == last_rank()) miscount.front() += 1;
  Verdict one_more = check_histogram(rt(), miscount, table.local_begin(), counts, per_rank);
  EXPECT_FALSE(one_more.ok) << one_more.found;

  // The same total, one count moved to its neighbour: only the recount sees it.
  std::vector<std::int64_t> moved(table.local().begin(), table.local().end());
  if (rt().rank() == 0) moved[0] -= 1, moved[1] += 1;
  Verdict same_total = check_histogram(rt(), moved, table.local_begin(), counts, per_rank);
  EXPECT_FALSE(same_total.ok) << same_total.found;
  EXPECT_NE(same_total.found.find("2 counts differ"), std::string::npos) << same_total.found;
}

// The per-core ceiling row: private full-size tables, summed over the ranks.
TEST(Verifiers, HistogramPrivateRejectsOneMiscount) {
  const std::uint64_t counts = 37 * static_cast<std::uint64_t>(rt().size()), per_rank = 500;
  DistArray<std::int64_t> layout(rt(), counts);  // only for each rank's block
  std::vector<std::int64_t> mine(counts, 0);  // a serial count of this rank's stream
  for (std::uint64_t i : histogram_indices(rt().rank(), per_rank, counts)) ++mine[i];
  const std::size_t block = layout.local().size();

  Verdict right = check_histogram_private(rt(), mine, layout.local_begin(), block, per_rank);
  EXPECT_TRUE(right.ok) << right.found;

  std::vector<std::int64_t> one_more(mine);
  if (rt().rank() == last_rank()) one_more.back() += 1;
  EXPECT_FALSE(check_histogram_private(rt(), one_more, layout.local_begin(), block, per_rank).ok);

  // The same total, one count moved: only the recount sees it.
  std::vector<std::int64_t> moved(mine);
  if (rt().rank() == 0) moved[0] -= 1, moved[counts - 1] += 1;
  Verdict same_total = check_histogram_private(rt(), moved, layout.local_begin(), block, per_rank);
  EXPECT_FALSE(same_total.ok) << same_total.found;
  EXPECT_NE(same_total.found.find("2 counts differ"), std::string::npos) << same_total.found;

  // One rank that counted nothing.
  std::vector<std::int64_t> idle(rt().rank() == 0 ? std::vector<std::int64_t>(counts, 0) : mine);
  EXPECT_FALSE(check_histogram_private(rt(), idle, layout.local_begin(), block, per_rank).ok);

  EXPECT_THROW(check_histogram_private(rt(), mine, counts, 1, per_rank), RangeError);
}

TEST(Verifiers, IndexgatherRejectsOneWrongValue) {
  const std::uint64_t n = 101 * static_cast<std::uint64_t>(rt().size());
  DistArray<std::uint64_t> table(rt(), n);
  for (std::uint64_t i = table.local_begin(); i < table.local_end(); ++i) table.at(i) = indexgather_value(i);
  auto idx = indexgather_indices(rt().rank(), 300, n);
  auto fetched = gather(table, idx);

  EXPECT_TRUE(check_indexgather(rt(), idx, fetched).ok);
  if (rt().rank() == last_rank()) fetched[150] = indexgather_value(idx[150] + 1);
  Verdict wrong = check_indexgather(rt(), idx, fetched);
  EXPECT_FALSE(wrong.ok);
  EXPECT_EQ(wrong.found, "1 wrong values");
}

TEST(Verifiers, StreamRejectsOneWrongElement) {
  const std::size_t m = 1000;
  const StreamValues after_triad = StreamValues::after(4);
  EXPECT_EQ(after_triad.a, 15.0);  // STREAM's first round: c = 1, b = 3, c = 4, a = 3 + 3 * 4
  EXPECT_EQ(after_triad.b, 3.0);
  EXPECT_EQ(after_triad.c, 4.0);
  std::vector<double> a(m, after_triad.a), b(m, after_triad.b), c(m, after_triad.c);
  EXPECT_TRUE(check_stream(rt(), a, b, c, 4).ok);
  EXPECT_FALSE(check_stream(rt(), a, b, c, 3).ok) << "these are not the values before triad";

  std::vector<double> wrong_c = c;
  if (rt().rank() == last_rank()) wrong_c[m / 2] *= 1 + 1e-9;  // a last-digits error, still caught
  EXPECT_FALSE(check_stream(rt(), a, b, wrong_c, 4).ok);
  EXPECT_FALSE(stream_arrays_match(a, b, std::span<const double>(c).first(m - 1), 4)) << "a short array";
}

TEST(Verifiers, ComponentsRejectTwoComponentsUnderOneLabel) {
  // Two triangles {0,1,2} and {3,4,5}, an isolated vertex 6, an edge 7-8.
  const std::uint64_t n = 9;
  UnionFind uf(n);
  for (auto [u, v] : {std::pair{0, 1}, {1, 2}, {2, 0}, {3, 4}, {4, 5}, {5, 3}, {7, 8}})
    uf.unite(static_cast<std::uint64_t>(u), static_cast<std::uint64_t>(v));
  const auto reference = std::move(uf).labels();
  const std::vector<std::uint64_t> want{0, 0, 0, 3, 3, 3, 6, 7, 7};
  ASSERT_EQ(reference, want);
  std::vector<std::uint64_t> reference_on_root = rt().rank() == 0 ? reference : std::vector<std::uint64_t>{};

  DistArray<std::uint64_t> labels(rt(), n);
  auto labelled = [&](std::vector<std::uint64_t> all) {
    for (std::uint64_t v = labels.local_begin(); v < labels.local_end(); ++v) labels.at(v) = all[v];
    return check_components(rt(), labels.local(), reference_on_root);
  };
  Verdict right = labelled(want);
  EXPECT_TRUE(right.ok) << right.found;
  Verdict merged = labelled({0, 0, 0, 0, 0, 0, 6, 7, 7});  // both triangles labelled 0
  EXPECT_FALSE(merged.ok);
  EXPECT_NE(merged.found.find("first at vertex 3"), std::string::npos) << merged.found;
  EXPECT_FALSE(labelled({0, 0, 0, 3, 3, 3, 6, 7, 8}).ok) << "an edge split across two labels";
  EXPECT_FALSE(labelled({1, 1, 1, 3, 3, 3, 6, 7, 7}).ok) << "a label that is not the smallest id";

  // Renumbered (vertex k is original vertex ids[k], here n-1-k): labels in
  // the new ids, any member's id as a component's label.
  DistArray<std::uint64_t> ids(rt(), n);
  for (std::uint64_t v = ids.local_begin(); v < ids.local_end(); ++v) ids.at(v) = n - 1 - v;
  auto renumbered = [&](std::vector<std::uint64_t> all) {
    for (std::uint64_t v = labels.local_begin(); v < labels.local_end(); ++v) labels.at(v) = all[v];
    return check_components(rt(), labels.local(), reference_on_root, ids.local());
  };
  // New ids: 8,7 = old 0,1 ... {0,1,2} -> {8,7,6}, {3,4,5} -> {5,4,3}, 6 -> 2, {7,8} -> {1,0}.
  Verdict renamed = renumbered({0, 0, 2, 3, 3, 3, 6, 6, 6});
  EXPECT_TRUE(renamed.ok) << renamed.found;
  EXPECT_FALSE(renumbered({0, 0, 2, 3, 3, 3, 3, 3, 3}).ok) << "two components under one label";
  EXPECT_FALSE(renumbered({0, 0, 2, 3, 3, 5, 6, 6, 6}).ok) << "a component split";
}

TEST(Verifiers, HittingTimesRejectAWrongTimeEvenWhenTheReferenceAgrees) {
  auto g = graph::generate(rt(), graph::GraphSpec::grid({5, 6}));  // connected
  linalg::EdgeListMatrix a(g);
  linalg::HittingOptions options;
  options.cg.tolerance = 1e-10;
  std::vector<std::uint64_t> target{0};
  auto h = linalg::hitting_times(g, a, target, options);
  std::vector<double> times(h.times.local().begin(), h.times.local().end());

  Verdict right = check_hitting_times(g, times, times, options.cg.tolerance);
  EXPECT_TRUE(right.ok) << right.found;

  std::vector<double> wrong = times;
  if (rt().rank() == last_rank() && !wrong.empty()) wrong.back() *= 1.001;
  EXPECT_FALSE(check_hitting_times(g, wrong, times, options.cg.tolerance).ok) << "differs from the reference";
  Verdict agreeing = check_hitting_times(g, wrong, wrong, options.cg.tolerance);
  EXPECT_FALSE(agreeing.ok) << "two answers agreeing on a wrong time: " << agreeing.found;
  EXPECT_NE(agreeing.found.find("true residual"), std::string::npos);
}

TEST(Verifiers, LaplacianEigenpairRejectsAWrongValueVectorOrShift) {
  // A 2 x n grid: lambda2 = 2 - 2 cos(pi / n), its vector cos(pi (c + 1/2) / n)
  // in column c, the same in both rows (vertex r * n + c).
  const std::uint64_t n = 9;
  auto g = graph::generate(rt(), graph::GraphSpec::grid({2, n}));
  const double pi = std::acos(-1.0), lambda = 2 - 2 * std::cos(pi / static_cast<double>(n));
  std::vector<double> x(g.local_vertices());
  for (std::size_t i = 0; i < x.size(); ++i) {
    const auto c = (g.local_vertex_begin() + i) % n;
    x[i] = std::cos(pi * (static_cast<double>(c) + 0.5) / static_cast<double>(n)) / std::sqrt(static_cast<double>(n));
  }
  Verdict right = check_laplacian_eigenpair(g, x, lambda, 1e-8);
  EXPECT_TRUE(right.ok) << right.found;

  EXPECT_FALSE(check_laplacian_eigenpair(g, x, lambda * (1 + 1e-6), 1e-8).ok) << "a wrong eigenvalue";
  EXPECT_FALSE(check_laplacian_eigenpair(g, x, 2 - 2 * std::cos(2 * pi / static_cast<double>(n)), 1e-8).ok)
      << "lambda3 claimed for lambda2's vector";
  // One entry moved, the rest kept: still of unit norm to rounding, not an eigenvector.
  std::vector<double> bent = x;
  if (rt().rank() == last_rank() && bent.size() >= 2) {
    bent[bent.size() - 1] += 1e-3;
    bent[bent.size() - 2] -= 1e-3;
  }
  EXPECT_FALSE(check_laplacian_eigenpair(g, bent, lambda, 1e-8).ok) << "a bent vector";
  std::vector<double> shifted = x;  // plus a multiple of the constants, renormalized
  double norm = 0;
  for (double& v : shifted) v += 1e-3;
  for (double v : shifted) norm += v * v;
  norm = std::sqrt(all_reduce(rt().comm(), norm, MPI_SUM));
  for (double& v : shifted) v /= norm;
  EXPECT_FALSE(check_laplacian_eigenpair(g, shifted, lambda, 1e-2).ok) << "not orthogonal to the constants";
  std::vector<double> zero(x.size(), 0.0);
  EXPECT_FALSE(check_laplacian_eigenpair(g, zero, lambda, 1e-8).ok) << "the zero vector (NaN Rayleigh quotient)";
}
