// The process-wide Kokkos/Tpetra lifetime and the small Tessera-types entry
// points of the trilinos/ layer.
#include <Teuchos_DefaultMpiComm.hpp>
#include <Tpetra_Core.hpp>
#include <Trilinos_version.h>

#include <atomic>

#include "tessera/trilinos/edge_list_row_matrix.hpp"
#include "tessera/trilinos/hitting.hpp"

namespace tessera::trilinos {

namespace {
std::atomic<bool> session_alive{false};
}

bool available() noexcept { return true; }

std::string description() {
  return std::string("Trilinos ") + TRILINOS_VERSION_STRING + " (Tpetra, Belos, Ifpack2; Kokkos Serial)";
}


struct Session::State {
  // Kokkos reads its options from argv; Tessera passes none.
  int argc = 1;
  char name[8] = "tessera";
  char* argv_storage[2] = {name, nullptr};
  char** argv = argv_storage;
  std::unique_ptr<Tpetra::ScopeGuard> guard;
};

Session::Session(Runtime& rt) {
  if (session_alive.exchange(true))
    throw ConfigError("a trilinos::Session already exists in this process: Kokkos and Tpetra start once");
  try {
    state_ = std::make_unique<State>();
    // MPI is already running (the Runtime owns it): the guard only starts
    // Kokkos and Tpetra on Tessera's communicator, and leaves MPI alone.
    state_->guard = std::make_unique<Tpetra::ScopeGuard>(&state_->argc, &state_->argv, rt.comm());
  } catch (...) {
    session_alive = false;
    throw;
  }
}

Session::~Session() {
  state_.reset();
  session_alive = false;
}

bool Session::active() noexcept { return session_alive.load(); }

Teuchos::RCP<const TpetraComm> teuchos_comm(Runtime& rt) {
  return Teuchos::rcp(new Teuchos::MpiComm<int>(rt.comm()));
}

}  // namespace tessera::trilinos
