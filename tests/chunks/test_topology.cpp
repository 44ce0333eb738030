// NetworkTopology: simulated tori and meshes against a breadth-first search
// over their links, dimension-ordered routes, the machine's levels, and the
// errors for topology strings that do not parse or do not fit the job.
#include <gtest/gtest.h>

#include <queue>
#include <string>
#include <vector>

#include "tessera/chunks/topology.hpp"
#include "tessera/runtime/error.hpp"
#include "tessera/runtime/runtime.hpp"

namespace tc = tessera::chunks;

namespace {
// Node-to-node distances by BFS over the grid's links (the reference for hops).
std::vector<std::vector<int>> bfs_distances(const std::vector<int>& dims, const std::vector<bool>& wraps) {
  int nodes = 1;
  for (int d : dims) nodes *= d;
  auto coords = [&](int n) {
    std::vector<int> c;
    for (int d : dims) c.push_back(n % d), n /= d;
    return c;
  };
  auto index = [&](const std::vector<int>& c) {
    int n = 0;
    for (std::size_t d = dims.size(); d-- > 0;) n = n * dims[d] + c[d];
    return n;
  };
  std::vector<std::vector<int>> dist(nodes, std::vector<int>(nodes, -1));
  for (int s = 0; s < nodes; ++s) {
    std::queue<int> q;
    q.push(s);
    dist[s][s] = 0;
    while (!q.empty()) {
      int n = q.front();
      q.pop();
      for (std::size_t d = 0; d < dims.size(); ++d)
        for (int step : {-1, 1}) {
          auto c = coords(n);
          c[d] += step;
          if (c[d] < 0 || c[d] >= dims[d]) {
            if (!wraps[d]) continue;
            c[d] = (c[d] + dims[d]) % dims[d];
          }
          int m = index(c);
          if (dist[s][m] < 0) dist[s][m] = dist[s][n] + 1, q.push(m);
        }
    }
  }
  return dist;
}

template <class Fn>
std::string error_of(Fn&& fn) {
  try {
    fn();
  } catch (const tessera::Error& e) {
    return e.what();
  }
  return "";
}
}  // namespace

TEST(GridTopology, ParsesShapesAndRanksPerNode) {
  auto t = tc::GridTopology::parse("torus:4x3x2");
  EXPECT_EQ(t.ranks(), 24);
  EXPECT_EQ(t.nodes(), 24);
  EXPECT_EQ(t.network_dimensions(), 3);
  EXPECT_EQ(t.dims(), (std::vector<int>{4, 3, 2, 1}));
  EXPECT_TRUE(t.wraps(0) && t.wraps(2));
  EXPECT_FALSE(t.wraps(3));  // the node slot never wraps
  EXPECT_EQ(t.ranks_per_node(), 1);
  EXPECT_EQ(t.describe(), "torus:4x3x2");

  auto m = tc::GridTopology::parse("mesh:8x8:4");
  EXPECT_EQ(m.ranks(), 256);
  EXPECT_EQ(m.nodes(), 64);
  EXPECT_EQ(m.ranks_per_node(), 4);
  EXPECT_FALSE(m.wraps(0));
  EXPECT_EQ(m.node_of(7), 1);
  EXPECT_EQ(m.hops(4, 7), 0);  // same node
  EXPECT_EQ(m.describe(), "mesh:8x8:4");
  EXPECT_THROW(m.wraps(5), tessera::RangeError);
}

TEST(GridTopology, CoordinatesRoundTripFirstDimensionFastest) {
  auto t = tc::GridTopology::parse("torus:3x4x2:2");
  for (int r = 0; r < t.ranks(); ++r) {
    auto c = t.coordinates(r);
    ASSERT_EQ(c.size(), 4u);
    int node = r / 2;
    EXPECT_EQ(c[0], node % 3);
    EXPECT_EQ(c[1], (node / 3) % 4);
    EXPECT_EQ(c[2], node / 12);
    EXPECT_EQ(c[3], r % 2);
    EXPECT_EQ(t.rank_at(c), r);
  }
  std::vector<int> nowhere{3, 0, 0, 0};
  EXPECT_THROW(t.rank_at(nowhere), tessera::RangeError);
  EXPECT_THROW(t.coordinates(t.ranks()), tessera::RangeError);
}

TEST(GridTopology, HopsMatchBreadthFirstSearchWithWraparound) {
  struct Case {
    std::vector<int> dims;
    std::vector<bool> wraps;
  };
  for (const Case& c : {Case{{5, 4, 3}, {true, true, true}}, Case{{4, 3}, {false, false}},
                        Case{{6, 2, 3}, {true, false, true}}, Case{{7}, {true}}}) {
    tc::GridTopology t(c.dims, c.wraps);
    auto dist = bfs_distances(c.dims, c.wraps);
    for (int a = 0; a < t.ranks(); ++a)
      for (int b = 0; b < t.ranks(); ++b) ASSERT_EQ(t.hops(a, b), dist[a][b]) << t.describe() << " " << a << "->" << b;
  }
  auto t = tc::GridTopology::parse("torus:8x8x8");
  std::vector<int> far{7, 0, 0, 0}, middle{4, 4, 4, 0};
  EXPECT_EQ(t.hops(0, t.rank_at(far)), 1);  // around the ring
  EXPECT_EQ(t.hops(0, t.rank_at(middle)), 12);
  auto m = tc::GridTopology::parse("mesh:8x8x8");
  EXPECT_EQ(m.hops(0, m.rank_at(far)), 7);
}

TEST(GridTopology, RoutesAreDimensionOrderedShortestPaths) {
  for (const char* spec : {"torus:4x3x5", "mesh:3x4", "torus:4:2"}) {
    auto t = tc::GridTopology::parse(spec);
    const int nd = t.network_dimensions();
    std::vector<std::int64_t> links;
    for (int a = 0; a < t.ranks(); ++a)
      for (int b = 0; b < t.ranks(); ++b) {
        t.route(a, b, links);
        ASSERT_EQ(static_cast<int>(links.size()), t.hops(a, b)) << spec << " " << a << "->" << b;
        // Walk the links: each leaves the node the previous one reached, and
        // the dimensions come in order.
        std::vector<int> at(t.coordinates(a).begin(), t.coordinates(a).begin() + nd);
        int last_dim = 0;
        for (std::int64_t l : links) {
          ASSERT_GE(l, 0);
          ASSERT_LT(l, t.link_count());
          int dir = l % 2 == 0 ? 1 : -1;
          int dim = static_cast<int>((l / 2) % nd);
          int node = static_cast<int>(l / 2 / nd);
          std::vector<int> here = at;
          here.push_back(0);
          ASSERT_EQ(node, t.node_of(t.rank_at(here))) << spec;
          ASSERT_GE(dim, last_dim);
          last_dim = dim;
          const int n = t.dims()[dim];
          at[dim] = ((at[dim] + dir) % n + n) % n;
        }
        for (int d = 0; d < nd; ++d) ASSERT_EQ(at[d], t.coordinates(b)[d]);
      }
  }
}

TEST(GridTopology, ClosestRankPrefersFewestHopsThenTheEarliest) {
  auto t = tc::GridTopology::parse("torus:8x8x8");
  auto at = [&](int x, int y, int z) { return t.rank_at(std::vector<int>{x, y, z, 0}); };
  std::vector<int> candidates{at(4, 4, 4), at(7, 7, 7), at(2, 0, 0), at(0, 0, 6)};
  EXPECT_EQ(t.closest_rank(0, candidates), at(2, 0, 0));  // 2 hops; (7,7,7) is 3 around the rings
  candidates = {at(4, 4, 4), at(0, 0, 6), at(2, 0, 0)};
  EXPECT_EQ(t.closest_rank(0, candidates), at(0, 0, 6));  // a tie goes to the earliest
  EXPECT_EQ(t.closest_rank(at(4, 4, 4), candidates), at(4, 4, 4));
  EXPECT_THROW(t.closest_rank(0, std::vector<int>{}), tessera::RangeError);
  EXPECT_THROW(t.closest_rank(0, std::vector<int>{512}), tessera::RangeError);
}

TEST(GridTopology, BadStringsNameWhatIsWrong) {
  struct Bad {
    std::string spec, says;
  };
  for (const Bad& b : {Bad{"", "no kind"}, Bad{"torus", "no kind"}, Bad{"ring:8", "unknown kind 'ring'"},
                       Bad{"torus:", "dimension 1 is empty"}, Bad{"torus:8x", "dimension 2 is empty"},
                       Bad{"torus:8xx8", "dimension 2 is empty"}, Bad{"mesh:8xfoo", "'foo' is not a number"},
                       Bad{"torus:0x4", "at least 1"}, Bad{"torus:8x-1", "at least 1, not -1"},
                       Bad{"torus:8x8:0", "ranks per node must be at least 1"},
                       Bad{"torus:8x8:", "ranks per node is empty"}, Bad{"torus:4x4:2:1", "'2:1' is not a number"},
                       Bad{"torus:99999999999", "too large"}, Bad{"mesh:4096x4096x4096", "exceeds"}}) {
    std::string what = error_of([&] { (void)tc::GridTopology::parse(b.spec); });
    EXPECT_NE(what.find(b.says), std::string::npos) << "'" << b.spec << "' gave: " << what;
    EXPECT_NE(what.find("'" + b.spec + "'"), std::string::npos) << what;
    EXPECT_NE(what.find("expected torus:AxBxC"), std::string::npos) << what;
    EXPECT_THROW((void)tc::GridTopology::parse(b.spec), tessera::ConfigError);
  }
}

TEST(GridTopology, ShapeMustMatchTheRankCountWhereItMust) {
  EXPECT_EQ(tc::parse_topology("torus:4x4", 16)->ranks(), 16);
  EXPECT_EQ(tc::parse_topology("torus:4x4")->ranks(), 16);  // simulated: any size
  std::string what = error_of([] { (void)tc::parse_topology("torus:4x4:2", 8); });
  EXPECT_NE(what.find("has 32 ranks but 8 are needed"), std::string::npos) << what;
  EXPECT_THROW((void)tc::parse_topology("torus:4x4", 8), tessera::MismatchError);
  EXPECT_THROW((void)tc::parse_topology("machine"), tessera::ConfigError);

  auto& rt = tessera::Runtime::current();
  if (rt.size() == 4) {
    EXPECT_EQ(tc::make_topology("mesh:2x2", rt)->ranks(), 4);
  } else {
    EXPECT_THROW((void)tc::make_topology("mesh:2x2", rt), tessera::MismatchError);
  }
}

TEST(MachineTopology, HopsByTheFinestSharedLevel) {
  // rank: node, socket, NUMA, core
  tc::MachineTopology m({{0, 0, 0, 0}, {0, 0, 0, 0}, {0, 0, 0, 1}, {0, 0, 1, 2}, {0, 1, 2, 3}, {0, -1, -1, -1},
                         {1, 0, 0, 0}});
  EXPECT_EQ(m.ranks(), 7);
  EXPECT_EQ(m.nodes(), 2);
  EXPECT_EQ(m.ranks_per_node(), 6);
  EXPECT_EQ(m.network_dimensions(), 1);
  EXPECT_EQ(m.hops(0, 0), 0);
  EXPECT_EQ(m.hops(0, 1), tc::MachineTopology::kSameCore);
  EXPECT_EQ(m.hops(0, 2), tc::MachineTopology::kSameNuma);
  EXPECT_EQ(m.hops(0, 3), tc::MachineTopology::kSameSocket);
  EXPECT_EQ(m.hops(0, 4), tc::MachineTopology::kSameNode);
  EXPECT_EQ(m.hops(5, 0), tc::MachineTopology::kSameNode);  // unbound: shares only the node
  EXPECT_EQ(m.hops(0, 6), tc::MachineTopology::kOtherNode);
  EXPECT_EQ(m.closest_rank(0, std::vector<int>{6, 4, 2, 3}), 2);
  std::vector<std::int64_t> links;
  m.route(0, 4, links);
  EXPECT_TRUE(links.empty());
  m.route(6, 0, links);
  EXPECT_EQ(links, (std::vector<std::int64_t>{2, 1}));  // out of node 1, into node 0
  EXPECT_EQ(m.coordinates(4)[4], 4);                    // slot on the node
  EXPECT_EQ(m.rank_at(m.coordinates(6)), 6);
  EXPECT_THROW(tc::MachineTopology({{-1, 0, 0, 0}}), tessera::RangeError);
  EXPECT_THROW(tc::MachineTopology(std::vector<tc::RankPlace>{}), tessera::ConfigError);
}

TEST(MachineTopology, DiscoverAgreesWithTheRuntimesNodeGroups) {
  auto& rt = tessera::Runtime::current();
  tc::MachineTopology m = tc::MachineTopology::discover(rt);  // collective
  ASSERT_EQ(m.ranks(), rt.size());
  EXPECT_EQ(m.nodes(), rt.node().count);
  for (int r = 0; r < rt.size(); ++r) {
    EXPECT_EQ(m.node_of(r), rt.node().node_of_rank[r]);
    EXPECT_EQ(m.hops(r, r), 0);
    for (int s = 0; s < rt.size(); ++s) {
      int h = m.hops(r, s);
      EXPECT_EQ(h, m.hops(s, r));
      if (r != s) {
        EXPECT_EQ(h >= tc::MachineTopology::kOtherNode, m.node_of(r) != m.node_of(s));
      }
    }
  }
  EXPECT_EQ(tc::make_topology("machine", rt)->ranks(), rt.size());
}
