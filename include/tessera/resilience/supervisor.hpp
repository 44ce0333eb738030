// The recovery supervisor behind `tessera -n K run --recover CMD...`.
//
// Open MPI 4.1 has no ULFM, so recovery is a relaunch: supervise() starts
// `mpirun -n K CMD...`, watches it (mpirun's exit, each rank's process and
// its heartbeat file: runtime/fault_injection.hpp), and when a rank dies or
// stops responding it stops what is left of the job, removes the dead
// processes' segments, and starts the job again, which resumes from its
// newest complete checkpoint (the application finds it with ck.latest();
// TESSERA_ATTEMPT tells it the attempt number). Until the job finishes or
// `retries` relaunches have failed too. Runs without MPI (never inside a job).
//
// Across nodes (`hosts` given): a heartbeat names its rank's host, and a
// rank's pid is checked in /proc only on the supervisor's own host (another
// node's pids live in another PID namespace); remote ranks are judged by
// mpirun's exit (its "lost a daemon" message names the node) and by their
// heartbeats. After a failure, a host that mpirun lost or that holds the
// failed rank is probed through mpirun's own launcher (plm_rsh_agent: ssh,
// or the emulated cluster's rsh); a host that does not answer is lost, and
// the job is relaunched on the remaining hosts with the sum of their slots
// (never more than `ranks`). A dead rank on a live node relaunches on the
// same hosts and rank count.
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "tessera/resilience/level.hpp"
#include "tessera/runtime/fault_injection.hpp"

namespace tessera::resilience {

// One host of the job and the ranks mpirun may place there.
struct HostSlots {
  std::string host;
  int slots = 1;
};

// "a:2,b:2" (mpirun's --host: a host without a count has one slot); throws
// ConfigError naming the bad entry.
std::vector<HostSlots> parse_host_list(const std::string& text);
// A hostfile as mpirun reads it ("HOST [slots=N] [max_slots=M]", # comments;
// no slots= means 1; a host listed twice adds up); throws naming file and line.
std::vector<HostSlots> read_hostfile(const std::string& path);
// "a:2,b:2"
std::string format_host_list(const std::vector<HostSlots>& hosts);

struct SuperviseOptions {
  int ranks = 1;
  // Where the ranks run: given to mpirun as --host; empty: mpirun's choice
  // (this host, or its default hostfile) and no relaunch on fewer nodes.
  std::vector<HostSlots> hosts;
  // false: the hosts are mpirun's own default hostfile, which it reads by
  // itself; --host is given only once a lost node is left out.
  bool pass_hosts = true;
  double probe_timeout = 10;              // seconds a host has to answer the launcher's probe
  std::string program;                    // what mpirun starts on every rank
  std::vector<std::string> args;
  std::vector<std::string> mpirun_options;
  int retries = 3;                        // relaunches after the first attempt
  double heartbeat_timeout = 10;          // seconds without a heartbeat from a rank that sent one: hung
  // Whether a rank whose steps stop (heartbeat_timeout without a new one)
  // is hung. Off for a plain launch: its steps are a job's stages, and one
  // stage of a large job (a solve at scale 26) runs for minutes; only every
  // rank waiting in Tessera's communication for heartbeat_timeout is a hang.
  bool silent_steps_hang = true;
  double exit_grace = 2;                  // seconds between SIGTERM and SIGKILL to a failed job's processes
  std::vector<InjectedFault> faults;      // passed as TESSERA_FAULTS
  std::string kill_file;                  // passed as TESSERA_KILL_FILE
  std::string shm_dir;                    // whose dead segments are removed; "" = $TESSERA_SHM_DIR or /dev/shm
  std::vector<std::pair<std::string, std::string>> environment;  // more variables for the job
  // mpirun in a process group of its own (stopped as one). `tessera -n K`
  // keeps it in the caller's instead: a terminal's Ctrl-C and stdin reach it
  // as they would a plain mpirun.
  bool own_process_group = true;
  // One line per event (launch, failure, cleanup, resume); default: stderr.
  std::function<void(const std::string&)> log;
};

struct AttemptReport {
  int attempt = 1;
  int ranks = 0;                // this attempt's rank count
  std::string hosts;            // "a:2,b:2" when the hosts are known
  std::string outcome;          // "finished", "failed" (non-zero exit), "rank died", "hung", "node lost",
                                // "not started" (mpirun could not start the program: not relaunched)
  std::string lost_host;        // the node found gone after this attempt ("": none)
  std::string lost_how;         // what showed it: "mpirun lost its daemon there; no answer to ssh HOST true"
  std::string daemon_lost_on;   // the node mpirun said it lost its daemon on ("?": unnamed), probed or not
  int exit_code = 0;            // mpirun's (128 + signal when it was stopped)
  int rank = -1;                // the rank that died or hung (-1: unknown)
  int signal = 0;               // the signal that ended it, when known (9: SIGKILL)
  std::string how;              // "SIGKILL injected at step 17", "exited on signal 9", "no heartbeat for 10 s"
  std::int64_t last_step = -1;  // that rank's last completed step (heartbeat)
  double seconds = 0;           // launch to end of this attempt
  double detection_seconds = -1;  // failure (injected kill, last heartbeat) to detection
  // The failure's moment is unknown (a lost node, a rank killed from
  // outside): detection_seconds is then an upper bound, counted from the
  // last heartbeat the supervisor saw from the failed rank or node.
  bool detection_is_bound = false;
  double cleanup_seconds = 0;     // detection to every process gone and segments removed
  std::int64_t resumed_step = -1; // the checkpoint this attempt resumed from (-1: none)
  Level resumed_level = Level::unknown;
  std::string resumed_from;       // its directory
  double resume_seconds = -1;     // previous failure's detection to this attempt's first completed step
  std::size_t segments_removed = 0;
  std::string error;              // the job's own error report (abort_job: its first failing rank's line), if any
};

struct SuperviseResult {
  bool finished = false;  // the last attempt exited with 0
  int exit_code = 0;      // the last attempt's
  std::vector<AttemptReport> attempts;
  std::string message;    // one line: what happened in the end
};

// Throws ConfigError for bad options; a job that keeps failing is reported
// in the result (finished = false), not thrown.
SuperviseResult supervise(const SuperviseOptions& options);

// One line per attempt, for people.
std::string describe(const AttemptReport& a);

}  // namespace tessera::resilience
