// The supervisor's view of a running job (internal): the ranks' processes
// in /proc, their heartbeat and wait records (runtime/heartbeat_files.hpp),
// and small helpers the phases share.
#pragma once
#include <sys/types.h>

#include <cstdint>
#include <set>
#include <string>

namespace tessera::resilience::supervisor {

// Seconds of CLOCK_REALTIME (the clock heartbeats carry).
double now_seconds();
// `v` with `digits` decimals.
std::string fixed(double v, int digits = 3);
// mpirun's exit code from its wait status (128 + signal when signalled).
int exit_code_of(int status);
// A small file's text ("" when absent).
std::string read_text(const std::string& path);

// Alive: neither gone nor a zombie.
bool process_alive(pid_t pid);
// Gone, a zombie, or already in the kernel's exit path.
bool process_ending(pid_t pid);
// The signal that ended `pid`, seen before its parent reaps it (0: none known).
int ending_signal(pid_t pid);

// The job's processes: mpirun's children (found while it runs) and the
// ranks' heartbeat pids; and Open MPI's job id (from a rank's environment),
// which names its shared-memory files.
struct JobProcesses {
  std::set<pid_t> pids;
  std::string jobid_hex;  // "" until found
  // Adds mpirun's (`parent`'s) children found in /proc.
  void scan_children(pid_t parent);
  void add(pid_t pid);
};

// Host names as mpirun and gethostname() may spell them: "n1" and
// "n1.cluster" are the same host.
bool same_host(const std::string& a, const std::string& b);

struct Heartbeat {
  pid_t pid = 0;
  std::int64_t step = -1;
  double time = 0;     // seconds (CLOCK_REALTIME) on the rank's host
  double seen_at = 0;  // when this supervisor saw the record change (its clock): another node's clock may differ
  std::int64_t ns = -1;
  std::string host;    // the rank's host ("" from a writer that names none)
  bool local = true;   // on this host: its pid is in this /proc
  bool seen = false;
  bool steps = false;  // more than the Runtime's start-up record: judged by its silence
};

// Reads RANK.hb into `hb`; false when it holds no record yet.
bool read_heartbeat(const std::string& path, Heartbeat& hb, const std::string& self_host, double now);

// A rank's RANK.wait record ("SEQ 1" in a long wait, "SEQ 0" after it), and
// when this supervisor saw it change.
struct WaitNote {
  std::string text;
  double since = 0;
  bool waiting = false;
};

void read_wait_note(const std::string& path, WaitNote& w, double now);

}  // namespace tessera::resilience::supervisor
