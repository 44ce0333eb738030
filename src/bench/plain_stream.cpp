#include "plain_stream.hpp"

#include <omp.h>
#include <unistd.h>

#include "stream_kernels.hpp"

namespace tessera::bench {

namespace {
cpu_set_t whole_node() {
  cpu_set_t all;
  CPU_ZERO(&all);
  for (long c = 0; c < sysconf(_SC_NPROCESSORS_ONLN) && c < CPU_SETSIZE; ++c) CPU_SET(static_cast<int>(c), &all);
  return all;
}
// Thread t's share of n elements: the same split at first touch and in every kernel.
std::pair<std::size_t, std::size_t> share(std::size_t n) {
  auto t = static_cast<std::size_t>(omp_get_thread_num()), threads = static_cast<std::size_t>(omp_get_num_threads());
  return {n * t / threads, n * (t + 1) / threads};
}
}  // namespace

PlainStream::PlainStream(std::uint64_t elements, int threads)
    : n_(static_cast<std::size_t>(elements)),
      threads_(threads),
      ma_(Mapping::anonymous(n_ * sizeof(double))),
      mb_(Mapping::anonymous(n_ * sizeof(double))),
      mc_(Mapping::anonymous(n_ * sizeof(double))),
      a_(reinterpret_cast<double*>(ma_.data())),
      b_(reinterpret_cast<double*>(mb_.data())),
      c_(reinterpret_cast<double*>(mc_.data())) {
  // Before the first parallel region: OpenMP's threads inherit this mask.
  restore_affinity_ = sched_getaffinity(0, sizeof(saved_affinity_), &saved_affinity_) == 0;
  cpu_set_t all = whole_node();
  sched_setaffinity(0, sizeof(all), &all);
#pragma omp parallel num_threads(threads_)
  {
    auto [lo, hi] = share(n_);
    for (std::size_t j = lo; j < hi; ++j) a_[j] = 1.0, b_[j] = 2.0, c_[j] = 0.0;
  }
}

PlainStream::~PlainStream() {
  if (restore_affinity_) sched_setaffinity(0, sizeof(saved_affinity_), &saved_affinity_);
}

void PlainStream::run(int kernel) {
#pragma omp parallel num_threads(threads_)
  {
    auto [lo, hi] = share(n_);
    stream::run_kernel(kernel, a_ + lo, b_ + lo, c_ + lo, hi - lo);
  }
}

}  // namespace tessera::bench
