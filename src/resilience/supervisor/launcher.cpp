// Launcher: mpirun started, read and stopped (launcher.hpp).
#include "launcher.hpp"

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "tessera/runtime/child_process.hpp"
#include "tessera/runtime/error.hpp"
#include "tessera/runtime/fault_injection.hpp"
#include "tessera/runtime/heartbeat_files.hpp"
#include "tessera/runtime/launch.hpp"

namespace tessera::resilience::supervisor {

void stop_started_job(const Job& job, bool own_group) {
  stop_child(job.pid, 5, own_group);
  ::close(job.err_fd);
}

Job launch(const SuperviseOptions& o, int ranks, const std::vector<HostSlots>& hosts, int attempt,
           const std::string& hb_dir, const std::string& session_base) {
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
  std::vector<std::string> args = {"-n", std::to_string(ranks), "-x", "OMPI_MCA_orte_execute_quiet=1"};
  if (!hosts.empty()) args.insert(args.end(), {"--host", format_host_list(hosts)});
  args.insert(args.end(), o.mpirun_options.begin(), o.mpirun_options.end());
  args.push_back(o.program);
  args.insert(args.end(), o.args.begin(), o.args.end());
  std::vector<std::string> names;
  for (const auto& [k, v] : vars) names.push_back(k);
  const bool single_node = o.hosts.empty() && mpirun_single_node(args);
  std::vector<std::string> argv_s = mpirun_argv(args, names);
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
    for (const auto& [name, value] : mpirun_defaults(single_node)) setenv(name.c_str(), value.c_str(), 0);
    // A relaunch to come: the survivors of a dead rank need not wait. Without
    // one (tessera -n K) they keep mpirun's second to remove their own
    // segments: this supervisor cannot reach another node's.
    if (o.retries > 0)
      for (const auto& [name, value] : mpirun_relaunch_environment()) setenv(name.c_str(), value.c_str(), 0);
    // A job on this node alone gets the attempt's session directory base
    // (runtime/launch.hpp says why). Left alone: a base the user chose, and
    // jobs across nodes (the base would be made on every node, and only this
    // one's removed).
    if (single_node && !session_base.empty() && !mpi_session_base_chosen()) setenv(MpiSessionBase::kVariable, session_base.c_str(), 1);
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

std::string cannot_start(const std::string& program, const std::string& why, const std::string& node) {
  return "cannot start the command '" + program + "': " + why + (node.empty() ? "" : " on node " + node) +
         "; CMD begins with the program every rank runs (e.g. tessera -n 4 run --recover tessera bench "
         "jacobi3d-recover ...)";
}

}  // namespace tessera::resilience::supervisor
