// STREAM's four kernels (McCalpin, "Memory Bandwidth and Machine Balance in
// Current High Performance Computers", 1995), on raw pointers so the
// DistArray run and the plain OpenMP baseline execute the very same loops.
#pragma once
#include <cstddef>

namespace tessera::bench::stream {

constexpr double kScalar = 3.0;
constexpr int kKernels = 4;
constexpr const char* kKernelNames[kKernels] = {"copy", "scale", "add", "triad"};
constexpr double kBytesPerElement[kKernels] = {16, 16, 24, 24};

inline void copy(double* __restrict c, const double* __restrict a, std::size_t n) {
  for (std::size_t j = 0; j < n; ++j) c[j] = a[j];
}
inline void scale(double* __restrict b, const double* __restrict c, std::size_t n) {
  for (std::size_t j = 0; j < n; ++j) b[j] = kScalar * c[j];
}
inline void add(double* __restrict c, const double* __restrict a, const double* __restrict b, std::size_t n) {
  for (std::size_t j = 0; j < n; ++j) c[j] = a[j] + b[j];
}
inline void triad(double* __restrict a, const double* __restrict b, const double* __restrict c, std::size_t n) {
  for (std::size_t j = 0; j < n; ++j) a[j] = b[j] + kScalar * c[j];
}

// Kernel k (0-3, STREAM's order) over n elements of a, b, c.
inline void run_kernel(int k, double* a, double* b, double* c, std::size_t n) {
  switch (k) {
    case 0: copy(c, a, n); break;
    case 1: scale(b, c, n); break;
    case 2: add(c, a, b, n); break;
    default: triad(a, b, c, n); break;
  }
}

}  // namespace tessera::bench::stream
