// Co-locale placement (--colocales) against synthetic hwloc topologies: the
// plan is a pure function from a topology to rank -> PUs, checked here
// against what the placement rule says by hand.
#include <gtest/gtest.h>

#include <numeric>
#include <set>

#include "tessera/runtime/error.hpp"
#include "tessera/runtime/launch.hpp"
#include "tessera/runtime/topology.hpp"

using namespace tessera;

namespace {
std::vector<int> range(int first, int count) {
  std::vector<int> v(static_cast<std::size_t>(count));
  std::iota(v.begin(), v.end(), first);
  return v;
}
// Every PU at most once across ranks (no two ranks share a core).
void expect_disjoint(const ColocalePlan& p) {
  std::set<int> seen;
  for (const auto& pus : p.pus_of_rank)
    for (int pu : pus) EXPECT_TRUE(seen.insert(pu).second) << "PU " << pu << " given twice";
}
}  // namespace

TEST(Colocales, OneRankPerSocketAndPerNumaDomain) {
  const std::string machine = "pack:2 numa:2 core:16 pu:1";  // 2 sockets x 2 NUMA x 16 cores = 64 PUs
  auto sockets = plan_colocales_synthetic(machine, ColocaleKind::socket, 2);
  EXPECT_EQ(sockets.domains, 2);
  EXPECT_EQ(sockets.pus_of_rank[0], range(0, 32));
  EXPECT_EQ(sockets.pus_of_rank[1], range(32, 32));
  EXPECT_NE(sockets.note.find("one rank per socket"), std::string::npos) << sockets.note;

  auto numa = plan_colocales_synthetic(machine, ColocaleKind::numa, 4);
  EXPECT_EQ(numa.domains, 4);
  for (int r = 0; r < 4; ++r) EXPECT_EQ(numa.pus_of_rank[static_cast<std::size_t>(r)], range(16 * r, 16)) << r;
  expect_disjoint(numa);
}

TEST(Colocales, MoreRanksThanDomainsSplitTheDomain) {
  // 4 ranks on 2 sockets: ranks 0,1 on socket 0, 2,3 on socket 1, each half a socket.
  auto p = plan_colocales_synthetic("pack:2 numa:2 core:16 pu:1", ColocaleKind::socket, 4);
  EXPECT_EQ(p.domain_of_rank, (std::vector<int>{0, 0, 1, 1}));
  EXPECT_EQ(p.pus_of_rank[1], range(16, 16));
  EXPECT_EQ(p.pus_of_rank[2], range(32, 16));
  expect_disjoint(p);
  // One socket, as on this machine: two ranks split its cores.
  auto one = plan_colocales_synthetic("pack:1 core:2 pu:1", ColocaleKind::socket, 2);
  EXPECT_EQ(one.domains, 1);
  EXPECT_EQ(one.pus_of_rank[0], std::vector<int>{0});
  EXPECT_EQ(one.pus_of_rank[1], std::vector<int>{1});
  // More ranks than PUs: shared round-robin, and the note says so.
  auto over = plan_colocales_synthetic("pack:1 core:2 pu:1", ColocaleKind::numa, 4);
  EXPECT_EQ(over.pus_of_rank[2], std::vector<int>{0});
  EXPECT_EQ(over.pus_of_rank[3], std::vector<int>{1});
  EXPECT_NE(over.note.find("oversubscribed"), std::string::npos) << over.note;
}

TEST(Colocales, FewerRanksThanCoresSpreadOverSockets) {
  // Two ranks by core on 2 x 16 cores (2 hardware threads each): cores 0 and
  // 16, one per socket, each with both of its PUs.
  auto p = plan_colocales_synthetic("pack:2 core:16 pu:2", ColocaleKind::core, 2);
  EXPECT_EQ(p.domains, 32);
  EXPECT_EQ(p.domain_of_rank, (std::vector<int>{0, 16}));
  EXPECT_EQ(p.pus_of_rank[0], (std::vector<int>{0, 1}));
  EXPECT_EQ(p.pus_of_rank[1], (std::vector<int>{32, 33}));
}

TEST(Colocales, BadInputGetsAClearError) {
  EXPECT_THROW(parse_colocale_kind("board"), ConfigError);
  EXPECT_EQ(parse_colocale_kind("numa"), ColocaleKind::numa);
  EXPECT_THROW(plan_colocales_synthetic("pack:two", ColocaleKind::socket, 2), ConfigError);
  EXPECT_THROW(plan_colocales_synthetic("pack:2 pu:1", ColocaleKind::socket, 0), ConfigError);
}

TEST(Colocales, ThisMachineHasAPlan) {
  auto p = plan_colocales_here(ColocaleKind::socket, 2);
  ASSERT_EQ(p.pus_of_rank.size(), 2u);
  EXPECT_GE(p.domains, 1);
  for (const auto& pus : p.pus_of_rank) EXPECT_FALSE(pus.empty());
}

// Co-locale segments ask for the pages of a rank bound within one NUMA domain
// there (whoever touches them first): only then is there a home node.
TEST(Colocales, HomeNumaNodeOnlyWhenBoundWithinOneOfSeveral) {
  Topology t;
  t.numa_nodes = 4;
  t.bound = true;
  t.bound_numa = {2};
  t.bound_numa_os = {5};  // OS indices need not follow hwloc's logical order
  EXPECT_EQ(home_numa_node(t), 5);
  t.bound_numa_os = {4, 5};
  EXPECT_EQ(home_numa_node(t), -1) << "spanning two domains: first touch decides";
  t.bound_numa_os = {5};
  t.bound = false;
  EXPECT_EQ(home_numa_node(t), -1) << "unbound";
  t.bound = true;
  t.numa_nodes = 1;
  EXPECT_EQ(home_numa_node(t), -1) << "one domain: nothing to choose";
  Topology here = Topology::discover();
  EXPECT_EQ(here.bound_numa_os.size(), here.bound_numa.size());
}
