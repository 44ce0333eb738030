// ProgressEngine: what a rank serves while it waits. Every live aggregation
// exchange of a Runtime registers here; a rank waiting on one of them (for a
// free buffer, a reduction, a barrier) serves all of them, since a peer may be
// blocked pushing into another exchange that this rank will only flush later.
// Owned by the Runtime (one per process, no global state); single-threaded,
// like the exchanges it serves.
#pragma once
#include <mpi.h>

#include <vector>

#include "tessera/runtime/trace.hpp"
#include "tessera/runtime/wait.hpp"

namespace tessera {

class Progressable {
 public:
  // Serves what has arrived and retires completed sends; true if it did work.
  virtual bool progress() = 0;
  // Called on every registered party after every kIdlePollsPerHook polls in a
  // row that found nothing to do: a party that holds work a peer may be
  // waiting for (a partial buffer of forwarded requests) sends it then.
  virtual void on_idle() {}

 protected:
  ~Progressable() = default;
};

class ProgressEngine {
 public:
  static constexpr unsigned kIdlePollsPerHook = 32;

  void add(Progressable* p) { live_.push_back(p); }
  void remove(Progressable* p) noexcept;
  // One poll of every registered party; true if any did work.
  bool progress_all();
  // One poll by a rank that waits: backs off when nothing happened.
  void serve_once(Backoff& backoff, unsigned& idle_polls);
  // `what` names the wait in a trace (static text); a wait whose condition
  // holds at once is not recorded.
  template <class Done>
  void serve_until(Done&& done, const char* what = "progress") {
    if (done()) return;
    trace::Wait traced(what);
    traced.started_waiting();
    Backoff backoff;
    unsigned idle = 0;
    while (!done()) serve_once(backoff, idle);
  }
  // Waits for a non-blocking operation (a collective) while serving.
  void wait_serving(MPI_Request& request, const char* what = "collective");
  // A barrier over comm that keeps serving while it waits.
  void barrier_serving(MPI_Comm comm);

 private:
  std::vector<Progressable*> live_;
};

}  // namespace tessera
