// The baseline of `tessera bench stream`: STREAM's loops in one process,
// parallelised with OpenMP (static partition), arrays first-touched by the
// threads that use them. Lives on rank 0 only, while it runs.
#pragma once
#include <sched.h>

#include <cstdint>
#include <span>

#include "tessera/storage/mapping.hpp"

namespace tessera::bench {

class PlainStream {
 public:
  // a = 1, b = 2, c = 0, each element written first by the thread that owns it.
  PlainStream(std::uint64_t elements, int threads);
  ~PlainStream();
  PlainStream(const PlainStream&) = delete;
  PlainStream& operator=(const PlainStream&) = delete;

  void run(int kernel);  // one kernel over the whole arrays, every thread its part
  std::span<const double> a() const { return {a_, n_}; }
  std::span<const double> b() const { return {b_, n_}; }
  std::span<const double> c() const { return {c_, n_}; }

 private:
  // The launcher may have bound this rank to one core; the baseline's threads
  // must be free to use the node's cores, as a plain OpenMP program would be.
  cpu_set_t saved_affinity_;
  bool restore_affinity_ = false;
  std::size_t n_;
  int threads_;
  Mapping ma_, mb_, mc_;
  double *a_, *b_, *c_;
};

}  // namespace tessera::bench
