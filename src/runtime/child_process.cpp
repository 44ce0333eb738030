// Child processes: wait with a deadline, stop, find on PATH (child_process.hpp).
#include "tessera/runtime/child_process.hpp"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <sstream>
#include <thread>

namespace tessera {

bool wait_for_child(pid_t pid, double seconds, int* status, const std::function<void()>& meanwhile, int poll_ms) {
  int ignored = 0;
  if (!status) status = &ignored;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  for (;;) {
    if (meanwhile) meanwhile();
    const pid_t r = ::waitpid(pid, status, WNOHANG);
    if (r == pid || (r < 0 && errno == ECHILD)) return true;
    if (std::chrono::steady_clock::now() >= deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(poll_ms));
  }
}

int kill_child(pid_t pid, bool process_group) {
  ::kill(process_group ? -pid : pid, SIGKILL);
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  return status;
}

int stop_child(pid_t pid, double grace, bool process_group, const std::function<void()>& meanwhile,
               const std::function<void()>& before_kill) {
  ::kill(process_group ? -pid : pid, SIGTERM);
  int status = 0;
  if (wait_for_child(pid, grace, &status, meanwhile)) return status;
  if (before_kill) before_kill();
  return kill_child(pid, process_group);
}

std::vector<std::string> split_words(const std::string& text) {
  std::istringstream in(text);
  std::vector<std::string> out;
  for (std::string w; in >> w;) out.push_back(w);
  return out;
}

bool on_path(const std::string& program) {
  if (program.find('/') != std::string::npos) return ::access(program.c_str(), X_OK) == 0;
  const char* path = std::getenv("PATH");
  std::istringstream dirs(path ? path : "/usr/bin:/bin");
  for (std::string d; std::getline(dirs, d, ':');)
    if (!d.empty() && ::access((d + "/" + program).c_str(), X_OK) == 0) return true;
  return false;
}

}  // namespace tessera
