// Window memory for the fine-grained MPI one-sided baselines. MPI_Win_allocate
// (not MPI_Win_create on the DistArray) because it lets Open MPI use its
// shared-memory one-sided component on a node, the fastest fine-grained path
// MPI offers, and because a created window has no component at one rank.
//
// Open MPI's one-sided components need shared memory (all ranks on one node)
// or an RDMA-capable network; over TCP between nodes MPI_Win_allocate fails.
// The table then reports why, the same on every rank, and the benchmark skips
// its fine-grained row instead of ending the job.
#pragma once
#include <mpi.h>

#include <span>
#include <string>

#include "tessera/array/distribution.hpp"
#include "tessera/runtime/collective.hpp"
#include "tessera/runtime/error.hpp"
#include "tessera/runtime/runtime.hpp"

namespace tessera::bench {

template <class T>
class RmaTable {
 public:
  // Collective. rt.comm() returns MPI errors as codes (Runtime sets
  // MPI_ERRORS_RETURN), so a failed allocation comes back here.
  RmaTable(Runtime& rt, const Distribution& dist) : dist_(dist), begin_(dist.begin(rt.rank())) {
    auto n = static_cast<MPI_Aint>(dist.count(rt.rank()) * sizeof(T));
    T* base = nullptr;
    MPI_Win win = MPI_WIN_NULL;
    int code = MPI_Win_allocate(n, sizeof(T), MPI_INFO_NULL, rt.comm(), &base, &win);
    std::string problem;
    if (code != MPI_SUCCESS) {
      char text[MPI_MAX_ERROR_STRING];
      int length = 0;
      MPI_Error_string(code, text, &length);
      problem = "MPI one-sided (MPI_Win_allocate) is not available over this transport: " +
                std::string(text, static_cast<std::size_t>(length)) +
                " (Open MPI's one-sided needs all ranks on one node or an RDMA-capable network)";
    }
    // All ranks skip together: the lowest failing rank's reason, everywhere.
    unavailable_ = first_problem(rt.comm(), problem);
    if (!unavailable_.empty()) {
      // A rank whose allocation succeeded while another's failed keeps its
      // window: MPI_Win_free is collective and the failed ranks never join it.
      return;
    }
    win_ = win;
    TESSERA_MPI(MPI_Win_set_errhandler(win_, MPI_ERRORS_RETURN));
    local_ = {base, static_cast<std::size_t>(dist.count(rt.rank()))};
  }
  ~RmaTable() {
    if (win_ != MPI_WIN_NULL) MPI_Win_free(&win_);
  }
  RmaTable(const RmaTable&) = delete;
  RmaTable& operator=(const RmaTable&) = delete;

  // "" when the window exists; otherwise why not, one line, the same on every rank.
  const std::string& unavailable() const noexcept { return unavailable_; }
  MPI_Win window() const noexcept { return win_; }
  std::span<T> local() const noexcept { return local_; }
  std::uint64_t local_begin() const noexcept { return begin_; }
  std::uint64_t local_end() const noexcept { return begin_ + local_.size(); }
  std::uint64_t size() const noexcept { return dist_.size(); }
  int owner(std::uint64_t i) const noexcept { return dist_.owner(i); }
  MPI_Aint displacement(std::uint64_t i, int owner) const noexcept {
    return static_cast<MPI_Aint>(dist_.local_offset(i, owner));
  }

 private:
  Distribution dist_;
  std::uint64_t begin_;
  MPI_Win win_ = MPI_WIN_NULL;
  std::span<T> local_;
  std::string unavailable_;
};

}  // namespace tessera::bench
