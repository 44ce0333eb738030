#include "tessera/runtime/cancellation.hpp"

#include <atomic>

#include "tessera/runtime/collective.hpp"
#include "tessera/runtime/error.hpp"
#include "tessera/runtime/wait.hpp"

namespace tessera {

namespace {
std::atomic<bool> g_enabled{false};
std::atomic<bool> g_requested{false};
MPI_Comm g_notices = MPI_COMM_NULL;  // CancellationNotice's messages, apart from every other exchange
constexpr int kNoticeTag = 7;

[[noreturn]] void cancelled() {
  throw Cancelled("cancelled: the client asked to stop the running command (a keyboard interrupt)");
}
}  // namespace

void enable_cancellation(MPI_Comm comm) {
  if (g_notices == MPI_COMM_NULL) TESSERA_MPI(MPI_Comm_dup(comm, &g_notices));
  g_enabled.store(true, std::memory_order_relaxed);
}
bool cancellation_enabled() noexcept { return g_enabled.load(std::memory_order_relaxed); }
void request_cancellation() noexcept { g_requested.store(true, std::memory_order_relaxed); }
void clear_cancellation() noexcept { g_requested.store(false, std::memory_order_relaxed); }

void cancellation_point(MPI_Comm comm) {
  if (!g_enabled.load(std::memory_order_relaxed)) return;
  int asked = g_requested.load(std::memory_order_relaxed) ? 1 : 0;
  if (all_reduce(comm, asked, MPI_MAX) != 0) cancelled();
}

CancellationNotice::CancellationNotice() {
  if (!cancellation_enabled()) return;
  comm_ = g_notices;
  TESSERA_MPI(MPI_Comm_rank(comm_, &rank_));
  if (rank_ != 0) TESSERA_MPI(MPI_Irecv(&flag_, 1, MPI_INT, 0, kNoticeTag, comm_, &receive_));
}

void CancellationNotice::tell(int cancelled) {
  int size = 0;
  TESSERA_MPI(MPI_Comm_size(comm_, &size));
  said_ = cancelled;
  sends_.assign(static_cast<std::size_t>(size), MPI_REQUEST_NULL);
  for (int r = 1; r < size; ++r)
    TESSERA_MPI(MPI_Isend(&said_, 1, MPI_INT, r, kNoticeTag, comm_, &sends_[static_cast<std::size_t>(r)]));
  sent_ = true;
}

void CancellationNotice::poll() {
  if (comm_ == MPI_COMM_NULL) return;
  if (rank_ == 0) {
    if (!sent_ && g_requested.load(std::memory_order_relaxed)) {
      tell(1);
      cancelled();
    }
    return;
  }
  if (received_) return;
  int done = 0;
  {
    MpiPollScope quiet;
    TESSERA_MPI(MPI_Test(&receive_, &done, MPI_STATUS_IGNORE));
  }
  if (!done) return;
  received_ = true;
  if (flag_) cancelled();
}

void CancellationNotice::finish() {
  if (comm_ == MPI_COMM_NULL) return;
  if (rank_ == 0) {
    if (!sent_) tell(0);
    for (auto& s : sends_) wait(s);
  } else if (!received_) {
    wait(receive_);
    received_ = true;
  }
  comm_ = MPI_COMM_NULL;
}

CancellationNotice::~CancellationNotice() {
  if (comm_ == MPI_COMM_NULL) return;
  try {
    finish();
  } catch (...) {  // a destructor during an error: the error is what gets reported
  }
}

}  // namespace tessera
