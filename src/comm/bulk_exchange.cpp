#include "tessera/comm/bulk_exchange.hpp"

#include <string>

#include "tessera/comm/request_reply.hpp"
#include "tessera/runtime/error.hpp"

namespace tessera::comm {

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
  std::uint64_t total = 0;
  for (auto c : counts) total += c;
  std::exception_ptr problem;
  if (total * record_bytes != send.size())
    problem = std::make_exception_ptr(MismatchError("bulk exchange: counts add up to " + std::to_string(total) +
                                                    " records but the buffer holds " +
                                                    std::to_string(send.size() / record_bytes)));
  AlltoallPlan plan(comm, counts, problem);
  received_counts.resize(static_cast<std::size_t>(plan.ranks()));
  for (int r = 0; r < plan.ranks(); ++r) received_counts[static_cast<std::size_t>(r)] = plan.received_from(r);
  std::byte* out = allocate(plan.received() * record_bytes);
  plan.forward_bytes(send.data(), out, record_bytes);
}

}  // namespace tessera::comm
