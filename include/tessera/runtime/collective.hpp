// Collective steps that may fail on some ranks only (a file exists on one
// node, a disk is full on another) must fail on every rank together, or the
// healthy ranks hang in the next collective. `agree` runs a local step and
// makes its outcome collective.
#pragma once
#include <mpi.h>

#include <exception>
#include <functional>

namespace tessera {

// Runs `step` on every rank of `comm`. If it throws on any rank, every rank
// throws: the failing ranks rethrow their own error, the others a tessera::Error
// of the same category (FormatError, RangeError, ...) carrying the lowest
// failing rank's message ("on rank k: ...").
void agree(MPI_Comm comm, const std::function<void()>& step);

}  // namespace tessera

#include <cstdint>
#include <type_traits>

namespace tessera {

template <class T>
MPI_Datatype mpi_type() {
  if constexpr (std::is_same_v<T, double>) return MPI_DOUBLE;
  else if constexpr (std::is_same_v<T, int>) return MPI_INT;
  else if constexpr (std::is_same_v<T, std::int64_t>) return MPI_INT64_T;
  else if constexpr (std::is_same_v<T, std::uint64_t>) return MPI_UINT64_T;
  else if constexpr (std::is_same_v<T, std::uint8_t>) return MPI_UINT8_T;
  else if constexpr (std::is_same_v<T, unsigned long long>) return MPI_UNSIGNED_LONG_LONG;
  else static_assert(sizeof(T) == 0, "no MPI datatype for this type");
}

// Element-wise reduction of `values` over every rank of `comm`, in place,
// waiting with back-off (never spinning the core).
template <class T>
void all_reduce(MPI_Comm comm, T* values, int count, MPI_Op op);

template <class T>
T all_reduce(MPI_Comm comm, T value, MPI_Op op) {
  all_reduce(comm, &value, 1, op);
  return value;
}
// Sum of `value` over the ranks before this one (0 on rank 0).
std::uint64_t exclusive_prefix_sum(MPI_Comm comm, std::uint64_t value);

}  // namespace tessera
