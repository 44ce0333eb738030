// Cleanup (internal): a dead job's own files in a shared-memory directory.
#pragma once
#include <cstddef>
#include <functional>
#include <string>

#include "monitor.hpp"

namespace tessera::resilience::supervisor {

// Removes the dead job's files from `dir`: Tessera segments and metadata
// whose creator was one of its processes and is dead, and Open MPI's
// vader_segment.HOST.JOBID.* files of its job id that no process uses.
// Nobody else's files: another job's garbage is `tessera shm gc`'s.
std::size_t remove_job_files(const std::string& dir, const JobProcesses& job,
                             const std::function<void(const std::string&)>& log);

}  // namespace tessera::resilience::supervisor
