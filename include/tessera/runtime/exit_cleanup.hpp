// Files this process created and must remove even when it dies abnormally
// (uncaught error, SIGTERM from MPI_Abort, SIGINT). Only SIGKILL escapes, and
// `tessera shm gc` handles that. The table is fixed-size and lock-free so the
// signal handler may walk it.
#pragma once
#include <string>

namespace tessera::exit_cleanup {

// Registers a path to unlink (a directory: rmdir, after the files) on abnormal exit; returns a slot id (or -1 when
// the table is full, which only loses the safety net, not correctness).
int add(const std::string& path);
// Forgets a slot after the owner removed the file itself.
void remove(int slot);
// Unlinks every registered path now (called by abort_job).
void run() noexcept;
// Installs handlers for SIGTERM, SIGINT, SIGHUP (idempotent).
void install_signal_handlers();

}  // namespace tessera::exit_cleanup
