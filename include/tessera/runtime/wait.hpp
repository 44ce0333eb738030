// Waiting without stealing the core. Ranks are often oversubscribed (more ranks
// than cores), so a loop that polls MPI must give the core away between polls:
// first with sched_yield, then with short sleeps once the wait is long.
#pragma once
#include <mpi.h>

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
  bool noted_ = false;
};

// Waits for a request, polling with back-off.
void wait(MPI_Request& request);
// Collective barrier that yields the core while it waits.
void barrier(MPI_Comm comm);

// Waits until done() is true, calling progress() between checks (it returns
// true when it did some work). Used by flush loops that must keep serving peers.
template <class Done, class Progress>
void wait_until(Done&& done, Progress&& progress) {
  Backoff backoff;
  while (!done()) {
    if (progress())
      backoff.reset();
    else
      backoff.idle();
  }
}

}  // namespace tessera
