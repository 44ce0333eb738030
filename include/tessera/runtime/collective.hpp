// Collective steps that may fail on some ranks only (a file exists on one
// node, a disk is full on another) must fail on every rank together, or the
// healthy ranks hang in the next collective. `agree` runs a local step and
// makes its outcome collective.
#pragma once
#include <mpi.h>

#include <exception>
#include <functional>

namespace tessera {

// Runs `step` on every rank of `comm`. If it throws on any rank, every rank
// throws: the failing ranks rethrow their own error, the others a tessera::Error
// naming the lowest failing rank.
void agree(MPI_Comm comm, const std::function<void()>& step);

}  // namespace tessera
