// STREAM (McCalpin) through DistArray: each rank runs the kernels on its local
// span, in Heap and in Shared storage; the baseline is the same loops in one
// process with OpenMP at the same thread count, measured in the same run.
#include "tessera/bench/benchmarks.hpp"

#include <algorithm>
#include <array>
#include <cstdio>

#include "stream_kernels.hpp"
#include "tessera/array/dist_array.hpp"
#include "tessera/bench/report.hpp"
#include "tessera/runtime/collective.hpp"
#include "tessera/runtime/wait.hpp"

namespace tessera::bench {

namespace {
constexpr const char* kKernels[4] = {"copy", "scale", "add", "triad"};
constexpr double kBytesPerElement[4] = {16, 16, 24, 24};

// Best time of each kernel over `reps` rounds, slowest rank each time.
std::array<double, 4> run_distarray(Runtime& rt, std::uint64_t n, const StorageOptions& storage, int reps,
                                    bool& verified) {
  DistArray<double> A(rt, n, storage), B(rt, n, storage), C(rt, n, storage);
  double* a = A.local().data();
  double* b = B.local().data();
  double* c = C.local().data();
  std::size_t m = A.local().size();
  for (std::size_t j = 0; j < m; ++j) a[j] = 1.0, b[j] = 2.0, c[j] = 0.0;  // first touch by the owner
  std::array<double, 4> best{1e30, 1e30, 1e30, 1e30};
  for (int r = 0; r < reps; ++r) {
    for (int k = 0; k < 4; ++k) {
      double t = time_once(rt, [&] {
        switch (k) {
          case 0: stream::copy(c, a, m); break;
          case 1: stream::scale(b, c, m); break;
          case 2: stream::add(c, a, b, m); break;
          default: stream::triad(a, b, c, m); break;
        }
      });
      best[static_cast<std::size_t>(k)] = std::min(best[static_cast<std::size_t>(k)], t);
    }
  }
  stream::Expected want(reps);
  int ok = 1;
  for (std::size_t j = 0; j < m && ok; ++j)
    ok = stream::Expected::close(a[j], want.a) && stream::Expected::close(b[j], want.b) &&
         stream::Expected::close(c[j], want.c);
  verified = all_reduce(rt.comm(), ok, MPI_LAND) != 0;
  return best;
}
}  // namespace

bool run_stream(Runtime& rt, const StreamOptions& o) {
  int threads = o.baseline_threads > 0 ? o.baseline_threads : rt.size();
  int reps = std::max(2, o.reps);
  nlohmann::json config{{"elements_per_array", o.elements},
                        {"array_bytes", o.elements * sizeof(double)},
                        {"reps", reps},
                        {"baseline_threads", threads}};
  Report report(rt, "stream", config, o.format);
  report.set_baselines({"plain loop", "DistArray heap"});

  // The baseline runs alone on rank 0 while the other ranks wait in a
  // yielding broadcast: a busy-polling MPI_Bcast would take a core from it.
  StreamBaseline base{};
  if (rt.rank() == 0) base = stream_baseline(o.elements, threads, reps);
  base = broadcast(rt.comm(), base, 0);

  bool heap_ok = false, shared_ok = false;
  auto heap = run_distarray(rt, o.elements, StorageOptions::heap(), reps, heap_ok);
  auto shared = run_distarray(rt, o.elements, StorageOptions::shared(), reps, shared_ok);
  double base_times[4] = {base.copy, base.scale, base.add, base.triad};

  for (int k = 0; k < 4; ++k) {
    auto uk = static_cast<std::size_t>(k);
    double bytes = kBytesPerElement[k] * static_cast<double>(o.elements);
    auto row = [&](const char* variant, const char* storage, double seconds, bool ok) {
      Result r = rate_result(variant, storage, {seconds, seconds, reps}, bytes, 1e9, "GB/s");
      r.group = kKernels[k];
      r.verified = ok;
      r.check = ok ? "all elements match STREAM's expected values" : "elements differ from the expected values";
      report.add(r);
    };
    row(("plain loop (OpenMP x" + std::to_string(threads) + ")").c_str(), "-", base_times[k], base.verified);
    row("DistArray", "heap", heap[uk], heap_ok);
    row("DistArray", "shared", shared[uk], shared_ok);
  }
  return report.print();
}

}  // namespace tessera::bench
