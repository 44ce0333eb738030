// The control segment (storage/control.hpp) on its own: futex words wake a
// waiter and time out into the check, liveness follows the OFD lock, and
// every field read from the file is validated (a corrupt or foreign file
// is refused naming it). One process per rank, each with its own file.
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <fstream>
#include <thread>

#include "tessera/runtime/error.hpp"
#include "tessera/runtime/runtime.hpp"
#include "tessera/storage/control.hpp"
#include "tessera/storage/storage.hpp"

using namespace tessera;
using control::ControlSegment;
using control::Side;

namespace {
std::string test_path(const std::string& what) {
  auto& rt = Runtime::current();
  return default_shared_dir() + "/" +
         control::control_file_name("test-control-" + rt.job_id() + "-" + std::to_string(rt.rank()) + "-" + what);
}

void fill_valid_request(control::Request& r) {
  std::memset(&r, 0, sizeof(r));
  r.analysis = static_cast<std::uint32_t>(control::Analysis::hitting_times);
  r.solver = static_cast<std::uint32_t>(control::Solver::tessera);
  r.target_count = 1;
  r.vertices = 10;
  r.tolerance = 1e-8;
  r.max_iterations = 10;
  std::strcpy(r.src, "/dev/shm/a-src.json");
  std::strcpy(r.dst, "/dev/shm/a-dst.json");
  std::strcpy(r.result, "/dev/shm/a-times.json");
}
}  // namespace

TEST(Control, CreateOpenAndRemove) {
  const auto path = test_path("roundtrip");
  {
    auto owner = ControlSegment::create(path, 3, 0600);
    auto other = ControlSegment::open(path);
    EXPECT_EQ(other->ranks(), 3);
    EXPECT_THROW(ControlSegment::create(path, 3, 0600), SystemError);  // never replaces a file
  }
  EXPECT_NE(::access(path.c_str(), F_OK), 0) << "the creator removes its control segment";
  EXPECT_THROW(ControlSegment::create(path, 0, 0600), ConfigError);
  EXPECT_THROW(ControlSegment::create(path, control::kMaxRanks + 1, 0600), ConfigError);
}

TEST(Control, PostWakesAWaiterAndTimeoutsRunTheCheck) {
  const auto path = test_path("futex");
  auto owner = ControlSegment::create(path, 1, 0600);
  auto peer = ControlSegment::open(path);
  int checks = 0;
  std::thread poster([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(120));
    peer->post(Side::analysis, 0);
  });
  auto t0 = std::chrono::steady_clock::now();
  std::uint32_t got = owner->wait(Side::analysis, 0, 0, 0.02, [&] { ++checks; });
  poster.join();
  EXPECT_EQ(got, 1u);
  EXPECT_GE(checks, 2) << "the 20 ms period runs the liveness check while waiting";
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), 2.0);
  // A check that throws ends the wait.
  EXPECT_THROW(owner->wait(Side::analysis, 0, 1, 0.01, [] { throw PeerError("gone"); }), PeerError);
}

TEST(Control, LivenessFollowsTheLock) {
  const auto path = test_path("liveness");
  auto owner = ControlSegment::create(path, 1, 0600);
  EXPECT_EQ(owner->liveness(Side::analysis, 0), ControlSegment::Liveness::not_attached);
  {
    auto analysis = ControlSegment::open(path);
    analysis->attach(Side::analysis, 0, "test");
    EXPECT_EQ(owner->liveness(Side::analysis, 0), ControlSegment::Liveness::alive);
    EXPECT_EQ(owner->first_dead(Side::analysis), -1);
    auto p = owner->peer(Side::analysis, 0);
    EXPECT_EQ(p.pid, getpid());
    EXPECT_STREQ(p.program, "test");
    EXPECT_NE(p.pid_namespace, 0u);
    // A second process (here: description) cannot attach as the same rank.
    auto again = ControlSegment::open(path);
    EXPECT_THROW(again->attach(Side::analysis, 0, "test"), ConfigError);
  }
  // Closing the file (as dying does) releases the lock: the rank is dead.
  EXPECT_EQ(owner->liveness(Side::analysis, 0), ControlSegment::Liveness::dead);
  EXPECT_EQ(owner->first_dead(Side::analysis), 0);
}

TEST(Control, FailPostsEveryoneWithTheMessage) {
  const auto path = test_path("fail");
  auto owner = ControlSegment::create(path, 2, 0600);
  EXPECT_FALSE(owner->failed());
  owner->fail(Side::analysis, static_cast<int>(ErrorCategory::mismatch), "wrong rank count");
  EXPECT_TRUE(owner->failed());
  EXPECT_EQ(owner->reply_message(), "wrong rank count");
  for (int r = 0; r < 2; ++r) {
    EXPECT_EQ(owner->load(Side::caller, r), 1u);
    EXPECT_EQ(owner->load(Side::analysis, r), 1u);
  }
}

TEST(Control, RequestFieldsAreValidated) {
  const auto path = test_path("request");
  auto owner = ControlSegment::create(path, 1, 0600);
  auto& req = owner->block().request;
  fill_valid_request(req);
  EXPECT_NO_THROW(owner->read_request());
  auto refused = [&](auto&& corrupt, const char* what) {
    fill_valid_request(req);
    corrupt(req);
    EXPECT_THROW(owner->read_request(), FormatError) << what;
  };
  refused([](control::Request& r) { r.analysis = 77; }, "unknown analysis");
  refused([](control::Request& r) { r.solver = 0; }, "unknown solver");
  refused([](control::Request& r) { r.preconditioner = 2; }, "unknown preconditioner");
  refused([](control::Request& r) { r.target_count = control::kMaxTargets + 1; }, "too many targets");
  refused([](control::Request& r) { r.target_count = 0; }, "no target");
  refused([](control::Request& r) { r.targets[0] = 10; }, "target past the vertices");
  refused([](control::Request& r) { r.tolerance = -1; }, "negative tolerance");
  refused([](control::Request& r) { r.max_iterations = 0; }, "no iterations");
  refused([](control::Request& r) { std::memset(r.src, 'x', sizeof(r.src)); }, "unterminated path");
  refused([](control::Request& r) { r.dst[0] = '\x01'; }, "non-printable path");
  refused([](control::Request& r) { r.result[0] = '\0'; }, "no result array");
}

TEST(Control, CorruptOrForeignFilesAreRefused) {
  const auto path = test_path("corrupt");
  auto owner = ControlSegment::create(path, 1, 0600);
  auto& b = owner->block();
  b.version = 99;
  EXPECT_THROW(ControlSegment::open(path), FormatError);
  b.version = control::kVersion;
  b.ranks = 0;
  EXPECT_THROW(ControlSegment::open(path), FormatError);
  b.ranks = 1;
  b.magic[0] = 'X';
  EXPECT_THROW(ControlSegment::open(path), FormatError);
  b.magic[0] = control::kBlockMagic[0];
  EXPECT_NO_THROW(ControlSegment::open(path));
  // Not a control segment at all: a plain file.
  const auto plain = test_path("plain");
  { std::ofstream(plain) << "hello"; }
  EXPECT_THROW(ControlSegment::open(plain), FormatError);
  ::unlink(plain.c_str());
  EXPECT_THROW(ControlSegment::open(test_path("absent")), FormatError);
}
