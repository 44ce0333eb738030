// The control segment (storage/control.hpp) on its own: futex words wake a
// waiter and time out into the check, liveness follows the OFD lock, and
// every field read from the file is validated (a corrupt or foreign file,
// or a payload of another schema, is refused naming it); and the request
// analyze/protocol.hpp keeps in its payload is validated field by field.
// One process per rank, each with its own file.
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <fstream>
#include <thread>

#include "tessera/analyze/protocol.hpp"
#include "tessera/runtime/error.hpp"
#include "tessera/runtime/runtime.hpp"
#include "tessera/storage/control.hpp"
#include "tessera/storage/storage.hpp"

using namespace tessera;
using control::ControlSegment;
using control::Side;
namespace proto = analyze::protocol;

namespace {
std::string test_path(const std::string& what) {
  auto& rt = Runtime::current();
  return default_shared_dir() + "/" +
         control::control_file_name("test-control-" + rt.job_id() + "-" + std::to_string(rt.rank()) + "-" + what);
}

constexpr std::uint32_t kSchema = 7;  // any word: the mechanism does not interpret it

void fill_valid_request(proto::Request& r) {
  std::memset(&r, 0, sizeof(r));
  r.analysis = static_cast<std::uint32_t>(proto::Analysis::hitting_times);
  r.solver = static_cast<std::uint32_t>(proto::Solver::tessera);
  r.target_count = 1;
  r.vertices = 10;
  r.tolerance = 1e-8;
  r.max_iterations = 10;
  std::strcpy(r.offsets, "/dev/shm/a-offsets.json");
  std::strcpy(r.dst, "/dev/shm/a-dst.json");
  std::strcpy(r.result, "/dev/shm/a-times.json");
}
}  // namespace

TEST(Control, CreateOpenAndRemove) {
  const auto path = test_path("roundtrip");
  {
    auto owner = ControlSegment::create(path, 3, 0600, kSchema);
    auto other = ControlSegment::open(path, kSchema);
    EXPECT_EQ(other->ranks(), 3);
    EXPECT_THROW(ControlSegment::create(path, 3, 0600, kSchema), SystemError);  // never replaces a file
  }
  EXPECT_NE(::access(path.c_str(), F_OK), 0) << "the creator removes its control segment";
  EXPECT_THROW(ControlSegment::create(path, 0, 0600, kSchema), ConfigError);
  EXPECT_THROW(ControlSegment::create(path, control::kMaxRanks + 1, 0600, kSchema), ConfigError);
}

TEST(Control, PostWakesAWaiterAndTimeoutsRunTheCheck) {
  const auto path = test_path("futex");
  auto owner = ControlSegment::create(path, 1, 0600, kSchema);
  auto peer = ControlSegment::open(path, kSchema);
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
  auto owner = ControlSegment::create(path, 1, 0600, kSchema);
  EXPECT_EQ(owner->liveness(Side::analysis, 0), ControlSegment::Liveness::not_attached);
  {
    auto analysis = ControlSegment::open(path, kSchema);
    analysis->attach(Side::analysis, 0, "test");
    EXPECT_EQ(owner->liveness(Side::analysis, 0), ControlSegment::Liveness::alive);
    EXPECT_EQ(owner->first_dead(Side::analysis), -1);
    auto p = owner->peer(Side::analysis, 0);
    EXPECT_EQ(p.pid, getpid());
    EXPECT_STREQ(p.program, "test");
    EXPECT_NE(p.pid_namespace, 0u);
    // A second process (here: description) cannot attach as the same rank.
    auto again = ControlSegment::open(path, kSchema);
    EXPECT_THROW(again->attach(Side::analysis, 0, "test"), ConfigError);
  }
  // Closing the file (as dying does) releases the lock: the rank is dead.
  EXPECT_EQ(owner->liveness(Side::analysis, 0), ControlSegment::Liveness::dead);
  EXPECT_EQ(owner->first_dead(Side::analysis), 0);
}

TEST(Control, FailPostsEveryoneWithTheMessage) {
  const auto path = test_path("fail");
  auto owner = ControlSegment::create(path, 2, 0600, kSchema);
  EXPECT_FALSE(owner->failed());
  owner->fail(Side::analysis, static_cast<int>(ErrorCategory::mismatch), "wrong rank count");
  EXPECT_TRUE(owner->failed());
  EXPECT_EQ(owner->message(), "wrong rank count");
  EXPECT_EQ(owner->failed_side(), Side::analysis);
  EXPECT_EQ(owner->error_category(), static_cast<int>(ErrorCategory::mismatch));
  // The first failure wins: the other side's later one only wakes everyone.
  owner->fail(Side::caller, static_cast<int>(ErrorCategory::peer), "too late");
  EXPECT_EQ(owner->message(), "wrong rank count");
  EXPECT_EQ(owner->failed_side(), Side::analysis);
  for (int r = 0; r < 2; ++r) {
    EXPECT_EQ(owner->load(Side::caller, r), 2u);
    EXPECT_EQ(owner->load(Side::analysis, r), 2u);
  }
}

TEST(Control, AFailureMessageIsValidatedWhenRead) {
  const auto path = test_path("message");
  auto owner = ControlSegment::create(path, 1, 0600, kSchema);
  owner->fail(Side::caller, static_cast<int>(ErrorCategory::peer), "gone");
  owner->block().message[1] = '\x01';
  EXPECT_THROW(owner->message(), FormatError) << "non-printable";
  std::memset(owner->block().message, 'x', sizeof(owner->block().message));
  EXPECT_EQ(owner->message().size(), control::kMessageBytes - 1) << "cut at the field's end, never past it";
}

TEST(Control, TheProtocolsPayloadFitsAndOtherSchemasAreRefused) {
  static_assert(sizeof(proto::Payload) <= control::kPayloadBytes);
  const auto path = test_path("schema");
  auto owner = proto::create(path, 1, 0600);
  EXPECT_EQ(owner->block().schema, proto::kSchema);
  EXPECT_NO_THROW(proto::open(path));
  // The payload is the block's own area: what one side writes, the other reads.
  auto other = proto::open(path);
  proto::payload(*owner).reply.iterations = 42;
  EXPECT_EQ(proto::payload(*other).reply.iterations, 42);
  EXPECT_EQ(reinterpret_cast<unsigned char*>(&proto::payload(*owner)), owner->block().payload);
  // A caller of another schema (another build) is refused, naming both.
  owner->block().schema = proto::kSchema + 1;
  try {
    proto::open(path);
    ADD_FAILURE() << "a payload of another schema was accepted";
  } catch (const FormatError& e) {
    EXPECT_NE(std::string(e.what()).find("schema " + std::to_string(proto::kSchema + 1)), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find(path), std::string::npos) << e.what();
  }
}

TEST(Control, RequestFieldsAreValidated) {
  const auto path = test_path("request");
  auto owner = proto::create(path, 1, 0600);
  auto& req = proto::payload(*owner).request;
  fill_valid_request(req);
  EXPECT_NO_THROW(proto::read_request(*owner));
  auto refused = [&](auto&& corrupt, const char* what) {
    fill_valid_request(req);
    corrupt(req);
    EXPECT_THROW(proto::read_request(*owner), FormatError) << what;
  };
  refused([](proto::Request& r) { r.analysis = 77; }, "unknown analysis");
  refused([](proto::Request& r) { r.solver = 0; }, "unknown solver");
  refused([](proto::Request& r) { r.preconditioner = 2; }, "unknown preconditioner");
  refused([](proto::Request& r) { r.target_count = proto::kMaxTargets + 1; }, "too many targets");
  refused([](proto::Request& r) { r.target_count = 0; }, "no target");
  refused([](proto::Request& r) { r.targets[0] = 10; }, "target past the vertices");
  refused([](proto::Request& r) { r.tolerance = -1; }, "negative tolerance");
  refused([](proto::Request& r) { r.max_iterations = 0; }, "no iterations");
  refused([](proto::Request& r) { std::memset(r.offsets, 'x', sizeof(r.offsets)); }, "unterminated path");
  refused([](proto::Request& r) { r.dst[0] = '\x01'; }, "non-printable path");
  refused([](proto::Request& r) { r.result[0] = '\0'; }, "no result array");
  // An unknown kind: the message names the kinds this analysis knows.
  fill_valid_request(req);
  req.analysis = 77;
  try {
    proto::read_request(*owner);
    ADD_FAILURE() << "an unknown analysis kind was accepted";
  } catch (const FormatError& e) {
    for (const char* known : {"unknown analysis kind 77", "hitting times", "fiedler", "centrality"})
      EXPECT_NE(std::string(e.what()).find(known), std::string::npos) << e.what();
  }
  // A spectral kind takes no targets, and no solver or preconditioner is read.
  for (auto kind : {proto::Analysis::fiedler, proto::Analysis::centrality}) {
    fill_valid_request(req);
    req.analysis = static_cast<std::uint32_t>(kind);
    EXPECT_THROW(proto::read_request(*owner), FormatError) << "a spectral request with a target";
    req.target_count = 0;
    req.solver = 0;
    req.preconditioner = 9;
    EXPECT_NO_THROW(proto::read_request(*owner));
    req.max_iterations = 0;
    EXPECT_THROW(proto::read_request(*owner), FormatError) << "a spectral request without iterations";
  }
  // A shutdown carries nothing else to check.
  fill_valid_request(req);
  req.analysis = static_cast<std::uint32_t>(proto::Analysis::shutdown);
  req.solver = 0;
  EXPECT_NO_THROW(proto::read_request(*owner));
}

TEST(Control, CorruptOrForeignFilesAreRefused) {
  const auto path = test_path("corrupt");
  auto owner = ControlSegment::create(path, 1, 0600, kSchema);
  auto& b = owner->block();
  b.version = 99;
  EXPECT_THROW(ControlSegment::open(path, kSchema), FormatError);
  b.version = control::kVersion;
  b.payload_bytes = 1;
  EXPECT_THROW(ControlSegment::open(path, kSchema), FormatError);
  b.payload_bytes = control::kPayloadBytes;
  b.ranks = 0;
  EXPECT_THROW(ControlSegment::open(path, kSchema), FormatError);
  b.ranks = 1;
  b.magic[0] = 'X';
  EXPECT_THROW(ControlSegment::open(path, kSchema), FormatError);
  b.magic[0] = control::kBlockMagic[0];
  EXPECT_NO_THROW(ControlSegment::open(path, kSchema));
  // Not a control segment at all: a plain file.
  const auto plain = test_path("plain");
  { std::ofstream(plain) << "hello"; }
  EXPECT_THROW(ControlSegment::open(plain, kSchema), FormatError);
  ::unlink(plain.c_str());
  EXPECT_THROW(ControlSegment::open(test_path("absent"), kSchema), FormatError);
}
