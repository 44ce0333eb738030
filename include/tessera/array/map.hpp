// Map: a Distribution bound to the Runtime whose ranks it splits over (after
// Tpetra's Map = distribution + communicator). Whatever is laid out over a
// Map (a DistArray, a vector, an operator's rows, a graph's vertices) finds
// its communicator and its own rank through it, never through a process-wide
// runtime, so objects over different runtimes can live side by side.
#pragma once
#include <mpi.h>

#include <cstdint>
#include <string>
#include <utility>

#include "tessera/array/distribution.hpp"
#include "tessera/runtime/runtime.hpp"

namespace tessera {

class Map {
 public:
  // Not collective. `rt` must outlive the map; `dist` must be over
  // rt.size() ranks (MismatchError otherwise).
  Map(Runtime& rt, Distribution dist) : rt_(&rt), dist_(std::move(dist)) {
    if (dist_.ranks() != rt.size())
      throw MismatchError("distribution is for " + std::to_string(dist_.ranks()) + " ranks but the job has " +
                          std::to_string(rt.size()));
    begin_ = dist_.begin(rt.rank());
    end_ = dist_.end(rt.rank());
  }
  static Map block(Runtime& rt, std::uint64_t n) { return Map(rt, Distribution::block(n, rt.size())); }

  Runtime& runtime() const noexcept { return *rt_; }
  MPI_Comm comm() const noexcept { return rt_->comm(); }
  int rank() const noexcept { return rt_->rank(); }
  int ranks() const noexcept { return rt_->size(); }
  const Distribution& distribution() const noexcept { return dist_; }
  std::uint64_t size() const noexcept { return dist_.size(); }

  // This rank's part: global indices [local_begin, local_end).
  std::uint64_t local_begin() const noexcept { return begin_; }
  std::uint64_t local_end() const noexcept { return end_; }
  std::uint64_t local_size() const noexcept { return end_ - begin_; }
  bool is_local(std::uint64_t i) const noexcept { return i >= begin_ && i < end_; }
  int owner(std::uint64_t i) const noexcept { return dist_.owner(i); }

  // The same runtime and the same split.
  bool operator==(const Map& o) const { return rt_ == o.rt_ && dist_ == o.dist_; }

 private:
  Runtime* rt_;
  Distribution dist_;
  std::uint64_t begin_ = 0, end_ = 0;
};

}  // namespace tessera
