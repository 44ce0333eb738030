// tessera bench faults: recovery trials of a recoverable Jacobi3D under the
// supervisor (resilience/supervisor.hpp) with injected failures, and the cost of
// a node-level checkpoint; plus the two jobs it launches.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "tessera/runtime/runtime.hpp"

namespace tessera::bench {

// The job `tessera bench jacobi3d-recover`: Jacobi3D checkpointing every
// `every` iterations, resuming from the newest checkpoint; rank 0 writes
// {"checksum", "resumed_from", "attempt", "check"} to `result` (JSON) and
// prints the check line. Exit 0 when the iterate agrees with the theory.
struct RecoverJacobiOptions {
  int n = 24;
  int iterations = 30;
  std::string chunks = "2x2x2";
  int every = 5;
  std::string levels = "node";  // node, buddy, disk, or a comma list
  std::string dir;              // the disk level's directory
  std::string node_dir;         // the node level's ("" = $TESSERA_SHM_DIR or /dev/shm)
  std::string name = "jacobi3d";
  std::string result;           // "" = none
  bool plain = false;           // also the plain sequential loop's checksum ("plain_checksum"), on rank 0
  bool quiet = false;
  bool keep = false;            // leave the checkpoints when finished (the next run restores)
  bool async = false;           // CheckpointOptions::async_drain: the buddy and disk copies beside the iterations
};
int run_recover_jacobi(Runtime& rt, const RecoverJacobiOptions& o);

// The job `tessera bench checkpoint-cost`: memcpy bandwidth of `bytes` per
// rank (all ranks copying at once), then `reps` checkpoints of `bytes` per
// rank at each level asked (2 node, 1 buddy, 3 disk drained asynchronously
// from level 2), each read back and compared byte for byte; rank 0 writes
// the figures, one row per level, to `result` (JSON).
struct CheckpointCostOptions {
  std::uint64_t bytes = std::uint64_t{64} << 20;
  int reps = 5;  // the first two write new memory; the stall is the median of the rest
  std::string levels = "node,buddy,disk";
  std::string node_dir;
  std::string dir;  // the disk level's ("" = a directory of its own under $TMPDIR, removed after)
  std::string result;
};
int run_checkpoint_cost(Runtime& rt, const CheckpointCostOptions& o);

// The job `tessera bench resume-state`: `bytes` of state per rank, updated
// in place at every step (each word by a step-dependent multiply-add, so a
// lost or stale word shows at the end), `steps` steps, a node-level
// checkpoint every `every`; a start resumes from the newest checkpoint.
// At the end every rank checks its words against the update replayed from
// their initial values; rank 0 writes {"ok", "resumed_from", "attempt"} to
// `result` (JSON). Exit 0 when every word is right.
struct ResumeStateOptions {
  std::uint64_t bytes = std::uint64_t{16} << 20;
  int steps = 20;
  int every = 5;
  std::string node_dir;
  std::string name = "resume-state";
  std::string result;
  // Tests of the verifier: at this step (0: never) the last rank's first
  // word gets a wrong value, which the end-of-run check must count.
  int wrong_word_at_step = 0;
};
int run_resume_state(Runtime& rt, const ResumeStateOptions& o);

// The driver: runs without MPI, launching every job under the supervisor.
struct FaultsBenchOptions {
  int ranks = 4;
  int trials = 10;
  std::uint64_t seed = 1;
  int n = 24;
  int iterations = 30;
  std::string chunks = "2x2x2";
  int every = 5;
  std::vector<std::uint64_t> cost_bytes{std::uint64_t{64} << 20};  // per rank, one cost job each; empty: none
  std::string cost_levels = "node,buddy,disk";
  std::string cost_dir;  // the disk level's directory for the cost rows ("" = under $TMPDIR)
  double heartbeat_timeout = 10;
  // empty: random_kill, kill_in_checkpoint, kill_in_restart; also kill_in_spare (a kill halfway
  // through a level-2 commit into the reused spare) and resume_time when asked
  std::vector<std::string> scenarios;
  // resume_time (only when asked): `resume_state_bytes` of state in all (split
  // over the ranks), a rank killed after a step; detection and kill to the
  // relaunch's first completed step, against the targets below.
  std::uint64_t resume_state_bytes = std::uint64_t{64} << 20;
  double resume_median_target = 1.0, resume_p99_target = 2.0, detection_target = 0.100;
  bool json = false;
  bool quiet = false;
  std::string program;  // the tessera executable
};
// 0 when every trial recovered bit-identically, with no hang, stale segment
// or SIGBUS, and every cost row is within its bound; 2 otherwise.
int run_faults_bench(const FaultsBenchOptions& o);

}  // namespace tessera::bench
