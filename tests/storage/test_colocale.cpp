// Co-locale segments (issue 13): with the runtime's co-locale segments on, an
// array created with default storage lives in node-shared memory (a memfd
// per rank), co-located ranks map each other's parts, and the aggregators'
// same-node path serves it; explicit Heap stays Heap. Checked here: the mode
// switch, the mappings, gather / scatter / update against serial references
// with the exchange's record counts (nothing travels to a co-locale), one
// copy of the bytes (the runtime's memory meters), and that no file or
// mapping outlives the array.
#include <gtest/gtest.h>
#include <linux/mempolicy.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <stdexcept>

#include "../test_util.hpp"
#include "tessera/comm/bulk_access.hpp"
#include "tessera/runtime/collective.hpp"
#include "tessera/runtime/launch.hpp"
#include "tessera/runtime/memory.hpp"
#include "tessera/runtime/topology.hpp"
#include "tessera/runtime/wait.hpp"

using namespace tessera;

namespace {

// Turns the runtime's co-locale segments on (or off) for one test.
class ColocaleMode {
 public:
  ColocaleMode(Runtime& rt, bool on) : rt_(rt), was_(rt.colocale_segments()) { rt.set_colocale_segments(on); }
  ~ColocaleMode() { rt_.set_colocale_segments(was_); }
  ColocaleMode(const ColocaleMode&) = delete;
  ColocaleMode& operator=(const ColocaleMode&) = delete;

 private:
  Runtime& rt_;
  bool was_;
};

void fill(DistArray<std::uint64_t>& a) {
  for (std::uint64_t i = a.local_begin(); i < a.local_end(); ++i) a.at(i) = test::value_of(i);
}

// Uneven shares, one rank with none: rank r's uniform indices into [0, n).
std::vector<std::uint64_t> indices_of(int r, std::uint64_t n, std::uint64_t salt) {
  test::SplitMix64 g(salt * 1000003 + static_cast<std::uint64_t>(r));
  std::vector<std::uint64_t> out(r == 1 ? 0 : 2000 + 300 * static_cast<std::size_t>(r));
  for (auto& i : out) i = g.below(n);
  return out;
}

// Records the exchange must carry for `indices`: those whose owner is neither
// this rank nor a co-locale whose part is mapped here.
template <class T>
std::uint64_t records_expected(const DistArray<T>& a, std::span<const std::uint64_t> indices) {
  std::uint64_t n = 0;
  for (std::uint64_t i : indices) {
    int owner = a.owner(i);
    n += owner != a.runtime().rank() && a.colocal_data(owner) == nullptr;
  }
  return n;
}
std::uint64_t owned_elsewhere(const Map& map, std::span<const std::uint64_t> indices) {
  std::uint64_t n = 0;
  for (std::uint64_t i : indices) n += !map.is_local(i);
  return n;
}

AggregationOptions direct_routing() {
  AggregationOptions o;
  o.routing = AggregationRouting::direct;  // records_sent then counts records, not forwards
  o.same_node_direct = 1;
  return o;
}

// Lines of /proc/self/maps that contain `needle`.
int mappings_named(const std::string& needle) {
  std::ifstream in("/proc/self/maps");
  std::string line;
  int n = 0;
  while (std::getline(in, line)) n += line.find(needle) != std::string::npos;
  return n;
}

// Entries of the shared-memory directory whose name contains `needle`.
int shared_dir_entries(const std::string& needle) {
  int n = 0;
  for (const auto& e : std::filesystem::directory_iterator(default_shared_dir()))
    n += e.path().filename().string().find(needle) != std::string::npos;
  return n;
}

}  // namespace

TEST(ColocaleStorage, DefaultStorageFollowsTheRuntimeModeAndExplicitKindsStay) {
  auto& rt = Runtime::current();
  {
    ColocaleMode on(rt, true);
    EXPECT_EQ(DistArray<int>(rt, 10).storage_kind(), StorageKind::colocale);
    EXPECT_EQ(DistArray<int>(rt, 10, StorageOptions::heap()).storage_kind(), StorageKind::heap);
    EXPECT_EQ(DistArray<int>(rt, 10, StorageOptions::shared()).storage_kind(), StorageKind::shared);
    EXPECT_TRUE(DistArray<int>(rt, 10).metadata_path().empty()) << "a co-locale segment is not published";
  }
  {
    ColocaleMode off(rt, false);
    EXPECT_EQ(DistArray<int>(rt, 10).storage_kind(), StorageKind::heap);
    EXPECT_EQ(DistArray<int>(rt, 10, StorageOptions::colocale()).storage_kind(), StorageKind::colocale);
  }
  EXPECT_STREQ(storage_kind_name(StorageKind::colocale), "colocale");
}

TEST(ColocaleStorage, CoLocatedRanksReadAndWriteEachOthersParts) {
  auto& rt = Runtime::current();
  ColocaleMode on(rt, true);
  for (std::uint64_t n : {std::uint64_t{0}, std::uint64_t{3}, std::uint64_t{1001}}) {  // 3: empty parts at 4 ranks
    DistArray<std::uint64_t> a(rt, n);
    for (auto v : a.local()) ASSERT_EQ(v, 0u) << "co-locale segments start zeroed";
    fill(a);
    barrier(rt.comm());
    for (int peer : rt.node().world_ranks) {
      const std::uint64_t count = a.distribution().count(peer);
      std::uint64_t* p = a.colocal_data(peer);
      if (peer == rt.rank() || count == 0) {
        EXPECT_EQ(p, nullptr) << "self and empty parts are not mapped";
        continue;
      }
      ASSERT_NE(p, nullptr) << "co-located rank " << peer << " not mapped (n " << n << ")";
      for (std::uint64_t k = 0; k < count; ++k) ASSERT_EQ(p[k], test::value_of(a.distribution().begin(peer) + k));
    }
    barrier(rt.comm());
    // The node's lowest rank writes into every co-locale's part; the owners see it.
    if (rt.rank() == rt.node().world_ranks.front())
      for (int peer : rt.node().world_ranks)
        if (std::uint64_t* p = a.colocal_data(peer))
          for (std::uint64_t k = 0; k < a.distribution().count(peer); ++k) p[k] += 1;
    barrier(rt.comm());
    const bool written = rt.rank() != rt.node().world_ranks.front();
    for (std::uint64_t i = a.local_begin(); i < a.local_end(); ++i)
      ASSERT_EQ(a.at(i), test::value_of(i) + (written ? 1 : 0)) << "index " << i;
    barrier(rt.comm());
  }
  DistArray<std::uint64_t> heap(rt, 100, StorageOptions::heap());
  for (int r = 0; r < rt.size(); ++r) EXPECT_EQ(heap.colocal_data(r), nullptr);
}

// Gather, scatter and update on a default-storage array in co-locale mode
// give the serial answer and send no record to a co-locale; the same on an
// explicit Heap array sends every record that leaves the rank.
TEST(ColocaleStorage, GatherScatterUpdateTakeTheSameNodePath) {
  auto& rt = Runtime::current();
  ColocaleMode on(rt, true);
  const std::uint64_t n = 10007;
  const int P = rt.size(), me = rt.rank();
  for (bool heap : {false, true}) {
    SCOPED_TRACE(heap ? "explicit Heap" : "default storage, co-locale mode");
    const StorageOptions storage = heap ? StorageOptions::heap() : StorageOptions{};
    auto expect_records = [&](const auto& array, std::span<const std::uint64_t> idx,
                              const comm::RecordExchange::Stats& sent) {
      if (heap) {
        EXPECT_EQ(sent.records_sent, owned_elsewhere(array.map(), idx)) << "Heap: every access leaving the rank is a record";
        if (me == 0 && P > 1) {
          EXPECT_GT(sent.batches_sent, 0u);
        }
      } else {
        for (int peer : rt.node().world_ranks)
          if (peer != me && array.distribution().count(peer) > 0) {
            EXPECT_NE(array.colocal_data(peer), nullptr) << "co-locale " << peer << " not mapped";
          }
        EXPECT_EQ(sent.records_sent, records_expected(array, idx)) << "records went to a co-locale";
        if (rt.node().count == 1) {
          EXPECT_EQ(sent.batches_sent, 0u) << "one node: no batch may travel";
        }
      }
    };

    // gather: out[k] = table[idx[k]]
    DistArray<std::uint64_t> table(rt, n, storage);
    ASSERT_EQ(table.storage_kind(), heap ? StorageKind::heap : StorageKind::colocale);
    fill(table);
    barrier(rt.comm());
    auto idx = indices_of(me, n, 1);
    std::vector<std::uint64_t> out(idx.size(), 0);
    {
      SrcAggregator<std::uint64_t> reads(table, direct_routing());
      for (std::size_t k = 0; k < idx.size(); ++k) reads.get(idx[k], out[k]);
      reads.flush();
      expect_records(table, idx, reads.exchange().stats());
    }
    for (std::size_t k = 0; k < idx.size(); ++k) ASSERT_EQ(out[k], test::value_of(idx[k])) << "k " << k;
    EXPECT_EQ(gather(table, idx, direct_routing()), out);

    // scatter: a permutation split over the ranks writes every element once.
    DistArray<std::uint64_t> target(rt, n, storage);
    std::vector<std::uint64_t> where, what;
    for (std::uint64_t k = static_cast<std::uint64_t>(me); k < n; k += static_cast<std::uint64_t>(P)) {
      where.push_back((k * 7919) % n);
      what.push_back(test::value_of(where.back()) ^ 0x5a5a);
    }
    {
      DstAggregator<std::uint64_t> writes(target, direct_routing());
      for (std::size_t k = 0; k < where.size(); ++k) writes.put(where[k], what[k]);
      writes.flush();
      expect_records(target, where, writes.exchange().stats());
    }
    for (std::uint64_t i = target.local_begin(); i < target.local_end(); ++i)
      ASSERT_EQ(target.at(i), test::value_of(i) ^ 0x5a5a) << "index " << i;
    scatter(target, where, std::vector<std::uint64_t>(where.size(), 7), direct_routing());
    for (auto v : target.local()) ASSERT_EQ(v, 7u);

    // update: sums with duplicates, against every rank's contributions summed serially.
    DistArray<std::int64_t> sums(rt, n, storage);
    auto ui = indices_of(me, n, 2);
    std::vector<std::int64_t> uv(ui.size());
    for (std::size_t k = 0; k < ui.size(); ++k) uv[k] = static_cast<std::int64_t>(ui[k] % 13) - 6;
    {
      UpdateAggregator<std::int64_t> adds(sums, direct_routing());
      for (std::size_t k = 0; k < ui.size(); ++k) adds.update(ui[k], uv[k]);
      adds.flush();
      expect_records(sums, ui, adds.exchange().stats());
    }
    update(sums, ui, uv, ops::Add{}, direct_routing());  // the bulk form: the same again
    std::vector<std::int64_t> reference(n, 0);
    for (int r = 0; r < P; ++r)
      for (std::uint64_t i : indices_of(r, n, 2)) reference[i] += 2 * (static_cast<std::int64_t>(i % 13) - 6);
    for (std::uint64_t i = sums.local_begin(); i < sums.local_end(); ++i)
      ASSERT_EQ(sums.at(i), reference[i]) << "index " << i;
  }
}

// One copy: filling a default-storage array in co-locale mode, with every
// rank reading every co-locale's part, does not grow the ranks' anonymous
// memory, and the node's proportional shared memory grows by the array's
// bytes once (not once per rank mapping it). A Heap array of the same size
// grows anonymous memory by its size: the meter sees arrays when they are there.
TEST(ColocaleStorage, TheArrayBytesAreCountedOnce) {
  auto& rt = Runtime::current();
  ColocaleMode on(rt, true);
  const std::uint64_t n = std::uint64_t{4} << 20;  // 32 MiB of uint64 over the job
  const double bytes = static_cast<double>(n * sizeof(std::uint64_t));
  auto job_sum = [&](std::uint64_t v) { return static_cast<double>(all_reduce<std::uint64_t>(rt.comm(), v, MPI_SUM)); };

  barrier(rt.comm());
  const double anon_before = job_sum(anonymous_memory_bytes()), pss_before = job_sum(shared_memory_pss_bytes());
  double anon_after = 0, pss_after = 0;
  {
    DistArray<std::uint64_t> a(rt, n);
    ASSERT_EQ(a.storage_kind(), StorageKind::colocale);
    fill(a);
    barrier(rt.comm());
    std::uint64_t read = 0, want = 0;
    for (int peer : rt.node().world_ranks)
      if (const std::uint64_t* p = a.colocal_data(peer))
        for (std::uint64_t k = 0; k < a.distribution().count(peer); ++k) {
          read += p[k];
          want += test::value_of(a.distribution().begin(peer) + k);
        }
    EXPECT_EQ(read, want);
    barrier(rt.comm());
    anon_after = job_sum(anonymous_memory_bytes());
    pss_after = job_sum(shared_memory_pss_bytes());
  }
  if (rt.rank() == 0)
    std::printf("co-locale array of %.1f MiB over %d ranks: anonymous memory %+.1f MiB, proportional shared memory %+.1f MiB\n",
                bytes / (1 << 20), rt.size(), (anon_after - anon_before) / (1 << 20), (pss_after - pss_before) / (1 << 20));
  EXPECT_LT(anon_after - anon_before, 0.1 * bytes) << "anonymous memory grew with a co-locale array";
  EXPECT_GT(pss_after - pss_before, 0.9 * bytes) << "the array's pages are not all resident";
  EXPECT_LT(pss_after - pss_before, 1.1 * bytes) << "shared pages counted more than once";

  const double heap_before = job_sum(anonymous_memory_bytes());
  DistArray<std::uint64_t> heap(rt, n, StorageOptions::heap());
  fill(heap);
  const double heap_growth = job_sum(anonymous_memory_bytes()) - heap_before;
  if (rt.rank() == 0) std::printf("Heap array of the same size: anonymous memory %+.1f MiB\n", heap_growth / (1 << 20));
  EXPECT_GT(heap_growth, 0.9 * bytes) << "the meter misses a Heap array";
}

// Normal destruction and unwinding leave no mapping; no file ever appears in
// the shared-memory directory (the crash case: test_colocale_segments.sh).
TEST(ColocaleStorage, NothingOutlivesTheArray) {
  auto& rt = Runtime::current();
  ColocaleMode on(rt, true);
  const std::string tag = "memfd:tessera-" + rt.job_id() + "-c";
  ASSERT_EQ(mappings_named(tag), 0) << "an earlier test left a co-locale mapping";
  {
    DistArray<std::uint64_t> a(rt, 4000);
    fill(a);
    int mapped_peers = 0;
    for (int peer : rt.node().world_ranks) mapped_peers += a.colocal_data(peer) != nullptr;
    EXPECT_EQ(mappings_named(tag), 1 + mapped_peers) << "its own part and each co-locale's";
    EXPECT_EQ(shared_dir_entries(rt.job_id()), 0) << "a co-locale segment has no file";
    barrier(rt.comm());
  }
  EXPECT_EQ(mappings_named(tag), 0) << "destruction leaves a mapping";
  try {
    DistArray<std::uint64_t> a(rt, 4000);
    fill(a);
    throw std::runtime_error("unwinding");
  } catch (const std::runtime_error&) {
  }
  EXPECT_EQ(mappings_named(tag), 0) << "unwinding leaves a mapping";
  barrier(rt.comm());
}

// A memory policy the owner sets on its segment belongs to the shared object:
// a co-locale's mapping of it reports the same policy, so the pages a
// co-locale touches first still go to the owner's NUMA domain (what the
// storage asks for when a rank is bound within one of several domains).
TEST(ColocaleStorage, TheOwnersNumaPreferenceHoldsForItsCoLocales) {
  auto& rt = Runtime::current();
  DistArray<std::uint64_t> a(rt, 4096 * static_cast<std::uint64_t>(rt.size()), StorageOptions::colocale());
  const bool ok = prefer_numa_node(a.local().data(), a.local().size_bytes(), 0);  // node 0 exists on every machine
  if (all_reduce(rt.comm(), ok ? 1 : 0, MPI_MIN) == 0) GTEST_SKIP() << "the kernel refuses mbind here";
  int node = -1;
  EXPECT_EQ(memory_policy_at(a.local().data(), &node), MPOL_PREFERRED);
  EXPECT_EQ(node, 0);
  barrier(rt.comm());
  for (int peer : rt.node().world_ranks)
    if (std::uint64_t* p = a.colocal_data(peer)) {
      node = -1;
      EXPECT_EQ(memory_policy_at(p, &node), MPOL_PREFERRED) << "co-locale " << peer << "'s segment, seen from here";
      EXPECT_EQ(node, 0);
    }
  DistArray<std::uint64_t> untouched(rt, 4096 * static_cast<std::uint64_t>(rt.size()), StorageOptions::colocale());
  const int home = home_numa_node(rt.topology());
  node = -1;
  EXPECT_EQ(memory_policy_at(untouched.local().data(), &node), home >= 0 ? MPOL_PREFERRED : MPOL_DEFAULT)
      << "a rank bound within one of several NUMA domains prefers it; otherwise no policy is set";
  if (home >= 0) {
    EXPECT_EQ(node, home);
  }
  barrier(rt.comm());
}

TEST(ColocaleStorage, TheEnvironmentSwitchAcceptsZeroOrOneOnly) {
  EXPECT_FALSE(parse_colocale_segments(nullptr));
  EXPECT_FALSE(parse_colocale_segments(""));
  EXPECT_FALSE(parse_colocale_segments("0"));
  EXPECT_TRUE(parse_colocale_segments("1"));
  for (const char* bad : {"yes", "on", "2", " 1"}) {
    try {
      parse_colocale_segments(bad);
      ADD_FAILURE() << "'" << bad << "' accepted";
    } catch (const ConfigError& e) {
      EXPECT_NE(std::string(e.what()).find("TESSERA_COLOCALE_SEGMENTS must be 0"), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find(std::string("got '") + bad + "'"), std::string::npos) << e.what();
    }
  }
}
