// Random increments into a distributed array, aggregated per destination.
// Run: mpirun -n 2 ./histogram
#include <cstdio>
#include <vector>

#include "tessera/comm/aggregators.hpp"
#include "tessera/runtime/collective.hpp"
using namespace tessera;

// Any indices will do; these are a fixed pseudo-random walk over the table.
std::vector<std::uint64_t> my_random_indices(int rank, std::uint64_t table) {
  std::vector<std::uint64_t> out(100'000);
  std::uint64_t x = 12345 + static_cast<std::uint64_t>(rank);
  for (auto& i : out) i = (x = x * 6364136223846793005u + 1442695040888963407u) % table;
  return out;
}

int main(int argc, char** argv) {
  Runtime rt(argc, argv);                                  // MPI up, co-locales found
  DistArray<std::int64_t> counts(rt, 1'000'000,            // one segment per rank in /dev/shm
                                 StorageOptions::shared("histo"));
  {
    UpdateAggregator<std::int64_t, ops::Add> hist(counts); // buffered per destination
    for (std::uint64_t i : my_random_indices(rt.rank(), counts.size())) hist.update(i, 1);
  }                                                        // destruction flushes (collective)
  std::int64_t mine = 0;
  for (std::int64_t v : counts.local()) mine += v;
  std::int64_t total = all_reduce(rt.comm(), mine, MPI_SUM);
  if (rt.rank() == 0) std::printf("%lld updates counted\n", static_cast<long long>(total));
}
