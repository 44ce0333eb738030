// The process-wide Tessera runtime: MPI, ranks, co-locales and topology.
#pragma once
#include <mpi.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "tessera/runtime/comm_counters.hpp"
#include "tessera/runtime/error.hpp"
#include "tessera/runtime/progress.hpp"
#include "tessera/runtime/topology.hpp"

namespace tessera {

class MpiSessionBase;

// Ranks that share a node (co-locales); they can map each other's memory.
struct NodeGroup {
  MPI_Comm comm = MPI_COMM_NULL;  // the ranks of this node
  int rank = 0;                   // this rank's index on the node
  int size = 1;                   // ranks on this node
  int index = 0;                  // which node, 0 .. count-1
  int count = 1;                  // nodes in the job
  std::vector<int> world_ranks;   // world rank of each node rank
  std::vector<int> node_of_rank;  // node index of every world rank
  std::string hostname;
};

// RAII owner of MPI for the process. Construct exactly one, first thing in
// main. Initialises MPI with MPI_THREAD_FUNNELED unless it is already running
// (then it only borrows it). Works without mpirun as a singleton.
class Runtime {
 public:
  Runtime();
  Runtime(int& argc, char**& argv);
  ~Runtime();
  Runtime(const Runtime&) = delete;
  Runtime& operator=(const Runtime&) = delete;

  int rank() const noexcept { return rank_; }
  int size() const noexcept { return size_; }
  // Tessera's world communicator (a duplicate with MPI_ERRORS_RETURN).
  MPI_Comm comm() const noexcept { return comm_; }
  const NodeGroup& node() const noexcept { return node_; }
  bool is_colocal(int world_rank) const { return node_.node_of_rank.at(static_cast<std::size_t>(world_rank)) == node_.index; }
  // hwloc view of the node and this rank's binding (read once, on first use).
  const Topology& topology() const;
  // Same string on every rank, unique per job: used to name shared segments.
  const std::string& job_id() const noexcept { return job_id_; }
  int thread_level() const noexcept { return thread_level_; }

  // Co-locale segments: when on, an array created with default
  // storage lives in node-shared memory of its owner, so co-located ranks
  // reach it directly (the same-node path) instead of through MPI; explicit
  // Heap or Shared storage is unaffected. From TESSERA_COLOCALE_SEGMENTS
  // (0 or 1, the same on every rank; `--colocales` sets it to 1 unless it is
  // set), read at construction. Off by default.
  bool colocale_segments() const noexcept { return colocale_segments_; }
  // Overrides the environment for arrays created from now on. Call on every
  // rank alike: array creation is collective and must agree on the storage.
  void set_colocale_segments(bool on) noexcept { colocale_segments_ = on; }

  // Shared by default: an array created with default storage is a Shared
  // array (a named file per rank plus metadata), so a process outside the job
  // maps any result the job makes (an analyst's session hands results to its
  // client this way). Takes precedence over co-locale segments. Off by
  // default; call on every rank alike, like set_colocale_segments.
  bool shared_by_default() const noexcept { return shared_by_default_; }
  void set_shared_by_default(bool on) noexcept { shared_by_default_ = on; }

  // Rank boundaries of the vertex ranges the library chooses (balanced
  // graph builds) fall on multiples of this many elements (1: anywhere).
  // With 1024, each rank's part of a 4- or 8-byte vertex array is whole
  // pages, so the parts of a Shared array map at consecutive addresses: one
  // array in a process outside the job. Call on every rank alike.
  std::uint64_t range_alignment() const noexcept { return range_alignment_; }
  void set_range_alignment(std::uint64_t elements) noexcept { range_alignment_ = elements == 0 ? 1 : elements; }

  // What a waiting rank serves: every live aggregation exchange of this runtime.
  ProgressEngine& progress() noexcept { return progress_; }
  // What this rank's aggregation engine sent and received, per peer
  // (`--comm-stats`, trace files, benchmarks' traffic).
  CommCounters& comm_counters() noexcept { return comm_counters_; }
  const CommCounters& comm_counters() const noexcept { return comm_counters_; }

  // The runtime of this process; throws when none exists.
  static Runtime& current();

 private:
  void init(int* argc, char*** argv);
  void setup();
  void finish_reports() noexcept;

  bool owns_mpi_ = false;
  int thread_level_ = 0;
  bool colocale_segments_ = false;
  bool shared_by_default_ = false;
  std::uint64_t range_alignment_ = 1;
  int rank_ = 0;
  int size_ = 1;
  MPI_Comm comm_ = MPI_COMM_NULL;
  NodeGroup node_;
  std::string job_id_;
  mutable std::unique_ptr<Topology> topology_;
  ProgressEngine progress_;
  CommCounters comm_counters_;
  std::unique_ptr<MpiSessionBase> singleton_session_base_;  // a singleton's Open MPI session files
};

// The MPI library's own version string.
std::string mpi_library_version();

}  // namespace tessera
