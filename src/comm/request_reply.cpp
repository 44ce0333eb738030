#include "tessera/comm/request_reply.hpp"

#include <algorithm>
#include <climits>
#include <numeric>
#include <string>

#include "tessera/runtime/wait.hpp"

namespace tessera::comm {

namespace detail {

void check_length(const char* what, std::size_t got, std::uint64_t want) {
  if (got != want)
    throw MismatchError(std::string("all-to-all exchange: ") + std::to_string(got) + " " + what +
                        " where the plan has " + std::to_string(want));
}

std::exception_ptr owner_out_of_range(std::size_t position, long long owner, int ranks) {
  return std::make_exception_ptr(RangeError("request " + std::to_string(position) + " of this rank names owner rank " +
                                            std::to_string(owner) + ", outside [0, " + std::to_string(ranks) + ")"));
}

std::vector<std::uint64_t> group_starts(std::span<const std::uint64_t> counts) {
  std::vector<std::uint64_t> start(counts.size());
  std::exclusive_scan(counts.begin(), counts.end(), start.begin(), std::uint64_t{0});
  return start;
}

}  // namespace detail

namespace {

constexpr std::uint64_t kMaxCount = INT_MAX;

std::string beyond_int(const std::string& what, std::uint64_t n) {
  return "bulk exchange: " + what + " " + std::to_string(n) + " records, beyond MPI's int counts (" +
         std::to_string(kMaxCount) + "); use more ranks or exchange in pieces";
}

// The MPI type of one record: a predefined type of its size where there is
// one (no type to build and free per call), else contiguous bytes.
class RecordType {
 public:
  explicit RecordType(std::size_t bytes) {
    switch (bytes) {
      case 1: type_ = MPI_BYTE; return;
      case 2: type_ = MPI_UINT16_T; return;
      case 4: type_ = MPI_UINT32_T; return;
      case 8: type_ = MPI_UINT64_T; return;
      default: break;
    }
    if (bytes == 0 || bytes > kMaxCount)
      throw ConfigError("bulk exchange: records of " + std::to_string(bytes) + " bytes cannot travel as one MPI type");
    TESSERA_MPI(MPI_Type_contiguous(static_cast<int>(bytes), MPI_BYTE, &type_));
    owned_ = true;
    int rc = MPI_Type_commit(&type_);
    if (rc != MPI_SUCCESS) MPI_Type_free(&type_);
    TESSERA_MPI(rc);
  }
  ~RecordType() {
    if (owned_) MPI_Type_free(&type_);
  }
  RecordType(const RecordType&) = delete;
  RecordType& operator=(const RecordType&) = delete;
  MPI_Datatype get() const noexcept { return type_; }

 private:
  MPI_Datatype type_ = MPI_DATATYPE_NULL;
  bool owned_ = false;
};

}  // namespace

AlltoallPlan::AlltoallPlan(MPI_Comm comm, std::span<const std::uint64_t> counts, std::exception_ptr problem)
    : comm_(comm) {
  const int size = tessera::detail::comm_size(comm);
  int rank = 0;
  TESSERA_MPI(MPI_Comm_rank(comm, &rank));
  const auto P = static_cast<std::size_t>(size);
  if (counts.size() != P && !problem)
    problem = std::make_exception_ptr(MismatchError("bulk exchange: " + std::to_string(counts.size()) +
                                                    " counts for " + std::to_string(P) + " ranks (one each)"));
  std::vector<std::uint64_t> to(P, 0), from(P, 0);
  std::copy_n(counts.begin(), std::min(P, counts.size()), to.begin());
  for (auto c : to) sent_ += c;
  if (sent_ > kMaxCount && !problem)
    problem = std::make_exception_ptr(ConfigError(beyond_int("this rank sends", sent_)));
  // Alongside the counts, and in flight with them: what every rank receives
  // in all, and how many ranks found a problem, so that every rank knows
  // whether any would fail (a receive total is only seen by its rank).
  std::vector<std::uint64_t> totals(P + 1);
  std::copy(to.begin(), to.end(), totals.begin());
  totals[P] = problem ? 1 : 0;
  MPI_Request counted, summed;
  TESSERA_MPI(MPI_Ialltoall(to.data(), 1, MPI_UINT64_T, from.data(), 1, MPI_UINT64_T, comm, &counted));
  TESSERA_MPI(MPI_Iallreduce(MPI_IN_PLACE, totals.data(), size + 1, MPI_UINT64_T, MPI_SUM, comm, &summed));
  wait(counted);
  wait(summed);
  received_ = totals[static_cast<std::size_t>(rank)];
  if (totals[P] > 0 || std::any_of(totals.begin(), totals.end() - 1, [](std::uint64_t t) { return t > kMaxCount; })) {
    // Only on failure: one more collective carries the failing rank's message.
    agree(comm, [&] {
      if (problem) std::rethrow_exception(problem);
      if (received_ > kMaxCount) throw ConfigError(beyond_int("this rank would receive", received_));
    });
    throw Error("bulk exchange: a rank reported a problem it did not raise");  // agree threw already
  }
  send_counts_.resize(P), send_displs_.resize(P), recv_counts_.resize(P), recv_displs_.resize(P);
  int s = 0, r = 0;
  for (std::size_t p = 0; p < P; ++p) {
    send_counts_[p] = static_cast<int>(to[p]), send_displs_[p] = s, s += send_counts_[p];
    recv_counts_[p] = static_cast<int>(from[p]), recv_displs_[p] = r, r += recv_counts_[p];
  }
}

void AlltoallPlan::exchange(const void* send, const std::vector<int>& send_counts,
                            const std::vector<int>& send_displs, void* recv, const std::vector<int>& recv_counts,
                            const std::vector<int>& recv_displs, std::size_t record_bytes) const {
  if (comm_ == MPI_COMM_NULL) return;
  RecordType type(record_bytes);
  MPI_Request req;
  TESSERA_MPI(MPI_Ialltoallv(send, send_counts.data(), send_displs.data(), type.get(), recv, recv_counts.data(),
                             recv_displs.data(), type.get(), comm_, &req));
  wait(req);
}

void AlltoallPlan::forward_bytes(const void* send, void* recv, std::size_t record_bytes) const {
  exchange(send, send_counts_, send_displs_, recv, recv_counts_, recv_displs_, record_bytes);
}

void AlltoallPlan::backward_bytes(const void* send, void* recv, std::size_t record_bytes) const {
  exchange(send, recv_counts_, recv_displs_, recv, send_counts_, send_displs_, record_bytes);
}

}  // namespace tessera::comm
