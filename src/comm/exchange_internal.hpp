// Helpers shared by the two files of RecordExchange (direct and routed batches).
#pragma once
#include <mpi.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <vector>

#include "tessera/runtime/error.hpp"
#include "tessera/runtime/progress.hpp"

namespace tessera::comm::detail {

// Ends one round of one kind of batch: a reduction of `sent` (batches this
// rank sent to each rank) tells it how many it is owed; it serves until they
// have all been received and `done()` holds, then resets both counts.
template <class Done>
void settle_round(ProgressEngine& engine, MPI_Comm comm, std::vector<int>& sent, std::uint64_t& received, Done&& done) {
  int expected = 0;
  MPI_Request req;
  TESSERA_MPI(MPI_Ireduce_scatter_block(sent.data(), &expected, 1, MPI_INT, MPI_SUM, comm, &req));
  engine.wait_serving(req, "flush");
  engine.serve_until([&] { return received >= static_cast<std::uint64_t>(expected) && done(); }, "flush");
  received -= static_cast<std::uint64_t>(expected);
  std::fill(sent.begin(), sent.end(), 0);
}

template <class T>
T load(const std::byte* at) {
  T v;
  std::memcpy(&v, at, sizeof(T));
  return v;
}
template <class T>
void store(std::byte* at, T v) {
  std::memcpy(at, &v, sizeof(T));
}

}  // namespace tessera::comm::detail
