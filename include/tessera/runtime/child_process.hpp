// Child processes this process started (mpirun, a launcher probe, an
// out-of-process analysis): waiting for them with a deadline and stopping
// them the one way (SIGTERM, a grace period, SIGKILL, reaped), and finding
// a program on PATH. No MPI.
#pragma once
#include <sys/types.h>

#include <functional>
#include <string>
#include <vector>

namespace tessera {

// Polls child `pid` until it exits (reaped: its wait status in *status) or
// `seconds` pass, sleeping `poll_ms` between checks and calling `meanwhile`
// (reading its output, say) before each. True once it was reaped.
bool wait_for_child(pid_t pid, double seconds, int* status = nullptr, const std::function<void()>& meanwhile = {},
                    int poll_ms = 5);

// Stops child `pid`: SIGTERM (to its process group with `process_group`:
// it leads one), up to `grace` seconds to exit (`meanwhile` called while
// waiting, as in wait_for_child), then `before_kill` (whatever the group
// does not hold) and SIGKILL; returns its wait status once reaped.
int stop_child(pid_t pid, double grace, bool process_group = false, const std::function<void()>& meanwhile = {},
               const std::function<void()>& before_kill = {});
// SIGKILL to child `pid` (or its group) and its wait status once reaped.
int kill_child(pid_t pid, bool process_group = false);

// The whitespace-separated words of `text` (a command line as an
// environment variable gives it, no quoting).
std::vector<std::string> split_words(const std::string& text);
// Whether `program` can be executed: as a path when it has a '/', else
// found in a directory of $PATH.
bool on_path(const std::string& program);

}  // namespace tessera
