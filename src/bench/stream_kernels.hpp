// STREAM's four kernels (McCalpin, "Memory Bandwidth and Machine Balance in
// Current High Performance Computers", 1995), on raw pointers so the
// DistArray run and the plain OpenMP baseline execute the very same loops.
#pragma once
#include <cmath>
#include <cstddef>

namespace tessera::bench::stream {

constexpr double kScalar = 3.0;

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

// Values every element must hold after `iterations` rounds of the four
// kernels, starting from a=1, b=2, c=0 (STREAM's own check).
struct Expected {
  double a = 1.0, b = 2.0, c = 0.0;
  explicit Expected(int iterations) {
    for (int k = 0; k < iterations; ++k) {
      c = a;
      b = kScalar * c;
      c = a + b;
      a = b + kScalar * c;
    }
  }
  static bool close(double got, double want) { return std::fabs(got - want) <= 1e-13 * std::fabs(want); }
};

}  // namespace tessera::bench::stream
