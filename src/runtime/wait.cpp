#include "tessera/runtime/wait.hpp"

#include <sched.h>
#include <time.h>

#include "tessera/runtime/error.hpp"
#include "tessera/runtime/fault_injection.hpp"

namespace tessera {

void Backoff::idle() noexcept {
  // Short waits (a flush round, a reply) stay responsive with sched_yield; a
  // long one (a peer computing for seconds) sleeps so it costs no CPU.
  ++idle_polls_;
  if (idle_polls_ < 2000) {
    sched_yield();
  } else {
    if (idle_polls_ == 20000) {  // a second or so: a long wait
      noted_ = true;
      FaultInjection::waiting(true);
    }
    timespec ts{0, idle_polls_ < 20000 ? 20'000 : 200'000};
    nanosleep(&ts, nullptr);
  }
}

void Backoff::end_note() noexcept {
  noted_ = false;
  FaultInjection::waiting(false);
}

void wait(MPI_Request& request) {
  Backoff backoff;
  for (;;) {
    int done = 0;
    TESSERA_MPI(MPI_Test(&request, &done, MPI_STATUS_IGNORE));
    if (done) return;
    backoff.idle();
  }
}

void barrier(MPI_Comm comm) {
  MPI_Request req;
  TESSERA_MPI(MPI_Ibarrier(comm, &req));
  wait(req);
}

}  // namespace tessera
