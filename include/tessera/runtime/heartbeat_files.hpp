// The files of a heartbeat directory (TESSERA_HEARTBEAT_DIR): named here
// once for the ranks that write them (runtime/fault_injection.cpp) and the
// supervisor that reads them (resilience/supervisor). Their records are
// described in fault_injection.hpp.
#pragma once
#include <string>

namespace tessera::heartbeat_files {

// RANK.hb: the rank's heartbeat record (pid, attempt, step, time, host).
inline std::string heartbeat(const std::string& dir, int rank) { return dir + "/" + std::to_string(rank) + ".hb"; }
// RANK.wait: "SEQ 1" while the rank waits in Tessera's communication, "SEQ 0" after.
inline std::string wait_note(const std::string& dir, int rank) { return dir + "/" + std::to_string(rank) + ".wait"; }
// exited.RANK: left by a normal exit (a killed rank runs no atexit handler).
inline std::string exited(const std::string& dir, int rank) { return dir + "/exited." + std::to_string(rank); }
// killed.RANK: an injected kill's step, point and time, written just before it.
inline std::string killed(const std::string& dir, int rank) { return dir + "/killed." + std::to_string(rank); }
// hung.RANK: an injected hang's step and time.
inline std::string hung(const std::string& dir, int rank) { return dir + "/hung." + std::to_string(rank); }
// resumed.ATTEMPT: the checkpoint attempt ATTEMPT resumed from (step, level, time, path).
inline std::string resumed(const std::string& dir, int attempt) {
  return dir + "/resumed." + std::to_string(attempt);
}
// error: the job's own error report (abort_job's first failing rank: runtime/launch.hpp).
inline std::string error_report(const std::string& dir) { return dir + "/error"; }

}  // namespace tessera::heartbeat_files
