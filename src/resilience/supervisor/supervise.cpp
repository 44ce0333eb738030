// supervise(): one attempt after another, each a run of named phases
// (supervisor.hpp): launch, watch, tear down, settle, read the job's
// records, classify, probe nodes, clean up, conclude.
#include "tessera/resilience/supervisor.hpp"

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>
#include <functional>
#include <memory>
#include <optional>

#include "cleanup.hpp"
#include "launcher.hpp"
#include "monitor.hpp"
#include "node_probe.hpp"
#include "tessera/runtime/child_process.hpp"
#include "tessera/runtime/error.hpp"
#include "tessera/runtime/heartbeat_files.hpp"
#include "tessera/runtime/launch.hpp"
#include "tessera/storage/storage.hpp"

namespace tessera::resilience {

using namespace supervisor;
namespace fs = std::filesystem;

namespace {

// How long mpirun may take to end by itself once the supervisor has killed
// every rank of a failed job (it normally takes well under 2 s).
constexpr double kLauncherEndsAlone = 15;

std::atomic<int> g_stop_signal{0};
void on_stop(int sig) { g_stop_signal = sig; }

// One attempt's state, shared by its phases.
struct Attempt {
  int attempt = 1;
  AttemptReport rep;
  std::string hb_dir;      // its heartbeat directory
  double started = 0;      // when it was launched
  double ended = 0;        // when its processes were gone
  Job job;
  MpirunOutput mpirun;
  std::vector<Heartbeat> beats;
  std::vector<WaitNote> waits;
  int status = 0;          // mpirun's wait status
  bool exited = false;     // mpirun exited (and was reaped)
  bool failed = false;     // the supervisor found a failure while it ran
  double detected = -1, first_step_time = -1;
  int seen_signal = 0;     // what ended the dead rank the supervisor found, when a signal did
  JobProcesses processes;
  std::vector<std::string> lost;  // hosts found gone after it
};

// The heartbeat directories' root, and this process's stop signals
// (SIGINT, SIGTERM, SIGHUP: the job is stopped, not relaunched), for one
// supervise() call.
class SupervisionScope {
 public:
  SupervisionScope() {
    std::string tmp = std::getenv("TMPDIR") && *std::getenv("TMPDIR") ? std::getenv("TMPDIR") : "/tmp";
    std::string root_template = tmp + "/tessera-run-XXXXXX";
    if (::mkdtemp(root_template.data()) == nullptr)
      throw SystemError("cannot create the heartbeat directory under " + tmp, errno);
    root_ = root_template;
    g_stop_signal = 0;
    struct sigaction stop {};
    stop.sa_handler = on_stop;
    sigemptyset(&stop.sa_mask);
    sigaction(SIGINT, &stop, &old_int_);
    sigaction(SIGTERM, &stop, &old_term_);
    sigaction(SIGHUP, &stop, &old_hup_);
  }
  SupervisionScope(const SupervisionScope&) = delete;
  SupervisionScope& operator=(const SupervisionScope&) = delete;
  ~SupervisionScope() {
    std::error_code ec;
    fs::remove_all(root_, ec);
    sigaction(SIGINT, &old_int_, nullptr);
    sigaction(SIGTERM, &old_term_, nullptr);
    sigaction(SIGHUP, &old_hup_, nullptr);
  }
  std::string heartbeat_dir(int attempt) const { return root_ + "/attempt" + std::to_string(attempt); }

 private:
  std::string root_;
  struct sigaction old_int_ {}, old_term_ {}, old_hup_ {};
};

void validate(const SuperviseOptions& o) {
  if (o.ranks < 1) throw ConfigError("run: -n must be at least 1, got " + std::to_string(o.ranks));
  if (o.program.empty()) throw ConfigError("run: no command to run (tessera -n K run --recover CMD ...)");
  // On this host (no hosts given) mpirun finds the program as this process
  // would: refused here, once, rather than failing every attempt. Another
  // node's is mpirun's to find (MpirunOutput::not_started).
  if (o.hosts.empty() && !on_path(o.program))
    throw ConfigError("run: " + cannot_start(o.program, o.program.find('/') == std::string::npos
                                                            ? "no such program on PATH"
                                                            : "not an executable file", ""));
  if (o.retries < 0) throw ConfigError("run: --retries must be 0 or more, got " + std::to_string(o.retries));
  if (!(o.heartbeat_timeout > 0)) throw ConfigError("run: --heartbeat-timeout must be positive");
  for (const auto& f : o.faults)
    if (f.rank >= o.ranks)
      throw ConfigError("run: a fault names rank " + std::to_string(f.rank) + " of a job of " + std::to_string(o.ranks) +
                        " ranks");
  for (const auto& h : o.hosts)
    if (h.host.empty() || h.slots < 1) throw ConfigError("run: every host needs a name and at least one slot");
}

// supervise(): one attempt after another, each a run of named phases.
class Supervision {
 public:
  explicit Supervision(const SuperviseOptions& options)
      : o(options),
        log(o.log ? o.log : [](const std::string& line) { std::fprintf(stderr, "tessera run: %s\n", line.c_str()); }),
        self_host(current_host_name()),
        hosts(o.hosts),
        ranks(o.ranks),
        shm_dir(o.shm_dir.empty() ? default_shared_dir() : o.shm_dir),
        attempts(o.retries + 1) {}
  ~Supervision() {
    if (next) stop_started_job(next->job, o.own_process_group);  // started, then not wanted
  }
  Supervision(const Supervision&) = delete;
  Supervision& operator=(const Supervision&) = delete;

  SuperviseResult run() {
    for (int attempt = 1; attempt <= attempts; ++attempt) {
      Attempt a = begin(attempt);
      watch(a);
      if (!a.exited) tear_down(a);
      settle(a);
      read_job_records(a);
      classify(a);
      if (not_started(a)) return result;
      probe_nodes(a);
      clean_up(a);
      bound_detection(a);
      if (conclude(a)) return result;
    }
    return gave_up();
  }

 private:
  StartedJob start(int attempt) {
    StartedJob s;
    std::error_code dir_error;
    fs::create_directories(scope.heartbeat_dir(attempt), dir_error);
    if (dir_error)
      throw SystemError("cannot create the job's directory " + scope.heartbeat_dir(attempt), dir_error.value());
    // mpirun's session directory base for the attempt (attempts may overlap),
    // removed when the supervision ends, after every mpirun was reaped.
    bases.push_back(std::make_unique<MpiSessionBase>("attempt" + std::to_string(attempt)));
    s.started = now_seconds();
    const bool shrunk = hosts.size() != o.hosts.size();
    s.job = launch(o, ranks, o.pass_hosts || shrunk ? hosts : std::vector<HostSlots>{}, attempt,
                   scope.heartbeat_dir(attempt), bases.back()->path());
    return s;
  }

  // Launch (or take the attempt started during the last one's teardown).
  Attempt begin(int attempt) {
    Attempt a;
    a.attempt = attempt;
    a.rep.attempt = attempt;
    a.rep.ranks = ranks;
    a.rep.hosts = format_host_list(hosts);
    a.hb_dir = scope.heartbeat_dir(attempt);
    StartedJob started_job = next ? *std::exchange(next, std::nullopt) : start(attempt);
    a.started = started_job.started;
    a.job = started_job.job;
    a.beats.resize(static_cast<std::size_t>(ranks));
    a.waits.resize(static_cast<std::size_t>(ranks));
    return a;
  }

  // Monitor: polls mpirun, the ranks' heartbeats, processes and waits until
  // mpirun exits or a failure shows (a dead rank, a hung one, every rank waiting).
  void watch(Attempt& a) {
    for (int poll = 0; !a.exited; ++poll) {
      if (poll % 20 == 0) a.processes.scan_children(a.job.pid);
      drain(a.job.err_fd, a.mpirun);
      if (g_stop_signal) break;
      pid_t w = ::waitpid(a.job.pid, &a.status, WNOHANG);
      if (w == a.job.pid) {
        a.exited = true;
        // A failure mpirun found itself (a lost daemon, a rank it saw die):
        // detected now, not once the job's processes are gone.
        if (!(WIFEXITED(a.status) && WEXITSTATUS(a.status) == 0)) a.detected = now_seconds();
        break;
      }
      const double now = now_seconds();
      for (int r = 0; r < ranks; ++r) {
        auto& b = a.beats[static_cast<std::size_t>(r)];
        if (read_heartbeat(heartbeat_files::heartbeat(a.hb_dir, r), b, self_host, now) && b.local) a.processes.add(b.pid);
      }
      if (a.first_step_time < 0)
        for (const auto& b : a.beats)
          if (b.seen && b.step >= 0) a.first_step_time = a.first_step_time < 0 ? b.time : std::min(a.first_step_time, b.time);
      find_dead_rank(a, now);
      if (!a.failed) find_silent_rank(a, now);
      // Every rank in a long wait, read every 20th poll: the timeout is seconds.
      if (!a.failed && poll % 20 == 0) find_everyone_waiting(a, now);
      if (a.failed) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
  }

  // A rank whose process is gone (seen in this /proc): the job cannot finish.
  void find_dead_rank(Attempt& a, double now) {
    // Only here: another node's pid means nothing in this /proc.
    // Several at once: mpirun may already be stopping the others (SIGTERM)
    // for the one that died first, so a rank ended by SIGTERM is named
    // only when no rank ended otherwise.
    for (int r = 0; r < ranks; ++r) {
      const auto& b = a.beats[static_cast<std::size_t>(r)];
      // Gone without exited.R (written at a normal exit): killed or crashed.
      if (b.seen && b.local && process_ending(b.pid) && !fs::exists(heartbeat_files::exited(a.hb_dir, r))) {
        const int sig = ending_signal(b.pid);
        if (a.failed && (sig == SIGTERM || a.seen_signal != SIGTERM)) continue;
        a.failed = true, a.detected = now, a.rep.rank = r, a.rep.outcome = "rank died";
        a.rep.last_step = b.step;
        a.seen_signal = sig;
      }
    }
  }

  // A rank that stopped sending heartbeats: hung.
  void find_silent_rank(Attempt& a, double now) {
    // The culprit is likely the rank furthest behind (then the stalest):
    // the others wait for it.
    // Ages by this supervisor's clock (when it saw each record change):
    // another node's clock need not agree with this one.
    int oldest = -1;
    for (int r = 0; r < ranks; ++r) {
      const auto& b = a.beats[static_cast<std::size_t>(r)];
      if (!b.seen || !b.steps) continue;
      const auto& c = a.beats[static_cast<std::size_t>(std::max(oldest, 0))];
      if (oldest < 0 || b.step < c.step || (b.step == c.step && b.seen_at < c.seen_at)) oldest = r;
    }
    if (o.silent_steps_hang && oldest >= 0 &&
        now - a.beats[static_cast<std::size_t>(oldest)].seen_at > o.heartbeat_timeout) {
      a.failed = true, a.detected = now, a.rep.rank = oldest, a.rep.outcome = "hung";
      a.rep.last_step = a.beats[static_cast<std::size_t>(oldest)].step;
      a.rep.how = "(no heartbeat for " + fixed(now - a.beats[static_cast<std::size_t>(oldest)].seen_at, 1) + " s)";
      a.rep.detection_seconds = now - a.beats[static_cast<std::size_t>(oldest)].seen_at;
    }
  }

  // Every rank in a long wait of Tessera's communication (no step
  // heartbeats needed): nobody computes, so nobody will send what the
  // others wait for.
  void find_everyone_waiting(Attempt& a, double now) {
    int last = -1;  // the rank that began waiting last
    bool all = ranks > 0;
    for (int r = 0; r < ranks; ++r) {
      auto& w = a.waits[static_cast<std::size_t>(r)];
      read_wait_note(heartbeat_files::wait_note(a.hb_dir, r), w, now);
      all = all && w.waiting;
      if (last < 0 || w.since > a.waits[static_cast<std::size_t>(last)].since) last = r;
    }
    if (all && now - a.waits[static_cast<std::size_t>(last)].since > o.heartbeat_timeout) {
      const double waited = now - a.waits[static_cast<std::size_t>(last)].since;
      a.failed = true, a.detected = now, a.rep.rank = last, a.rep.outcome = "hung";
      a.rep.last_step = a.beats[static_cast<std::size_t>(last)].step;
      a.rep.how = "(every rank has waited in Tessera's communication for " + fixed(waited, 1) +
                " s: a deadlock, or a message that never came; rank " + std::to_string(last) + " began waiting last)";
      a.rep.detection_seconds = waited;
    }
  }

  // Stops what is left of a failed job.
  void tear_down(Attempt& a) {
    // Stop what is left of the job: its ranks first (mpirun then ends by
    // itself: stopped while aborting, Open MPI 4.1's mpirun can crash), then
    // mpirun's group, and wait until every process is gone so that their
    // segments belong to dead creators.
    bool all_killed = true;
    for (const auto& b : a.beats) {
      if (b.seen && b.local && process_alive(b.pid)) ::kill(b.pid, SIGKILL);
      all_killed = all_killed && b.seen && b.local;
    }
    // On one node, with every rank killed here, the relaunch is certain (no
    // node to probe, nobody left to write a checkpoint: a process exiting
    // never runs its own code again), so it starts now, beside the old
    // job's teardown (mpirun reaping survivors that unmap their memory),
    // not after it. The old job's files are told apart by its pids.
    if (a.attempt < attempts && all_killed && hosts.size() <= 1 && !g_stop_signal) {
      const double deadline = now_seconds() + 1;
      auto exiting = [&] {
        for (const auto& b : a.beats)
          if (!process_ending(b.pid)) return false;
        return true;
      };
      while (!exiting() && now_seconds() < deadline) std::this_thread::sleep_for(std::chrono::milliseconds(1));
      if (exiting()) next = start(a.attempt + 1);
    }
    auto drain_mpirun = [&] { drain(a.job.err_fd, a.mpirun); };
    // With every rank killed here, mpirun ends by itself, though not at
    // once: it gives its (dead) ranks odls_base_sigkill_timeout (1 s) and
    // a loaded machine adds to that. A signal while it aborts crashes it,
    // so it is sent only to an mpirun that is still there long after.
    a.exited = wait_for_child(a.job.pid, all_killed ? std::max(o.exit_grace, kLauncherEndsAlone) : o.exit_grace,
                            &a.status, drain_mpirun);
    if (!a.exited) {
      a.mpirun.launcher_stopped(a.job.pid);
      // No group to kill: mpirun's children (ranks, launcher sessions)
      // one by one; still its children (not reaped), so still theirs.
      auto kill_children = [&] {
        if (o.own_process_group) return;
        a.processes.scan_children(a.job.pid);
        for (pid_t p : a.processes.pids)
          if (process_alive(p)) ::kill(p, SIGKILL);
      };
      a.status = stop_child(a.job.pid, o.exit_grace, o.own_process_group, drain_mpirun, kill_children);
      a.exited = true;
    }
  }

  // mpirun's last words read; every process of the job gone.
  void settle(Attempt& a) {
    drain(a.job.err_fd, a.mpirun);
    a.mpirun.finish();
    ::close(a.job.err_fd);
    // Ranks are mpirun's children: gone with it, or soon after. Their
    // segments are removed only once their creators are gone.
    for (int spins = 0; spins < 1000; ++spins) {
      bool any = false;
      for (const auto& b : a.beats) any = any || (b.seen && b.local && process_alive(b.pid));
      for (pid_t p : a.processes.pids) any = any || process_alive(p);
      if (!any) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    a.rep.exit_code = exit_code_of(a.status);
    a.ended = now_seconds();
    if (a.detected < 0) a.detected = a.ended;
  }

  // What the job left for the report: the checkpoint resumed from, an
  // injected kill or hang.
  void read_job_records(Attempt& a) {
    if (std::string r = read_text(heartbeat_files::resumed(a.hb_dir, a.attempt)); !r.empty()) {
      std::istringstream in(r);
      long long step = -1, ns = 0;
      int level = 0;
      in >> step >> level >> ns;
      a.rep.resumed_level = static_cast<Level>(level);
      std::getline(in >> std::ws, a.rep.resumed_from);
      a.rep.resumed_step = step;
    }
    if (a.attempt > 1 && previous_detection > 0 && a.first_step_time > 0) a.rep.resume_seconds = a.first_step_time - previous_detection;
    for (int r = 0; r < ranks; ++r) {
      std::string k = read_text(heartbeat_files::killed(a.hb_dir, r));
      if (k.empty()) continue;
      std::istringstream in(k);
      long long step = 0, ns = 0;
      std::string point;
      in >> step >> point >> ns;
      a.rep.rank = r;
      a.rep.signal = SIGKILL;
      a.rep.outcome = "rank died";
      a.rep.how = "(SIGKILL injected " + std::string(point == "step" ? "after step " + std::to_string(step)
                                                   : point == "checkpoint" ? "while writing the checkpoint of step " + std::to_string(step)
                                                   : point == "spare" ? "halfway through writing the checkpoint of step " + std::to_string(step) + " into the reused spare"
                                                                           : "while restarting") + ")";
      a.rep.detection_seconds = a.detected - static_cast<double>(ns) * 1e-9;
      a.rep.last_step = a.beats[static_cast<std::size_t>(r)].step;
      break;
    }
    if (a.rep.outcome == "hung")  // an injected hang names its rank; otherwise the stalest guess stands
      for (int r = 0; r < ranks; ++r)
        if (std::string h = read_text(heartbeat_files::hung(a.hb_dir, r)); !h.empty()) {
          a.rep.rank = r;
          a.rep.last_step = a.beats[static_cast<std::size_t>(r)].step;
          a.rep.how = "(hang injected after step " + h.substr(0, h.find(' ')) + "; " + a.rep.how.substr(1);
          break;
        }
  }

  // The outcome, and which rank failed how.
  void classify(Attempt& a) {
    if (a.rep.outcome.empty()) a.rep.outcome = a.rep.exit_code == 0 && !g_stop_signal ? "finished" : "failed";
    // Ended by SIGTERM while mpirun names another rank: mpirun was already
    // stopping the job for that one, which is the cause.
    if (a.rep.how.empty() && a.seen_signal == SIGTERM && a.mpirun.rank >= 0 && a.mpirun.rank < ranks && a.mpirun.rank != a.rep.rank) {
      a.rep.rank = a.mpirun.rank, a.seen_signal = 0;
      a.rep.last_step = a.beats[static_cast<std::size_t>(a.mpirun.rank)].step;
    }
    if (a.rep.how.empty() && a.rep.outcome == "rank died" && a.seen_signal > 0) {
      a.rep.signal = a.seen_signal;
      a.rep.how = std::string("(exited on signal ") + std::to_string(a.seen_signal) + ", " + strsignal(a.seen_signal) + ")";
    }
    if (a.rep.how.empty() && a.mpirun.rank >= 0 && a.mpirun.rank < ranks) {
      if (a.rep.rank < 0) a.rep.rank = a.mpirun.rank, a.rep.last_step = a.beats[static_cast<std::size_t>(a.mpirun.rank)].step;
      if (a.rep.rank == a.mpirun.rank) {
        a.rep.outcome = "rank died";
        a.rep.signal = a.mpirun.signal;
        a.rep.how = std::string("(exited on signal ") + std::to_string(a.mpirun.signal) + ", " + strsignal(a.mpirun.signal) + ")";
      }
    }
    if (a.rep.how.empty() && a.rep.outcome == "rank died") a.rep.how = "(its process is gone)";
    a.rep.error = read_text(heartbeat_files::error_report(a.hb_dir));
    a.rep.daemon_lost_on = a.mpirun.lost_node;
    std::string error_line = a.rep.error;
    while (!error_line.empty() && (error_line.back() == '\n' || error_line.back() == '\r')) error_line.pop_back();
    if (a.rep.outcome == "failed" && !error_line.empty()) a.rep.how = "(" + error_line + ")";
  }

  // A command that never started: reported, not relaunched.
  bool not_started(Attempt& a) {
    // Nothing to recover: the command never ran, and a relaunch would not run it either.
    if (a.rep.outcome != "finished" && !a.mpirun.not_started.empty()) {
      a.rep.outcome = "not started";
      a.rep.how = "(" + cannot_start(a.mpirun.not_started, a.mpirun.not_started_why, a.mpirun.not_started_node) + ")";
      a.rep.error = read_text(heartbeat_files::error_report(a.hb_dir));
      a.rep.seconds = a.ended - a.started;
      result.attempts.push_back(a.rep);
      result.exit_code = a.rep.exit_code == 0 ? 1 : a.rep.exit_code;
      result.message = cannot_start(a.mpirun.not_started, a.mpirun.not_started_why, a.mpirun.not_started_node);
      return true;
    }
    return false;
  }

  // Node probe: a suspect host that does not answer mpirun's launcher is lost.
  void probe_nodes(Attempt& a) {
    // A lost node? Suspects: the node mpirun lost its daemon on, the failed
    // rank's node; every other node when nothing names one. A suspect that
    // does not answer mpirun's launcher is gone: relaunch without it.
    // (Not after the job's own error report, unless mpirun lost a daemon:
    // the job said why it failed.)
    if (a.rep.outcome != "finished" && !g_stop_signal && hosts.size() > 1 &&
        (a.rep.error.empty() || !a.mpirun.lost_node.empty())) {
      std::vector<std::string> suspects;
      auto suspect = [&](const std::string& name) {
        if (name.empty() || same_host(name, self_host)) return;
        for (const auto& h : hosts)
          if (same_host(h.host, name) && std::find(suspects.begin(), suspects.end(), h.host) == suspects.end())
            suspects.push_back(h.host);
      };
      suspect(a.mpirun.lost_node);
      if (a.rep.rank >= 0 && a.rep.rank < ranks) suspect(a.beats[static_cast<std::size_t>(a.rep.rank)].host);
      if (a.rep.rank == a.mpirun.rank) suspect(a.mpirun.rank_node);
      if (suspects.empty() || a.mpirun.lost_node == "?")
        for (const auto& h : hosts) suspect(h.host);
      std::string hows;
      for (const auto& h : suspects) {
        std::string how;
        if (host_answers(h, o.probe_timeout, how)) continue;
        a.lost.push_back(h);
        if (same_host(h, a.mpirun.lost_node)) how = "mpirun lost its daemon there; " + how;
        hows += (hows.empty() ? "" : "; ") + how;
      }
      if (!a.lost.empty()) {
        a.rep.outcome = "node lost";
        for (const auto& h : a.lost) a.rep.lost_host += (a.rep.lost_host.empty() ? "" : ",") + h;
        auto on_lost = [&](const std::string& host) {
          for (const auto& h : a.lost)
            if (!host.empty() && same_host(h, host)) return true;
          return false;
        };
        std::string there;
        for (int r = 0; r < ranks; ++r)
          if (on_lost(a.beats[static_cast<std::size_t>(r)].host)) there += (there.empty() ? "" : ",") + std::to_string(r);
        a.rep.lost_how = (there.empty() ? "" : "its ranks " + there + "; ") + hows;
        // A rank elsewhere was only stopped because of it: not the cause.
        if (a.rep.rank >= 0 && !on_lost(a.beats[static_cast<std::size_t>(a.rep.rank)].host) &&
            !(a.rep.rank == a.mpirun.rank && on_lost(a.mpirun.rank_node)))
          a.rep.rank = -1, a.rep.how.clear(), a.rep.last_step = -1, a.rep.signal = 0;
      }
    }
  }

  // Cleanup: the dead job's own files.
  void clean_up(Attempt& a) {
    // The dead job's segments: their creators are gone, so gc removes them.
    if (a.rep.outcome != "finished") {
      try {
        // Open MPI's files (vader_segment.*) live in /dev/shm unless
        // btl_vader_backing_directory moves them (then into shm_dir, say).
        a.rep.segments_removed = remove_job_files(shm_dir, a.processes, log);
        if (shm_dir != "/dev/shm") a.rep.segments_removed += remove_job_files("/dev/shm", JobProcesses{{}, a.processes.jobid_hex}, log);
      } catch (const Error& e) {
        log(std::string("cleaning ") + shm_dir + " failed: " + e.what());
      }
    }
  }

  // Without an injected moment, the detection time's bound.
  void bound_detection(Attempt& a) {
    // No injected moment: the failure came after the failed rank's (or the
    // lost node's ranks') last heartbeat, so detection took at most this long.
    if (a.rep.outcome != "finished" && a.rep.outcome != "failed" && a.rep.detection_seconds < 0) {
      double last = -1;
      for (int r = 0; r < ranks; ++r) {
        const auto& b = a.beats[static_cast<std::size_t>(r)];
        if (!b.seen) continue;
        bool failed_here = r == a.rep.rank;
        if (!a.rep.lost_host.empty())
          for (const auto& h : a.lost) failed_here = failed_here || (!b.host.empty() && same_host(h, b.host));
        if (failed_here) last = std::max(last, b.seen_at);
      }
      if (last > 0 && a.detected >= last) {
        a.rep.detection_seconds = a.detected - last;
        a.rep.detection_is_bound = true;
      }
    }
  }

  // The attempt's report; true when there is nothing more to do (finished,
  // stopped, every node lost). Otherwise the next attempt's hosts and ranks.
  bool conclude(Attempt& a) {
    a.rep.cleanup_seconds = now_seconds() - a.detected;
    a.rep.seconds = a.ended - a.started;
    previous_detection = a.detected;
    log(describe(a.rep));
    result.attempts.push_back(a.rep);
    result.exit_code = a.rep.exit_code;
    if (g_stop_signal) {
      result.message = std::string("stopped by signal ") + strsignal(g_stop_signal) + "; not relaunched";
      result.exit_code = 128 + g_stop_signal;
      return true;
    }
    if (a.rep.outcome == "finished") {
      result.finished = true;
      result.message = a.attempt == 1 ? "finished on the first attempt"
                                    : "recovered: finished on attempt " + std::to_string(a.attempt) + " after " +
                                          std::to_string(a.attempt - 1) + " failure(s)";
      return true;
    }
    if (!a.lost.empty()) {
      std::erase_if(hosts, [&](const HostSlots& h) { return std::find(a.lost.begin(), a.lost.end(), h.host) != a.lost.end(); });
      int slots = 0;
      for (const auto& h : hosts) slots += h.slots;
      if (slots == 0) {
        result.message = "gave up: every node of the job is lost (" + a.rep.lost_host + " last)";
        if (result.exit_code == 0) result.exit_code = 1;
        return true;
      }
      ranks = std::min(o.ranks, slots);
    }
    if (a.attempt < attempts)
      log("relaunching" +
          (a.lost.empty() ? std::string()
                        : " on " + std::to_string(ranks) + " ranks (" + format_host_list(hosts) + ") without " +
                              a.rep.lost_host) +
          ": attempt " + std::to_string(a.attempt + 1) + " of at most " + std::to_string(attempts));
    return false;
  }

  SuperviseResult gave_up() {
    result.message = "gave up: the job failed " + std::to_string(attempts) + " time(s) (--retries " +
                     std::to_string(o.retries) + "); the last attempt " + result.attempts.back().outcome +
                     (result.attempts.back().how.empty() ? "" : " " + result.attempts.back().how);
    if (result.exit_code == 0) result.exit_code = 1;
    return result;
  }

  const SuperviseOptions& o;
  const std::function<void(const std::string&)> log;
  const std::string self_host;
  std::vector<HostSlots> hosts;  // shrunk when a node is lost: the hosts left
  int ranks;                     // and the ranks they hold
  const std::string shm_dir;
  const int attempts;
  SupervisionScope scope;
  std::vector<std::unique_ptr<MpiSessionBase>> bases;  // the attempts' mpirun session directory bases
  SuperviseResult result;
  double previous_detection = -1;
  std::optional<StartedJob> next;  // the next attempt when it was started during this one's teardown
};

}  // namespace

SuperviseResult supervise(const SuperviseOptions& o) {
  validate(o);
  return Supervision(o).run();
}

}  // namespace tessera::resilience
