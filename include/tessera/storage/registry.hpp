// Finding Tessera's files in a shared-storage directory, and removing those
// whose creator is dead (a job killed with SIGKILL cannot clean up itself).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "tessera/storage/segment.hpp"

namespace tessera {

struct ShmEntry {
  enum class Kind { segment, metadata };
  Kind kind = Kind::segment;
  std::string file;        // name inside the directory
  std::string array_name;
  int rank = -1;           // segments only
  std::uint64_t bytes = 0;
  ProcessIdentity creator;
  bool persist = false;
  ProcessIdentity::Liveness liveness = ProcessIdentity::Liveness::unknown;
  std::string liveness_reason;  // why dead or unknown (see ProcessIdentity)
  std::string problem;     // non-empty when the file is unreadable or corrupt
};

// Tessera segments (by header magic) and metadata files (by format field) in dir.
std::vector<ShmEntry> scan_shared_dir(const std::string& dir);

struct GcOptions {
  bool dry_run = false;
  bool include_persistent = false;  // also remove persistent arrays of dead creators
};
struct GcFailure {
  std::string file;    // name inside the directory
  std::string reason;  // e.g. "cannot remove DIR/F: Permission denied"
};
// Removes files whose creator is proven dead (never `unknown` ones: another
// host, boot or PID namespace it cannot see into); returns the removed names.
// A file that cannot be removed (another user's) is skipped and the rest are
// still removed; the skipped ones go to `failures`, or without it a
// SystemError listing them is thrown at the end.
std::vector<std::string> collect_garbage(const std::string& dir, const GcOptions& options,
                                         std::vector<GcFailure>* failures = nullptr);

const char* liveness_name(ProcessIdentity::Liveness l);

// Open MPI's own shared-memory files (Open MPI 4: vader_segment.HOST.JOBID.RANK
// in /dev/shm, one per local rank). Their names carry a job id, not a pid,
// so a file is a leftover of a killed job when no process on this host maps
// it or holds it open (found through /proc/*/maps and /proc/*/fd); when some
// process cannot be inspected (another user's, without privileges) the file
// counts as possibly in use and is kept.
struct MpiLeftover {
  std::string file;
  std::uint64_t bytes = 0;
  bool in_use = true;
};
std::vector<MpiLeftover> scan_mpi_files(const std::string& dir);
// Removes the Open MPI files no process uses; returns their names.
std::vector<std::string> remove_mpi_leftovers(const std::string& dir, bool dry_run,
                                              std::vector<GcFailure>* failures);

}  // namespace tessera
