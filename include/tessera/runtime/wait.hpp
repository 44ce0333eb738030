// Waiting without stealing the core. Ranks are often oversubscribed (more ranks
// than cores), so a loop that polls MPI must give the core away between polls:
// first with sched_yield, then with short sleeps once the wait is long, or at
// once while another program keeps the cores busy (a yield comes back late).
#pragma once
#include <mpi.h>

#include <cstdint>

#include "tessera/runtime/trace.hpp"

namespace tessera {

// A wait that lasts (past the switch to sleeps) is noted for a supervisor
// watching heartbeats (FaultInjection::waiting): when every rank of a job has
// waited longer than its heartbeat timeout, the job is deadlocked.
class Backoff {
 public:
  Backoff() = default;
  Backoff(const Backoff&) = delete;
  Backoff& operator=(const Backoff&) = delete;
  ~Backoff() {
    if (noted_) end_note();
  }
  // Call after a poll that found nothing to do.
  void idle() noexcept;
  // Call after a poll that made progress.
  void reset() noexcept {
    idle_polls_ = 0;
    if (noted_) [[unlikely]] end_note();
  }

 private:
  void end_note() noexcept;
  unsigned idle_polls_ = 0;
  std::uint64_t idle_since_ = 0;  // CLOCK_MONOTONIC ns at the first idle poll
  bool noted_ = false;
};

// Open MPI's progress engine calls sched_yield in every poll that finds
// nothing when mpi_yield_when_idle is on (mpirun turns it on for an
// oversubscribed node, and Tessera's launchers ask for it, for the blocking
// calls of Trilinos and of users' own MPI code). In Tessera's own polls that
// yield only doubles Backoff's, and while another program keeps the cores
// busy each one gives it a whole time slice: a test of one-record batches ran
// 45 s instead of 0.1 s beside two busy loops. Every Tessera poll of MPI
// (MPI_Test*) runs in one of these, which turns that yield off for its scope
// where the MPI library exports the switch (a no-op elsewhere).
class MpiPollScope {
 public:
  MpiPollScope() noexcept;
  ~MpiPollScope();
  MpiPollScope(const MpiPollScope&) = delete;
  MpiPollScope& operator=(const MpiPollScope&) = delete;

 private:
  int saved_ = -1;  // MPI's setting before; -1: untouched
};

// Waits for a request, polling with back-off. `what` names the wait in a
// trace (idle time), e.g. "all_reduce"; static text.
void wait(MPI_Request& request, const char* what = "wait");
// Collective barrier that yields the core while it waits.
void barrier(MPI_Comm comm);

// Waits until done() is true, calling progress() between checks (it returns
// true when it did some work). Used by flush loops that must keep serving peers.
template <class Done, class Progress>
void wait_until(Done&& done, Progress&& progress, const char* what = "progress") {
  if (done()) return;
  trace::Wait traced(what);
  traced.started_waiting();
  Backoff backoff;
  while (!done()) {
    if (progress())
      backoff.reset();
    else
      backoff.idle();
  }
}

}  // namespace tessera
