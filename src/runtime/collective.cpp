#include "tessera/runtime/collective.hpp"

#include <climits>
#include <exception>

#include "tessera/runtime/error.hpp"
#include "tessera/runtime/wait.hpp"

namespace tessera {

namespace {
int rank_of(MPI_Comm comm) {
  int rank = 0;
  TESSERA_MPI(MPI_Comm_rank(comm, &rank));
  return rank;
}
int to_int_count(std::size_t n) {
  if (n > static_cast<std::size_t>(INT_MAX))
    throw RangeError("a collective of " + std::to_string(n) + " bytes exceeds MPI's int count; split it");
  return static_cast<int>(n);
}
// Lowest rank for which `mine` is true, or INT_MAX.
int lowest_rank_with(MPI_Comm comm, bool mine) {
  return all_reduce(comm, mine ? rank_of(comm) : INT_MAX, MPI_MIN);
}
}  // namespace

namespace detail {

int comm_size(MPI_Comm comm) {
  int size = 0;
  TESSERA_MPI(MPI_Comm_size(comm, &size));
  return size;
}

void all_gather_bytes(MPI_Comm comm, const void* mine, std::size_t bytes, void* all) {
  MPI_Request req;
  TESSERA_MPI(MPI_Iallgather(mine, to_int_count(bytes), MPI_BYTE, all, to_int_count(bytes), MPI_BYTE, comm, &req));
  wait(req, "all_gather");
}

std::vector<std::byte> gather_bytes(MPI_Comm comm, const void* mine, std::size_t bytes, std::size_t unit, int root) {
  // Counts in units of `unit` bytes keep large gathers within MPI's int count.
  MPI_Datatype type;
  TESSERA_MPI(MPI_Type_contiguous(to_int_count(unit), MPI_BYTE, &type));
  TESSERA_MPI(MPI_Type_commit(&type));
  struct Free {
    MPI_Datatype* t;
    ~Free() { MPI_Type_free(t); }
  } free_type{&type};
  int count = to_int_count(bytes / unit);
  int size = comm_size(comm), rank = rank_of(comm);
  std::vector<int> counts(rank == root ? static_cast<std::size_t>(size) : 0), displs(counts.size());
  MPI_Request req;
  TESSERA_MPI(MPI_Igather(&count, 1, MPI_INT, counts.data(), 1, MPI_INT, root, comm, &req));
  wait(req, "gather");
  std::size_t total = 0;
  for (std::size_t r = 0; r < counts.size(); ++r) {
    displs[r] = to_int_count(total);
    total += static_cast<std::size_t>(counts[r]);
  }
  std::vector<std::byte> out(total * unit);
  TESSERA_MPI(MPI_Igatherv(mine, count, type, out.data(), counts.data(), displs.data(), type, root, comm, &req));
  wait(req, "gather");
  return out;
}

void broadcast_bytes(MPI_Comm comm, void* data, std::size_t bytes, int root) {
  MPI_Request req;
  TESSERA_MPI(MPI_Ibcast(data, to_int_count(bytes), MPI_BYTE, root, comm, &req));
  wait(req, "broadcast");
}

}  // namespace detail

std::string broadcast(MPI_Comm comm, std::string text, int root) {
  std::uint64_t length = broadcast<std::uint64_t>(comm, text.size(), root);
  text.resize(length);
  detail::broadcast_bytes(comm, text.data(), length, root);
  return text;
}

std::string first_problem(MPI_Comm comm, const std::string& problem) {
  int lowest = lowest_rank_with(comm, !problem.empty());
  if (lowest == INT_MAX) return "";
  return broadcast(comm, problem, lowest);
}

void agree(MPI_Comm comm, const std::function<void()>& step) {
  std::exception_ptr failure;
  try {
    step();
  } catch (...) {
    failure = std::current_exception();
  }
  int lowest = lowest_rank_with(comm, failure != nullptr);
  if (lowest == INT_MAX) return;
  // Every rank learns the lowest failing rank's message, so whichever rank
  // reports the error to the user names the real cause (file, line, value).
  // The category travels too, so every rank can catch the same type.
  std::string message;
  int category = static_cast<int>(ErrorCategory::generic);
  if (rank_of(comm) == lowest) {
    try {
      std::rethrow_exception(failure);
    } catch (const Error& e) {
      message = e.what();
      category = static_cast<int>(e.category());
    } catch (const std::exception& e) {
      message = e.what();
    } catch (...) {
      message = "unknown error";
    }
  }
  category = broadcast(comm, category, lowest);
  message = broadcast(comm, std::move(message), lowest);
  if (failure) std::rethrow_exception(failure);
  throw_error(static_cast<ErrorCategory>(category), "on rank " + std::to_string(lowest) + ": " + message);
}

template <class T>
void all_reduce(MPI_Comm comm, T* values, int count, MPI_Op op) {
  MPI_Request req;
  TESSERA_MPI(MPI_Iallreduce(MPI_IN_PLACE, values, count, mpi_type<T>(), op, comm, &req));
  wait(req, "all_reduce");
}
template void all_reduce<double>(MPI_Comm, double*, int, MPI_Op);
template void all_reduce<int>(MPI_Comm, int*, int, MPI_Op);
template void all_reduce<std::int64_t>(MPI_Comm, std::int64_t*, int, MPI_Op);
template void all_reduce<std::uint64_t>(MPI_Comm, std::uint64_t*, int, MPI_Op);
template void all_reduce<std::uint8_t>(MPI_Comm, std::uint8_t*, int, MPI_Op);
template void all_reduce<unsigned long long>(MPI_Comm, unsigned long long*, int, MPI_Op);

template <class T>
void all_gather_in_place(MPI_Comm comm, std::span<T> values, std::span<const int> counts, std::span<const int> displs) {
  MPI_Request req;
  TESSERA_MPI(MPI_Iallgatherv(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, values.data(), counts.data(), displs.data(),
                              mpi_type<T>(), comm, &req));
  wait(req, "all_gather");
}
template void all_gather_in_place<double>(MPI_Comm, std::span<double>, std::span<const int>, std::span<const int>);
template void all_gather_in_place<std::uint64_t>(MPI_Comm, std::span<std::uint64_t>, std::span<const int>, std::span<const int>);
template void all_gather_in_place<std::uint32_t>(MPI_Comm, std::span<std::uint32_t>, std::span<const int>, std::span<const int>);

template <class T>
void reduce_scatter_sum(MPI_Comm comm, std::span<const T> values, std::span<T> mine, std::span<const int> counts) {
  MPI_Request req;
  TESSERA_MPI(MPI_Ireduce_scatter(values.data(), mine.data(), counts.data(), mpi_type<T>(), MPI_SUM, comm, &req));
  wait(req, "reduce_scatter");
}
template void reduce_scatter_sum<double>(MPI_Comm, std::span<const double>, std::span<double>, std::span<const int>);

template <class T>
void all_to_all_v(MPI_Comm comm, const T* send, const int* send_counts, const int* send_displs, T* recv,
                  const int* recv_counts, const int* recv_displs) {
  MPI_Request req;
  TESSERA_MPI(MPI_Ialltoallv(send, send_counts, send_displs, mpi_type<T>(), recv, recv_counts, recv_displs,
                             mpi_type<T>(), comm, &req));
  wait(req, "all_to_all");
}
template void all_to_all_v<double>(MPI_Comm, const double*, const int*, const int*, double*, const int*, const int*);
template void all_to_all_v<std::uint64_t>(MPI_Comm, const std::uint64_t*, const int*, const int*, std::uint64_t*,
                                          const int*, const int*);

std::uint64_t exclusive_prefix_sum(MPI_Comm comm, std::uint64_t value) {
  std::uint64_t before = 0;
  MPI_Request req;
  TESSERA_MPI(MPI_Iexscan(&value, &before, 1, MPI_UINT64_T, MPI_SUM, comm, &req));
  wait(req, "prefix_sum");
  return rank_of(comm) == 0 ? 0 : before;  // MPI leaves rank 0's result undefined
}

}  // namespace tessera
