#include "tessera/runtime/error.hpp"

#include "tessera/runtime/exit_cleanup.hpp"
#include "tessera/runtime/launch.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <algorithm>
#include <string>
#include <thread>

namespace tessera {

namespace {
std::string mpi_error_text(int code) {
  char text[MPI_MAX_ERROR_STRING];
  int len = 0;
  if (MPI_Error_string(code, text, &len) != MPI_SUCCESS) return "unknown MPI error " + std::to_string(code);
  return std::string(text, static_cast<std::size_t>(len));
}
}  // namespace

MpiError::MpiError(int code, const std::string& call, const char* file, int line)
    : Error("MPI call failed: " + call + ": " + mpi_error_text(code) + " (" + file + ":" +
            std::to_string(line) + ")"),
      code_(code) {}

SystemError::SystemError(const std::string& what, int err)
    : Error(what + ": " + std::strerror(err)), errno_(err) {}

void throw_error(ErrorCategory category, const std::string& message) {
  switch (category) {
    case ErrorCategory::format: throw FormatError(message);
    case ErrorCategory::mismatch: throw MismatchError(message);
    case ErrorCategory::range: throw RangeError(message);
    case ErrorCategory::config: throw ConfigError(message);
    case ErrorCategory::peer: throw PeerError(message);
    case ErrorCategory::cancelled: throw Cancelled(message);
    case ErrorCategory::generic:
    case ErrorCategory::mpi:
    case ErrorCategory::system: break;
  }
  throw Error(message);
}

void check_mpi(int code, const char* call, const char* file, int line) {
  if (code != MPI_SUCCESS) throw MpiError(code, call, file, line);
}

namespace {
// Under `tessera -n K` (kErrorReportVariable): the first rank to link a complete report file into
// place owns the job's error line (link() is atomic and fails if the name
// exists, so no rank sees a half-written report). True when the line is
// taken care of: written here, or another rank's is already there.
bool claim_error_report(const std::string& line) {
  const char* value = std::getenv(kErrorReportVariable);
  if (value == nullptr) return false;
  char* path = nullptr;
  long launcher_child = std::strtol(value, &path, 10);  // "PID:FILE", PID: the mpirun the launcher started
  if (*path != ':' || launcher_child != static_cast<long>(::getppid())) return false;
  const char* report = path + 1;
  std::string mine = std::string(report) + "." + std::to_string(::getpid());
  int fd = ::open(mine.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) return false;  // not the launcher's node or directory: print instead
  bool written = ::write(fd, line.data(), line.size()) == static_cast<ssize_t>(line.size());
  ::close(fd);
  bool claimed = written && (::link(mine.c_str(), report) == 0 || errno == EEXIST);
  ::unlink(mine.c_str());
  return claimed;
}

void report_error(const std::string& line) {
  if (claim_error_report(line)) return;
  std::fputs(line.c_str(), stderr);
  std::fflush(stderr);
}
}  // namespace

void abort_job(const std::exception& e, int exit_code) {
  exit_cleanup::run();
  int initialized = 0, finalized = 0;
  MPI_Initialized(&initialized);
  MPI_Finalized(&finalized);
  if (!initialized || finalized) {
    report_error(std::string("tessera: error: ") + e.what() + "\n");
    std::exit(exit_code);
  }
  int rank = 0, size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  // When several ranks fail on the same cause (a bad file read by all), the
  // lowest rank reports and aborts first; the others wait long enough to be
  // killed by that abort instead of repeating the message (or, under
  // `tessera -n K`, to leave the report to the lowest rank).
  if (rank > 0) std::this_thread::sleep_for(std::chrono::milliseconds(300 + 20 * std::min(rank, 50)));
  // The rank is named only when it matters: rank 0 reports a cause every
  // rank shares (a bad file, an option); another rank reporting first
  // failed on its own (its node, its memory, its part of the data).
  std::string line = rank > 0 ? "tessera: error on rank " + std::to_string(rank) + " of " + std::to_string(size) +
                                    ": " + e.what() + "\n"
                              : std::string("tessera: error: ") + e.what() + "\n";
  bool claimed = claim_error_report(line);
  if (!claimed) {
    std::fputs(line.c_str(), stderr);
    std::fflush(stderr);
  }
  if (size == 1) {
    MPI_Finalize();
    std::exit(exit_code);
  }
  // mpirun forwards our stderr asynchronously; aborting at once can kill the
  // job before the line above reaches the user.
  if (!claimed) std::this_thread::sleep_for(std::chrono::milliseconds(100));
  MPI_Abort(MPI_COMM_WORLD, exit_code);
  std::exit(exit_code);
}

}  // namespace tessera
