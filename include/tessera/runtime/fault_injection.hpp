// Failure injection and heartbeats, for the recovery supervisor
// (`tessera run --recover`, resilience/supervisor.hpp), its tests and demos.
//
// An application calls FaultInjection::at_step(rank, step) after each step
// it completes; the checkpoint store calls at_point() inside a commit and a
// restore. Without the variables below every call returns at once.
//
//   TESSERA_ATTEMPT        the supervisor's attempt number (1 = first launch)
//   TESSERA_HEARTBEAT_DIR  each rank rewrites RANK.hb there at every step
//                          (pid, attempt, step, time, host) so a hung rank is
//                          caught (the Runtime writes one at start-up, with
//                          no step); a rank killed by injection leaves
//                          killed.RANK (step, point, time) first; a rank in
//                          a long wait of Tessera's communication rewrites
//                          RANK.wait ("SEQ 1" while it waits, "SEQ 0" after)
//   TESSERA_FAULTS         "ATTEMPT:RANK:POINT[:STEP],...": POINT is step
//                          (SIGKILL after completing STEP), checkpoint (during
//                          the first commit at or after STEP, after this
//                          rank's data file, before the manifest), spare
//                          (halfway through copying this rank's data into
//                          the node level's reused spare file, in the first
//                          commit at or after STEP that reuses one), restart
//                          (while restoring) or hang (stop responding at STEP)
//   TESSERA_KILL_RANK, TESSERA_KILL_AT_STEP   shorthand for "1:RANK:step:STEP"
//   TESSERA_KILL_FILE      when this file exists, the rank it names (its
//                          text) removes it and kills itself at its next step
// A fault fires only in its attempt, so a relaunch does not repeat it.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace tessera {

enum class FaultPoint { step, checkpoint, restart, hang, spare };

struct InjectedFault {
  int attempt = 1;
  int rank = 0;
  FaultPoint point = FaultPoint::step;
  std::uint64_t step = 0;
};

// A heartbeat file is one record of this size, rewritten in place.
inline constexpr int kHeartbeatRecordBytes = 256;
// The step of the Runtime's start-up heartbeat: the rank's process is known,
// but a job that never reports steps is never judged by step silence.
inline constexpr std::int64_t kStartedStep = -2;
// A RANK.wait record: "SEQ STATE", padded.
inline constexpr int kWaitRecordBytes = 32;

class FaultInjection {
 public:
  static constexpr const char* kAttempt = "TESSERA_ATTEMPT";
  static constexpr const char* kHeartbeatDir = "TESSERA_HEARTBEAT_DIR";
  static constexpr const char* kFaults = "TESSERA_FAULTS";
  static constexpr const char* kKillRank = "TESSERA_KILL_RANK";
  static constexpr const char* kKillAtStep = "TESSERA_KILL_AT_STEP";
  static constexpr const char* kKillFile = "TESSERA_KILL_FILE";

  // After completing `step`: heartbeat, then a kill or hang due here.
  static void at_step(int rank, std::uint64_t step);
  // Inside the checkpoint store (checkpoint: `step` is the commit's step).
  static void at_point(int rank, FaultPoint point, std::uint64_t step);
  // A heartbeat without a step (start-up, restart): the rank is alive.
  static void heartbeat(int rank);
  // The Runtime's first heartbeat (kStartedStep): the supervisor learns the
  // rank's process, and so sees its death at once, in any Tessera job.
  static void started(int rank);
  // A wait in Tessera's communication has lasted long (begins) or is over:
  // RANK.wait, for the supervisor's deadlock rule (every rank waiting
  // longer than the heartbeat timeout). Only after a heartbeat named the rank;
  // it never reads the variables itself, so a Backoff that waits before any
  // Runtime does nothing here, even with a malformed TESSERA_FAULTS.
  static void waiting(bool begins) noexcept;
  // Rank 0 after finding the checkpoint it resumes from: recorded for the
  // supervisor's report (resumed.txt in the heartbeat directory).
  static void note_resume(std::uint64_t step, int level, const std::string& path);
  // TESSERA_ATTEMPT, 1 when unset.
  static int attempt();

  // "ATTEMPT:RANK:POINT[:STEP],..."; throws ConfigError naming the bad part.
  static std::vector<InjectedFault> parse(const std::string& text);
  static std::string format(const std::vector<InjectedFault>& faults);
  static const char* point_name(FaultPoint point);
};

}  // namespace tessera
