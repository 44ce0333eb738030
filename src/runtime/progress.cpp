#include "tessera/runtime/progress.hpp"
#include "tessera/runtime/wait.hpp"

#include <algorithm>

#include "tessera/runtime/error.hpp"

namespace tessera {

void ProgressEngine::remove(Progressable* p) noexcept { live_.erase(std::remove(live_.begin(), live_.end(), p), live_.end()); }

bool ProgressEngine::progress_all() {
  bool did = false;
  // Index loop: handlers never create or destroy exchanges, but stay safe.
  for (std::size_t i = 0; i < live_.size(); ++i) did = live_[i]->progress() || did;
  return did;
}

void ProgressEngine::serve_once(Backoff& backoff, unsigned& idle_polls) {
  if (progress_all()) {
    backoff.reset();
    idle_polls = 0;
    return;
  }
  if (++idle_polls % kIdlePollsPerHook == 0)
    for (std::size_t i = 0; i < live_.size(); ++i) live_[i]->on_idle();
  backoff.idle();
}

void ProgressEngine::wait_serving(MPI_Request& request, const char* what) {
  int done = 0;
  serve_until(
      [&] {
        if (!done) {
          MpiPollScope quiet;
          TESSERA_MPI(MPI_Test(&request, &done, MPI_STATUS_IGNORE));
        }
        return done != 0;
      },
      what);
}

void ProgressEngine::barrier_serving(MPI_Comm comm) {
  MPI_Request req;
  TESSERA_MPI(MPI_Ibarrier(comm, &req));
  wait_serving(req, "barrier");
}

}  // namespace tessera
