// Launcher (internal): mpirun started with the job's variables, its stderr
// read (Open MPI's boxes dropped, what they say kept), a started job stopped.
#pragma once
#include <sys/types.h>

#include <cstdio>
#include <string>
#include <vector>

#include "tessera/resilience/supervisor.hpp"

namespace tessera::resilience::supervisor {

// mpirun's stderr (the ranks' own stderr comes through it too), for
// `tessera -n K CMD` and `tessera run`: lines pass on as they arrive, Open
// MPI's boxed messages (between rules of dashes: MPI_ABORT, "Primary job
// terminated normally", "mpirun noticed that process rank ...") are dropped,
// since the supervisor's one line says what they say. What they say is kept:
// the rank that died and its signal, and the node whose daemon mpirun lost.
class MpirunOutput {
 public:
  void feed(const char* data, std::size_t n) {
    for (std::size_t i = 0; i < n; ++i) {
      line_ += data[i];
      if (data[i] == '\n') take();
    }
  }
  void finish() {
    if (!line_.empty()) take();
    if (in_box_) close_box();
  }
  // From now on mpirun's own reports (a crash while it aborts: lines tagged
  // "[host:PID]") are the supervisor's doing, not the job's: dropped.
  void launcher_stopped(pid_t launcher) {
    launcher_stopped_ = true;
    launcher_ = launcher;
  }
  int rank = -1, signal = 0;
  std::string lost_node;  // the node whose daemon mpirun lost ("?": unnamed)
  // The program mpirun could not start ("": it started), why, and where.
  std::string not_started, not_started_why, not_started_node;
  std::string rank_node;  // the node of `rank`, as mpirun names it

 private:
  // The PID in Open MPI's "[host:PID] ..." tag (printed zero-padded), or -1.
  static pid_t tagged_pid(const std::string& line) {
    const std::size_t colon = line.find(':'), close = line.find(']');
    if (line.empty() || line[0] != '[' || colon == std::string::npos || close == std::string::npos || close < colon + 2 ||
        close - colon > 11)
      return -1;
    pid_t pid = 0;
    for (std::size_t i = colon + 1; i < close; ++i) {
      if (line[i] < '0' || line[i] > '9') return -1;
      pid = pid * 10 + (line[i] - '0');
    }
    return pid;
  }
  static bool is_rule(const std::string& line) {
    std::size_t dashes = line.find_first_not_of('-');
    return dashes >= 20 && (dashes == std::string::npos || line.find_first_not_of("\r\n", dashes) == std::string::npos);
  }
  void take() {
    std::string line = std::move(line_);
    line_.clear();
    if (is_rule(line)) {
      if (in_box_) close_box();
      else in_box_ = true;
      return;
    }
    if (in_box_) {
      box_ += line;
      return;
    }
    // "[host:pid] 1 more process has sent help message ..." and the hint
    // after it only count the boxes dropped above.
    if (line.find("more process") != std::string::npos && line.find("help message") != std::string::npos) return;
    if (line.find("orte_base_help_aggregate") != std::string::npos) return;
    // mpirun stopped by this supervisor while it was aborting the job: Open
    // MPI 4.1's mpirun then says so and crashes in PMIx_Finalize; the
    // supervisor's line already says the job was stopped.
    if (launcher_stopped_ && (line == "\n" || line.find("abort is already in progress") != std::string::npos ||
                              tagged_pid(line) == launcher_))
      return;
    std::fwrite(line.data(), 1, line.size(), stderr);
    std::fflush(stderr);
  }
  void close_box() {
    in_box_ = false;
    // Wrapped anywhere: whitespace flattened first.
    std::string flat;
    for (char c : box_) {
      bool space = c == ' ' || c == '\n' || c == '\r' || c == '\t';
      if (!space) flat += c;
      else if (!flat.empty() && flat.back() != ' ') flat += ' ';
    }
    box_.clear();
    auto word_after = [&](std::size_t at, const std::string& key) {
      at = flat.find(key, at);
      if (at == std::string::npos) return std::string();
      at += key.size();
      return flat.substr(at, flat.find(' ', at) - at);
    };
    auto number_after = [&](const std::string& key) {
      std::string w = word_after(0, key);
      std::size_t digits = w.find_first_not_of("0123456789");
      w = w.substr(0, digits);
      return w.empty() || w.size() > 9 ? -1 : std::stoi(w);
    };
    // "mpirun noticed that process rank R with PID P on node N exited on
    // signal S (NAME)."
    int r = number_after("process rank "), sig = number_after("exited on signal ");
    if (r >= 0 && sig > 0 && rank < 0) rank = r, signal = sig, rank_node = word_after(0, " on node ");
    // "mpirun was unable to find the specified executable file ... Node: N
    // Executable: P" / "... could not access or execute an executable:
    // Executable: P Node: N"
    const bool missing = flat.find("unable to find the specified executable") != std::string::npos;
    if ((missing || flat.find("could not access or execute an executable") != std::string::npos) &&
        not_started.empty()) {
      not_started = word_after(0, "Executable: ");
      not_started_node = word_after(0, "Node: ");
      not_started_why = missing ? "no such program" : "not an executable file";
      if (not_started.empty()) not_started = "?";
    }
    // "ORTE has lost communication with a remote daemon. ... Remote daemon:
    // [[J,0],1] on node N"
    if (flat.find("lost communication with a remote daemon") != std::string::npos && lost_node.empty()) {
      std::size_t at = flat.find("Remote daemon");
      if (at != std::string::npos) lost_node = word_after(at, " on node ");
      if (lost_node.empty()) lost_node = "?";
    }
  }
  std::string line_, box_;
  bool in_box_ = false, launcher_stopped_ = false;
  pid_t launcher_ = -1;
};

struct Job {
  pid_t pid = -1;
  int err_fd = -1;
};

struct StartedJob {
  Job job;
  double started = 0;  // when it was launched
};

// A job started and then not wanted (the supervisor is stopped): ended as
// the user's ^C would end it, its ranks removing their own segments.
void stop_started_job(const Job& job, bool own_group);
// mpirun for attempt `attempt` on `ranks` ranks (on `hosts` when given),
// its heartbeats in `hb_dir`, its own session directory tree under
// `session_base` (see launch()); its stderr is the Job's err_fd (non-blocking).
Job launch(const SuperviseOptions& o, int ranks, const std::vector<HostSlots>& hosts, int attempt,
           const std::string& hb_dir, const std::string& session_base);
// Reads what mpirun wrote so far into `out`.
void drain(int fd, MpirunOutput& out);
// Why the job's command could not be started, for people: one line.
std::string cannot_start(const std::string& program, const std::string& why, const std::string& node);

}  // namespace tessera::resilience::supervisor
