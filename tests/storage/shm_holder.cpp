// Creates a Shared array (not persistent), writes the pids of its ranks to a
// ready file, then waits to be killed. Used by test_gc_after_sigkill.sh.
// Usage: shm_holder NAME READY_FILE
#include <unistd.h>

#include <cstdio>
#include <fstream>

#include "tessera/array/dist_array.hpp"
#include "tessera/runtime/wait.hpp"

int main(int argc, char** argv) {
  tessera::Runtime rt(argc, argv);
  if (argc != 3) return 64;
  tessera::DistArray<double> a(rt, 1 << 16, tessera::StorageOptions::shared(argv[1]));
  for (auto& x : a.local()) x = 1.0;
  int pid = getpid();
  std::vector<int> pids(static_cast<std::size_t>(rt.size()));
  MPI_Gather(&pid, 1, MPI_INT, pids.data(), 1, MPI_INT, 0, rt.comm());
  if (rt.rank() == 0) {
    std::string tmp = std::string(argv[2]) + ".tmp";
    {
      std::ofstream out(tmp);
      for (int p : pids) out << p << "\n";
    }
    std::rename(tmp.c_str(), argv[2]);
  }
  for (;;) sleep(1);
}
