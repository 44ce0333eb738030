// The hitting-times summary against a serial pass over the gathered values,
// the default target (highest degree, smallest id on ties), and
// HittingOptions::connected giving the same times without the components pass.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "../graph/graph_test_util.hpp"
#include "tessera/graph/generators.hpp"
#include "tessera/linalg/edge_list_matrix.hpp"
#include "tessera/linalg/hitting_summary.hpp"
#include "tessera/linalg/hitting_times.hpp"

using namespace tessera;
using namespace tessera::graph;
using namespace tessera::linalg;

TEST(HittingSummary, MatchesASerialPass) {
  Runtime& rt = Runtime::current();
  const std::uint64_t n = 53;
  Vector times(rt, Distribution::block(n, rt.size()));
  auto local = times.local();
  for (std::size_t i = 0; i < local.size(); ++i) {
    std::uint64_t v = times.distribution().begin(rt.rank()) + i;
    local[i] = v % 5 == 4 ? std::numeric_limits<double>::quiet_NaN() : static_cast<double>((v * 7) % 11);
  }
  auto s = summarize(times);
  // Serial reference.
  std::uint64_t reachable = 0, farthest = kNoIndex;
  double lo = INFINITY, hi = -INFINITY, sum = 0;
  for (std::uint64_t v = 0; v < n; ++v) {
    if (v % 5 == 4) continue;
    double t = static_cast<double>((v * 7) % 11);
    ++reachable, sum += t, lo = std::min(lo, t);
    if (t > hi) hi = t, farthest = v;
  }
  EXPECT_EQ(s.reachable, reachable);
  EXPECT_EQ(s.unreachable, n - reachable);
  EXPECT_EQ(s.min, lo);
  EXPECT_EQ(s.max, hi);
  EXPECT_DOUBLE_EQ(s.mean, sum / static_cast<double>(reachable));
  EXPECT_EQ(s.farthest, farthest);  // the smallest vertex with the largest time

  times.fill(std::numeric_limits<double>::quiet_NaN());
  auto none = summarize(times);
  EXPECT_EQ(none.reachable, 0u);
  EXPECT_EQ(none.farthest, kNoIndex);
  EXPECT_EQ(none.max, 0.0);
}

TEST(HittingSummary, HighestDegreeVertexTakesTheSmallestOnTies) {
  Runtime& rt = Runtime::current();
  LocalEdges e;
  if (rt.rank() == 0)
    for (std::uint64_t leaf : {0, 1, 2, 4, 6}) e.add(3, leaf), e.add(7, leaf);  // 3 and 7 have degree 5
  BuildOptions o;
  o.symmetrize = true;
  auto g = EdgeList::build(rt, 9, false, std::move(e), o);
  EXPECT_EQ(highest_degree_vertex(g), 3u);
}

TEST(HittingSummary, ConnectedSkipsComponentsWithTheSameTimes) {
  Runtime& rt = Runtime::current();
  auto g = generate(rt, GraphSpec::grid({7, 9}));
  EdgeListMatrix a(g);
  std::vector<std::uint64_t> targets = {0, 40};
  HittingOptions o;
  o.cg.tolerance = 1e-12;
  auto general = hitting_times(g, a, targets, o);
  o.connected = true;
  auto known = hitting_times(g, a, targets, o);
  ASSERT_EQ(general.times.local().size(), known.times.local().size());
  for (std::size_t i = 0; i < known.times.local().size(); ++i)
    EXPECT_NEAR(known.times.local()[i], general.times.local()[i], 1e-9 * (1 + general.times.local()[i]));
  EXPECT_EQ(known.unreachable, 0u);
}
