// The bulk-synchronous baseline of indexgather and histogram: bucket each
// request's local offset by owner rank, one MPI_Alltoallv there (and, for a
// gather, one back). Nonblocking collectives finished by the yielding wait.
#pragma once
#include <cstdint>
#include <numeric>
#include <vector>

#include "tessera/array/dist_array.hpp"
#include "tessera/runtime/error.hpp"
#include "tessera/runtime/wait.hpp"

namespace tessera::bench {

struct BucketExchange {
  MPI_Comm comm = MPI_COMM_NULL;
  std::vector<int> send_counts, send_displs, recv_counts, recv_displs;
  std::vector<std::size_t> slot;        // request k travelled in send position slot[k]
  std::vector<std::uint64_t> incoming;  // local offsets other ranks asked of this rank

  // Buckets and sends the local offsets of `indices` to their owners in `table`.
  template <class T>
  BucketExchange(const DistArray<T>& table, const std::vector<std::uint64_t>& indices)
      : comm(table.runtime().comm()) {
    auto ranks = static_cast<std::size_t>(table.runtime().size());
    send_counts.assign(ranks, 0);
    recv_counts.assign(ranks, 0);
    send_displs.assign(ranks, 0);
    recv_displs.assign(ranks, 0);
    std::vector<int> owners(indices.size());
    for (std::size_t k = 0; k < indices.size(); ++k)
      ++send_counts[static_cast<std::size_t>(owners[k] = table.owner(indices[k]))];
    std::exclusive_scan(send_counts.begin(), send_counts.end(), send_displs.begin(), 0);
    std::vector<std::uint64_t> out(indices.size());
    slot.resize(indices.size());
    std::vector<int> fill = send_displs;
    for (std::size_t k = 0; k < indices.size(); ++k) {
      slot[k] = static_cast<std::size_t>(fill[static_cast<std::size_t>(owners[k])]++);
      out[slot[k]] = table.distribution().local_offset(indices[k], owners[k]);
    }
    MPI_Request req;
    TESSERA_MPI(MPI_Ialltoall(send_counts.data(), 1, MPI_INT, recv_counts.data(), 1, MPI_INT, comm, &req));
    wait(req);
    std::exclusive_scan(recv_counts.begin(), recv_counts.end(), recv_displs.begin(), 0);
    incoming.resize(static_cast<std::size_t>(recv_displs.back() + recv_counts.back()));
    TESSERA_MPI(MPI_Ialltoallv(out.data(), send_counts.data(), send_displs.data(), MPI_UINT64_T, incoming.data(),
                               recv_counts.data(), recv_displs.data(), MPI_UINT64_T, comm, &req));
    wait(req);
  }

  // Sends one answer per incoming request back; returns them in request order.
  std::vector<std::uint64_t> reply(const std::vector<std::uint64_t>& answers) const {
    std::vector<std::uint64_t> back(slot.size()), out(slot.size());
    MPI_Request req;
    TESSERA_MPI(MPI_Ialltoallv(answers.data(), recv_counts.data(), recv_displs.data(), MPI_UINT64_T, back.data(),
                               send_counts.data(), send_displs.data(), MPI_UINT64_T, comm, &req));
    wait(req);
    for (std::size_t k = 0; k < slot.size(); ++k) out[k] = back[slot[k]];
    return out;
  }
};

}  // namespace tessera::bench
