// Cooperative cancellation of a collective workflow: an analyst's session
// stops its running command when the client presses Ctrl-C, and keeps its
// ranks and objects. A rank cannot be stopped at an arbitrary instruction
// (its peers would wait for it forever), so kernels stop only at points every
// rank reaches together: the end of an iteration, a round, a pass.
//
// Off (the default: SPMD programs, the CLI), a cancellation point is one
// relaxed load. On, it adds one small all-reduce: the request, made on any
// rank by any thread, reaches every rank at the same point, and every rank
// throws tessera::Cancelled there.
#pragma once
#include <mpi.h>

#include <vector>

namespace tessera {

// Collective over `comm`: cancellation points communicate from now on (a
// session turns it on at start; its notices travel on a duplicate of comm).
void enable_cancellation(MPI_Comm comm);
bool cancellation_enabled() noexcept;

// Asks the running workflow to stop at its next cancellation point (any
// thread; a signal handler too: it only stores an atomic).
void request_cancellation() noexcept;
// Forgets a request (the session, before each command).
void clear_cancellation() noexcept;

// Collective over `comm` when enabled: throws Cancelled on every rank if any
// rank has a request. Call it where every rank of `comm` arrives in step.
void cancellation_point(MPI_Comm comm);

// Cancellation inside a phase where the ranks are not in step (a build's
// pass: each rank generates or parses its own share, for minutes at scale
// 26): rank 0, where a session takes the request, tells every rank with a
// message, and each rank looks for it (a test, never a wait) at `poll()`,
// which then throws Cancelled. Made on every rank at the start of the phase;
// `finish()` on every rank after its collective end (a flush), where rank 0
// is past its own polls. Inert when cancellation is off.
class CancellationNotice {
 public:
  CancellationNotice();
  CancellationNotice(const CancellationNotice&) = delete;
  CancellationNotice& operator=(const CancellationNotice&) = delete;
  ~CancellationNotice();

  void poll();
  void finish();

 private:
  MPI_Comm comm_ = MPI_COMM_NULL;  // null: inert
  int rank_ = 0;
  int flag_ = 0;
  bool sent_ = false, received_ = false;
  MPI_Request receive_ = MPI_REQUEST_NULL;
  int said_ = 0;  // what every rank is told (MPI-3: one buffer may feed many sends)
  std::vector<MPI_Request> sends_;

  void tell(int cancelled);
};

}  // namespace tessera
