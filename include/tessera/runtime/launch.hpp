// `tessera ... -n K` starts the job under mpirun (through the supervisor,
// resilience/supervisor.hpp) when not already inside one.
// `--colocales socket|numa|core`: place and bind the ranks of a node by the
// hwloc view of it (Chapel 1.32's co-locales: one process per socket or NUMA
// domain), so co-located ranks share a node's memory but not its cores.
#pragma once
#include <string>
#include <vector>

namespace tessera {

// True when this process was started by an MPI launcher (Open MPI, MPICH, PMIx).
bool launched_by_mpi();

// "PID:FILE", set for mpirun (PID) and so for its ranks by the supervisor
// that `tessera -n K` and `tessera run` start jobs under
// (resilience/supervisor.hpp): abort_job on the first failing rank writes the
// job's error line to FILE, and the supervisor prints it once after mpirun
// has exited.
inline constexpr const char* kErrorReportVariable = "TESSERA_ERROR_REPORT";

// ---- Open MPI session directories -------------------------------------------
// Open MPI keeps every job's session directory under one top directory per
// user and host (TMPDIR/ompi.HOST.UID) and removes it when a job ends and
// finds it empty; a job starting at that moment cannot create its own
// inside ("ORTE_ERROR_LOG: ... session_dir.c"). So a launch on this node
// alone gives its mpirun a base of its own (OMPI_MCA_orte_tmpdir_base), as
// scripts/mpirun.sh, `tessera -n K` and Python sessions do.

// Whether the user chose where Open MPI keeps session directories
// (OMPI_MCA_orte_tmpdir_base, orte_local_tmpdir_base or
// orte_remote_tmpdir_base set): then a launch leaves that alone.
bool mpi_session_base_chosen();

// A base for one launch by this process: TMPDIR/tessera-mpirun.UID.PIDNS/PID
// (PID this process's, PIDNS its PID namespace's inode), beside
// scripts/mpirun.sh's, so either removes the other's bases once their
// process has ended (as the constructor does) and `tessera shm gc` finds a
// killed job's mpirun there. Removed by the destructor: destroy it after
// the mpirun that used it has been reaped.
class MpiSessionBase {
 public:
  MpiSessionBase();  // throws SystemError naming the directory it cannot make
  MpiSessionBase(const MpiSessionBase&) = delete;
  MpiSessionBase& operator=(const MpiSessionBase&) = delete;
  ~MpiSessionBase();
  const std::string& path() const noexcept { return path_; }
  // Left in place (an mpirun still using it ends by itself): a later launch
  // removes it once this process has ended.
  void keep() noexcept { path_.clear(); }
  // "OMPI_MCA_orte_tmpdir_base=PATH": the global base, not
  // orte_local_tmpdir_base (mpirun sets the global one for its ranks, and
  // Open MPI 4.1 refuses both in one process).
  std::string environment_entry() const { return "OMPI_MCA_orte_tmpdir_base=" + path_; }

 private:
  std::string path_;
};

// ---- co-locales -----------------------------------------------------------

enum class ColocaleKind { socket, numa, core };
// "socket" / "numa" / "core"; throws ConfigError otherwise.
ColocaleKind parse_colocale_kind(const std::string& text);
const char* colocale_name(ColocaleKind kind);

// Where each rank of one node runs: the placement as a pure function of the
// node's topology. Domains are the node's sockets, NUMA domains or cores, in
// hwloc's logical order. With K ranks and D domains, rank r goes to domain
// floor(r * D / K) (spread over the domains when K < D, consecutive ranks
// share one when K > D); ranks sharing a domain split its PUs evenly (or,
// with more ranks than PUs, share them round-robin).
struct ColocalePlan {
  ColocaleKind kind = ColocaleKind::socket;
  int domains = 0;                        // sockets / NUMA domains / cores found
  std::vector<int> domain_of_rank;        // rank -> domain index
  std::vector<std::vector<int>> pus_of_rank;  // rank -> OS indices of the PUs it is bound to
  std::string note;                       // one line: how ranks map to domains
};

// The plan for `ranks` ranks on a machine described by hwloc's synthetic
// syntax ("pack:2 numa:2 core:16 pu:1"): how the placement is tested.
ColocalePlan plan_colocales_synthetic(const std::string& synthetic, ColocaleKind kind, int ranks);
// The plan for this machine (hwloc's view of it).
ColocalePlan plan_colocales_here(ColocaleKind kind, int ranks);

// TESSERA_COLOCALE_SEGMENTS: "0" (or unset/empty) off, "1" on; anything else
// throws ConfigError naming the variable and the accepted values.
bool parse_colocale_segments(const char* text);
inline constexpr const char* kColocaleSegmentsVariable = "TESSERA_COLOCALE_SEGMENTS";

// Binds this process to its share of the node: its node-local rank and the
// node's rank count come from the launcher's environment (Open MPI, MPICH;
// 0 of 1 without a launcher). Records the choice in TESSERA_COLOCALES for
// `tessera info` and turns co-locale segments on (TESSERA_COLOCALE_SEGMENTS=1)
// unless the user set that variable. Throws tessera::Error when the binding
// fails. Call before the Runtime is constructed.
ColocalePlan bind_colocale(ColocaleKind kind);

}  // namespace tessera
