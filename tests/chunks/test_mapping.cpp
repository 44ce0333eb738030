// Chunk mappings: every chunk placed once with balanced counts, hop-bytes
// against a brute-force count over all chunk pairs and BFS distances on
// small tori, link loads worked out by hand, TO < RR < RND for a stencil.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <unistd.h>
#include <queue>
#include <string>
#include <vector>

#include "tessera/chunks/mapping.hpp"
#include "tessera/chunks/topology.hpp"
#include "tessera/runtime/error.hpp"
#include "tessera/runtime/runtime.hpp"
#include "tessera/runtime/splitmix64.hpp"

namespace tc = tessera::chunks;

namespace {
const tc::MappingKind kAllKinds[] = {tc::MappingKind::random, tc::MappingKind::round_robin, tc::MappingKind::block,
                                     tc::MappingKind::topology_aware};

void expect_balanced(const tc::Placement& p, std::int64_t chunks, int ranks, const std::string& what) {
  ASSERT_EQ(static_cast<std::int64_t>(p.size()), chunks) << what;
  std::vector<std::int64_t> count(ranks, 0);
  for (int r : p) {
    ASSERT_GE(r, 0) << what;
    ASSERT_LT(r, ranks) << what;
    ++count[r];
  }
  auto [lo, hi] = std::minmax_element(count.begin(), count.end());
  EXPECT_EQ(*lo, chunks / ranks) << what;
  EXPECT_EQ(*hi, (chunks + ranks - 1) / ranks) << what;
}

// Hops by BFS over whichever rank pairs the topology says are one hop apart
// on a grid (|coordinate difference| 1, or n-1 across a wrapping dimension,
// in exactly one network dimension, same slot) - an independent count.
std::vector<std::vector<int>> bfs_hops(const tc::GridTopology& t) {
  const int n = t.ranks(), nd = t.network_dimensions();
  std::vector<std::vector<int>> adj(n);
  for (int a = 0; a < n; ++a)
    for (int b = 0; b < n; ++b) {
      if (t.node_of(a) == t.node_of(b) && a != b) adj[a].push_back(b);  // same node: 0 hops, handled below
      int differing = 0, unit = 0;
      for (int d = 0; d < nd; ++d) {
        int diff = std::abs(t.coordinates(a)[d] - t.coordinates(b)[d]);
        if (diff != 0) ++differing;
        if (diff == 1 || (t.wraps(d) && diff == t.dims()[d] - 1 && diff > 0)) ++unit;
      }
      if (differing == 1 && unit == 1) adj[a].push_back(b);
    }
  std::vector<std::vector<int>> dist(n, std::vector<int>(n, -1));
  for (int s = 0; s < n; ++s) {
    std::deque<int> q{s};
    dist[s][s] = 0;
    while (!q.empty()) {
      int a = q.front();
      q.pop_front();
      for (int b : adj[a]) {
        int w = t.node_of(a) == t.node_of(b) ? 0 : 1;
        if (dist[s][b] < 0 || dist[s][a] + w < dist[s][b]) {
          dist[s][b] = dist[s][a] + w;
          if (w == 0) q.push_front(b);
          else q.push_back(b);
        }
      }
    }
  }
  return dist;
}

// Every pair of chunks tested for face adjacency directly from (i, j, k).
std::uint64_t brute_force_hop_bytes(const tc::ChunkGrid& g, const tc::Placement& p,
                                    const std::vector<std::vector<int>>& dist, std::array<std::uint64_t, 3> face,
                                    bool periodic) {
  const int n = static_cast<int>(g.count());
  const int extent[3] = {g.di, g.dj, g.dk};
  std::uint64_t sum = 0;
  for (int a = 0; a < n; ++a)
    for (int b = 0; b < n; ++b) {
      auto ia = g.index(a), ib = g.index(b);
      for (int axis = 0; axis < 3; ++axis) {
        bool others_equal = true;
        for (int o = 0; o < 3; ++o)
          if (o != axis && ia[o] != ib[o]) others_equal = false;
        if (!others_equal || a == b) continue;
        int diff = std::abs(ia[axis] - ib[axis]);
        // Periodic: a pair one apart both ways (extent 2) exchanges two faces.
        int faces = (diff == 1) + (periodic && extent[axis] - diff == 1);
        sum += static_cast<std::uint64_t>(faces) * face[axis] * static_cast<std::uint64_t>(dist[p[a]][p[b]]);
      }
    }
  return sum;
}
}  // namespace

TEST(ChunkGrid, ParsesAndNumbersIFastest) {
  auto g = tc::ChunkGrid::parse("4x3x2");
  EXPECT_EQ(g.count(), 24);
  EXPECT_EQ(g.id(1, 2, 1), 1 + 4 * (2 + 3 * 1));
  for (int c = 0; c < 24; ++c) {
    auto ijk = g.index(c);
    EXPECT_EQ(g.id(ijk[0], ijk[1], ijk[2]), c);
  }
  EXPECT_EQ(tc::ChunkGrid::parse("16x16").describe(), "16x16x1");
  EXPECT_EQ(tc::ChunkGrid::parse("8").count(), 8);
  for (const char* bad : {"", "8x", "x8", "8x8x8x8", "0x4", "4xa", "-4"})
    EXPECT_THROW((void)tc::ChunkGrid::parse(bad), tessera::ConfigError) << bad;
  EXPECT_THROW((void)tc::ChunkGrid::parse("65536x65536"), tessera::RangeError);
}

TEST(Stencil, SevenPointGraphHasOneEdgePerFace) {
  tc::ChunkGrid g{4, 3, 2};
  auto box = tc::stencil7_graph(g, {10, 20, 30});
  // Faces between neighbours along i: (di-1)*dj*dk pairs, each both ways.
  EXPECT_EQ(box.edges.size(), 2u * (3 * 3 * 2 + 4 * 2 * 2 + 4 * 3 * 1));
  EXPECT_EQ(box.total_bytes(), 2u * (18 * 10 + 16 * 20 + 12 * 30));
  auto ring = tc::stencil7_graph(tc::ChunkGrid{4, 3, 3}, 5, true);
  EXPECT_EQ(ring.edges.size(), 6u * 36);
  for (const auto& e : ring.edges) EXPECT_NE(e.from, e.to);
}

TEST(Mapping, EveryChunkPlacedOnceWithBalancedCounts) {
  struct Case {
    std::string grid, topology;
  };
  for (const Case& c : {Case{"8x8x8", "torus:4x4x4"}, Case{"5x3x2", "torus:2x2x2"}, Case{"7", "mesh:2x2x2"},
                        Case{"6x5x4", "torus:3x2:2"}, Case{"4x4x4", "mesh:4x4x4"}, Case{"9x7x5", "torus:5x3x2"}}) {
    auto g = tc::ChunkGrid::parse(c.grid);
    auto t = tc::parse_topology(c.topology);
    for (auto kind : kAllKinds) {
      auto p = tc::map_chunks(kind, g, *t, 7);
      expect_balanced(p, g.count(), t->ranks(), c.grid + " on " + c.topology + " by " + tc::mapping_name(kind));
      EXPECT_NO_THROW(tc::check_placement(p, g.count(), t->ranks()));
    }
  }
  tc::MachineTopology machine({{0, 0, 0, 0}, {0, 0, 0, 1}, {0, 0, 1, 2}, {1, 0, 0, 0}, {1, 0, 0, 1}});
  expect_balanced(tc::map_topology_aware(tc::ChunkGrid{6, 4, 1}, machine), 24, 5, "TO on a machine");
}

TEST(Mapping, RoundRobinBlockAndSeededRandom) {
  auto rr = tc::map_round_robin(10, 4);
  EXPECT_EQ(rr, (tc::Placement{0, 1, 2, 3, 0, 1, 2, 3, 0, 1}));
  auto block = tc::map_block(10, 4);
  EXPECT_EQ(block, (tc::Placement{0, 0, 0, 1, 1, 1, 2, 2, 3, 3}));
  EXPECT_EQ(tc::map_block(3, 5), (tc::Placement{0, 1, 2}));
  auto r1 = tc::map_random(1000, 7, 42), r2 = tc::map_random(1000, 7, 42), r3 = tc::map_random(1000, 7, 43);
  EXPECT_EQ(r1, r2);
  EXPECT_NE(r1, r3);
  expect_balanced(r1, 1000, 7, "rnd");
  EXPECT_THROW((void)tc::map_round_robin(10, 0), tessera::ConfigError);
  EXPECT_EQ(tc::parse_mapping("to"), tc::MappingKind::topology_aware);
  for (auto kind : kAllKinds) EXPECT_EQ(tc::parse_mapping(tc::mapping_name(kind)), kind);
  try {
    (void)tc::parse_mapping("greedy");
    ADD_FAILURE() << "greedy accepted";
  } catch (const tessera::ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("'greedy'; expected rnd, rr, block or to"), std::string::npos) << e.what();
  }
}

TEST(HopBytes, MatchesABruteForceCountOnSmallTori) {
  struct Case {
    std::string grid, topology;
    bool periodic;
  };
  for (const Case& c : {Case{"6x4x3", "torus:3x4x2", false}, Case{"6x4x3", "torus:3x4x2", true},
                        Case{"5x5x2", "mesh:4x3", false}, Case{"4x2x3", "torus:3x2:2", true},
                        Case{"3x3x3", "torus:5", false}}) {
    auto g = tc::ChunkGrid::parse(c.grid);
    auto grid_topology = tc::GridTopology::parse(c.topology);
    auto dist = bfs_hops(grid_topology);
    const std::array<std::uint64_t, 3> face{3, 5, 7};
    auto graph = tc::stencil7_graph(g, face, c.periodic);
    for (std::uint64_t seed = 1; seed <= 3; ++seed)
      for (auto kind : kAllKinds) {
        auto p = tc::map_chunks(kind, g, grid_topology, seed);
        std::uint64_t want = brute_force_hop_bytes(g, p, dist, face, c.periodic);
        EXPECT_EQ(tc::hop_bytes(graph, p, grid_topology), want) << c.grid << " on " << c.topology << " "
                                                                 << tc::mapping_name(kind) << " seed " << seed;
        auto q = tc::evaluate(graph, p, grid_topology);
        EXPECT_EQ(q.hop_bytes, want);
        EXPECT_EQ(q.total_bytes, graph.total_bytes());
        // Every hop loads one link: the busiest carries at least the average
        // and at most everything.
        EXPECT_LE(q.max_link_load, q.hop_bytes);
        EXPECT_GE(q.max_link_load * static_cast<std::uint64_t>(grid_topology.link_count()), q.hop_bytes);
      }
  }
}

TEST(LinkLoad, DimensionOrderedRoutesWorkedByHand) {
  // Chunks 0-1-2-3 in a line on ranks 0,3,1,2 of a 4-node mesh line: link
  // 1->2 carries 0->1 (rank 0->3), 2->1 (1->3) and 2->3 (1->2): 3 faces.
  auto line = tc::GridTopology::parse("mesh:4");
  auto graph = tc::stencil7_graph(tc::ChunkGrid{4, 1, 1}, 100);
  tc::Placement p{0, 3, 1, 2};
  EXPECT_EQ(tc::max_link_load(graph, p, line), 300u);
  EXPECT_EQ(tc::hop_bytes(graph, p, line), 2u * 100 * (3 + 2 + 1));
  // On a ring the 0<->3 pair goes round the short way: 1 hop.
  auto ring = tc::GridTopology::parse("torus:4");
  EXPECT_EQ(tc::hop_bytes(graph, p, ring), 2u * 100 * (1 + 2 + 1));
  // Identity on a periodic ring: every link carries exactly one face.
  auto periodic = tc::stencil7_graph(tc::ChunkGrid{4, 1, 1}, 100, true);
  EXPECT_EQ(tc::max_link_load(periodic, tc::map_block(4, 4), ring), 100u);
  // All chunks on one rank: nothing crosses the network.
  EXPECT_EQ(tc::evaluate(graph, tc::Placement{2, 2, 2, 2}, ring).max_link_load, 0u);
}

TEST(Mapping, TopologyAwareBeatsRoundRobinBeatsRandomOnA3DTorus) {
  struct Case {
    const char* spec;
    tc::ChunkGrid grid;
  };
  for (const Case& c : {Case{"torus:4x4x4", {8, 8, 8}}, Case{"torus:4x4x4", {12, 8, 8}},
                        Case{"torus:4x4x2:2", {12, 8, 8}}, Case{"torus:4x4x2:2", {8, 8, 8}},
                        Case{"torus:8x8x16", {16, 16, 16}}}) {
    auto t = tc::parse_topology(c.spec);
    auto graph = tc::stencil7_graph(c.grid, 64);
    auto q = [&](tc::MappingKind k) { return tc::evaluate(graph, tc::map_chunks(k, c.grid, *t, 1), *t); };
    auto rnd = q(tc::MappingKind::random), rr = q(tc::MappingKind::round_robin),
         to = q(tc::MappingKind::topology_aware);
    const std::string what = c.grid.describe() + " on " + c.spec;
    EXPECT_LT(to.hop_bytes, rr.hop_bytes) << what;
    EXPECT_LT(rr.hop_bytes, rnd.hop_bytes) << what;
    EXPECT_LT(to.max_link_load, rr.max_link_load) << what;
    EXPECT_LT(rr.max_link_load, rnd.max_link_load) << what;
  }
  // One chunk per rank, same shape: TO embeds the grid, every message 1 hop.
  auto t = tc::parse_topology("torus:4x4x4");
  tc::ChunkGrid g{4, 4, 4};
  auto graph = tc::stencil7_graph(g, 8);
  EXPECT_EQ(tc::hop_bytes(graph, tc::map_topology_aware(g, *t), *t), graph.total_bytes());
  // Also when the grid's long axis is not the torus's: i (8) goes along z (8).
  auto long_z = tc::parse_topology("torus:4x4x8");
  tc::ChunkGrid long_i{8, 4, 4};
  auto long_graph = tc::stencil7_graph(long_i, 8);
  EXPECT_EQ(tc::hop_bytes(long_graph, tc::map_topology_aware(long_i, *long_z), *long_z), long_graph.total_bytes());
}

TEST(Mapping, BadPlacementsAndGraphsAreRefused) {
  auto t = tc::parse_topology("torus:2x2");
  auto graph = tc::stencil7_graph(tc::ChunkGrid{2, 2, 1}, 1);
  try {
    tc::check_placement(tc::Placement{0, 1, 4, 2}, 4, 4);
    ADD_FAILURE() << "rank 4 accepted";
  } catch (const tessera::RangeError& e) {
    EXPECT_NE(std::string(e.what()).find("chunk 2 on rank 4"), std::string::npos) << e.what();
  }
  EXPECT_THROW(tc::check_placement(tc::Placement{0, 1, 2}, 4, 4), tessera::RangeError);
  EXPECT_THROW((void)tc::hop_bytes(graph, tc::Placement{0, 1, 2}, *t), tessera::RangeError);
  graph.edges.push_back(tc::CommEdge{0, 9, 1});  // a chunk id out of range
  EXPECT_THROW((void)tc::hop_bytes(graph, tc::Placement{0, 1, 2, 3}, *t), tessera::RangeError);
}

TEST(Placement, FilesRoundTripAndBadLinesNameTheLine) {
  auto& rt = tessera::Runtime::current();
  const std::string dir = std::filesystem::temp_directory_path() /
                          ("tessera-placement-" + std::to_string(::getpid()) + "-" + std::to_string(rt.rank()));
  std::filesystem::create_directories(dir);
  auto write = [&](const std::string& name, const std::string& text) {
    std::ofstream(dir + "/" + name) << text;
    return dir + "/" + name;
  };
  auto p = tc::map_random(12, 4, 3);
  tc::write_placement(p, dir + "/p.txt");
  EXPECT_EQ(tc::read_placement(dir + "/p.txt", 12, 4), p);
  // SCOTCH's form: a count line, then "vertex terminal" in any order.
  EXPECT_EQ(tc::read_placement(write("s.map", "3\n2\t0\n0\t1\n1\t1\n"), 3, 2), (tc::Placement{1, 1, 0}));
  struct Bad {
    std::string text, says;
  };
  for (const Bad& b : {Bad{"0 1\n1 x\n", "p.bad:2: 'x' is not an integer"}, Bad{"0 1\n0 1\n", ":2: chunk 0 is placed twice"},
                       Bad{"0 1\n1 5\n", ":2: rank 5 is outside 0..3"}, Bad{"0 1\n7 0\n", ":2: chunk 7 is outside 0..1"},
                       Bad{"0 1 2\n", ":1: expected 'chunk rank', found 3 numbers"},
                       Bad{"3\n0 1\n", ":1: the mapping has 3 vertices for 2 chunks"},
                       Bad{"# chunk rank\n1 0\n", "1 of 2 chunks are not placed (the first is chunk 0)"}}) {
    try {
      (void)tc::read_placement(write("p.bad", b.text), 2, 4);
      ADD_FAILURE() << "accepted: " << b.text;
    } catch (const tessera::FormatError& e) {
      EXPECT_NE(std::string(e.what()).find(b.says), std::string::npos) << e.what();
    }
  }
  EXPECT_THROW((void)tc::read_placement(dir + "/missing.txt", 2, 4), tessera::SystemError);
  std::filesystem::remove_all(dir);
}
