#include <dlfcn.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <numeric>
#include <sstream>
#include <string>

#include "tessera/runtime/collective.hpp"
#include "tessera/runtime/error.hpp"
#include "tessera/runtime/memory.hpp"
#include "tessera/runtime/runtime.hpp"
#include "tessera/runtime/wait.hpp"

using namespace tessera;

TEST(Runtime, RankAndSizeMatchMpi) {
  auto& rt = Runtime::current();
  int r = -1, s = -1;
  MPI_Comm_rank(MPI_COMM_WORLD, &r);
  MPI_Comm_size(MPI_COMM_WORLD, &s);
  EXPECT_EQ(rt.rank(), r);
  EXPECT_EQ(rt.size(), s);
  EXPECT_GE(rt.thread_level(), MPI_THREAD_FUNNELED);
}

// Checkpoint and state sizes run to gigabytes: "1G" once failed as above the
// aggregation buffers' 1G limit, with no G suffix at all.
TEST(Runtime, ByteCountsWithEverySuffix) {
  const std::uint64_t tib = std::uint64_t{1} << 40;
  EXPECT_EQ(parse_bytes("4096", "x", tib), 4096u);
  EXPECT_EQ(parse_bytes("64k", "x", tib), 65536u);
  EXPECT_EQ(parse_bytes("2MiB", "x", tib), 2u << 20);
  EXPECT_EQ(parse_bytes("1G", "x", tib), std::uint64_t{1} << 30);
  EXPECT_EQ(parse_bytes("4G", "x", tib), std::uint64_t{4} << 30);
  EXPECT_EQ(parse_bytes("1T", "x", tib), tib);
  EXPECT_EQ(parse_bytes("1G", "x", std::uint64_t{1} << 30), std::uint64_t{1} << 30);  // the bound itself
  for (const char* bad : {"", "0", "0K", "lots", "12Q", "-1", "1.5G", "G", "2T", "1025G", "99999999999999999999",
                          "18446744073709551615K", " 1M", "1M "})
    try {
      parse_bytes(bad, "--state-bytes", tib);
      ADD_FAILURE() << "'" << bad << "' accepted";
    } catch (const ConfigError& e) {
      EXPECT_NE(std::string(e.what()).find("--state-bytes must be a byte count between 1 and 1T"), std::string::npos)
          << e.what();
      EXPECT_NE(std::string(e.what()).find(std::string("'") + bad + "'"), std::string::npos) << e.what();
    }
  EXPECT_EQ(format_bytes(64u << 20), "64M");
  EXPECT_EQ(format_bytes(1000), "1000");
  EXPECT_EQ(format_bytes(std::uint64_t{3} << 40), "3T");
}

// The reference: the Rss lines of /proc/self/smaps under each mapping of a
// "*.so" or "*.so.N" file, which library_code_bytes() reads from the page
// table of those mappings alone.
std::uint64_t library_rss_in_smaps() {
  std::ifstream in("/proc/self/smaps");
  std::string line;
  std::uint64_t kib = 0;
  bool library = false;
  while (std::getline(in, line)) {
    std::istringstream fields(line);
    std::string first, path;
    fields >> first;
    if (first.back() == ':') {
      if (library && first == "Rss:") kib += std::stoull(line.substr(4));
      continue;
    }
    for (std::string f; fields >> f;) path = f;  // a header; its last field is the path
    const auto so = path.rfind(".so");
    library = path.starts_with("/") && so != std::string::npos && (so + 3 == path.size() || path[so + 3] == '.');
  }
  return kib * 1024;
}

TEST(Runtime, LibraryCodeIsTheLibrariesResidentPages) {
  library_rss_in_smaps();  // pages in the code both use, so neither call adds any
  library_code_bytes();
  for (int attempt = 0;; ++attempt) {
    const std::uint64_t before = library_rss_in_smaps(), bytes = library_code_bytes(), after = library_rss_in_smaps();
    if (before != after && attempt < 5) continue;  // a page came in meanwhile
    EXPECT_GT(bytes, 0u);  // libmpi at least
    EXPECT_GE(bytes, before);
    EXPECT_LE(bytes, after);
    break;
  }
}

TEST(Runtime, OnlyOneRuntimePerProcess) { EXPECT_THROW(Runtime second, Error); }

TEST(Runtime, NodeGroupsPartitionTheJob) {
  auto& rt = Runtime::current();
  const auto& node = rt.node();
  EXPECT_EQ(node.world_ranks.size(), static_cast<std::size_t>(node.size));
  EXPECT_EQ(node.world_ranks[static_cast<std::size_t>(node.rank)], rt.rank());
  EXPECT_TRUE(rt.is_colocal(rt.rank()));
  // Each node counted once: the node sizes of the node leaders add up to the job.
  int mine = node.rank == 0 ? node.size : 0, total = 0;
  MPI_Allreduce(&mine, &total, 1, MPI_INT, MPI_SUM, rt.comm());
  EXPECT_EQ(total, rt.size());
  EXPECT_GE(node.index, 0);
  EXPECT_LT(node.index, node.count);
  for (int wr : node.world_ranks) EXPECT_TRUE(rt.is_colocal(wr));
}

TEST(Runtime, JobIdIsTheSameOnEveryRank) {
  auto& rt = Runtime::current();
  char id[64] = {};
  std::snprintf(id, sizeof(id), "%s", rt.job_id().c_str());
  MPI_Bcast(id, sizeof(id), MPI_CHAR, 0, rt.comm());
  EXPECT_EQ(rt.job_id(), std::string(id));
  EXPECT_FALSE(rt.job_id().empty());
}

TEST(Runtime, TopologyFromHwloc) {
  const auto& t = Runtime::current().topology();
  EXPECT_GE(t.packages, 1);
  EXPECT_GE(t.cores, 1);
  EXPECT_GE(t.pus, t.cores);
  EXPECT_GE(t.numa_nodes, 1);
  EXPECT_FALSE(t.bound_cores.empty());
  EXPECT_NE(t.summary().find("cores"), std::string::npos);
  EXPECT_EQ(format_index_list({3, 0, 1, 2, 7}), "0-3,7");
}

TEST(Runtime, MpiErrorsBecomeExceptions) {
  auto& rt = Runtime::current();
  int x = 0;
  try {
    TESSERA_MPI(MPI_Send(&x, 1, MPI_INT, rt.size() + 5, 0, rt.comm()));
    FAIL() << "sending to a rank outside the job must throw";
  } catch (const MpiError& e) {
    EXPECT_NE(std::string(e.what()).find("MPI_Send"), std::string::npos) << e.what();
  }
}

TEST(Runtime, AgreeFailsOnEveryRankTogether) {
  auto& rt = Runtime::current();
  int bad = rt.size() - 1;
  try {
    agree(rt.comm(), [&] {
      if (rt.rank() == bad) throw RangeError("local failure");
    });
    FAIL() << "agree must throw on every rank";
  } catch (const RangeError& e) {  // the same category everywhere, the failing rank's message
    std::string want = rt.rank() == bad ? "local failure" : "on rank " + std::to_string(bad) + ": local failure";
    EXPECT_EQ(std::string(e.what()), want);
  }
  EXPECT_NO_THROW(agree(rt.comm(), [] {}));
}

// Tessera's polls switch Open MPI's own idle yield off for their scope and
// back after (a yield per empty MPI_Test gave a busy program a time slice
// each: 45 s for a 0.1 s test beside two busy loops). Read from Open MPI's
// exported flag; skipped with another MPI.
TEST(Runtime, PollsSwitchMpisOwnYieldOffForTheirScope) {
  auto* flag = static_cast<bool*>(::dlsym(RTLD_DEFAULT, "opal_progress_yield_when_idle"));
  using SetYield = bool (*)(bool);
  auto set = reinterpret_cast<SetYield>(::dlsym(RTLD_DEFAULT, "opal_progress_set_yield_when_idle"));
  if (!flag || !set) GTEST_SKIP() << "not Open MPI: no yield switch to test";
  const bool before = set(true);
  {
    MpiPollScope outer;
    EXPECT_FALSE(*flag);
    {
      MpiPollScope inner;
      EXPECT_FALSE(*flag);
    }
    EXPECT_FALSE(*flag) << "an inner scope turned the yield back on inside an outer one";
  }
  EXPECT_TRUE(*flag);
  set(false);
  { MpiPollScope off; }
  EXPECT_FALSE(*flag) << "a scope turned on a yield that was off";
  set(before);
  // A wait through the scope still completes.
  MPI_Request r;
  ASSERT_EQ(MPI_Ibarrier(MPI_COMM_WORLD, &r), MPI_SUCCESS);
  wait(r);
  EXPECT_EQ(*flag, before);
}
