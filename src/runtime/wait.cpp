#include "tessera/runtime/wait.hpp"

#include <dlfcn.h>
#include <sched.h>
#include <time.h>

#include <cstdint>

#include "tessera/runtime/error.hpp"
#include "tessera/runtime/fault_injection.hpp"

namespace tessera {

namespace {
std::uint64_t now_ns() noexcept {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<std::uint64_t>(ts.tv_sec) * 1'000'000'000u + static_cast<std::uint64_t>(ts.tv_nsec);
}
constexpr std::uint64_t kYieldNs = 1'000'000;            // then short sleeps
constexpr std::uint64_t kShortSleepsNs = 1'000'000'000;  // then long sleeps, and the wait is noted
// A sched_yield that returned this late gave the core to another program:
// the machine is contended, and for a while this thread sleeps instead.
constexpr std::uint64_t kSlowYieldNs = 100'000;
constexpr std::uint64_t kContendedNs = 100'000'000;
thread_local std::uint64_t t_contended_until = 0;

using SetYield = bool (*)(bool);
SetYield mpi_set_yield() noexcept {
  static const SetYield f = reinterpret_cast<SetYield>(::dlsym(RTLD_DEFAULT, "opal_progress_set_yield_when_idle"));
  return f;
}
}  // namespace

MpiPollScope::MpiPollScope() noexcept {
  if (SetYield f = mpi_set_yield()) saved_ = f(false) ? 1 : 0;
}

MpiPollScope::~MpiPollScope() {
  if (saved_ >= 0) mpi_set_yield()(saved_ == 1);
}

void Backoff::idle() noexcept {
  // Short waits (a flush round, a reply) stay responsive with sched_yield; a
  // long one (a peer computing for seconds) sleeps so it costs no CPU. The
  // switch goes by the clock, not by a count of polls, and a slow yield
  // (another program ran) switches to sleeps at once: a sleeper, once woken,
  // is scheduled ahead of a program that keeps a core busy, a yielder is
  // not. With 2,000 yields first (and MPI's own yield in every poll, see
  // MpiPollScope), a 0.1 s test ran 45 s beside two busy loops.
  if (idle_polls_++ == 0) idle_since_ = now_ns();
  const std::uint64_t now = now_ns(), waited = now - idle_since_;
  if (waited < kYieldNs && now >= t_contended_until) {
    sched_yield();
    if (now_ns() - now > kSlowYieldNs) t_contended_until = now + kContendedNs;
    return;
  }
  if (waited >= kShortSleepsNs && !noted_) {
    noted_ = true;
    FaultInjection::waiting(true);
  }
  timespec ts{0, waited < kShortSleepsNs ? 20'000 : 200'000};
  nanosleep(&ts, nullptr);
}

void Backoff::end_note() noexcept {
  noted_ = false;
  FaultInjection::waiting(false);
}

void wait(MPI_Request& request, const char* what) {
  Backoff backoff;
  trace::Wait traced(what);  // recorded only if the first poll finds it unfinished
  for (;;) {
    int done = 0;
    {
      MpiPollScope quiet;
      TESSERA_MPI(MPI_Test(&request, &done, MPI_STATUS_IGNORE));
    }
    if (done) return;
    traced.started_waiting();
    backoff.idle();
  }
}

void barrier(MPI_Comm comm) {
  MPI_Request req;
  TESSERA_MPI(MPI_Ibarrier(comm, &req));
  wait(req, "barrier");
}

}  // namespace tessera
