// The one home of collectives in Tessera. Library code calls only these, never
// a blocking MPI collective: every wait here polls a non-blocking request with
// back-off, so an oversubscribed rank gives its core to the rank doing the
// work instead of spinning in MPI (see wait.hpp).
//
// Steps that may fail on some ranks only (a file exists on one node, a disk is
// full on another) must fail on every rank together, or the healthy ranks hang
// in the next collective. `agree` runs a local step and makes its outcome
// collective.
#pragma once
#include <mpi.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <functional>
#include <limits>
#include <span>
#include <string>
#include <type_traits>
#include <vector>

namespace tessera {

// Runs `step` on every rank of `comm`. If it throws on any rank, every rank
// throws: the failing ranks rethrow their own error, the others a tessera::Error
// of the same category (FormatError, RangeError, ...) carrying the lowest
// failing rank's message ("on rank k: ...").
void agree(MPI_Comm comm, const std::function<void()>& step);

// "" when `problem` is empty on every rank; otherwise the problem of the
// lowest rank that has one, on every rank. For verifiers that report rather
// than throw.
std::string first_problem(MPI_Comm comm, const std::string& problem);

template <class T>
MPI_Datatype mpi_type() {
  if constexpr (std::is_same_v<T, double>) return MPI_DOUBLE;
  else if constexpr (std::is_same_v<T, int>) return MPI_INT;
  else if constexpr (std::is_same_v<T, char>) return MPI_CHAR;
  else if constexpr (std::is_same_v<T, std::int64_t>) return MPI_INT64_T;
  else if constexpr (std::is_same_v<T, std::uint32_t>) return MPI_UINT32_T;
  else if constexpr (std::is_same_v<T, std::uint64_t>) return MPI_UINT64_T;
  else if constexpr (std::is_same_v<T, std::uint8_t>) return MPI_UINT8_T;
  else if constexpr (std::is_same_v<T, unsigned long long>) return MPI_UNSIGNED_LONG_LONG;
  else static_assert(sizeof(T) == 0, "no MPI datatype for this type");
}

// Element-wise reduction of `values` over every rank of `comm`, in place.
template <class T>
void all_reduce(MPI_Comm comm, T* values, int count, MPI_Op op);

template <class T>
T all_reduce(MPI_Comm comm, T value, MPI_Op op) {
  all_reduce(comm, &value, 1, op);
  return value;
}
// Variable-size exchanges; counts and displacements are in elements, one
// per rank (instantiated for double; all_to_all_v also for std::uint64_t).
// Every rank's block [displs[r], displs[r] + counts[r]) of `values` on every
// rank; this rank's own block is already in place.
template <class T>
void all_gather_in_place(MPI_Comm comm, std::span<T> values, std::span<const int> counts, std::span<const int> displs);
// The element-wise sum of every rank's `values`; rank r receives block r
// (counts[r] elements, blocks in rank order) into `mine`.
template <class T>
void reduce_scatter_sum(MPI_Comm comm, std::span<const T> values, std::span<T> mine, std::span<const int> counts);
// Block r of `send` goes to rank r, which receives it as this rank's block of
// its `recv` (MPI_Alltoallv).
template <class T>
void all_to_all_v(MPI_Comm comm, const T* send, const int* send_counts, const int* send_displs, T* recv,
                  const int* recv_counts, const int* recv_displs);

// Sum of `value` over the ranks before this one (0 on rank 0).
std::uint64_t exclusive_prefix_sum(MPI_Comm comm, std::uint64_t value);

namespace detail {
void all_gather_bytes(MPI_Comm comm, const void* mine, std::size_t bytes, void* all);
std::vector<std::byte> gather_bytes(MPI_Comm comm, const void* mine, std::size_t bytes, std::size_t unit, int root);
void broadcast_bytes(MPI_Comm comm, void* data, std::size_t bytes, int root);
int comm_size(MPI_Comm comm);
}  // namespace detail

// Every rank's `value`, in rank order, on every rank. T trivially copyable.
template <class T>
std::vector<T> all_gather(MPI_Comm comm, const T& value) {
  static_assert(std::is_trivially_copyable_v<T>);
  std::vector<T> all(static_cast<std::size_t>(detail::comm_size(comm)));
  detail::all_gather_bytes(comm, &value, sizeof(T), all.data());
  return all;
}

// Rank `root` receives every rank's `values` concatenated in rank order (the
// counts may differ); the other ranks get an empty vector.
template <class T>
std::vector<T> gather_to_root(MPI_Comm comm, std::span<const T> values, int root = 0) {
  static_assert(std::is_trivially_copyable_v<T>);
  auto bytes = detail::gather_bytes(comm, values.data(), values.size_bytes(), sizeof(T), root);
  std::vector<T> out(bytes.size() / sizeof(T));
  if (!out.empty()) std::memcpy(out.data(), bytes.data(), bytes.size());
  return out;
}

// `values` of rank `root` copied to every rank.
template <class T>
void broadcast(MPI_Comm comm, T* values, std::size_t count, int root) {
  static_assert(std::is_trivially_copyable_v<T>);
  detail::broadcast_bytes(comm, values, count * sizeof(T), root);
}
template <class T>
T broadcast(MPI_Comm comm, T value, int root) {
  broadcast(comm, &value, 1, root);
  return value;
}
std::string broadcast(MPI_Comm comm, std::string text, int root);

// The largest (or smallest) value over every rank and the smallest index that
// holds it. A rank with nothing to offer passes kNoIndex; when no rank offers
// anything the result's index is kNoIndex.
inline constexpr std::uint64_t kNoIndex = ~std::uint64_t{0};
template <class T>
struct Located {
  T value{};
  std::uint64_t index = kNoIndex;
  bool found() const noexcept { return index != kNoIndex; }
};
namespace detail {
// `op` picks the value (MPI_MAX or MPI_MIN); `absent` loses every comparison.
template <class T>
Located<T> all_arg(MPI_Comm comm, T value, std::uint64_t index, MPI_Op op, T absent) {
  if (index == kNoIndex) value = absent;
  Located<T> out;
  out.value = all_reduce(comm, value, op);
  out.index = all_reduce<std::uint64_t>(comm, value == out.value ? index : kNoIndex, MPI_MIN);
  return out;
}
}  // namespace detail
template <class T>
Located<T> all_argmax(MPI_Comm comm, T value, std::uint64_t index) {
  return detail::all_arg(comm, value, index, MPI_MAX, std::numeric_limits<T>::lowest());
}
template <class T>
Located<T> all_argmin(MPI_Comm comm, T value, std::uint64_t index) {
  return detail::all_arg(comm, value, index, MPI_MIN, std::numeric_limits<T>::max());
}

}  // namespace tessera
