#include <gtest/gtest.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include <filesystem>
#include <fstream>
#include <utility>
#include <nlohmann/json.hpp>

#include "../test_util.hpp"
#include "tessera.h"
#include "tessera/array/dist_array.hpp"
#include "tessera/storage/attach.hpp"
#include "tessera/storage/registry.hpp"
#include "tessera/storage/segment.hpp"
#include "tessera/runtime/exit_cleanup.hpp"
#include "tessera/runtime/wait.hpp"

extern char** environ;

using namespace tessera;
namespace fs = std::filesystem;

namespace {

int file_mode(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return -1;
  return static_cast<int>(st.st_mode & 0777);
}

std::string read_text(const std::string& path) {
  std::ifstream in(path);
  return {std::istreambuf_iterator<char>(in), {}};
}

void write_text(const std::string& path, const std::string& text) { std::ofstream(path) << text; }

// Runs a program to completion; returns its exit status (or -1).
int run_program(const std::vector<std::string>& args) {
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  pid_t pid = 0;
  if (posix_spawn(&pid, argv[0], nullptr, nullptr, argv.data(), environ) != 0) return -1;
  int status = 0;
  if (waitpid(pid, &status, 0) != pid) return -1;
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

// Fills a uint64 array with value_of(global index).
void fill(DistArray<std::uint64_t>& a) {
  for (std::uint64_t i = a.local_begin(); i < a.local_end(); ++i) a.at(i) = test::value_of(i);
}

template <class E>
std::string expect_error(const std::function<void()>& f) {
  try {
    f();
  } catch (const E& e) {
    return e.what();
  } catch (const std::exception& e) {
    ADD_FAILURE() << "wrong exception type: " << e.what();
    return {};
  }
  ADD_FAILURE() << "no exception";
  return {};
}

}  // namespace

TEST(SharedStorage, SegmentsAndMetadataAreOwnerOnly) {
  auto& rt = Runtime::current();
  test::ScratchDir dir(rt);
  auto opts = StorageOptions::shared("tessera-test-layout", dir.path());
  DistArray<std::uint64_t> a(rt, 1000, opts);
  std::string meta = a.metadata_path();
  EXPECT_EQ(meta, dir.path() + "/tessera-test-layout.json");
  EXPECT_EQ(file_mode(meta), 0600);
  EXPECT_EQ(file_mode(dir.path() + "/tessera-test-layout.r" + std::to_string(rt.rank()) + ".seg"), 0600);

  auto m = SharedArrayMetadata::read(meta);
  EXPECT_EQ(m.length, 1000u);
  EXPECT_EQ(m.element.name, "uint64");
  EXPECT_EQ(m.element.size, 8u);
  EXPECT_EQ(m.segments.size(), static_cast<std::size_t>(rt.size()));
  EXPECT_EQ(m.offsets, a.distribution().offsets());
  EXPECT_EQ(m.job_id, rt.job_id());
  EXPECT_FALSE(m.persist);
  for (const auto& s : m.segments) EXPECT_EQ(s.file.find('/'), std::string::npos);

  auto g = StorageOptions::shared("tessera-test-group", dir.path());
  g.group_access = true;
  DistArray<int> b(rt, 10, g);
  EXPECT_EQ(file_mode(b.metadata_path()), 0660);
  MPI_Barrier(rt.comm());  // destruction is per rank: keep the files until all have looked
}

TEST(SharedStorage, DefaultsToDevShmAndCleansUp) {
  auto& rt = Runtime::current();
  std::string meta, seg;
  {
    DistArray<double> a(rt, 100, StorageOptions::shared());
    meta = a.metadata_path();
    EXPECT_EQ(meta.rfind("/dev/shm/tessera-", 0), 0u) << meta;
    seg = meta.substr(0, meta.size() - 5) + ".r" + std::to_string(rt.rank()) + ".seg";
    EXPECT_TRUE(fs::exists(seg));
    MPI_Barrier(rt.comm());
  }
  MPI_Barrier(rt.comm());
  EXPECT_FALSE(fs::exists(seg));
  EXPECT_FALSE(fs::exists(meta));
}

// A segment file has no name until it is complete: a process killed while
// writing its header or reserving its blocks leaves nothing that gc could
// not attribute (a headerless offsets.r1.seg was once left by faults.plain).
// Once named, its mapping is listed under that name in /proc/PID/maps.
TEST(SharedStorage, ASegmentFileIsNamedOnlyWhenComplete) {
  auto& rt = Runtime::current();
  const std::string dir = default_shared_dir();
  const std::string name = "tessera-test-newseg-" + rt.job_id() + "-" + std::to_string(rt.rank());
  const std::string path = dir + "/" + name + ".seg";
  auto entries_named = [&] {
    int n = 0;
    for (auto& e : fs::directory_iterator(dir)) n += e.path().filename().string().rfind(name, 0) == 0;
    return n;
  };
  {
    NewSegmentFile file(path, 0600);
    ASSERT_EQ(::ftruncate(file.fd(), 4096), 0);
    EXPECT_EQ(entries_named(), 0) << "an unfinished segment is visible in " << dir;
    int slot = file.publish(true);
    EXPECT_GE(slot, 0);
    EXPECT_TRUE(fs::exists(path));
    EXPECT_EQ(fs::file_size(path), 4096u);
    Mapping m = Mapping::file(file.fd(), 4096, true, path);
    EXPECT_NE(read_text("/proc/self/maps").find(path), std::string::npos) << "the mapping does not name " << path;

    NewSegmentFile again(path, 0600);  // never replaces a published file
    try {
      again.publish(false);
      ADD_FAILURE() << "a second segment replaced " << path;
    } catch (const SystemError& e) {
      EXPECT_NE(std::string(e.what()).find(path), std::string::npos) << e.what();
    }
    exit_cleanup::remove(slot);
  }
  EXPECT_TRUE(fs::exists(path)) << "a published file belongs to its caller, not to NewSegmentFile";
  EXPECT_EQ(entries_named(), 1) << "something besides " << path << " was left in " << dir;
  fs::remove(path);
}

TEST(SharedStorage, PersistKeepsFilesForLaterAttach) {
  auto& rt = Runtime::current();
  test::ScratchDir dir(rt);
  auto opts = StorageOptions::shared("tessera-test-persist", dir.path());
  opts.persist = true;
  std::string meta;
  {
    DistArray<std::uint64_t> a(rt, 777, opts);
    fill(a);
    meta = a.metadata_path();
  }
  MPI_Barrier(rt.comm());
  auto att = AttachedArray::open(meta, Access::read_only);
  EXPECT_TRUE(att.metadata().persist);
  std::uint64_t checked = 0;
  for (std::size_t s = 0; s < att.segment_count(); ++s) {
    auto span = att.segment_span<std::uint64_t>(s);
    for (std::size_t k = 0; k < span.size(); ++k) EXPECT_EQ(span[k], test::value_of(att.segment(s).begin + k));
    checked += span.size();
  }
  EXPECT_EQ(checked, 777u);
}

TEST(SharedStorage, CoLocatedRanksMapEachOthersSegments) {
  auto& rt = Runtime::current();
  DistArray<std::uint64_t> a(rt, 1001, StorageOptions::shared());
  fill(a);
  MPI_Barrier(rt.comm());
  for (int peer : rt.node().world_ranks) {
    if (peer == rt.rank()) continue;
    const std::uint64_t* p = a.colocal_data(peer);
    ASSERT_NE(p, nullptr) << "co-located rank " << peer << " not mapped";
    for (std::uint64_t k = 0; k < a.distribution().count(peer); ++k)
      EXPECT_EQ(p[k], test::value_of(a.distribution().begin(peer) + k));
  }
  DistArray<std::uint64_t> heap(rt, 10, StorageOptions::heap());
  for (int r = 0; r < rt.size(); ++r) EXPECT_EQ(heap.colocal_data(r), nullptr);
}

TEST(SharedStorage, SeparateProcessAttachesVerifiesAndWritesBack) {
  // 64 MiB + a ragged tail: big enough for the peer's zero-copy memory check.
  auto& rt = Runtime::current();
  DistArray<std::uint64_t> a(rt, (std::uint64_t{1} << 23) + 5, StorageOptions::shared());
  fill(a);
  MPI_Barrier(rt.comm());
  int status = 0;
  if (rt.rank() == 0) status = run_program({TESSERA_ATTACH_PEER, a.metadata_path()});
  MPI_Bcast(&status, 1, MPI_INT, 0, rt.comm());
  ASSERT_EQ(status, 0) << "the C peer process failed (exit " << status << ")";
  // The peer's writes are visible here, through the same pages.
  for (std::uint64_t i = a.local_begin(); i < a.local_end(); ++i) ASSERT_EQ(a.at(i), 3 * test::value_of(i) + 1);
}

TEST(SharedStorage, BadNamesAndCollisionsFailOnEveryRank) {
  auto& rt = Runtime::current();
  test::ScratchDir dir(rt);
  EXPECT_THROW(DistArray<int>(rt, 10, StorageOptions::shared("../escape", dir.path())), ConfigError);
  EXPECT_THROW(DistArray<int>(rt, 10, StorageOptions::shared("a/b", dir.path())), ConfigError);
  EXPECT_THROW(DistArray<int>(rt, 10, StorageOptions::shared("x", dir.path() + "/missing")), Error);
  DistArray<int> a(rt, 10, StorageOptions::shared("tessera-test-taken", dir.path()));
  try {
    DistArray<int> b(rt, 10, StorageOptions::shared("tessera-test-taken", dir.path()));
    FAIL() << "a second array with the same name must be refused";
  } catch (const Error& e) {
    if (rt.rank() == 0) {
      EXPECT_NE(std::string(e.what()).find("already exists"), std::string::npos) << e.what();
    }
  }
  // The failed attempt removed what it had created; the first array is intact.
  MPI_Barrier(rt.comm());
  int segs = 0;
  for (const auto& e : fs::directory_iterator(dir.path())) segs += e.path().extension() == ".seg";
  EXPECT_EQ(segs, rt.size());
  MPI_Barrier(rt.comm());
}

// Corrupt copies of a persisted array, one defect each; attaching must name
// the file at fault and map nothing.
class AttachBadInput : public testing::Test {
 protected:
  void SetUp() override {
    auto& rt = Runtime::current();
    dir_ = std::make_unique<test::ScratchDir>(rt);
    auto opts = StorageOptions::shared("tessera-test-bad", dir_->path());
    opts.persist = true;
    DistArray<std::uint64_t> a(rt, 64, opts);
    fill(a);
    MPI_Barrier(rt.comm());
  }
  void TearDown() override { dir_.reset(); }
  // A fresh copy of the array in its own directory; returns the metadata path.
  std::string copy(const std::string& tag) {
    std::string d = dir_->path() + "/" + tag;
    fs::create_directory(d);
    for (const auto& e : fs::directory_iterator(dir_->path()))
      if (e.is_regular_file()) fs::copy_file(e.path(), d + "/" + e.path().filename().string());
    return d + "/tessera-test-bad.json";
  }
  std::string seg0(const std::string& meta) { return meta.substr(0, meta.size() - 5) + ".r0.seg"; }
  nlohmann::json json_of(const std::string& meta) { return nlohmann::json::parse(read_text(meta)); }
  std::unique_ptr<test::ScratchDir> dir_;
};

TEST_F(AttachBadInput, EachDefectGetsAClearError) {
  if (Runtime::current().rank() != 0) return;  // attaching is a single-process affair
  std::string msg;

  msg = expect_error<SystemError>([&] { AttachedArray::open(dir_->path() + "/nope.json", Access::read_only); });
  EXPECT_NE(msg.find("nope.json"), std::string::npos) << msg;

  std::string m = copy("garbage");
  write_text(m, "{ this is not json");
  msg = expect_error<FormatError>([&] { AttachedArray::open(m, Access::read_only); });
  EXPECT_NE(msg.find(m), std::string::npos) << msg;

  m = copy("version");
  auto j = json_of(m);
  j["version"] = 99;
  write_text(m, j.dump());
  msg = expect_error<FormatError>([&] { AttachedArray::open(m, Access::read_only); });
  EXPECT_NE(msg.find("version 99"), std::string::npos) << msg;

  m = copy("escape");
  j = json_of(m);
  j["segments"][0]["file"] = "../../etc/passwd";
  write_text(m, j.dump());
  msg = expect_error<FormatError>([&] { AttachedArray::open(m, Access::read_only); });
  EXPECT_NE(msg.find("plain file names"), std::string::npos) << msg;

  m = copy("lengths");
  j = json_of(m);
  j["length"] = 65;
  write_text(m, j.dump());
  msg = expect_error<FormatError>([&] { AttachedArray::open(m, Access::read_only); });
  EXPECT_NE(msg.find("length"), std::string::npos) << msg;

  m = copy("bytes");
  j = json_of(m);
  j["segments"][0]["bytes"] = 1;
  write_text(m, j.dump());
  msg = expect_error<FormatError>([&] { AttachedArray::open(m, Access::read_only); });
  EXPECT_NE(msg.find("segment 0"), std::string::npos) << msg;

  m = copy("truncated");
  if (fs::file_size(seg0(m)) > 4096) {
    fs::resize_file(seg0(m), fs::file_size(seg0(m)) - 8);
    msg = expect_error<FormatError>([&] { AttachedArray::open(m, Access::read_only); });
    EXPECT_NE(msg.find("truncated"), std::string::npos) << msg;
    EXPECT_NE(msg.find(".r0.seg"), std::string::npos) << msg;
  }

  m = copy("missing");
  fs::remove(seg0(m));
  msg = expect_error<FormatError>([&] { AttachedArray::open(m, Access::read_only); });
  EXPECT_NE(msg.find("missing"), std::string::npos) << msg;

  m = copy("magic");
  {
    std::fstream f(seg0(m), std::ios::in | std::ios::out | std::ios::binary);
    f.write("XXXXXXXX", 8);
  }
  msg = expect_error<FormatError>([&] { AttachedArray::open(m, Access::read_only); });
  EXPECT_NE(msg.find("not a Tessera segment"), std::string::npos) << msg;

  m = copy("type");
  j = json_of(m);
  j["element"]["type"] = "float64";
  write_text(m, j.dump());
  msg = expect_error<MismatchError>([&] { AttachedArray::open(m, Access::read_only); });
  EXPECT_NE(msg.find("float64"), std::string::npos) << msg;

  auto good = AttachedArray::open(copy("typed"), Access::read_only);
  msg = expect_error<MismatchError>([&] { good.segment_span<double>(0); });
  EXPECT_NE(msg.find("uint64"), std::string::npos) << msg;
  EXPECT_EQ(good.segment_span<std::uint64_t>(0).size(), good.segment(0).count);

  // The C ABI reports the same errors through tessera_last_error().
  tessera_array* arr = nullptr;
  EXPECT_EQ(tessera_attach(m.c_str(), TESSERA_READ_ONLY, &arr), -1);
  EXPECT_EQ(arr, nullptr);
  EXPECT_NE(std::string(tessera_last_error()).find("float64"), std::string::npos);
}

TEST(SharedStorage, RegistryListsLiveFilesAndGcKeepsThem) {
  auto& rt = Runtime::current();
  test::ScratchDir dir(rt);
  DistArray<float> a(rt, 100, StorageOptions::shared("tessera-test-live", dir.path()));
  MPI_Barrier(rt.comm());
  if (rt.rank() == 0) {
    auto entries = scan_shared_dir(dir.path());
    EXPECT_EQ(entries.size(), static_cast<std::size_t>(rt.size()) + 1);
    for (const auto& e : entries) {
      EXPECT_EQ(e.liveness, ProcessIdentity::Liveness::alive) << e.file;
      EXPECT_EQ(e.array_name, "tessera-test-live");
      EXPECT_TRUE(e.problem.empty()) << e.problem;
    }
    EXPECT_TRUE(collect_garbage(dir.path(), {}).empty());
  }
  MPI_Barrier(rt.comm());
}

// Issue 9: a pid means nothing outside its PID namespace, so a creator is
// dead only when proven; everything it cannot see is unknown and kept.
TEST(SharedStorage, CreatorLivenessNeverGuessesDead) {
  auto& rt = Runtime::current();
  test::ScratchDir dir(rt);
  DistArray<float> a(rt, 10, StorageOptions::shared("tessera-test-identity", dir.path()));
  MPI_Barrier(rt.comm());
  if (rt.rank() == 0) {
    using L = ProcessIdentity::Liveness;
    auto self = ProcessIdentity::self();
    ASSERT_NE(self.pid_namespace, 0u);
    ASSERT_EQ(self.boot_id.size(), 36u) << self.boot_id;
    EXPECT_EQ(self.check().liveness, L::alive);
    pid_t child = ::fork();
    if (child == 0) ::_exit(0);
    ASSERT_EQ(::waitpid(child, nullptr, 0), child);
    auto gone = self;
    gone.pid = child;
    EXPECT_EQ(gone.check().liveness, L::dead) << gone.check().reason;
    // Files written before namespaces were recorded: never dead.
    auto legacy = gone;
    legacy.pid_namespace = 0;
    legacy.boot_id.clear();
    EXPECT_EQ(legacy.check().liveness, L::unknown);
    EXPECT_NE(legacy.check().reason.find("older Tessera"), std::string::npos) << legacy.check().reason;
    legacy.pid = self.pid;
    EXPECT_EQ(legacy.check().liveness, L::alive);
    // Another boot of this host, another host: unknown.
    auto reboot = gone;
    reboot.boot_id = "00000000-0000-0000-0000-000000000000";
    EXPECT_EQ(reboot.check().liveness, L::unknown);
    auto remote = legacy;
    remote.host = "another-host.example";
    remote.pid = child;
    EXPECT_EQ(remote.check().liveness, L::unknown);
    // The same kernel (boot id) under another host name (a container's): ours.
    auto renamed = self;
    renamed.host = "container-hostname";
    EXPECT_EQ(renamed.check().liveness, L::alive);
    // Another PID namespace that no process is in: dead only when seen from
    // the initial namespace (which sees every process), else unknown.
    auto elsewhere = gone;
    elsewhere.pid_namespace = 1;
    EXPECT_EQ(elsewhere.check().liveness, current_pid_namespace() == 0xEFFFFFFCu ? L::dead : L::unknown)
        << elsewhere.check().reason;

    // Both recorded, in the header and in the metadata.
    for (const auto& e : scan_shared_dir(dir.path())) {
      EXPECT_EQ(e.creator.pid_namespace, self.pid_namespace) << e.file;
      EXPECT_EQ(e.creator.boot_id, self.boot_id) << e.file;
    }
    // A legacy metadata file (no namespace, no boot id) of a vanished pid is
    // listed unknown and gc keeps it.
    auto meta = nlohmann::json::parse(read_text(a.metadata_path()));
    for (auto* id : {&meta["creator"]["process"], &meta["segments"][0]["creator"]}) {
      id->erase("pid_namespace");
      id->erase("boot_id");
      (*id)["pid"] = child;
    }
    meta["name"] = "tessera-test-legacy";
    const std::string legacy_file = dir.path() + "/tessera-test-legacy.json";
    std::ofstream(legacy_file) << meta.dump();
    bool listed = false;
    for (const auto& e : scan_shared_dir(dir.path())) {
      if (e.file != "tessera-test-legacy.json") continue;
      listed = true;
      EXPECT_EQ(e.liveness, L::unknown) << e.liveness_reason;
      EXPECT_EQ(e.creator.pid_namespace, 0u);
    }
    EXPECT_TRUE(listed);
    EXPECT_TRUE(collect_garbage(dir.path(), {}).empty());
    // Recorded namespace and a vanished pid: proven dead and collected.
    meta = nlohmann::json::parse(read_text(a.metadata_path()));
    meta["creator"]["process"]["pid"] = child;
    meta["name"] = "tessera-test-dead";
    std::ofstream(dir.path() + "/tessera-test-dead.json") << meta.dump();
    EXPECT_EQ(collect_garbage(dir.path(), {}), std::vector<std::string>{"tessera-test-dead.json"});
    ::unlink(legacy_file.c_str());
  }
  MPI_Barrier(rt.comm());
}

// Issue 8 item 13: a known element type must have its size.
TEST(SharedStorage, ElementTypeMustMatchItsSize) {
  auto& rt = Runtime::current();
  test::ScratchDir dir(rt);
  DistArray<std::uint64_t> a(rt, 64, StorageOptions::shared("tessera-test-typesize", dir.path()));
  MPI_Barrier(rt.comm());
  if (rt.rank() == 0) {
    std::ifstream in(a.metadata_path());
    auto j = nlohmann::json::parse(in);
    j["element"]["size"] = 1;
    std::string err;
    try {
      SharedArrayMetadata::parse(j.dump(), "m.json");
    } catch (const FormatError& e) {
      err = e.what();
    }
    EXPECT_NE(err.find("m.json: element type uint64 has 8-byte elements, not 1"), std::string::npos) << err;
    EXPECT_EQ(implied_element_size("bytes24"), 24u);
    EXPECT_EQ(implied_element_size("my_struct"), 0u);
  }
  MPI_Barrier(rt.comm());
}

// Issue 8 items 10 and 12: the metadata temporary never follows a symlink;
// metadata that is a FIFO or a device is refused without blocking.
TEST(SharedStorage, MetadataFilesAreRegularAndExclusive) {
  auto& rt = Runtime::current();
  test::ScratchDir dir(rt);
  if (rt.rank() == 0) {
    SharedArrayMetadata m;
    m.name = "x";
    m.element = element_type_of<double>();
    m.length = 0;
    m.offsets = {0, 0};
    SegmentRecord s;
    s.file = "x.r0.seg";
    s.bytes = m.header_bytes;
    m.segments.push_back(s);
    const std::string victim = dir.path() + "/victim", target = dir.path() + "/x.json";
    std::ofstream(victim) << "precious\n";
    // The name the writer used to take (path.tmp<pid>) as a symlink.
    fs::create_symlink(victim, target + ".tmp" + std::to_string(getpid()));
    m.write(target, 0600);
    std::ifstream in(victim);
    std::string text((std::istreambuf_iterator<char>(in)), {});
    EXPECT_EQ(text, "precious\n");
    EXPECT_EQ(SharedArrayMetadata::read(target).name, "x");
    // FIFO and device: refused at once.
    ASSERT_EQ(::mkfifo((dir.path() + "/fifo.json").c_str(), 0600), 0);
    fs::create_symlink("/dev/zero", dir.path() + "/zero.json");
    for (std::string name : {"fifo.json", "zero.json"}) {
      std::string err;
      try {
        SharedArrayMetadata::read(dir.path() + "/" + name);
      } catch (const Error& e) {
        err = e.what();
      }
      EXPECT_NE(err.find(name + " is not a regular file"), std::string::npos) << err;
      tessera_array* arr = nullptr;
      EXPECT_EQ(tessera_attach((dir.path() + "/" + name).c_str(), TESSERA_READ_ONLY, &arr), -1);
    }
    // Larger than any metadata: refused without reading it all.
    { std::ofstream(dir.path() + "/big.json") << std::string(kMaxMetadataBytes + 1, ' '); }
    EXPECT_THROW(SharedArrayMetadata::read(dir.path() + "/big.json"), FormatError);
    // scan_shared_dir (shm list/gc) skips them too, without blocking.
    EXPECT_NO_THROW(scan_shared_dir(dir.path()));
  }
  MPI_Barrier(rt.comm());
}

// Issue 8 item 6: count x size never wraps around.
TEST(SharedStorage, HugeLengthsAreRefusedNotWrapped) {
  auto& rt = Runtime::current();
  for (std::uint64_t n : {std::uint64_t{1} << 61, ~std::uint64_t{0}}) {
    std::string err;
    try {
      DistArray<std::uint64_t> a(rt, n);
    } catch (const RangeError& e) {
      err = e.what();
    }
    EXPECT_NE(err.find("cannot be allocated"), std::string::npos) << n << ": " << err;
  }
}

// Issue 41: an array filled to an upper bound, then compacted, gives the
// rest back. Each rank keeps the prefix of its part; a Shared array's
// segments are truncated and its metadata rewritten, so a process attaching
// afterwards maps the smaller array.
TEST(SharedStorage, ShrinkKeepsThePrefixAndGivesTheRestBack) {
  auto& rt = Runtime::current();
  test::ScratchDir dir(rt);
  const std::uint64_t n = 3000;
  // The new part of rank r: its first (r + 1) * 100 elements, never more than it holds.
  auto smaller_than = [&](const Distribution& d) {
    std::vector<std::uint64_t> sizes;
    for (int r = 0; r < rt.size(); ++r) sizes.push_back(std::min<std::uint64_t>(d.count(r), 100 * (r + 1)));
    return Distribution::weighted_block(sizes);
  };
  for (auto opts : {StorageOptions::heap(), StorageOptions::colocale(),
                    StorageOptions::shared(test::unique_name(rt, "shrink"), dir.path())}) {
    DistArray<std::uint64_t> a(rt, n, opts);
    fill(a);
    const std::uint64_t old_begin = a.local_begin();
    auto to = smaller_than(a.distribution());
    a.shrink(to);
    EXPECT_EQ(a.size(), to.size());
    EXPECT_EQ(a.local().size(), to.count(rt.rank()));
    EXPECT_EQ(a.local_begin(), to.begin(rt.rank()));
    for (std::size_t k = 0; k < a.local().size(); ++k) ASSERT_EQ(a.local()[k], test::value_of(old_begin + k));
    if (opts.kind == StorageKind::shared) {
      barrier(rt.comm());
      auto seg = a.metadata_path().substr(0, a.metadata_path().size() - 5) + ".r" + std::to_string(rt.rank()) + ".seg";
      auto meta = SharedArrayMetadata::read(a.metadata_path());
      EXPECT_EQ(meta.length, to.size());
      EXPECT_EQ(meta.offsets, to.offsets());
      EXPECT_EQ(fs::file_size(seg), meta.header_bytes + 8 * to.count(rt.rank()));
      auto att = AttachedArray::open(a.metadata_path(), Access::read_only);
      ASSERT_EQ(att.length(), to.size());
      auto mine = att.segment_span<std::uint64_t>(static_cast<std::size_t>(rt.rank()));
      ASSERT_EQ(mine.size(), to.count(rt.rank()));
      for (std::size_t k = 0; k < mine.size(); ++k) ASSERT_EQ(mine[k], test::value_of(old_begin + k));
    }
    barrier(rt.comm());
  }
}

TEST(SharedStorage, ShrinkRefusesToGrowOrToCutAnotherJobsArray) {
  auto& rt = Runtime::current();
  test::ScratchDir dir(rt);
  DistArray<std::uint64_t> a(rt, 40, StorageOptions::heap());
  std::vector<std::uint64_t> bigger(static_cast<std::size_t>(rt.size()), 0);
  bigger.back() = a.distribution().count(rt.size() - 1) + 1;
  test::expect_error<MismatchError>([&] { a.shrink(Distribution::weighted_block(bigger)); }, "cannot shrink");

  auto opts = StorageOptions::shared("tessera-test-shrink-existing", dir.path());
  opts.persist = true;
  { DistArray<std::uint64_t> persisted(rt, 40, opts); }
  barrier(rt.comm());
  DistArray<std::uint64_t> opened(rt, 40, StorageOptions::existing("tessera-test-shrink-existing", dir.path()));
  EXPECT_FALSE(opened.shrinkable());
  EXPECT_TRUE(a.shrinkable());
  test::expect_error<MismatchError>([&] { opened.shrink(Distribution::block(20, rt.size())); }, "another job");
}

// Another layout of an array written by this job: each rank maps its
// elements in place from the segment holding them (no copy: a write through
// the writer's own mapping shows), and a rank whose elements span two
// segments is refused on every rank.
TEST(SharedStorage, OpenByRangeMapsAnotherLayoutInPlace) {
  auto& rt = Runtime::current();
  test::ScratchDir dir(rt);
  const std::uint64_t n = 10007;  // elements not page-aligned in any rank's range
  std::vector<std::uint64_t> all_on_0(static_cast<std::size_t>(rt.size()), 0);
  all_on_0[0] = n;
  auto opts = StorageOptions::shared("tessera-test-by-range", dir.path());
  opts.persist = true;
  {
    DistArray<std::uint64_t> written(rt, Distribution::weighted_block(all_on_0), opts);
    auto mine = written.local();
    for (std::size_t k = 0; k < mine.size(); ++k) mine[k] = test::value_of(written.distribution().begin(rt.rank()) + k);
  }
  barrier(rt.comm());
  const auto block = Distribution::block(n, rt.size());
  DistArray<std::uint64_t> opened(rt, block, StorageOptions::existing_by_range("tessera-test-by-range", dir.path()));
  auto mine = std::as_const(opened).local();
  ASSERT_EQ(mine.size(), block.count(rt.rank()));
  for (std::size_t k = 0; k < mine.size(); ++k) ASSERT_EQ(mine[k], test::value_of(block.begin(rt.rank()) + k));
  EXPECT_FALSE(opened.shrinkable());
  {  // the writer's layout, writable: its change shows through every rank's range
    auto w = StorageOptions::existing("tessera-test-by-range", dir.path());
    w.open_writable = true;
    DistArray<std::uint64_t> writer(rt, Distribution::weighted_block(all_on_0), w);
    if (rt.rank() == 0)
      for (auto& v : writer.local()) v = ~v;
    barrier(rt.comm());
    for (std::size_t k = 0; k < mine.size(); ++k) ASSERT_EQ(mine[k], ~test::value_of(block.begin(rt.rank()) + k));
    barrier(rt.comm());
  }
  if (rt.size() > 1) {  // written over several ranks, read as one rank's range
    auto spread = StorageOptions::shared("tessera-test-by-range-spread", dir.path());
    spread.persist = true;
    { DistArray<std::uint64_t> written(rt, block, spread); }
    barrier(rt.comm());
    test::expect_error<MismatchError>(
        [&] {
          DistArray<std::uint64_t> whole(rt, Distribution::weighted_block(all_on_0),
                                         StorageOptions::existing_by_range("tessera-test-by-range-spread", dir.path()));
        },
        "span two of its segments");
  }
}
