// `tessera ... -n K` starts the job under mpirun (through the supervisor,
// resilience/supervisor.hpp) when not already inside one.
// `--colocales socket|numa|core`: place and bind the ranks of a node by the
// hwloc view of it (Chapel 1.32's co-locales: one process per socket or NUMA
// domain), so co-located ranks share a node's memory but not its cores.
#pragma once
#include <memory>
#include <string>
#include <utility>
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

// ---- mpirun, built in one place ----------------------------------------------
// Every mpirun Tessera starts gets its arguments, environment and session
// directory base here (src/runtime/launch.cpp, the one source file that sets
// Open MPI's launch environment): `tessera -n K` and `tessera run` (through
// the supervisor), the out-of-process analysis, and `tessera mpirun ARGS`,
// which Python sessions (python/tessera/session/launch.py) and
// scripts/mpirun.sh run.

// Variables mpirun gets unless the user set them: root allowed (CI and
// containers run as root), idle ranks yield the core (ranks oversubscribe
// it), and, for a job on this node alone, the ob1 PML: Open MPI's path on one
// node anyway, and naming it spares every rank the probe of cm's network MTLs
// (PSM/PSM2 look for Omni-Path hardware), which doubles a short job's start.
// Across nodes the user's or the site's choice of PML stands.
std::vector<std::pair<std::string, std::string>> mpirun_defaults(bool single_node);

// Whether a job with these mpirun arguments runs on this node alone: no
// --host, --hostfile or default hostfile (OMPI_MCA_orte_default_hostfile).
bool mpirun_single_node(const std::vector<std::string>& mpirun_args);

// mpirun's argv: "mpirun --oversubscribe", then "-x NAME" for each variable
// the ranks on other nodes need too (PYTHONPATH and every TESSERA_* set in
// this process, and `forward`; each once), then `mpirun_args` (options,
// program and its arguments, or app contexts).
std::vector<std::string> mpirun_argv(const std::vector<std::string>& mpirun_args,
                                     const std::vector<std::string>& forward = {});

// Set for a job that will be relaunched on failure (the supervisor's
// --recover): mpirun gives the survivors of a dead rank 1 s between SIGTERM
// and SIGKILL; with a relaunch to come their state is in the checkpoint and
// their segments are collected by the supervisor, so it need not wait.
std::vector<std::pair<std::string, std::string>> mpirun_relaunch_environment();

// Set for an mpirun in a sandbox (the contained out-of-process analysis):
// around mpirun, vader's segments go to the sandbox's private /tmp (two
// sandboxed jobs share a PID namespace's numbering, hence job ids, and would
// open each other's segments in a shared /dev/shm); per rank (across
// nodes), ranks of one node share neither /tmp nor the daemon's session
// directory, so they talk TCP and PMIx answers over its socket.
std::vector<std::pair<std::string, std::string>> mpirun_sandbox_environment(bool per_rank);

// A process no launcher started (a singleton) before MPI_Init: the ob1 PML
// named (Open MPI probes the PSM/PSM2 network layers first: 0.2 s of every
// one-rank start), and, unless the user chose one, a session directory base
// of its own (Open MPI 4.1 leaves a singleton's jf.N directory behind at
// every run), set in OMPI_MCA_orte_tmpdir_base. Returns the base (null when
// none); unset the variable after MPI_Init (children choose their own).
class MpiSessionBase;
std::unique_ptr<MpiSessionBase> prepare_singleton_mpi();

// `tessera mpirun ARGS`: the defaults set, a session directory base of this
// process's own (named by its PID, which the exec keeps: mpirun's), then
// mpirun_argv(ARGS) exec'd. Returns only by throwing SystemError.
[[noreturn]] void exec_mpirun(const std::vector<std::string>& mpirun_args);

// ---- Open MPI session directories -------------------------------------------
// Open MPI keeps every job's session directory under one top directory per
// user and host (TMPDIR/ompi.HOST.UID) and removes it when a job ends and
// finds it empty; a job starting at that moment cannot create its own
// inside ("ORTE_ERROR_LOG: ... session_dir.c"). So a launch on this node
// alone gives its mpirun a base of its own (OMPI_MCA_orte_tmpdir_base).

// Where Open MPI's shared-memory BTL (vader) keeps its files on this node:
// OMPI_MCA_btl_vader_backing_directory, else /dev/shm (Open MPI's default),
// whatever TESSERA_SHM_DIR says about Tessera's own segments.
std::string mpi_shared_memory_dir();

// Whether the user chose where Open MPI keeps session directories
// (OMPI_MCA_orte_tmpdir_base, orte_local_tmpdir_base or
// orte_remote_tmpdir_base set): then a launch leaves that alone.
bool mpi_session_base_chosen();

// The one directory holding every launch's base:
// TMPDIR/tessera-mpirun.UID.PIDNS (PIDNS the inode of this PID namespace,
// where a PID means one process). `tessera shm gc` looks there for a killed
// job's mpirun.
std::string mpi_session_bases_dir();

// A base for one launch: mpi_session_bases_dir()/PID, or PID.TAG when one
// process makes several (the supervisor's attempts). PID is a process that
// outlives the mpirun using the base: this one, or mpirun itself when this
// process execs it. The constructor removes the bases whose PID has ended
// (whoever made them); the destructor removes this one: destroy it after the
// mpirun that used it has been reaped.
class MpiSessionBase {
 public:
  explicit MpiSessionBase(const std::string& tag = "");  // throws SystemError naming the directory it cannot make
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
  std::string environment_entry() const { return std::string(kVariable) + "=" + path_; }
  static constexpr const char* kVariable = "OMPI_MCA_orte_tmpdir_base";

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
