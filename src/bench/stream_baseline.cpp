// The baseline of `tessera bench stream`: STREAM's loops in one process,
// parallelised with OpenMP, arrays first-touched by the threads that use them.
#include "tessera/bench/benchmarks.hpp"

#include <omp.h>
#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <memory>

#include "stream_kernels.hpp"
#include "tessera/storage/mapping.hpp"

namespace tessera::bench {

namespace {
// The launcher may have bound this rank to one core; the baseline's threads
// must be free to use the node's cores, as a plain OpenMP program would be.
class WholeNodeAffinity {
 public:
  WholeNodeAffinity() {
    have_ = sched_getaffinity(0, sizeof(saved_), &saved_) == 0;
    cpu_set_t all;
    CPU_ZERO(&all);
    for (long c = 0; c < sysconf(_SC_NPROCESSORS_ONLN) && c < CPU_SETSIZE; ++c) CPU_SET(static_cast<int>(c), &all);
    sched_setaffinity(0, sizeof(all), &all);
  }
  ~WholeNodeAffinity() {
    if (have_) sched_setaffinity(0, sizeof(saved_), &saved_);
  }

 private:
  cpu_set_t saved_;
  bool have_ = false;
};
}  // namespace

StreamBaseline stream_baseline(std::uint64_t elements, int threads, int reps) {
  WholeNodeAffinity affinity;
  auto n = static_cast<std::size_t>(elements);
  Mapping ma = Mapping::anonymous(n * sizeof(double)), mb = Mapping::anonymous(n * sizeof(double)),
          mc = Mapping::anonymous(n * sizeof(double));
  auto* a = reinterpret_cast<double*>(ma.data());
  auto* b = reinterpret_cast<double*>(mb.data());
  auto* c = reinterpret_cast<double*>(mc.data());
  double best[4] = {1e30, 1e30, 1e30, 1e30};
#pragma omp parallel num_threads(threads)
  {
    int t = omp_get_thread_num(), T = omp_get_num_threads();
    std::size_t lo = n * static_cast<std::size_t>(t) / static_cast<std::size_t>(T);
    std::size_t hi = n * static_cast<std::size_t>(t + 1) / static_cast<std::size_t>(T);
    for (std::size_t j = lo; j < hi; ++j) a[j] = 1.0, b[j] = 2.0, c[j] = 0.0;
    for (int r = 0; r < reps; ++r) {
      double t0 = 0;
#pragma omp barrier
#pragma omp master
      t0 = omp_get_wtime();
      stream::copy(c + lo, a + lo, hi - lo);
#pragma omp barrier
#pragma omp master
      best[0] = std::min(best[0], omp_get_wtime() - t0), t0 = omp_get_wtime();
      stream::scale(b + lo, c + lo, hi - lo);
#pragma omp barrier
#pragma omp master
      best[1] = std::min(best[1], omp_get_wtime() - t0), t0 = omp_get_wtime();
      stream::add(c + lo, a + lo, b + lo, hi - lo);
#pragma omp barrier
#pragma omp master
      best[2] = std::min(best[2], omp_get_wtime() - t0), t0 = omp_get_wtime();
      stream::triad(a + lo, b + lo, c + lo, hi - lo);
#pragma omp barrier
#pragma omp master
      best[3] = std::min(best[3], omp_get_wtime() - t0);
    }
  }
  stream::Expected want(reps);
  bool ok = true;
  for (std::size_t j = 0; j < n && ok; ++j)
    ok = stream::Expected::close(a[j], want.a) && stream::Expected::close(b[j], want.b) &&
         stream::Expected::close(c[j], want.c);
  return {best[0], best[1], best[2], best[3], ok};
}

}  // namespace tessera::bench
