// Node probe: a host asked through mpirun's launcher (node_probe.hpp).
#include "node_probe.hpp"

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

#include "monitor.hpp"
#include "tessera/runtime/child_process.hpp"

namespace tessera::resilience::supervisor {

namespace fs = std::filesystem;

namespace {

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

}  // namespace

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

}  // namespace tessera::resilience::supervisor
