// Creates an array with default storage while co-locale segments are on
// (TESSERA_COLOCALE_SEGMENTS=1), writes the job id and then the pids of its
// ranks to a ready file, then waits to be killed. Used by
// test_colocale_segments.sh. Usage: colocale_holder READY_FILE
#include <unistd.h>

#include <cstdio>
#include <fstream>

#include "tessera/array/dist_array.hpp"
#include "tessera/runtime/collective.hpp"

int main(int argc, char** argv) {
  tessera::Runtime rt(argc, argv);
  if (argc != 2) return 64;
  if (!rt.colocale_segments()) return 65;
  tessera::DistArray<double> a(rt, 1 << 16);
  if (a.storage_kind() != tessera::StorageKind::colocale) return 66;
  for (auto& x : a.local()) x = 1.0;
  auto pids = tessera::all_gather(rt.comm(), static_cast<int>(getpid()));
  if (rt.rank() == 0) {
    std::string tmp = std::string(argv[1]) + ".tmp";
    {
      std::ofstream out(tmp);
      out << rt.job_id() << "\n";
      for (int p : pids) out << p << "\n";
    }
    std::rename(tmp.c_str(), argv[1]);
  }
  for (;;) sleep(1);
}
