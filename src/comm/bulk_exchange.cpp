#include "tessera/comm/bulk_exchange.hpp"

#include <climits>
#include <string>

#include "tessera/runtime/error.hpp"
#include "tessera/runtime/wait.hpp"

namespace tessera::comm {

namespace {
int checked_int(std::uint64_t n, const char* what) {
  if (n > static_cast<std::uint64_t>(INT_MAX))
    throw ConfigError(std::string("bulk exchange: ") + what + " of " + std::to_string(n) +
                      " records exceeds MPI's int count; use more ranks");
  return static_cast<int>(n);
}
}  // namespace

std::vector<std::byte> exchange_bytes(MPI_Comm comm, std::span<const std::byte> send,
                                      std::span<const std::uint64_t> counts, std::size_t record_bytes,
                                      std::vector<std::uint64_t>& received_counts) {
  std::vector<std::byte> out;
  exchange_bytes_into(comm, send, counts, record_bytes, received_counts, [&](std::size_t bytes) {
    out.resize(bytes);
    return out.data();
  });
  return out;
}

void exchange_bytes_into(MPI_Comm comm, std::span<const std::byte> send, std::span<const std::uint64_t> counts,
                         std::size_t record_bytes, std::vector<std::uint64_t>& received_counts,
                         const std::function<std::byte*(std::size_t)>& allocate) {
  int size = 0;
  TESSERA_MPI(MPI_Comm_size(comm, &size));
  auto P = static_cast<std::size_t>(size);
  received_counts.assign(P, 0);
  MPI_Request req;
  TESSERA_MPI(MPI_Ialltoall(counts.data(), 1, MPI_UINT64_T, received_counts.data(), 1, MPI_UINT64_T, comm, &req));
  wait(req);

  std::vector<int> scounts(P), sdispl(P), rcounts(P), rdispl(P);
  std::uint64_t s_total = 0, r_total = 0;
  for (std::size_t r = 0; r < P; ++r) {
    scounts[r] = checked_int(counts[r], "a send");
    rcounts[r] = checked_int(received_counts[r], "a receive");
    sdispl[r] = checked_int(s_total, "a send offset");
    rdispl[r] = checked_int(r_total, "a receive offset");
    s_total += counts[r];
    r_total += received_counts[r];
  }
  if (s_total * record_bytes != send.size())
    throw Error("bulk exchange: counts add up to " + std::to_string(s_total) + " records but the buffer holds " +
                std::to_string(send.size() / record_bytes));
  checked_int(r_total, "a receive total");

  MPI_Datatype record;
  TESSERA_MPI(MPI_Type_contiguous(static_cast<int>(record_bytes), MPI_BYTE, &record));
  TESSERA_MPI(MPI_Type_commit(&record));
  std::byte* out = allocate(r_total * record_bytes);
  int rc = MPI_Ialltoallv(send.data(), scounts.data(), sdispl.data(), record, out, rcounts.data(), rdispl.data(),
                          record, comm, &req);
  if (rc == MPI_SUCCESS) wait(req);
  MPI_Type_free(&record);
  TESSERA_MPI(rc);
}

}  // namespace tessera::comm
