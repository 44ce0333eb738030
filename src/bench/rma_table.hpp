// Window memory for the fine-grained MPI one-sided baselines. MPI_Win_allocate
// (not MPI_Win_create on the DistArray) because it lets Open MPI use its
// shared-memory one-sided component on a node, the fastest fine-grained path
// MPI offers, and because a created window has no component at one rank.
#pragma once
#include <mpi.h>

#include <span>

#include "tessera/array/distribution.hpp"
#include "tessera/runtime/error.hpp"
#include "tessera/runtime/runtime.hpp"

namespace tessera::bench {

template <class T>
class RmaTable {
 public:
  RmaTable(Runtime& rt, const Distribution& dist) : dist_(dist), begin_(dist.begin(rt.rank())) {
    auto n = static_cast<MPI_Aint>(dist.count(rt.rank()) * sizeof(T));
    T* base = nullptr;
    TESSERA_MPI(MPI_Win_allocate(n, sizeof(T), MPI_INFO_NULL, rt.comm(), &base, &win_));
    local_ = {base, static_cast<std::size_t>(dist.count(rt.rank()))};
  }
  ~RmaTable() { MPI_Win_free(&win_); }
  RmaTable(const RmaTable&) = delete;
  RmaTable& operator=(const RmaTable&) = delete;

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
};

}  // namespace tessera::bench
