// A rank killed (SIGKILL) in the middle of an aggregation whose batches to
// its co-locales travel through the same-node rings, while the others keep
// pushing and then flush: run by test_killed_peer.py, which expects the job to
// end promptly naming the dead rank, and nothing left in /dev/shm.
// Usage: killed_peer VICTIM_RANK READY_FILE
#include <signal.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>

#include "tessera/comm/aggregators.hpp"

int main(int argc, char** argv) {
  tessera::Runtime rt(argc, argv);
  if (argc < 3) {
    std::fprintf(stderr, "usage: killed_peer VICTIM_RANK READY_FILE\n");
    return 2;
  }
  const int victim = std::atoi(argv[1]);
  tessera::DistArray<std::int64_t> a(rt, 1 << 16, tessera::StorageOptions::heap());
  tessera::AggregationOptions o;
  o.same_node_direct = 0;
  o.buffer_bytes = 4096;  // many batches: the rings fill and wrap
  {
    tessera::UpdateAggregator<std::int64_t, tessera::ops::Add> up(a, o);
    for (std::uint64_t k = 0; k < 200000; ++k) {
      up.update((k * 2654435761u + static_cast<std::uint64_t>(rt.rank())) % a.size(), 1);
      if (k == 50000 && rt.rank() == victim) {
        std::ofstream(argv[2]) << "ready\n";
        ::raise(SIGKILL);
      }
    }
    for (int round = 0; round < 1000; ++round) {  // the survivors keep exchanging until the job is ended
      for (std::uint64_t k = 0; k < 1000; ++k) up.update(k % a.size(), 1);
      up.flush();
    }
  }
  std::fprintf(stderr, "rank %d: the job was not ended after rank %d died\n", rt.rank(), victim);
  return 3;
}
