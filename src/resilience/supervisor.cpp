// The recovery supervisor (recovery.hpp): launch, watch, clean, relaunch.
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
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <optional>
#include <fstream>
#include <sstream>
#include <set>
#include <thread>
#include <utility>

#include "tessera/runtime/child_process.hpp"
#include "tessera/runtime/error.hpp"
#include "tessera/runtime/fault_injection.hpp"
#include "tessera/runtime/heartbeat_files.hpp"
#include "tessera/runtime/launch.hpp"
#include "tessera/storage/registry.hpp"
#include "tessera/storage/segment.hpp"
#include "tessera/storage/storage.hpp"

namespace tessera::resilience {

namespace fs = std::filesystem;

namespace {

// How long mpirun may take to end by itself once the supervisor has killed
// every rank of a failed job (it normally takes well under 2 s).
constexpr double kLauncherEndsAlone = 15;

std::atomic<int> g_stop_signal{0};
void on_stop(int sig) { g_stop_signal = sig; }

double now_seconds() {
  timespec ts{};
  ::clock_gettime(CLOCK_REALTIME, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

// /proc/PID/stat after the command name: state, ppid, pgrp, session,
// tty_nr, tpgid, flags, ... ("" when the process is gone).
std::string proc_stat_fields(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string text;
  if (!in || !std::getline(in, text)) return {};
  auto close = text.rfind(')');
  if (close == std::string::npos || close + 2 >= text.size()) return {};
  return text.substr(close + 2);
}

// Field `n` of /proc/PID/stat (as proc(5) numbers them: 3 is the state)
// from proc_stat_fields' text, or "" when it has fewer.
std::string stat_field(const std::string& fields, int n) {
  std::istringstream in(fields);
  std::string field;
  for (int k = 3; k <= n; ++k)
    if (!(in >> field)) return {};
  return field;
}

bool process_alive(pid_t pid) {
  const std::string f = proc_stat_fields(pid);
  return !f.empty() && f[0] != 'Z' && f[0] != 'X';
}

// Gone, a zombie, or already in the kernel's exit path (PF_EXITING, set
// before the process unmaps its memory): a rank killed with a gigabyte
// mapped spends ~0.1 s unmapping before it is a zombie, and the failure is
// certain from the start of that.
bool process_ending(pid_t pid) {
  constexpr unsigned long kPfExiting = 0x4;  // include/linux/sched.h
  const std::string f = proc_stat_fields(pid);
  if (f.empty() || f[0] == 'Z' || f[0] == 'X') return true;
  unsigned long flags = 0;
  try {
    flags = std::stoul(stat_field(f, 9));
  } catch (const std::exception&) {
    return false;
  }
  return (flags & kPfExiting) != 0;
}

// The signal that ended `pid`, seen from /proc before its parent (mpirun)
// reaps it: the exit code field (52 of stat) holds the wait status from the
// moment do_exit starts, just after PF_EXITING. 0 when it ended otherwise or
// is already gone. (mpirun's own report names a rank too, but whichever rank
// it reaped first: after a rank's death the supervisor kills the others.)
int ending_signal(pid_t pid) {
  for (int tries = 0; tries < 20; ++tries) {
    const std::string f = proc_stat_fields(pid);
    if (f.empty()) return 0;
    long long status = 0;
    try {
      status = std::stoll(stat_field(f, 52));
    } catch (const std::exception&) {
      return 0;
    }
    if (status != 0) return WIFSIGNALED(status) ? WTERMSIG(status) : 0;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return 0;
}

// The job's processes: mpirun's children (found while it runs) and the
// ranks' heartbeat pids; and Open MPI's job id (from a rank's environment),
// which names its shared-memory files.
struct JobProcesses {
  std::set<pid_t> pids;
  std::string jobid_hex;  // "" until found
  void scan_children(pid_t parent) {
    std::error_code ec;
    for (fs::directory_iterator it("/proc", ec), end; !ec && it != end; it.increment(ec)) {
      const std::string name = it->path().filename().string();
      if (name.empty() || name.find_first_not_of("0123456789") != std::string::npos) continue;
      const auto pid = static_cast<pid_t>(std::stoll(name));
      if (stat_field(proc_stat_fields(pid), 4) != std::to_string(parent)) continue;  // 4: ppid
      add(pid);
    }
  }
  void add(pid_t pid) {
    if (!pids.insert(pid).second || !jobid_hex.empty()) return;
    std::ifstream in("/proc/" + std::to_string(pid) + "/environ", std::ios::binary);
    std::string var;
    while (std::getline(in, var, '\0'))
      if (var.rfind("OMPI_MCA_ess_base_jobid=", 0) == 0) {
        char buf[16];
        std::snprintf(buf, sizeof buf, "%llx", std::strtoull(var.c_str() + 24, nullptr, 10));
        jobid_hex = buf;
      }
  }
};

// Removes the dead job's files from `dir`: Tessera segments and metadata
// whose creator was one of its processes and is dead, and Open MPI's
// vader_segment.HOST.JOBID.* files of its job id that no process uses.
// Nobody else's files: another job's garbage is `tessera shm gc`'s.
std::size_t remove_job_files(const std::string& dir, const JobProcesses& job,
                             const std::function<void(const std::string&)>& log) {
  std::size_t removed = 0;
  auto unlink_one = [&](const std::string& file) {
    if (::unlink((dir + "/" + file).c_str()) == 0) ++removed;
    else if (errno != ENOENT) log("could not remove " + dir + "/" + file + ": " + std::strerror(errno));
  };
  const std::string host = current_host_name();
  for (const auto& e : scan_shared_dir(dir))
    if (e.problem.empty() && e.creator.host == host && job.pids.count(static_cast<pid_t>(e.creator.pid)) &&
        e.liveness == ProcessIdentity::Liveness::dead)
      unlink_one(e.file);
  if (!job.jobid_hex.empty())
    for (const auto& f : scan_mpi_files(dir))
      if (!f.in_use && f.file.find("." + job.jobid_hex + ".") != std::string::npos) unlink_one(f.file);
  return removed;
}

// Host names as mpirun and gethostname() may spell them: "n1" and
// "n1.cluster" are the same host.
bool same_host(const std::string& a, const std::string& b) {
  if (a == b) return true;
  return a.substr(0, a.find('.')) == b.substr(0, b.find('.'));
}

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

bool read_heartbeat(const std::string& path, Heartbeat& hb, const std::string& self_host, double now) {
  std::ifstream in(path);
  long long pid = 0, step = -1, ns = 0;
  int attempt = 0;
  if (!(in >> pid >> attempt >> step >> ns) || pid <= 0) return false;
  std::string host;
  in >> host;
  if (!hb.seen || ns != hb.ns) hb.seen_at = now;
  hb.pid = static_cast<pid_t>(pid);
  hb.steps = hb.steps || step != kStartedStep;
  hb.step = step == kStartedStep ? -1 : step;
  hb.ns = ns;
  hb.time = static_cast<double>(ns) * 1e-9;
  hb.host = host;
  hb.local = host.empty() || same_host(host, self_host);
  hb.seen = true;
  return true;
}

// A rank's RANK.wait record ("SEQ 1" in a long wait, "SEQ 0" after it), and
// when this supervisor saw it change.
struct WaitNote {
  std::string text;
  double since = 0;
  bool waiting = false;
};

void read_wait_note(const std::string& path, WaitNote& w, double now) {
  std::ifstream in(path);
  std::string seq;
  int state = 0;
  if (!(in >> seq >> state)) return;
  const std::string text = seq + " " + std::to_string(state);
  if (text != w.text) w.text = text, w.since = now, w.waiting = state == 1;
}

std::string read_text(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

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
void stop_started_job(const Job& job, bool own_group) {
  stop_child(job.pid, 5, own_group);
  ::close(job.err_fd);
}

Job launch(const SuperviseOptions& o, int ranks, const std::vector<HostSlots>& hosts, int attempt,
           const std::string& hb_dir) {
  // The job's variables: set here for mpirun and its local ranks, and named
  // with -x so that mpirun also sets them for ranks on other nodes (their
  // environment is the remote login's, not this one).
  std::vector<std::pair<std::string, std::string>> vars = {
      {FaultInjection::kAttempt, std::to_string(attempt)},
      {FaultInjection::kHeartbeatDir, hb_dir},
      {kErrorReportVariable, ":" + heartbeat_files::error_report(hb_dir)}};  // "PID:FILE", PID mpirun's: set in the child
  if (!o.faults.empty()) vars.emplace_back(FaultInjection::kFaults, FaultInjection::format(o.faults));
  if (!o.kill_file.empty()) vars.emplace_back(FaultInjection::kKillFile, o.kill_file);
  vars.insert(vars.end(), o.environment.begin(), o.environment.end());
  std::vector<std::string> argv_s = {"mpirun", "-n", std::to_string(ranks), "--oversubscribe",
                                     "-x", "OMPI_MCA_orte_execute_quiet=1"};
  if (!hosts.empty()) argv_s.insert(argv_s.end(), {"--host", format_host_list(hosts)});
  for (const auto& [k, v] : vars) argv_s.insert(argv_s.end(), {"-x", k});
  argv_s.insert(argv_s.end(), o.mpirun_options.begin(), o.mpirun_options.end());
  argv_s.push_back(o.program);
  argv_s.insert(argv_s.end(), o.args.begin(), o.args.end());
  std::vector<char*> argv;
  for (auto& a : argv_s) argv.push_back(a.data());
  argv.push_back(nullptr);
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) throw SystemError("cannot start mpirun (pipe)", errno);
  std::fflush(nullptr);
  pid_t child = ::fork();
  if (child < 0) throw SystemError("cannot start mpirun", errno);
  if (child == 0) {
    if (o.own_process_group) ::setpgid(0, 0);  // the job is one process group: stopped as one
    ::dup2(fds[1], STDERR_FILENO);
    setenv("OMPI_ALLOW_RUN_AS_ROOT", "1", 0);
    setenv("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1", 0);
    setenv("OMPI_MCA_mpi_yield_when_idle", "1", 0);
    // On one node ob1 (with the vader shared-memory BTL) is Open MPI's path
    // anyway; naming it spares every rank the probe of cm's network MTLs
    // (PSM/PSM2 look for Omni-Path hardware), which doubles a short job's
    // start. Across nodes the user's or the site's choice stands.
    if (o.hosts.empty()) setenv("OMPI_MCA_pml", "ob1", 0);
    // mpirun gives the survivors of a dead rank 1 s between SIGTERM and
    // SIGKILL; with a relaunch to come their state is in the checkpoint and
    // their segments are collected here, so it need not wait. Without one
    // (tessera -n K) they keep that second to remove their own segments:
    // this supervisor cannot reach another node's.
    if (o.retries > 0) setenv("OMPI_MCA_odls_base_sigkill_timeout", "0", 0);
    for (const auto& [k, v] : vars)
      setenv(k.c_str(), (k == kErrorReportVariable ? std::to_string(::getpid()) + v : v).c_str(), 1);
    execvp("mpirun", argv.data());
    std::fprintf(stderr, "tessera: error: cannot start mpirun (is openmpi-bin installed? run scripts/setup.sh): %s\n",
                 std::strerror(errno));
    std::_Exit(127);
  }
  if (o.own_process_group) ::setpgid(child, child);  // also here: no race with the first kill
  ::close(fds[1]);
  ::fcntl(fds[0], F_SETFL, ::fcntl(fds[0], F_GETFL) | O_NONBLOCK);
  return {child, fds[0]};
}

void drain(int fd, MpirunOutput& out) {
  char buf[4096];
  for (;;) {
    ssize_t n = ::read(fd, buf, sizeof buf);
    if (n > 0) {
      out.feed(buf, static_cast<std::size_t>(n));
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    break;
  }
}

int exit_code_of(int status) {
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + (WIFSIGNALED(status) ? WTERMSIG(status) : 0);
}

std::string fixed(double v, int digits = 3) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", digits, v);
  return buf;
}

// The command mpirun starts its daemons on other hosts with: Open MPI's
// plm_rsh_agent ("ssh : rsh" by default: the first one installed).
std::vector<std::string> launcher_command() {
  const char* agent = std::getenv("OMPI_MCA_plm_rsh_agent");
  std::string text = agent && *agent ? agent : "ssh : rsh";
  std::size_t from = 0;
  for (;;) {
    std::size_t colon = text.find(':', from);
    auto words = split_words(text.substr(from, colon == std::string::npos ? std::string::npos : colon - from));
    if (!words.empty() && on_path(words[0])) return words;
    if (colon == std::string::npos) return {};
    from = colon + 1;
  }
}

// Whether `host` answers `LAUNCHER host true` within `timeout` seconds;
// `how` says what happened when it does not.
bool host_answers(const std::string& host, double timeout, std::string& how) {
  std::vector<std::string> argv_s = launcher_command();
  if (argv_s.empty()) {
    how = "no launcher to probe it with (OMPI_MCA_plm_rsh_agent, ssh, rsh)";
    return false;
  }
  const std::string name = fs::path(argv_s[0]).filename().string();
  if (name == "ssh")
    argv_s.insert(argv_s.begin() + 1, {"-o", "BatchMode=yes", "-o",
                                       "ConnectTimeout=" + std::to_string(std::max(1, static_cast<int>(timeout)))});
  argv_s.insert(argv_s.end(), {host, "true"});
  std::string shown;  // the command, without directories
  for (const auto& w : argv_s) shown += (shown.empty() ? "" : " ") + (w.find('/') == std::string::npos ? w : fs::path(w).filename().string());
  std::vector<char*> argv;
  for (auto& a : argv_s) argv.push_back(a.data());
  argv.push_back(nullptr);
  int in[2], out[2];
  if (::pipe2(in, O_CLOEXEC) != 0) return how = std::string("cannot probe it: ") + std::strerror(errno), false;
  if (::pipe2(out, O_CLOEXEC) != 0) {
    ::close(in[0]), ::close(in[1]);
    return how = std::string("cannot probe it: ") + std::strerror(errno), false;
  }
  std::fflush(nullptr);
  pid_t child = ::fork();
  if (child == 0) {
    ::setpgid(0, 0);
    ::dup2(in[0], STDIN_FILENO);  // empty: the probe reads nothing
    ::dup2(out[1], STDOUT_FILENO);
    ::dup2(out[1], STDERR_FILENO);
    execvp(argv[0], argv.data());
    std::_Exit(127);
  }
  ::close(in[0]), ::close(in[1]), ::close(out[1]);
  if (child < 0) {
    ::close(out[0]);
    return how = std::string("cannot probe it: ") + std::strerror(errno), false;
  }
  ::setpgid(child, child);
  ::fcntl(out[0], F_SETFL, ::fcntl(out[0], F_GETFL) | O_NONBLOCK);
  std::string said;
  auto read_some = [&] {
    char buf[1024];
    for (ssize_t n; (n = ::read(out[0], buf, sizeof buf)) > 0;)
      if (said.size() < 4096) said.append(buf, static_cast<std::size_t>(n));
  };
  int status = 0;
  const bool ended = wait_for_child(child, timeout, &status, read_some, 10);
  if (!ended) status = kill_child(child, true);
  read_some();
  ::close(out[0]);
  if (ended && WIFEXITED(status) && WEXITSTATUS(status) == 0) return true;
  while (!said.empty() && (said.back() == '\n' || said.back() == '\r' || said.back() == ' ')) said.pop_back();
  if (auto nl = said.rfind('\n'); nl != std::string::npos) said = said.substr(nl + 1);
  how = "no answer to '" + shown + "' (" +
        (!ended ? "nothing in " + fixed(timeout, 0) + " s" : "exit code " + std::to_string(exit_code_of(status))) +
        (said.empty() ? "" : ": " + said) + ")";
  return false;
}

// Why the job's command could not be started, for people: one line.
std::string cannot_start(const std::string& program, const std::string& why, const std::string& node) {
  return "cannot start the command '" + program + "': " + why + (node.empty() ? "" : " on node " + node) +
         "; CMD begins with the program every rank runs (e.g. tessera -n 4 run --recover tessera bench "
         "jacobi3d-recover ...)";
}

// A slot count as both host syntaxes write it: 1 to 6 digits, at least 1.
bool positive_count(const std::string& text) {
  return !text.empty() && text.size() <= 6 && text.find_first_not_of("0123456789") == std::string::npos &&
         std::stoi(text) >= 1;
}

// A host named twice gets the sum of its slots, in the order first named.
void add_host(std::vector<HostSlots>& hosts, const HostSlots& h) {
  for (auto& e : hosts)
    if (e.host == h.host) {
      e.slots += h.slots;
      return;
    }
  hosts.push_back(h);
}

}  // namespace

std::vector<HostSlots> parse_host_list(const std::string& text) {
  std::vector<HostSlots> out;
  std::istringstream in(text);
  for (std::string item; std::getline(in, item, ',');) {
    if (item.empty()) continue;
    HostSlots h;
    auto colon = item.rfind(':');
    h.host = item.substr(0, colon);
    if (colon != std::string::npos) {
      std::string n = item.substr(colon + 1);
      if (!positive_count(n))
        throw ConfigError("run: --host '" + item + "': the slot count after ':' must be a positive number");
      h.slots = std::stoi(n);
    }
    if (h.host.empty()) throw ConfigError("run: --host '" + item + "': no host name");
    add_host(out, h);
  }
  if (out.empty()) throw ConfigError("run: --host '" + text + "' names no host");
  return out;
}

std::vector<HostSlots> read_hostfile(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw ConfigError("run: cannot read the hostfile " + path);
  std::vector<HostSlots> out;
  int number = 0;
  for (std::string line; std::getline(in, line);) {
    ++number;
    line = line.substr(0, line.find('#'));
    auto words = split_words(line);
    if (words.empty()) continue;
    HostSlots h{words[0], 1};
    for (std::size_t i = 1; i < words.size(); ++i) {
      const std::string& w = words[i];
      auto eq = w.find('=');
      std::string key = w.substr(0, eq), value = eq == std::string::npos ? "" : w.substr(eq + 1);
      if (key == "slots" || key == "max_slots" || key == "max-slots") {
        if (!positive_count(value))
          throw ConfigError(path + ":" + std::to_string(number) + ": '" + w + "': expected a positive count");
        if (key == "slots") h.slots = std::stoi(value);
      } else {
        throw ConfigError(path + ":" + std::to_string(number) + ": unknown field '" + w +
                          "' (expected HOST [slots=N] [max_slots=N])");
      }
    }
    add_host(out, h);
  }
  if (out.empty()) throw ConfigError("run: the hostfile " + path + " names no host");
  return out;
}

std::string format_host_list(const std::vector<HostSlots>& hosts) {
  std::string s;
  for (const auto& h : hosts) s += (s.empty() ? "" : ",") + h.host + ":" + std::to_string(h.slots);
  return s;
}

std::string describe(const AttemptReport& a) {
  std::string s = "attempt " + std::to_string(a.attempt);
  if (!a.hosts.empty()) s += " on " + std::to_string(a.ranks) + " ranks (" + a.hosts + ")";
  s += ": ";
  if (a.resumed_step >= 0)
    s += "resumed from step " + std::to_string(a.resumed_step) + " (level " + std::to_string(level_number(a.resumed_level)) + ", " +
         a.resumed_from + ")" + (a.resume_seconds >= 0 ? " in " + fixed(a.resume_seconds) + " s" : "") + "; ";
  else if (a.attempt > 1)
    s += "not resumed from a checkpoint; ";
  s += a.outcome;
  if (!a.lost_host.empty()) s += ": " + a.lost_host + " (" + a.lost_how + ")" + (a.rank >= 0 ? ";" : "");
  if (a.rank >= 0) s += (a.lost_host.empty() ? ": rank " : " rank ") + std::to_string(a.rank);
  if (!a.how.empty()) s += " " + a.how;
  if (a.last_step >= 0 && a.outcome != "finished") s += ", its last completed step " + std::to_string(a.last_step);
  if (a.detection_seconds >= 0)
    s += "; detected in " + std::string(a.detection_is_bound ? "at most " : "") + fixed(a.detection_seconds) + " s" +
         (a.detection_is_bound ? " (since its last heartbeat)" : "");
  if (a.outcome != "finished") {
    s += ", exit code " + std::to_string(a.exit_code) + ", cleaned up in " + fixed(a.cleanup_seconds) + " s";
    if (a.segments_removed) s += " (" + std::to_string(a.segments_removed) + " dead segment file(s) removed)";
  }
  s += "; " + fixed(a.seconds, 2) + " s in all";
  return s;
}

namespace {

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
      throw SystemError("cannot create the heartbeat directory " + scope.heartbeat_dir(attempt), dir_error.value());
    s.started = now_seconds();
    const bool shrunk = hosts.size() != o.hosts.size();
    s.job = launch(o, ranks, o.pass_hosts || shrunk ? hosts : std::vector<HostSlots>{}, attempt,
                   scope.heartbeat_dir(attempt));
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
