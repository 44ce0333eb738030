// chunks/ checkpoint store: CRC32C against its published check value and the
// table version; round trips of spans, DistArrays, ChunkArrays and EdgeLists
// (resilience/edge_list.hpp) against
// values computed here; restart on another rank count (the Restart.* tests,
// driven by test_checkpoint_restart.sh); randomized corruption of every kind
// at both levels, each detected with latest() falling back to the older
// checkpoint; foreign checkpoints and types refused; a full file system
// (FullSpace.*, driven by test_checkpoint_full.sh on a 1 MiB tmpfs).
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <fcntl.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>

#include "../test_util.hpp"
#include "tessera/resilience/checkpoint.hpp"
#include "tessera/resilience/edge_list.hpp"
#include "tessera/runtime/collective.hpp"
#include "tessera/runtime/wait.hpp"
#include "tessera/storage/durable_file.hpp"

using namespace tessera;
using namespace tessera::chunks;
using namespace tessera::resilience;
using tessera::test::expect_error;
namespace fs = std::filesystem;

namespace {
Runtime& rt() { return Runtime::current(); }

struct Cell {  // the serialize path: sizes differ per chunk
  std::uint64_t id = 0;
  std::vector<double> data;
  std::string label;
  static constexpr const char* checkpoint_name = "test.Cell";
  template <class A>
  void serialize(A& a) {
    a(id, data, label);
  }
};
Cell make_cell(std::uint64_t id) {
  Cell c;
  c.id = id;
  c.data.resize(id % 7 + 1);
  for (std::size_t k = 0; k < c.data.size(); ++k) c.data[k] = static_cast<double>(id) * 1.5 + static_cast<double>(k);
  c.label = "cell-" + std::to_string(id);
  return c;
}
struct Other {  // another chunk type, trivially copyable
  std::uint64_t id = 0;
};

double span_value(std::uint64_t i) { return static_cast<double>(test::value_of(i)) * 0.5; }
// Rank r of P contributes r + 3 values: the global array is their concatenation.
std::uint64_t span_count(int r) { return static_cast<std::uint64_t>(r) + 3; }
std::uint64_t span_length(int ranks) {
  std::uint64_t n = 0;
  for (int r = 0; r < ranks; ++r) n += span_count(r);
  return n;
}
std::vector<double> my_span_values() {
  std::uint64_t begin = 0;
  for (int r = 0; r < rt().rank(); ++r) begin += span_count(r);
  std::vector<double> v(span_count(rt().rank()));
  for (std::size_t k = 0; k < v.size(); ++k) v[k] = span_value(begin + k);
  return v;
}
constexpr std::uint64_t kArrayLength = 1003;
constexpr std::size_t kChunks = 37;

// Writes the three kinds of piece at `step`; the array's values depend on step.
void write_all(Checkpoint& ck, std::uint64_t step, ChunkArray<Cell>& cells) {
  DistArray<std::uint64_t> a(rt(), kArrayLength);
  for (std::uint64_t i = a.local_begin(); i < a.local_end(); ++i) a.at(i) = test::value_of(i) + step;
  auto values = my_span_values();
  auto w = ck.begin(step);
  w.add("a", a);
  w.add("v", values);
  w.add("cells", cells);
  w.commit();
}

// Checks every kind of piece of `r` on this rank against the serial values.
void check_all(const CheckpointReader& r, std::uint64_t step, int writers) {
  EXPECT_EQ(r.info().ranks, writers);
  EXPECT_EQ(r.info().step, step);
  auto a = r.read_array<std::uint64_t>("a");
  ASSERT_EQ(a.size(), kArrayLength);
  for (std::uint64_t i = a.local_begin(); i < a.local_end(); ++i) ASSERT_EQ(a.at(i), test::value_of(i) + step) << i;
  ASSERT_EQ(r.length("v"), span_length(writers));
  auto block = Distribution::block(span_length(writers), rt().size());
  auto v = r.read_block<double>("v");
  ASSERT_EQ(v.size(), block.count(rt().rank()));
  for (std::size_t k = 0; k < v.size(); ++k) ASSERT_EQ(v[k], span_value(block.begin(rt().rank()) + k));
  auto cells = r.read_chunks<Cell>("cells");
  ASSERT_EQ(cells.size(), kChunks);
  EXPECT_EQ(cells.placement(), block_placement(kChunks, rt().size()));
  for (std::uint64_t id : cells.local_ids()) {
    Cell want = make_cell(id);
    const Cell& got = cells.local(id);
    ASSERT_EQ(got.id, want.id);
    ASSERT_EQ(got.data, want.data);
    ASSERT_EQ(got.label, want.label);
  }
  int mine = static_cast<int>(cells.local_ids().size());
  EXPECT_EQ(all_reduce(rt().comm(), mine, MPI_SUM), static_cast<int>(kChunks));
}

ChunkArray<Cell> make_cells() {
  // A placement that is not block: restore must not depend on it.
  Placement p(kChunks);
  for (std::size_t c = 0; c < kChunks; ++c) p[c] = static_cast<int>((c * 7) % static_cast<std::size_t>(rt().size()));
  return ChunkArray<Cell>(rt().comm(), kChunks, make_cell, p);
}

CheckpointOptions opts(std::string dir, Levels levels, std::string name, std::string node_dir = "", int keep = 1) {
  CheckpointOptions o;
  o.dir = std::move(dir);
  o.levels = levels;
  o.name = std::move(name);
  o.node_dir = std::move(node_dir);
  o.keep = keep;
  return o;
}

// A weighted directed graph with duplicates and self loops, edge e a pure
// function of e; each rank builds a block of the edges.
constexpr std::uint64_t kGraphVertices = 61, kGraphEdges = 500;
struct TestEdge {
  std::uint64_t u, v;
  double w;
  auto operator<=>(const TestEdge&) const = default;
};
TestEdge test_edge(std::uint64_t e) {
  std::uint64_t s = e * 7919 + 1;
  std::uint64_t u = splitmix64(s) % kGraphVertices, v = splitmix64(s) % kGraphVertices;
  return {u, v, static_cast<double>(e % 13) * 0.25};
}
graph::EdgeList make_graph() {
  auto d = Distribution::block(kGraphEdges, rt().size());
  graph::LocalEdges local;
  for (std::uint64_t e = d.begin(rt().rank()); e < d.end(rt().rank()); ++e) {
    auto t = test_edge(e);
    local.add(t.u, t.v, t.w);
  }
  return graph::EdgeList::build(rt(), kGraphVertices, true, std::move(local));
}
// The restored graph holds the serial sort of every edge, in order.
void check_graph(const graph::EdgeList& g) {
  EXPECT_EQ(g.vertices(), kGraphVertices);
  EXPECT_TRUE(g.directed());
  ASSERT_TRUE(g.weighted());
  auto local = g.local_copy();  // arcs from the rows, in stored order
  auto src = gather_to_root<std::uint64_t>(rt().comm(), local.src);
  auto dst = gather_to_root<std::uint64_t>(rt().comm(), local.dst);
  auto w = gather_to_root<double>(rt().comm(), g.local_weight());
  if (rt().rank() != 0) return;
  std::vector<TestEdge> want;
  for (std::uint64_t e = 0; e < kGraphEdges; ++e) want.push_back(test_edge(e));
  std::sort(want.begin(), want.end());
  ASSERT_EQ(src.size(), want.size());
  for (std::size_t k = 0; k < want.size(); ++k) ASSERT_EQ((TestEdge{src[k], dst[k], w[k]}), want[k]) << k;
}

std::vector<std::byte> read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::vector<char> c((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::vector<std::byte> out(c.size());
  // memcpy from an empty vector's null data() is undefined (UBSan flags it).
  if (!c.empty()) std::memcpy(out.data(), c.data(), c.size());
  return out;
}
void write_file(const std::string& path, std::span<const std::byte> bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
}
std::vector<std::string> files_in(const std::string& dir) {
  std::vector<std::string> out;
  for (const auto& e : fs::directory_iterator(dir)) out.push_back(e.path().filename().string());
  std::sort(out.begin(), out.end());
  return out;
}
std::vector<std::string> checkpoint_dirs(const std::string& level_dir) {
  std::vector<std::string> out;
  if (!fs::exists(level_dir)) return out;
  for (const auto& e : fs::directory_iterator(level_dir)) out.push_back(e.path().string());
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace

TEST(Crc32c, ThreeStreamsAndCopyEqualTheTableVersion) {
  // Lengths past the three interleaved 8 KiB streams, odd cuts, and the copy.
  test::SplitMix64 g(11);
  for (std::size_t n : {24575u, 24576u, 24577u, 49160u, 196608u, 300001u}) {
    std::vector<std::byte> data(n), copy(n);
    for (auto& b : data) b = static_cast<std::byte>(g.next());
    std::span<const std::byte> all(data);
    const std::uint32_t whole = crc32c_portable(all);
    EXPECT_EQ(crc32c(all), whole) << n;
    std::size_t cut = static_cast<std::size_t>(g.below(n));
    EXPECT_EQ(crc32c(all.subspan(cut), crc32c(all.first(cut))), whole) << n;
    EXPECT_EQ(crc32c_copy(copy.data(), all), whole) << n;
    EXPECT_EQ(copy, data) << n;
    for (std::size_t offset : {1u, 5u, 8u}) {  // a destination at any alignment, the bytes around it untouched
      std::vector<std::byte> out(n + 16, std::byte{0xA5});
      EXPECT_EQ(crc32c_copy(out.data() + offset, all), whole) << n << " at offset " << offset;
      EXPECT_TRUE(std::equal(data.begin(), data.end(), out.begin() + static_cast<std::ptrdiff_t>(offset))) << n;
      EXPECT_TRUE(std::all_of(out.begin(), out.begin() + static_cast<std::ptrdiff_t>(offset),
                              [](std::byte b) { return b == std::byte{0xA5}; }));
      EXPECT_TRUE(std::all_of(out.begin() + static_cast<std::ptrdiff_t>(offset + n), out.end(),
                              [](std::byte b) { return b == std::byte{0xA5}; }));
    }
    data[g.below(n)] ^= std::byte{4};
    EXPECT_NE(crc32c(std::span<const std::byte>(data)), whole) << n;
  }
}

TEST(Crc32c, CheckValueAndTableVersion) {
  // The published check value of CRC-32C (iSCSI, RFC 3720): "123456789".
  const char* check = "123456789";
  auto bytes = std::as_bytes(std::span<const char>(check, 9));
  EXPECT_EQ(crc32c_portable(bytes), 0xE3069283u);
  EXPECT_EQ(crc32c(bytes), 0xE3069283u);
  // The fast one equals the table one on random data, chained at random cuts.
  test::SplitMix64 g(7);
  for (int trial = 0; trial < 50; ++trial) {
    std::vector<std::byte> data(g.below(5000));
    for (auto& b : data) b = static_cast<std::byte>(g.next());
    std::size_t cut = static_cast<std::size_t>(g.below(data.size() + 1));
    std::span<const std::byte> all(data);
    std::uint32_t whole = crc32c_portable(all);
    EXPECT_EQ(crc32c(all), whole);
    EXPECT_EQ(crc32c(all.subspan(cut), crc32c(all.first(cut))), whole);
    if (!data.empty()) {  // a single flipped bit changes it
      data[g.below(data.size())] ^= std::byte{static_cast<unsigned char>(1u << g.below(8))};
      EXPECT_NE(crc32c(std::span<const std::byte>(data)), whole);
    }
  }
}

TEST(Checkpoint, RoundTripEveryKind) {
  test::ScratchDir dir(rt());
  auto cells = make_cells();
  for (Levels levels : {Levels(Level::node), Levels(Level::disk), Level::node | Level::disk}) {
    Checkpoint ck(rt(), opts(dir.path() + "/disk", levels, "roundtrip", dir.path() + "/node", 1));
    EXPECT_FALSE(ck.latest()) << "nothing written yet";
    write_all(ck, 5, cells);
    auto found = ck.latest();
    ASSERT_TRUE(found) << found.message();
    EXPECT_TRUE(found.skipped.empty()) << found.message();
    EXPECT_EQ(found.info->level, has_level(levels, Level::node) ? Level::node : Level::disk);
    auto r = ck.restore(*found.info);
    check_all(r, 5, rt().size());
    // Into an existing array of another distribution: its local range.
    std::vector<std::uint64_t> sizes(static_cast<std::size_t>(rt().size()), 0);
    sizes.back() = kArrayLength;
    DistArray<std::uint64_t> skewed(rt(), Distribution::weighted_block(sizes));
    r.read("a", skewed);
    for (std::uint64_t i = skewed.local_begin(); i < skewed.local_end(); ++i) ASSERT_EQ(skewed.at(i), test::value_of(i) + 5);
    auto middle = r.read<double>("v", 1, 2);
    EXPECT_EQ(middle, (std::vector<double>{span_value(1), span_value(2)}));
    ck.remove();
    EXPECT_FALSE(fs::exists(dir.path() + "/node/roundtrip.ckpt"));
    EXPECT_FALSE(fs::exists(dir.path() + "/disk/roundtrip.ckpt"));
    MPI_Barrier(rt().comm());  // before the next round creates them again
  }
}

// Buddies: another node whenever there is one, each node's ranks spread
// over the next node's; on one node the next rank.
TEST(Checkpoint, BuddyRanks) {
  auto group = [](std::vector<int> node_of_rank) {
    NodeGroup g;
    g.node_of_rank = node_of_rank;
    g.count = *std::max_element(node_of_rank.begin(), node_of_rank.end()) + 1;
    return g;
  };
  EXPECT_EQ(buddy_ranks(group({0, 0, 1, 1})), (std::vector<int>{2, 3, 0, 1}));
  EXPECT_EQ(buddy_ranks(group({0, 1, 0, 1})), (std::vector<int>{1, 0, 3, 2}));
  EXPECT_EQ(buddy_ranks(group({0, 0, 0, 1})), (std::vector<int>{3, 3, 3, 0}));
  EXPECT_EQ(buddy_ranks(group({0, 0, 0})), (std::vector<int>{1, 2, 0}));
  EXPECT_EQ(buddy_ranks(group({0})), (std::vector<int>{0}));
  test::SplitMix64 g(99);
  for (int trial = 0; trial < 100; ++trial) {
    std::vector<int> nodes(1 + g.below(12));
    int count = 1 + static_cast<int>(g.below(4));
    if (static_cast<int>(nodes.size()) < count) continue;
    for (std::size_t r = 0; r < nodes.size(); ++r)  // every node gets a rank
      nodes[r] = r < static_cast<std::size_t>(count) ? static_cast<int>(r)
                                                     : static_cast<int>(g.below(static_cast<std::uint64_t>(count)));
    auto b = buddy_ranks(group(nodes));
    for (std::size_t r = 0; r < nodes.size(); ++r) {
      ASSERT_GE(b[r], 0);
      ASSERT_LT(b[r], static_cast<int>(nodes.size()));
      if (count > 1) {
        EXPECT_NE(nodes[static_cast<std::size_t>(b[r])], nodes[r]) << "trial " << trial << " rank " << r;
      }
    }
  }
}

// Level 1 on one node is the node level (the buddy's directory is the same).
TEST(Checkpoint, BuddyLevelOnOneNode) {
  test::ScratchDir dir(rt());
  auto cells = make_cells();
  Checkpoint ck(rt(), opts("", Level::buddy, "buddy", dir.path()));
  write_all(ck, 4, cells);
  auto found = ck.latest();
  ASSERT_TRUE(found) << found.message();
  EXPECT_EQ(found.info->level, Level::buddy);
  check_all(ck.restore(*found.info), 4, rt().size());
}

// Level 1 across the emulated cluster, driven by tests/cluster/test_checkpoint_buddy.py:
// written on 2 or 3 nodes, read by the surviving nodes' ranks after node1 is
// lost. A level-2 checkpoint written beside it keeps no copy on another node.
TEST(Buddy, Write) {
  if (!std::getenv("TESSERA_CKPT_BUDDY")) GTEST_SKIP() << "run by test_checkpoint_buddy.py";
  const int nodes = rt().node().count;
  ASSERT_GE(nodes, 2) << "the buddy test runs on 2 or more nodes";
  auto cells = make_cells();
  Checkpoint ck(rt(), opts("", Level::buddy, "buddy"));
  write_all(ck, 6, cells);
  Checkpoint node_only(rt(), opts("", Level::node, "nodeonly"));
  write_all(node_only, 6, cells);
  if (rt().node().rank == 0) {
    // Each node holds its own ranks' files and their buddies': on 2 nodes
    // every file, on 3 or more two copies of each, one on another node.
    auto buddy = buddy_ranks(rt().node());
    auto st = Checkpoint::inspect(default_shared_dir(), "buddy");
    ASSERT_EQ(st.size(), 1u);
    if (nodes == 2) {
      EXPECT_EQ(st[0].problem, "") << "on node " << rt().node().index;
    }
    for (int r = 0; r < rt().size(); ++r) {
      const auto& node_of = rt().node().node_of_rank;
      const bool here = node_of[static_cast<std::size_t>(r)] == rt().node().index ||
                        node_of[static_cast<std::size_t>(buddy[static_cast<std::size_t>(r)])] == rt().node().index;
      char name[32];
      std::snprintf(name, sizeof name, "r%06d.data", r);
      EXPECT_EQ(fs::exists(st[0].info.path + "/" + name), here) << "node " << rt().node().index << ", rank " << r;
    }
  }
  barrier(rt().comm());  // every node looked before latest() completes them
  // A restore reads any rank's file (the span's pieces and the chunks are not
  // where a block puts them): latest() copies to each node what it lacks.
  auto found = ck.latest();
  ASSERT_TRUE(found) << found.message();
  EXPECT_EQ(found.info->level, Level::buddy);
  check_all(ck.restore(*found.info), 6, rt().size());
  if (rt().node().rank == 0) {
    auto st = Checkpoint::inspect(default_shared_dir(), "buddy");
    ASSERT_EQ(st.size(), 1u);
    EXPECT_EQ(st[0].problem, "") << "complete on node " << rt().node().index << " after latest()";
  }
}
// With async_drain the buddy copies travel after commit() returns: the
// checkpoint is committed at level 2 at once, at level 1 by finish_drain(),
// and the older checkpoint stays until then. Left pending here, as a job
// killed before its next commit leaves it.
TEST(Buddy, WriteAsync) {
  if (!std::getenv("TESSERA_CKPT_BUDDY")) GTEST_SKIP() << "run by test_checkpoint_buddy.py";
  auto cells = make_cells();
  auto o = opts("", Level::buddy, "buddyasync");
  o.async_drain = true;
  Checkpoint ck(rt(), o);
  auto on_node = [&] {
    std::vector<CheckpointStatus> st;
    if (rt().node().rank == 0) st = Checkpoint::inspect(default_shared_dir(), "buddyasync");
    return st;
  };
  const auto buddy = buddy_ranks(rt().node());
  const auto& node_of = rt().node().node_of_rank;
  auto has_file = [&](const std::string& path, int r) {
    char name[32];
    std::snprintf(name, sizeof name, "r%06d.data", r);
    return fs::exists(path + "/" + name);
  };
  for (std::uint64_t step : {5, 6}) {
    write_all(ck, step, cells);
    EXPECT_TRUE(ck.draining());
    ck.finish_drain();
    EXPECT_FALSE(ck.draining());
  }
  barrier(rt().comm());
  if (rt().node().rank == 0) {
    auto st = on_node();
    ASSERT_EQ(st.size(), 1u) << "step 5 pruned once step 6's copies were in";
    EXPECT_EQ(st[0].info.step, 6u);
    EXPECT_EQ(st[0].info.level, Level::buddy);
    for (int r = 0; r < rt().size(); ++r) {
      const bool here = node_of[static_cast<std::size_t>(r)] == rt().node().index ||
                        node_of[static_cast<std::size_t>(buddy[static_cast<std::size_t>(r)])] == rt().node().index;
      EXPECT_EQ(has_file(st[0].info.path, r), here) << "node " << rt().node().index << ", rank " << r;
    }
  }
  barrier(rt().comm());
  write_all(ck, 7, cells);  // pending from here on
  EXPECT_TRUE(ck.draining());
  Backoff backoff;
  while (!ck.poll()) backoff.idle();  // the bytes arrive; the files are renamed by finish_drain() only
  barrier(rt().comm());
  if (rt().node().rank == 0) {
    auto st = on_node();
    ASSERT_EQ(st.size(), 2u) << "step 6 kept while step 7's copies are in flight";
    EXPECT_EQ(st[0].info.step, 7u);
    EXPECT_EQ(st[0].info.level, Level::node) << "committed at level 2 until its buddy copies are in";
    EXPECT_EQ(st[1].info.step, 6u);
    EXPECT_EQ(st[1].info.level, Level::buddy);
    if (rt().node().count == 2) {  // on 3 or more, a node holds two thirds of the files
      EXPECT_EQ(st[1].problem, "");
    }
    for (int r = 0; r < rt().size(); ++r)
      EXPECT_EQ(has_file(st[0].info.path, r), node_of[static_cast<std::size_t>(r)] == rt().node().index)
          << "node " << rt().node().index << ", rank " << r;
  }
  barrier(rt().comm());
}

// A full /dev/shm on the buddy's node during a level-1 commit, with and
// without async_drain: the commit fails on every rank naming the bytes
// needed, leaves no temporary file, and the previous checkpoint restores at
// level 1 (every rank on its own node, run with one rank per node).
TEST(Buddy, FullAtTheBuddy) {
  if (!std::getenv("TESSERA_CKPT_BUDDY_FULL")) GTEST_SKIP() << "run by test_checkpoint_buddy.py";
  ASSERT_EQ(rt().node().count, rt().size()) << "one rank per node";
  constexpr std::size_t kWords = (std::size_t{8} << 20) / sizeof(std::uint64_t);  // 8 MiB per rank
  const std::string shm = default_shared_dir();
  for (bool async : {false, true}) {
    auto o = opts("", Level::buddy, async ? "fullasync" : "full");
    o.async_drain = async;
    Checkpoint ck(rt(), o);
    std::vector<std::uint64_t> v(kWords, 1);
    {
      auto w = ck.begin(1);
      w.add("v", std::span<const std::uint64_t>(v));
      w.commit();
    }
    ck.finish_drain();
    // Leave room for this rank's own new file and half of its buddy's.
    struct statvfs fs_info {};
    ASSERT_EQ(::statvfs(shm.c_str(), &fs_info), 0);
    const std::uint64_t free_bytes = static_cast<std::uint64_t>(fs_info.f_bavail) * fs_info.f_frsize;
    const std::uint64_t leave = kWords * sizeof(std::uint64_t) * 3 / 2;
    ASSERT_GT(free_bytes, leave);
    const std::string filler = shm + "/tessera-test-filler-" + std::to_string(::getpid());
    {
      FileDescriptor fd(::open(filler.c_str(), O_RDWR | O_CREAT | O_EXCL, 0600));
      ASSERT_GE(fd.get(), 0);
      ASSERT_EQ(::posix_fallocate(fd.get(), 0, static_cast<off_t>(free_bytes - leave)), 0);
    }
    barrier(rt().comm());
    std::fill(v.begin(), v.end(), 2);
    auto w = ck.begin(2);
    w.add("v", std::span<const std::uint64_t>(v));
    std::string message;
    try {
      w.commit();
    } catch (const Error& e) {
      message = e.what();
    }
    ::unlink(filler.c_str());
    EXPECT_NE(message.find("no room for"), std::string::npos) << "async " << async << ": " << message;
    EXPECT_FALSE(ck.draining());
    barrier(rt().comm());
    for (const auto& d : checkpoint_dirs(ck.level_dir(Level::node)))
      for (const auto& f : files_in(d)) EXPECT_EQ(f.find(".tmp"), std::string::npos) << d << "/" << f;
    auto found = ck.latest();
    ASSERT_TRUE(found) << found.message();
    EXPECT_EQ(found.info->step, 1u);
    EXPECT_EQ(found.info->level, Level::buddy);
    auto r = ck.restore(*found.info);
    const auto size = static_cast<std::uint64_t>(rt().size());
    const auto other = static_cast<std::uint64_t>((rt().rank() + 1) % rt().size());
    auto got = r.read<std::uint64_t>("v", other * kWords, kWords);  // a buddy's bytes too
    EXPECT_EQ(r.length("v"), size * kWords);
    EXPECT_TRUE(std::all_of(got.begin(), got.end(), [](std::uint64_t x) { return x == 1; }));
    ck.remove();
  }
}

TEST(Buddy, ReadAfterNodeLoss) {
  const char* writers = std::getenv("TESSERA_CKPT_BUDDY");
  if (!writers) GTEST_SKIP() << "run by test_checkpoint_buddy.py";
  Checkpoint ck(rt(), opts("", Level::buddy, "buddy"));
  auto found = ck.latest();
  ASSERT_TRUE(found) << found.message();
  EXPECT_EQ(found.info->level, Level::buddy);
  EXPECT_EQ(found.message(), "") << "the buddy checkpoint is complete once the survivors share what they hold";
  check_all(ck.restore(*found.info), 6, std::atoi(writers));
  ck.remove();
  // The asynchronous one: step 7's buddy copies never got in, so node1's
  // files of it died with node1; step 6's are on the survivors.
  auto o = opts("", Level::buddy, "buddyasync");
  o.async_drain = true;
  Checkpoint async(rt(), o);
  auto older = async.latest();
  ASSERT_TRUE(older) << older.message();
  EXPECT_EQ(older.info->step, 6u);
  EXPECT_EQ(older.info->level, Level::buddy);
  EXPECT_NE(older.message().find("checkpoint step 7"), std::string::npos) << older.message();
  EXPECT_NE(older.message().find("is missing"), std::string::npos) << older.message();
  check_all(async.restore(*older.info), 6, std::atoi(writers));
  async.remove();
  // Node1's level-2 files died with it: that checkpoint is refused, naming why.
  Checkpoint node_only(rt(), opts("", Level::node, "nodeonly"));
  auto lost = node_only.latest();
  EXPECT_FALSE(lost);
  EXPECT_NE(lost.message().find("is missing"), std::string::npos) << lost.message();
  EXPECT_NE(lost.message().find("level 2 keeps no copy on another node"), std::string::npos) << lost.message();
  node_only.remove();
}

// Chunks are serialized by commit(), straight into the file: one that grew
// after add() is refused on every rank, and the previous checkpoint stays.
TEST(Checkpoint, ChunkChangedAfterAddIsRefused) {
  test::ScratchDir dir(rt());
  auto cells = make_cells();
  Checkpoint ck(rt(), opts(dir.path(), Level::node, test::unique_name(rt(), "grown"), dir.path()));
  write_all(ck, 1, cells);
  auto w = ck.begin(2);
  w.add("cells", cells);
  const bool grows = !cells.local_ids().empty() && rt().rank() == 0;
  if (grows) cells.local(cells.local_ids().front()).data.push_back(1.0);
  expect_error<Error>([&] { w.commit(); }, "changed between add() and commit()");
  if (grows) cells.local(cells.local_ids().front()).data.pop_back();
  auto found = ck.latest();
  ASSERT_TRUE(found) << found.message();
  EXPECT_EQ(found.info->step, 1u);
  check_all(ck.restore(*found.info), 1, rt().size());
  ck.remove();
}

TEST(Checkpoint, EdgeListRoundTrip) {
  test::ScratchDir dir(rt());
  Checkpoint ck(rt(), opts(dir.path(), Level::disk, "graph"));
  auto g = make_graph();
  auto w = ck.begin(1);
  resilience::add_edge_list(w, "g", g);
  w.commit();
  auto found = ck.latest();
  ASSERT_TRUE(found) << found.message();
  auto r = ck.restore(*found.info);
  check_graph(resilience::read_edge_list(r, "g"));
  expect_error<RangeError>([&] { resilience::read_edge_list(r, "h"); }, "has no 'h.graph'");
}

TEST(Checkpoint, KeepsTheNewestAndDropsOlderOnlyAfterCommit) {
  test::ScratchDir dir(rt());
  auto cells = make_cells();
  for (int keep : {1, 2}) {
    Checkpoint ck(rt(), opts(dir.path(), Level::disk, "keep" + std::to_string(keep), "", keep));
    for (std::uint64_t step = 1; step <= 4; ++step) {
      write_all(ck, step, cells);
      MPI_Barrier(rt().comm());
      auto dirs = checkpoint_dirs(ck.level_dir(Level::disk));
      EXPECT_EQ(dirs.size(), std::min<std::size_t>(step, static_cast<std::size_t>(keep)));
      MPI_Barrier(rt().comm());  // a commit creates its directory before any collective
    }
    auto found = ck.latest();
    ASSERT_TRUE(found);
    EXPECT_EQ(found.info->step, 4u);
    // A relaunch continues the epochs: a new Checkpoint never reuses a name.
    Checkpoint again(rt(), opts(dir.path(), Level::disk, "keep" + std::to_string(keep), "", keep));
    write_all(again, 4, cells);
    auto newer = again.latest();
    ASSERT_TRUE(newer);
    EXPECT_GT(newer.info->epoch, found.info->epoch);
    check_all(again.restore(*newer.info), 4, rt().size());
    again.remove();
  }
}

TEST(Checkpoint, NodeLevelInDevShmByDefault) {
  std::string name = test::unique_name(rt(), "ckpt");
  Checkpoint ck(rt(), opts("", Level::node, name, "", 1));
  const std::string shm = default_shared_dir();  // $TESSERA_SHM_DIR or /dev/shm
  EXPECT_EQ(ck.level_dir(Level::node), shm + "/" + name + ".ckpt");
  auto cells = make_cells();
  write_all(ck, 1, cells);
  auto found = ck.latest();
  ASSERT_TRUE(found) << found.message();
  check_all(ck.restore(*found.info), 1, rt().size());
  if (rt().rank() == 0) {
    auto st = Checkpoint::inspect(shm, name);
    ASSERT_EQ(st.size(), 1u);
    EXPECT_EQ(st[0].problem, "");
  }
  ck.remove();
  EXPECT_FALSE(fs::exists(shm + "/" + name + ".ckpt"));
}

TEST(Checkpoint, BadOptionsAndPieces) {
  test::ScratchDir dir(rt());
  auto make = [&](CheckpointOptions o) { Checkpoint c(rt(), std::move(o)); };
  expect_error<ConfigError>([&] { make(opts(dir.path(), Level::disk, "a/b", "", 1)); }, "a/b");
  expect_error<ConfigError>([&] { make(opts(dir.path(), Levels(), "x", "", 1)); }, "no level");
  expect_error<ConfigError>([&] { make(opts("", Level::disk, "x", "", 1)); }, "directory");
  Checkpoint ck(rt(), opts(dir.path(), Level::disk, "bad", "", 1));
  std::vector<int> v{1, 2};
  {
    auto w = ck.begin(1);
    w.add("v", v);
    expect_error<ConfigError>([&] { w.add("v", v); }, "added twice");
  }
  if (rt().size() > 1) {  // ranks that disagree: every rank throws, nothing is left
    auto w = ck.begin(2);
    if (rt().rank() == 1)
      w.add("v", std::vector<double>{1.0});
    else
      w.add("v", v);
    expect_error<MismatchError>([&] { w.commit(); }, "'v'");
    EXPECT_FALSE(ck.latest());
    MPI_Barrier(rt().comm());
    EXPECT_TRUE(checkpoint_dirs(ck.level_dir(Level::disk)).empty());
  }
}

TEST(Checkpoint, ForeignCheckpointsAndTypesRefused) {
  test::ScratchDir dir(rt());
  auto cells = make_cells();
  Checkpoint a(rt(), opts(dir.path(), Level::disk, "progA", "", 1));
  write_all(a, 3, cells);
  auto found = a.latest();
  ASSERT_TRUE(found);
  auto r = a.restore(*found.info);
  expect_error<MismatchError>([&] { r.read_block<std::int32_t>("a"); }, "holds uint64 (8 bytes), not int32");
  expect_error<MismatchError>([&] { r.read_chunks<Other>("cells"); }, "test.Cell");
  expect_error<MismatchError>([&] { r.read_chunks<Cell>("a"); }, "not a chunk array");
  expect_error<RangeError>([&] { r.read_block<double>("nope"); }, "has no 'nope'");
  // progA's files under progB's name: refused, naming the program.
  MPI_Barrier(rt().comm());
  if (rt().rank() == 0) fs::copy(a.level_dir(Level::disk), dir.path() + "/progB.ckpt", fs::copy_options::recursive);
  MPI_Barrier(rt().comm());
  Checkpoint b(rt(), opts(dir.path(), Level::disk, "progB", "", 1));
  auto none = b.latest();
  EXPECT_FALSE(none);
  ASSERT_EQ(none.skipped.size(), 1u);
  EXPECT_NE(none.message().find("written by program 'progA', not by 'progB'"), std::string::npos) << none.message();
}

// A data file lost after latest(): the collective reads fail on every rank
// together (no rank is left waiting in the array's or graph's construction).
TEST(Checkpoint, CollectiveReadsFailTogether) {
  test::ScratchDir dir(rt());
  auto cells = make_cells();
  auto g = make_graph();
  Checkpoint ck(rt(), opts(dir.path(), Level::disk, "lost"));
  write_all(ck, 1, cells);
  auto found = ck.latest();
  ASSERT_TRUE(found);
  auto r = ck.restore(*found.info);
  MPI_Barrier(rt().comm());
  if (rt().rank() == 0) fs::remove(found.info->path + "/r000000.data");
  MPI_Barrier(rt().comm());
  expect_error<Error>([&] { r.read_chunks<Cell>("cells"); }, "r000000.data");
  expect_error<Error>([&] { r.read_array<std::uint64_t>("a"); }, "r000000.data");
  auto gr = ck.begin(2);
  resilience::add_edge_list(gr, "g", g);
  gr.commit();
  auto gf = ck.latest();
  ASSERT_TRUE(gf);
  auto grr = ck.restore(*gf.info);
  MPI_Barrier(rt().comm());
  if (rt().rank() == 0) fs::remove(gf.info->path + "/r000000.data");
  MPI_Barrier(rt().comm());
  expect_error<Error>([&] { resilience::read_edge_list(grr, "g"); }, "r000000.data");
}

// The disk level is a copy of the committed node level: losing the node's
// files (a lost node) leaves the disk copy of the same epoch.
TEST(Checkpoint, DiskCopyServesWhenNodeFilesAreGone) {
  test::ScratchDir dir(rt());
  auto cells = make_cells();
  Checkpoint ck(rt(), opts(dir.path() + "/disk", Level::node | Level::disk, "both", dir.path() + "/node", 1));
  write_all(ck, 9, cells);
  MPI_Barrier(rt().comm());
  if (rt().rank() == 0) fs::remove_all(ck.level_dir(Level::node));
  MPI_Barrier(rt().comm());
  auto found = ck.latest();
  ASSERT_TRUE(found);
  EXPECT_EQ(found.info->level, Level::disk);
  check_all(ck.restore(*found.info), 9, rt().size());
}

// The asynchronous drain: commit() returns with the node level committed and
// the disk copy in flight; finish_drain() commits the disk level.
TEST(Checkpoint, AsynchronousDrainToDisk) {
  test::ScratchDir dir(rt());
  auto cells = make_cells();
  auto o = opts(dir.path() + "/disk", Level::node | Level::disk, "drain", dir.path() + "/node");
  o.async_drain = true;
  Checkpoint ck(rt(), o);
  write_all(ck, 1, cells);
  EXPECT_TRUE(ck.draining());
  auto disk = checkpoint_dirs(ck.level_dir(Level::disk));  // the drain creates its directory: maybe not yet
  ASSERT_LE(disk.size(), 1u);
  for (const auto& d : disk)
    EXPECT_FALSE(fs::exists(d + "/manifest.json")) << "the disk level is committed by finish_drain only";
  ck.finish_drain();
  EXPECT_FALSE(ck.draining());
  MPI_Barrier(rt().comm());
  disk = checkpoint_dirs(ck.level_dir(Level::disk));
  ASSERT_EQ(disk.size(), 1u);
  EXPECT_TRUE(fs::exists(disk[0] + "/manifest.json"));
  // Two more commits: each finishes the previous drain first; keep = 1.
  write_all(ck, 2, cells);
  write_all(ck, 3, cells);
  ck.finish_drain();
  MPI_Barrier(rt().comm());
  if (rt().rank() == 0) {
    auto st = Checkpoint::inspect(dir.path() + "/disk", "drain");
    ASSERT_EQ(st.size(), 1u);
    EXPECT_EQ(st[0].info.step, 3u);
    EXPECT_EQ(st[0].info.level, Level::disk);
    EXPECT_EQ(st[0].problem, "");
    fs::remove_all(ck.level_dir(Level::node));  // the node's copy lost: the disk's serves
  }
  MPI_Barrier(rt().comm());
  auto found = ck.latest();
  ASSERT_TRUE(found) << found.message();
  EXPECT_EQ(found.info->level, Level::disk);
  check_all(ck.restore(*found.info), 3, rt().size());
}

// Randomized damage to the newest of two checkpoints, at each level: every
// trial is detected and latest() falls back to the older one.
TEST(Checkpoint, CorruptionDetectedAndOlderUsed) {
  test::ScratchDir dir(rt());
  auto cells = make_cells();
  const char* kinds[] = {"bitflip", "truncate", "delete", "torn", "stale", "mixed"};
  // 100 of each at one rank (tests/CMakeLists.txt registers this at 1 and 2
  // ranks); at more ranks 10, for the checks split over ranks (each trial
  // is then a few collectives, slow on a loaded machine). Under the
  // sanitizers, which check the same code 5 times slower, 20 at one rank.
#if defined(__SANITIZE_ADDRESS__)
  const int one_rank_trials = 20;
#else
  const int one_rank_trials = 100;
#endif
  const int trials = rt().size() == 1 ? one_rank_trials : 10;
  for (Level level : {Level::buddy, Level::node, Level::disk}) {
    Checkpoint ck(rt(), opts(dir.path() + "/disk", level, "damage", dir.path() + "/node", 2));
    write_all(ck, 1, cells);
    write_all(ck, 2, cells);
    MPI_Barrier(rt().comm());
    auto dirs = checkpoint_dirs(ck.level_dir(level));
    ASSERT_EQ(dirs.size(), 2u);
    const std::string old_dir = dirs[0], new_dir = dirs[1];
    // Only rank 0 damages files, so only it keeps copies: another rank
    // reading them here would race with rank 0's first rewrite (it once read
    // a file rank 0 had just truncated).
    std::vector<std::string> names;
    std::map<std::string, std::vector<std::byte>> pristine, older;
    if (rt().rank() == 0) {
      names = files_in(new_dir);
      for (const auto& n : names) pristine[n] = read_file(new_dir + "/" + n);
      for (const auto& n : files_in(old_dir)) older[n] = read_file(old_dir + "/" + n);
    }
    test::SplitMix64 g(1234 + static_cast<std::uint64_t>(level));
    for (const char* kind : kinds) {
      int detected = 0;
      for (int t = 0; t < trials; ++t) {
        std::string expect;  // a word the reason must contain
        if (rt().rank() == 0) {
          for (const auto& e : files_in(new_dir)) fs::remove(new_dir + "/" + e);
          for (const auto& [n, b] : pristine) write_file(new_dir + "/" + n, b);
          const std::string victim = names[g.below(names.size())];
          const std::string data_file = names[1 + g.below(names.size() - 1)];  // manifest.json sorts first
          std::string k = kind;
          if (k == "bitflip") {
            auto b = pristine[victim];
            b[g.below(b.size())] ^= std::byte{static_cast<unsigned char>(1u << g.below(8))};
            write_file(new_dir + "/" + victim, b);
          } else if (k == "truncate") {
            auto b = pristine[victim];
            b.resize(g.below(b.size()));
            write_file(new_dir + "/" + victim, b);
          } else if (k == "delete") {
            fs::remove(new_dir + "/" + data_file);
            expect = "missing";
          } else if (k == "torn") {  // killed mid-commit: temporaries, no manifest
            fs::remove(new_dir + "/manifest.json");
            if (g.below(2)) fs::rename(new_dir + "/" + data_file, new_dir + "/" + data_file + ".tmp-1-2-3");
            expect = "incomplete";
          } else if (k == "stale") {  // the older checkpoint's manifest in the newer one's place
            write_file(new_dir + "/manifest.json", older["manifest.json"]);
            expect = "stale manifest";
          } else {  // a data file of the older checkpoint among the newer one's
            write_file(new_dir + "/" + data_file, older[data_file]);
            expect = "mixed";
          }
        }
        expect = broadcast(rt().comm(), expect, 0);
        auto found = ck.latest();
        bool ok = found && found.info->step == 1 && found.skipped.size() == 1 &&
                  found.message().find("step 2") != std::string::npos &&
                  (expect.empty() || found.message().find(expect) != std::string::npos);
        if (ok) ++detected;
        else ADD_FAILURE() << kind << " trial " << t << " at level " << level_number(level) << ": " << found.message();
      }
      EXPECT_EQ(detected, trials) << kind << " at level " << level_number(level);
    }
    // Undamaged again: the newer one is used; the older restores correctly.
    MPI_Barrier(rt().comm());
    if (rt().rank() == 0) {
      for (const auto& e : files_in(new_dir)) fs::remove(new_dir + "/" + e);
      for (const auto& [n, b] : pristine) write_file(new_dir + "/" + n, b);
    }
    MPI_Barrier(rt().comm());
    auto found = ck.latest();
    ASSERT_TRUE(found);
    EXPECT_EQ(found.info->step, 2u);
    EXPECT_TRUE(found.skipped.empty()) << found.message();
    check_all(ck.restore(CheckpointInfo{level, old_dir, 1, 0, 0}), 1, rt().size());
    if (rt().rank() == 0) {  // the serial inspection agrees
      auto st = Checkpoint::inspect(level == Level::disk ? dir.path() + "/disk" : dir.path() + "/node", "damage");
      ASSERT_EQ(st.size(), 2u);
      EXPECT_EQ(st[0].info.step, 2u);
      EXPECT_EQ(st[0].problem, "");
      EXPECT_EQ(st[1].problem, "");
    }
    ck.remove();
  }
}

// Restart on another rank count, driven by test_checkpoint_restart.sh:
// TESSERA_CKPT_RESTART_DIR is shared; each writer rank count P writes under
// its own name, each reader rank count reads every P's.
TEST(Restart, Write) {
  const char* dir = std::getenv("TESSERA_CKPT_RESTART_DIR");
  if (!dir) GTEST_SKIP() << "run by test_checkpoint_restart.sh";
  auto cells = make_cells();
  Checkpoint ck(rt(), opts(dir, Level::disk, "restart" + std::to_string(rt().size()), "", 1));
  write_all(ck, 7, cells);
  auto g = make_graph();
  Checkpoint gk(rt(), opts(dir, Level::disk, "graph" + std::to_string(rt().size()), "", 1));
  auto w = gk.begin(7);
  resilience::add_edge_list(w, "g", g);
  w.commit();
}
TEST(Restart, Read) {
  const char* dir = std::getenv("TESSERA_CKPT_RESTART_DIR");
  const char* writers = std::getenv("TESSERA_CKPT_RESTART_WRITERS");
  if (!dir || !writers) GTEST_SKIP() << "run by test_checkpoint_restart.sh";
  std::string list = writers;
  for (std::size_t at = 0; at < list.size();) {
    std::size_t end = list.find(',', at);
    if (end == std::string::npos) end = list.size();
    int p = std::stoi(list.substr(at, end - at));
    at = end + 1;
    Checkpoint ck(rt(), opts(dir, Level::disk, "restart" + std::to_string(p), "", 1));
    auto found = ck.latest();
    ASSERT_TRUE(found) << "P=" << p << ": " << found.message();
    SCOPED_TRACE("written at " + std::to_string(p) + " ranks, read at " + std::to_string(rt().size()));
    check_all(ck.restore(*found.info), 7, p);
    Checkpoint gk(rt(), opts(dir, Level::disk, "graph" + std::to_string(p), "", 1));
    auto g = gk.latest();
    ASSERT_TRUE(g) << g.message();
    check_graph(resilience::read_edge_list(gk.restore(*g.info), "g"));
  }
}

// A rank killed halfway through a node-level commit into the reused spare,
// driven by test_checkpoint_spare_kill.sh (TESSERA_CKPT_SPARE_DIR: the node
// directory). Write runs under the supervisor with the fault spare:1, so
// step 3's commit (the first to take over a spare: step 1's files) is torn;
// Read, at any rank count, finds step 2 and restores it bit for bit.
constexpr std::size_t kSpareWords = 1 << 14;  // per writing rank
std::uint64_t spare_value(std::uint64_t i, std::uint64_t step) { return test::value_of(i) * (step + 1) + step; }
CheckpointOptions spare_opts(const char* dir) { return opts("", Level::node, "sparekill", dir, 1); }
TEST(SpareKill, Write) {
  const char* dir = std::getenv("TESSERA_CKPT_SPARE_DIR");
  if (!dir) GTEST_SKIP() << "run by test_checkpoint_spare_kill.sh";
  Checkpoint ck(rt(), spare_opts(dir));
  const std::uint64_t begin = kSpareWords * static_cast<std::uint64_t>(rt().rank());
  for (std::uint64_t step = 1; step <= 4; ++step) {
    std::vector<std::uint64_t> v(kSpareWords);
    for (std::size_t k = 0; k < v.size(); ++k) v[k] = spare_value(begin + k, step);
    auto w = ck.begin(step);
    w.add("v", v);
    w.commit();
  }
  ADD_FAILURE() << "no rank was killed in a commit into the spare (TESSERA_FAULTS=" << (std::getenv("TESSERA_FAULTS") ? std::getenv("TESSERA_FAULTS") : "") << ")";
}
TEST(SpareKill, Read) {
  const char* dir = std::getenv("TESSERA_CKPT_SPARE_DIR");
  const char* writers = std::getenv("TESSERA_CKPT_SPARE_WRITERS");
  if (!dir || !writers) GTEST_SKIP() << "run by test_checkpoint_spare_kill.sh";
  const int p = std::atoi(writers);
  Checkpoint ck(rt(), spare_opts(dir));
  // The torn step 3 holds the killed rank's half-written file under its
  // temporary name: step 1's spare file, taken over.
  const std::string level = ck.level_dir(Level::node);
  std::string torn;
  for (const auto& d : checkpoint_dirs(level))
    if (d.find("/s000000000003-") != std::string::npos) torn = d;
  ASSERT_FALSE(torn.empty()) << "no directory of the torn step 3 in " << level;
  EXPECT_FALSE(fs::exists(torn + "/manifest.json"));
  int temporaries = 0;
  for (const auto& f : files_in(torn)) temporaries += f.find(".tmp") != std::string::npos ? 1 : 0;
  EXPECT_GE(temporaries, 1) << "the killed rank's half-written file";
  auto found = ck.latest();
  ASSERT_TRUE(found) << found.message();
  EXPECT_EQ(found.info->step, 2u);
  EXPECT_NE(found.message().find("step 3"), std::string::npos) << found.message();
  EXPECT_NE(found.message().find("incomplete"), std::string::npos) << found.message();
  auto r = ck.restore(*found.info);
  EXPECT_EQ(r.info().ranks, p);
  const std::uint64_t length = kSpareWords * static_cast<std::uint64_t>(p);
  ASSERT_EQ(r.length("v"), length);
  auto block = Distribution::block(length, rt().size());
  auto got = r.read_block<std::uint64_t>("v");
  ASSERT_EQ(got.size(), block.count(rt().rank()));
  for (std::size_t k = 0; k < got.size(); ++k) ASSERT_EQ(got[k], spare_value(block.begin(rt().rank()) + k, 2)) << k;
  if (!std::getenv("TESSERA_CKPT_SPARE_FINISH")) return;
  // The job goes on: its next commit prunes the torn directory, and the
  // checkpoints are removed at the end, leaving nothing.
  std::vector<std::uint64_t> v(got.size());
  for (std::size_t k = 0; k < v.size(); ++k) v[k] = spare_value(block.begin(rt().rank()) + k, 3);
  auto w = ck.begin(3);
  w.add("v", v);
  w.commit();
  MPI_Barrier(rt().comm());
  EXPECT_FALSE(fs::exists(torn)) << "pruned (or become the spare) by the newer commit";
  auto newer = ck.latest();
  ASSERT_TRUE(newer) << newer.message();
  EXPECT_EQ(newer.info->step, 3u);
  EXPECT_EQ(ck.restore(*newer.info).read_block<std::uint64_t>("v"), v);
  ck.remove();
  EXPECT_FALSE(fs::exists(level));
}

// A full file system during a checkpoint, driven by test_checkpoint_full.sh
// (TESSERA_CKPT_SMALL_DIR: a 1 MiB tmpfs): an Error naming the directory
// and the bytes, no temporary left, the previous checkpoint still restores.
TEST(FullSpace, PreviousCheckpointSurvives) {
  const char* small = std::getenv("TESSERA_CKPT_SMALL_DIR");
  if (!small) GTEST_SKIP() << "run by test_checkpoint_full.sh";
  auto cells = make_cells();
  Checkpoint ck(rt(), opts("", Level::node, "full", small, 1));
  write_all(ck, 1, cells);
  std::vector<std::uint64_t> big((std::size_t{2} << 20) / sizeof(std::uint64_t) / static_cast<std::size_t>(rt().size()) + 1, 42);
  auto w = ck.begin(2);
  w.add("big", big);
  try {
    w.commit();
    ADD_FAILURE() << "a 2 MiB checkpoint fit in a 1 MiB file system";
  } catch (const SystemError& e) {
    std::string m = e.what();
    EXPECT_NE(m.find("needs"), std::string::npos) << m;
    EXPECT_NE(m.find(ck.level_dir(Level::node)), std::string::npos) << m;
  } catch (const Error& e) {  // another rank's failure, rethrown here
    EXPECT_NE(std::string(e.what()).find("needs"), std::string::npos) << e.what();
  }
  MPI_Barrier(rt().comm());
  auto dirs = checkpoint_dirs(ck.level_dir(Level::node));
  ASSERT_EQ(dirs.size(), 1u);
  for (const auto& f : files_in(dirs[0])) EXPECT_EQ(f.find(".tmp"), std::string::npos) << f;
  auto found = ck.latest();
  ASSERT_TRUE(found) << found.message();
  EXPECT_EQ(found.info->step, 1u);
  check_all(ck.restore(*found.info), 1, rt().size());
  // Room again (the big piece smaller): the next checkpoint commits.
  auto w2 = ck.begin(3);
  w2.add("small", std::vector<std::uint64_t>(16, 1));
  w2.commit();
  auto newer = ck.latest();
  ASSERT_TRUE(newer) << newer.message();
  EXPECT_EQ(newer.info->step, 3u);
  ck.remove();
}

// A full file system while a commit grows the reused spare: the spare of
// step 2 is taken over by step 4 (its inode), which does not fit; the error
// names the bytes, no temporary is left, step 3 restores bit for bit and a
// commit that fits goes on.
TEST(FullSpace, WhileGrowingTheSpare) {
  const char* small = std::getenv("TESSERA_CKPT_SMALL_DIR");
  if (!small) GTEST_SKIP() << "run by test_checkpoint_full.sh";
  Checkpoint ck(rt(), opts("", Level::node, "fullspare", small, 1));
  auto values = [](std::uint64_t step) {
    std::vector<std::uint64_t> v(4096);
    for (std::size_t k = 0; k < v.size(); ++k) v[k] = test::value_of(k + 4096 * static_cast<std::uint64_t>(rt().rank())) ^ step;
    return v;
  };
  const std::string mine = ck.level_dir(Level::node) + "/spare/r" + std::string(6 - std::to_string(rt().rank()).size(), '0') +
                           std::to_string(rt().rank()) + ".data";
  auto inode = [](const std::string& path) {
    struct stat st {};
    return ::stat(path.c_str(), &st) == 0 ? st.st_ino : ino_t{0};
  };
  for (std::uint64_t step = 1; step <= 3; ++step) {
    const ino_t spare = inode(mine);
    auto w = ck.begin(step);
    auto v = values(step);
    w.add("v", v);
    w.commit();
    if (step == 3) {  // written into step 1's files: the spare path is the one under test
      auto found = ck.latest();
      ASSERT_TRUE(found) << found.message();
      ASSERT_NE(spare, ino_t{0});
      EXPECT_EQ(inode(found.info->path + "/" + fs::path(mine).filename().string()), spare);
    }
  }
  const ino_t spare = inode(mine);
  ASSERT_NE(spare, ino_t{0}) << "step 2's files are the spare";
  std::vector<std::uint64_t> big((std::size_t{2} << 20) / sizeof(std::uint64_t) / static_cast<std::size_t>(rt().size()) + 1, 9);
  auto w = ck.begin(4);
  w.add("v", big);
  try {
    w.commit();
    ADD_FAILURE() << "a 2 MiB checkpoint fit in a 1 MiB file system";
  } catch (const SystemError& e) {
    std::string m = e.what();
    EXPECT_NE(m.find("no room for"), std::string::npos) << m;
    EXPECT_NE(m.find("bytes free"), std::string::npos) << m;
  } catch (const Error& e) {  // another rank's failure, rethrown here
    EXPECT_NE(std::string(e.what()).find("no room for"), std::string::npos) << e.what();
  }
  MPI_Barrier(rt().comm());
  std::vector<std::string> dirs;
  for (const auto& d : checkpoint_dirs(ck.level_dir(Level::node)))
    if (fs::path(d).filename() != "spare") dirs.push_back(d);
  ASSERT_EQ(dirs.size(), 1u);
  EXPECT_NE(dirs[0].find("s000000000003"), std::string::npos) << dirs[0];
  for (const auto& f : files_in(dirs[0])) EXPECT_EQ(f.find(".tmp"), std::string::npos) << f;
  auto found = ck.latest();
  ASSERT_TRUE(found) << found.message();
  EXPECT_EQ(found.info->step, 3u);
  auto r = ck.restore(*found.info);
  const std::uint64_t begin = 4096 * static_cast<std::uint64_t>(rt().rank());
  auto got = r.read<std::uint64_t>("v", begin, 4096);
  EXPECT_EQ(got, values(3));
  auto w5 = ck.begin(5);
  auto v5 = values(5);
  w5.add("v", v5);
  w5.commit();
  auto newer = ck.latest();
  ASSERT_TRUE(newer) << newer.message();
  EXPECT_EQ(newer.info->step, 5u);
  EXPECT_EQ(ck.restore(*newer.info).read<std::uint64_t>("v", begin, 4096), v5);
  ck.remove();
}

// The disk full during an asynchronous drain: commit() succeeds (the node
// level is elsewhere), finish_drain() is the error, the incomplete disk
// checkpoint is removed and the previous disk one stays.
TEST(FullSpace, AsynchronousDrainFails) {
  const char* small = std::getenv("TESSERA_CKPT_SMALL_DIR");
  if (!small) GTEST_SKIP() << "run by test_checkpoint_full.sh";
  test::ScratchDir node(rt());
  auto cells = make_cells();
  auto o = opts(small, Level::node | Level::disk, "fulldrain", node.path());
  o.async_drain = true;
  Checkpoint ck(rt(), o);
  write_all(ck, 1, cells);
  ck.finish_drain();
  std::vector<std::uint64_t> big((std::size_t{2} << 20) / sizeof(std::uint64_t) / static_cast<std::size_t>(rt().size()) + 1, 7);
  auto w = ck.begin(2);
  w.add("big", big);
  w.commit();
  expect_error<Error>([&] { ck.finish_drain(); }, "needs");
  MPI_Barrier(rt().comm());
  auto disk = checkpoint_dirs(ck.level_dir(Level::disk));
  ASSERT_EQ(disk.size(), 1u);
  EXPECT_NE(disk[0].find("s000000000001"), std::string::npos) << disk[0];
  for (const auto& f : files_in(disk[0])) EXPECT_EQ(f.find(".tmp"), std::string::npos) << f;
  auto found = ck.latest();
  ASSERT_TRUE(found) << found.message();
  EXPECT_EQ(found.info->step, 2u);
  EXPECT_EQ(found.info->level, Level::node);
  auto r = ck.restore(*found.info);
  EXPECT_EQ(r.length("big"), big.size() * static_cast<std::size_t>(rt().size()));
  auto got = r.read_block<std::uint64_t>("big");
  EXPECT_EQ(got, std::vector<std::uint64_t>(got.size(), 7));
  ck.remove();
}
