#include "tessera/runtime/launch.hpp"

#include <unistd.h>

#include <cerrno>
#include <cstdlib>

#include "tessera/runtime/error.hpp"

namespace tessera {

bool launched_by_mpi() {
  for (const char* var : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_RANK", "MPI_LOCALNRANKS", "PMI_RANK"})
    if (std::getenv(var)) return true;
  return false;
}

void relaunch_under_mpirun(int ranks, const std::string& program, const std::vector<std::string>& args) {
  if (ranks < 1) throw ConfigError("-n must be at least 1, got " + std::to_string(ranks));
  // Same settings as scripts/mpirun.sh: containers and CI run as root, and
  // oversubscribed ranks must give the core away while idle.
  setenv("OMPI_ALLOW_RUN_AS_ROOT", "1", 0);
  setenv("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1", 0);
  setenv("OMPI_MCA_mpi_yield_when_idle", "1", 0);
  // --quiet: Open MPI 4.1 then prints neither its 8-line MPI_ABORT banner nor
  // "Primary job terminated normally, but 1 process returned a non-zero exit
  // code": the user sees Tessera's one error line (tests/cli/test_cli.sh).
  std::vector<std::string> argv_s = {"mpirun", "--quiet", "-n", std::to_string(ranks), "--oversubscribe", program};
  argv_s.insert(argv_s.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (auto& a : argv_s) argv.push_back(a.data());
  argv.push_back(nullptr);
  execvp("mpirun", argv.data());
  throw SystemError("cannot start mpirun (is openmpi-bin installed? run scripts/setup.sh)", errno);
}

}  // namespace tessera
