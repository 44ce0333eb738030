// The measurement database (after Charm++'s LB database): compute seconds of
// each chunk in each step, and bytes sent between each pair of chunks, since
// the last reset. Every rank records what its own chunks did, indexed by
// global chunk id, so a chunk that migrates needs no record moved: the sum
// over ranks is the chunk's total.
#pragma once
#include <mpi.h>

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "tessera/chunks/balance.hpp"

namespace tessera::chunks {

class LoadDatabase {
 public:
  explicit LoadDatabase(std::size_t chunks) : seconds_(chunks, 0.0), last_step_(chunks, 0.0), sent_(chunks) {}

  void add_compute(std::uint64_t chunk, double seconds) {
    seconds_[chunk] += seconds;
    last_step_[chunk] += seconds;
  }
  // Called on every send: a chunk talks to few others, so a short scan of
  // its own list beats a hash of the pair.
  void add_bytes(std::uint64_t from, std::uint64_t to, std::uint64_t bytes) {
    auto& mine = sent_[from];
    for (auto& [peer, total] : mine)
      if (peer == to) {
        total += bytes;
        return;
      }
    mine.push_back({to, bytes});
  }
  // Marks the end of a step: the per-step figure starts again.
  void end_step();
  void reset();

  std::size_t chunks() const noexcept { return seconds_.size(); }
  int steps() const noexcept { return steps_; }

  // Collective: every chunk's compute seconds per step since the reset,
  // summed over ranks, on every rank.
  std::vector<double> gather_loads(MPI_Comm comm) const;
  // Collective: every rank's chunk-pair byte counts, on `root` only.
  std::vector<ChunkEdge> gather_edges(MPI_Comm comm, int root) const;
  // Collective: a printable summary on `root` ("" elsewhere): per-rank load,
  // the heaviest chunks, and the heaviest chunk pairs by bytes.
  std::string summary(MPI_Comm comm, const Placement& placement, int root, int top = 8) const;

 private:
  std::vector<double> seconds_;    // since reset, by chunk id (this rank's share)
  std::vector<double> last_step_;  // current step
  std::vector<double> previous_step_;
  std::vector<std::vector<std::pair<std::uint64_t, std::uint64_t>>> sent_;  // by sender: (receiver, bytes)
  int steps_ = 0;
};

}  // namespace tessera::chunks
