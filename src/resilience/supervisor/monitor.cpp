// The supervisor's view of a running job (monitor.hpp).
#include "monitor.hpp"

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
#include <fstream>
#include <optional>
#include <set>
#include <sstream>
#include <thread>
#include <utility>

#include "tessera/runtime/fault_injection.hpp"

namespace tessera::resilience::supervisor {

namespace fs = std::filesystem;

namespace {

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

}  // namespace

double now_seconds() {
  timespec ts{};
  ::clock_gettime(CLOCK_REALTIME, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
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

void JobProcesses::scan_children(pid_t parent) {
  std::error_code ec;
  for (fs::directory_iterator it("/proc", ec), end; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    if (name.empty() || name.find_first_not_of("0123456789") != std::string::npos) continue;
    const auto pid = static_cast<pid_t>(std::stoll(name));
    if (stat_field(proc_stat_fields(pid), 4) != std::to_string(parent)) continue;  // 4: ppid
    add(pid);
  }
}

void JobProcesses::add(pid_t pid) {
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

bool same_host(const std::string& a, const std::string& b) {
  if (a == b) return true;
  return a.substr(0, a.find('.')) == b.substr(0, b.find('.'));
}

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

int exit_code_of(int status) {
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + (WIFSIGNALED(status) ? WTERMSIG(status) : 0);
}

std::string fixed(double v, int digits) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", digits, v);
  return buf;
}


}  // namespace tessera::resilience::supervisor
