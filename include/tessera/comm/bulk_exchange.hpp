// Bulk all-to-all exchange of whole arrays, for one-off redistribution (an
// edge list moving to its owners, an exchange plan being set up). Irregular
// fine-grained traffic belongs in the aggregators instead.
#pragma once
#include <mpi.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <functional>
#include <span>
#include <type_traits>
#include <vector>

namespace tessera::comm {

// Sends send[displ[r] .. displ[r] + counts[r]) to rank r, where displ is the
// prefix sum of counts (records grouped by destination); returns what every
// rank sent here, grouped by source rank, and the count from each source in
// `received_counts`. Collective; waits with back-off. One AlltoallPlan
// (request_reply.hpp): its errors (wrong counts, totals beyond MPI's int
// counts) are thrown on every rank together.
std::vector<std::byte> exchange_bytes(MPI_Comm comm, std::span<const std::byte> send,
                                      std::span<const std::uint64_t> counts, std::size_t record_bytes,
                                      std::vector<std::uint64_t>& received_counts);

// The same, receiving into storage that `allocate(bytes)` returns (called
// once, with the total), so a typed result needs no second copy.
void exchange_bytes_into(MPI_Comm comm, std::span<const std::byte> send, std::span<const std::uint64_t> counts,
                         std::size_t record_bytes, std::vector<std::uint64_t>& received_counts,
                         const std::function<std::byte*(std::size_t)>& allocate);

template <class T>
std::vector<T> exchange(MPI_Comm comm, std::span<const T> send, std::span<const std::uint64_t> counts,
                        std::vector<std::uint64_t>& received_counts) {
  static_assert(std::is_trivially_copyable_v<T>);
  std::vector<T> out;
  exchange_bytes_into(comm, std::as_bytes(send), counts, sizeof(T), received_counts, [&](std::size_t bytes) {
    out.resize(bytes / sizeof(T));
    return reinterpret_cast<std::byte*>(out.data());
  });
  return out;
}

}  // namespace tessera::comm
