#include "tessera/runtime/error.hpp"

#include "tessera/runtime/exit_cleanup.hpp"

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <algorithm>
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
    case ErrorCategory::generic:
    case ErrorCategory::mpi:
    case ErrorCategory::system: break;
  }
  throw Error(message);
}

void check_mpi(int code, const char* call, const char* file, int line) {
  if (code != MPI_SUCCESS) throw MpiError(code, call, file, line);
}

void abort_job(const std::exception& e, int exit_code) {
  exit_cleanup::run();
  int initialized = 0, finalized = 0;
  MPI_Initialized(&initialized);
  MPI_Finalized(&finalized);
  if (!initialized || finalized) {
    std::fprintf(stderr, "tessera: error: %s\n", e.what());
    std::fflush(stderr);
    std::exit(exit_code);
  }
  int rank = 0, size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  // When several ranks fail on the same cause (a bad file read by all), the
  // lowest rank prints and aborts first; the others wait long enough to be
  // killed by that abort instead of repeating the message.
  if (rank > 0) std::this_thread::sleep_for(std::chrono::milliseconds(300 + 20 * std::min(rank, 50)));
  if (size > 1)
    std::fprintf(stderr, "tessera: error (rank %d of %d): %s\n", rank, size, e.what());
  else
    std::fprintf(stderr, "tessera: error: %s\n", e.what());
  std::fflush(stderr);
  if (size == 1) {
    MPI_Finalize();
    std::exit(exit_code);
  }
  // mpirun forwards our stderr asynchronously; aborting at once can kill the
  // job before the line above reaches the user (seen once in 9 runs).
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  MPI_Abort(MPI_COMM_WORLD, exit_code);
  std::exit(exit_code);
}

}  // namespace tessera
