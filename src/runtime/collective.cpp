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
  if (failure) std::rethrow_exception(failure);
  if (lowest != INT_MAX) throw Error("the operation failed on rank " + std::to_string(lowest) + " (see its message)");
}

}  // namespace tessera
