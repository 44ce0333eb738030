// A Tessera job that reports no steps, for the supervisor's deadlock rule
// (test_recovery.py, case waits):
//   waiting_job deadlock  rank 0 waits in a barrier of a duplicate of the
//                         job's communicator, the others in the job's own
//                         barrier: every rank waits forever, so the
//                         supervisor must stop it;
//   waiting_job compute S rank 0 computes for S seconds (outside any wait)
//                         while the others wait for it in a barrier, then
//                         joins: slow, not hung, so it must finish.
#include <mpi.h>

#include <chrono>
#include <cstdio>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "tessera/runtime/runtime.hpp"
#include "tessera/runtime/wait.hpp"

int main(int argc, char** argv) {
  tessera::Runtime rt(argc, argv);
  const std::string mode = argc > 1 ? argv[1] : "";
  if (mode == "deadlock") {
    MPI_Comm other = MPI_COMM_NULL;
    MPI_Comm_dup(rt.comm(), &other);
    // Rank 0 waits in a barrier of `other`, the rest in one of the job's
    // communicator: each side waits for ranks that never come.
    tessera::barrier(rt.rank() == 0 ? other : rt.comm());
    std::printf("rank %d passed a barrier that cannot complete\n", rt.rank());
    return 1;
  }
  if (mode == "compute" && argc > 2) {
    if (rt.rank() == 0) {
      const auto until = std::chrono::steady_clock::now() + std::chrono::duration<double>(std::atof(argv[2]));
      volatile std::uint64_t x = 0;
      while (std::chrono::steady_clock::now() < until) x = x + 1;
    }
    tessera::barrier(rt.comm());
    if (rt.rank() == 0) std::printf("computed and joined\n");
    return 0;
  }
  std::fprintf(stderr, "usage: waiting_job deadlock | compute SECONDS\n");
  return 2;
}
