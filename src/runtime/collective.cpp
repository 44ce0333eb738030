#include "tessera/runtime/collective.hpp"

#include <climits>
#include <string>

#include "tessera/runtime/error.hpp"
#include "tessera/runtime/wait.hpp"

namespace tessera {

void agree(MPI_Comm comm, const std::function<void()>& step) {
  std::exception_ptr failure;
  try {
    step();
  } catch (...) {
    failure = std::current_exception();
  }
  int rank = 0;
  TESSERA_MPI(MPI_Comm_rank(comm, &rank));
  int mine = failure ? rank : INT_MAX, lowest = INT_MAX;
  MPI_Request req;
  TESSERA_MPI(MPI_Iallreduce(&mine, &lowest, 1, MPI_INT, MPI_MIN, comm, &req));
  wait(req);
  if (lowest == INT_MAX) return;
  // Every rank learns the lowest failing rank's message, so whichever rank
  // reports the error to the user names the real cause (file, line, value).
  // The category travels too, so every rank can catch the same type.
  std::string message;
  unsigned long head[2] = {0, 0};  // length, category
  if (rank == lowest) {
    try {
      std::rethrow_exception(failure);
    } catch (const std::exception& e) {
      message = e.what();
      head[1] = dynamic_cast<const FormatError*>(&e)     ? 1
                : dynamic_cast<const MismatchError*>(&e) ? 2
                : dynamic_cast<const RangeError*>(&e)    ? 3
                : dynamic_cast<const ConfigError*>(&e)   ? 4
                : dynamic_cast<const PeerError*>(&e)     ? 5
                                                         : 0;
    } catch (...) {
      message = "unknown error";
    }
    head[0] = message.size();
  }
  TESSERA_MPI(MPI_Ibcast(head, 2, MPI_UNSIGNED_LONG, lowest, comm, &req));
  wait(req);
  unsigned long length = head[0];
  message.resize(length);
  TESSERA_MPI(MPI_Ibcast(message.data(), static_cast<int>(length), MPI_CHAR, lowest, comm, &req));
  wait(req);
  if (failure) std::rethrow_exception(failure);
  message = "on rank " + std::to_string(lowest) + ": " + message;
  switch (head[1]) {
    case 1: throw FormatError(message);
    case 2: throw MismatchError(message);
    case 3: throw RangeError(message);
    case 4: throw ConfigError(message);
    case 5: throw PeerError(message);
    default: throw Error(message);
  }
}

}  // namespace tessera

namespace tessera {

template <class T>
void all_reduce(MPI_Comm comm, T* values, int count, MPI_Op op) {
  MPI_Request req;
  TESSERA_MPI(MPI_Iallreduce(MPI_IN_PLACE, values, count, mpi_type<T>(), op, comm, &req));
  wait(req);
}
template void all_reduce<double>(MPI_Comm, double*, int, MPI_Op);
template void all_reduce<int>(MPI_Comm, int*, int, MPI_Op);
template void all_reduce<std::int64_t>(MPI_Comm, std::int64_t*, int, MPI_Op);
template void all_reduce<std::uint64_t>(MPI_Comm, std::uint64_t*, int, MPI_Op);
template void all_reduce<std::uint8_t>(MPI_Comm, std::uint8_t*, int, MPI_Op);
template void all_reduce<unsigned long long>(MPI_Comm, unsigned long long*, int, MPI_Op);

std::uint64_t exclusive_prefix_sum(MPI_Comm comm, std::uint64_t value) {
  std::uint64_t before = 0;
  MPI_Request req;
  TESSERA_MPI(MPI_Iexscan(&value, &before, 1, MPI_UINT64_T, MPI_SUM, comm, &req));
  wait(req);
  int rank = 0;
  TESSERA_MPI(MPI_Comm_rank(comm, &rank));
  return rank == 0 ? 0 : before;  // MPI leaves rank 0's result undefined
}

}  // namespace tessera
