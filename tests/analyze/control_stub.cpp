// A minimal caller of the control-segment protocol, for tests/analyze: it
// plays the caller's side without a pipeline, so a test can send requests
// the pipeline never sends (a missing array, one of the wrong type) or die at
// a chosen moment (hold: wait until killed).
//
//   control_stub hold    DIR RANKS            create, wait for the analysis, print "attached", sleep
//   control_stub missing DIR                  request naming arrays that do not exist
//   control_stub wrongtype DIR                request naming a float64 array as the edge sources
// Prints the control path first ("control PATH"), then what happened; the
// analysis' error message on a refused request ("refused: ...", exit 3).
#include <cstdio>
#include <cstring>
#include <string>
#include <thread>

#include "tessera/analyze/protocol.hpp"
#include "tessera/array/dist_array.hpp"
#include "tessera/runtime/error.hpp"
#include "tessera/runtime/runtime.hpp"

using namespace tessera;
using control::ControlSegment;
using control::Side;
namespace proto = analyze::protocol;

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: control_stub hold|missing|wrongtype DIR [RANKS]\n");
    return 2;
  }
  const std::string mode = argv[1], dir = argv[2];
  const int ranks = argc > 3 ? std::atoi(argv[3]) : 1;
  Runtime rt;
  try {
    const std::string path = dir + "/" + control::control_file_name("stub-" + rt.job_id());
    auto ctl = proto::create(path, ranks, 0600);
    ctl->attach(Side::caller, 0, "control_stub");
    std::printf("control %s\n", path.c_str());
    std::fflush(stdout);
    // Until the analysis rank 0 is ready (or refuses), checking it lives.
    ctl->wait(Side::caller, 0, 0, 0.1, [&] {
      if (ctl->first_dead(Side::analysis) >= 0) throw PeerError("the analysis died before it was ready");
    });
    if (ctl->failed()) {
      std::printf("refused: %s\n", ctl->message().c_str());
      return 3;
    }
    std::printf("attached\n");
    std::fflush(stdout);
    if (mode == "hold") {
      for (;;) std::this_thread::sleep_for(std::chrono::seconds(1));  // the test kills this process
    }
    // A float64 array to name where uint64 row offsets are expected.
    DistArray<double> wrong(rt, 16, StorageOptions::shared("stub-" + rt.job_id() + "-wrong", dir));
    auto& req = proto::payload(*ctl).request;
    std::memset(&req, 0, sizeof(req));
    req.analysis = static_cast<std::uint32_t>(proto::Analysis::hitting_times);
    req.solver = static_cast<std::uint32_t>(proto::Solver::tessera);
    req.target_count = 1;
    req.vertices = 16;
    req.tolerance = 1e-8;
    req.max_iterations = 100;
    const std::string absent = dir + "/no-such-array.json";
    const std::string arrays = mode == "wrongtype" ? wrong.metadata_path() : absent;
    std::snprintf(req.offsets, sizeof(req.offsets), "%s", arrays.c_str());
    std::snprintf(req.dst, sizeof(req.dst), "%s", arrays.c_str());
    std::snprintf(req.result, sizeof(req.result), "%s", wrong.metadata_path().c_str());
    const std::uint32_t seen = ctl->load(Side::caller, 0);
    ctl->post(Side::analysis, 0);
    ctl->wait(Side::caller, 0, seen, 0.1, [&] {
      if (ctl->first_dead(Side::analysis) >= 0) throw PeerError("the analysis died before it answered");
    });
    if (ctl->failed()) {
      std::printf("refused: %s\n", ctl->message().c_str());
      return 3;
    }
    std::printf("answered\n");
    return 0;
  } catch (const std::exception& e) {
    std::printf("error: %s\n", e.what());
    return 1;
  }
}
