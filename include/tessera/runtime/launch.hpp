// `tessera ... -n K`: start the job under mpirun when not already inside one.
#pragma once
#include <string>
#include <vector>

namespace tessera {

// True when this process was started by an MPI launcher (Open MPI, MPICH, PMIx).
bool launched_by_mpi();

// Replaces this process with `mpirun -n ranks --oversubscribe <program> args…`
// (root allowed, idle ranks yield). Throws tessera::Error if mpirun is missing.
[[noreturn]] void relaunch_under_mpirun(int ranks, const std::string& program, const std::vector<std::string>& args);

}  // namespace tessera
