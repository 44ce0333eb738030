// Cleanup: a dead job's files (cleanup.hpp).
#include "cleanup.hpp"

#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "tessera/storage/registry.hpp"
#include "tessera/storage/segment.hpp"
#include "tessera/storage/storage.hpp"

namespace tessera::resilience::supervisor {

std::size_t remove_job_files(const std::string& dir, const JobProcesses& job,
                             const std::function<void(const std::string&)>& log) {
  std::size_t removed = 0;
  auto unlink_one = [&](const std::string& file) {
    if (::unlink((dir + "/" + file).c_str()) == 0) ++removed;
    else if (errno != ENOENT) log("could not remove " + dir + "/" + file + ": " + std::strerror(errno));
  };
  const std::string host = current_host_name();
  for (const auto& e : scan_shared_dir(dir))
    if (e.problem.empty() && e.creator.host == host && job.pids.count(static_cast<pid_t>(e.creator.pid)) &&
        e.liveness == ProcessIdentity::Liveness::dead)
      unlink_one(e.file);
  if (!job.jobid_hex.empty())
    for (const auto& f : scan_mpi_files(dir))
      if (!f.in_use && f.file.find("." + job.jobid_hex + ".") != std::string::npos) unlink_one(f.file);
  return removed;
}

}  // namespace tessera::resilience::supervisor
