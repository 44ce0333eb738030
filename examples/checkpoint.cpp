// A computation that survives being stopped: it checkpoints every 3 steps
// and, started again (on any number of ranks), resumes from the newest
// complete checkpoint. Run: mpirun -n 2 ./checkpoint DIR 5; mpirun -n 3 ./checkpoint DIR 10
#include <cstdio>
#include <string>

#include "tessera/resilience/checkpoint.hpp"
#include "tessera/runtime/collective.hpp"
using namespace tessera;
using namespace tessera::resilience;

int main(int argc, char** argv) {
  Runtime rt(argc, argv);
  if (argc < 3) {
    if (rt.rank() == 0) std::fprintf(stderr, "usage: checkpoint DIR STEPS\n");
    return 2;
  }
  const std::uint64_t steps = std::stoull(argv[2]);
  CheckpointOptions options;
  options.dir = argv[1];        // the disk level: fsync'd files under DIR/example.ckpt
  options.levels = Level::disk; // Level::node adds copies in /dev/shm that outlive the job
  options.name = "example";     // checkpoints of another program are refused
  Checkpoint ck(rt, options);

  DistArray<double> x(rt, 1000);  // x[i] = step * i after `step` steps
  std::uint64_t step = 0;
  if (auto found = ck.latest()) {  // collective: newest complete, every byte checked
    auto r = ck.restore(*found.info);
    r.read("x", x);                 // this rank's part, whatever the rank count that wrote it
    step = found.info->step;
    if (rt.rank() == 0) std::printf("resumed at step %llu\n", static_cast<unsigned long long>(step));
  }
  while (step < steps) {
    ++step;
    for (std::uint64_t i = x.local_begin(); i < x.local_end(); ++i) x.at(i) += static_cast<double>(i);
    if (step % 3 == 0 || step == steps) {
      auto w = ck.begin(step);
      w.add("x", x);
      w.commit();  // collective: complete on every rank, or not at all
    }
  }
  double mine = 0;
  for (double v : x.local()) mine += v;
  double sum = all_reduce(rt.comm(), mine, MPI_SUM);
  if (rt.rank() == 0) std::printf("step %llu: sum %.0f\n", static_cast<unsigned long long>(step), sum);
}
