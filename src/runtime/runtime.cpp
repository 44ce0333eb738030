#include "tessera/runtime/runtime.hpp"

#include "tessera/runtime/fault_injection.hpp"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <exception>

#include "tessera/runtime/collective.hpp"
#include "tessera/runtime/exit_cleanup.hpp"
#include "tessera/runtime/launch.hpp"
#include "tessera/runtime/trace.hpp"

namespace tessera {

namespace {
Runtime* g_current = nullptr;

std::string local_hostname() {
  char name[256] = {};
  if (gethostname(name, sizeof(name) - 1) != 0) return "unknown";
  return name;
}

std::uint32_t fnv1a(const std::string& s) {
  std::uint32_t h = 2166136261u;
  for (unsigned char c : s) h = (h ^ c) * 16777619u;
  return h;
}
}  // namespace

std::string mpi_library_version() {
  char text[MPI_MAX_LIBRARY_VERSION_STRING];
  int len = 0;
  TESSERA_MPI(MPI_Get_library_version(text, &len));
  std::string s(text, static_cast<std::size_t>(len));
  while (!s.empty() && (s.back() == '\n' || s.back() == '\0' || s.back() == ' ')) s.pop_back();
  return s;
}

Runtime::Runtime() { init(nullptr, nullptr); }
Runtime::Runtime(int& argc, char**& argv) { init(&argc, &argv); }

void Runtime::init(int* argc, char*** argv) {
  if (g_current) throw Error("a tessera::Runtime already exists in this process; create only one, in main()");
  int initialized = 0;
  TESSERA_MPI(MPI_Initialized(&initialized));
  if (!initialized) {
    // A singleton's launch environment and session directory base
    // (runtime/launch.hpp); the base is removed after MPI_Finalize (or by a
    // later launch once this process is gone).
    singleton_session_base_ = prepare_singleton_mpi();
    const bool own_base = singleton_session_base_ != nullptr;
    const int status = MPI_Init_thread(argc, argv, MPI_THREAD_FUNNELED, &thread_level_);
    if (own_base) unsetenv(MpiSessionBase::kVariable);
    check_mpi(status, "MPI_Init_thread", __FILE__, __LINE__);
    owns_mpi_ = true;
  } else {
    TESSERA_MPI(MPI_Query_thread(&thread_level_));
  }
  g_current = this;
  try {
    setup();
  } catch (...) {
    g_current = nullptr;
    throw;
  }
  exit_cleanup::install_signal_handlers();
}

void Runtime::setup() {
  // Errors on Tessera's own communicators come back as codes and become
  // exceptions instead of aborting. The host's MPI_COMM_WORLD keeps its
  // handler when Tessera only borrows an MPI that someone else initialised.
  if (owns_mpi_) TESSERA_MPI(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));
  TESSERA_MPI(MPI_Comm_dup(MPI_COMM_WORLD, &comm_));
  TESSERA_MPI(MPI_Comm_set_errhandler(comm_, MPI_ERRORS_RETURN));
  TESSERA_MPI(MPI_Comm_rank(comm_, &rank_));
  TESSERA_MPI(MPI_Comm_size(comm_, &size_));
  FaultInjection::started(rank_);  // a supervisor now knows this rank's process

  TESSERA_MPI(MPI_Comm_split_type(comm_, MPI_COMM_TYPE_SHARED, rank_, MPI_INFO_NULL, &node_.comm));
  TESSERA_MPI(MPI_Comm_rank(node_.comm, &node_.rank));
  TESSERA_MPI(MPI_Comm_size(node_.comm, &node_.size));
  node_.world_ranks = all_gather(node_.comm, rank_);
  node_.hostname = local_hostname();

  // A node is named by its lowest world rank; number nodes by that order.
  int leader = node_.world_ranks.front();
  std::vector<int> leaders = all_gather(comm_, leader);
  std::vector<int> unique_leaders = leaders;
  std::sort(unique_leaders.begin(), unique_leaders.end());
  unique_leaders.erase(std::unique(unique_leaders.begin(), unique_leaders.end()), unique_leaders.end());
  node_.count = static_cast<int>(unique_leaders.size());
  node_.node_of_rank.resize(static_cast<std::size_t>(size_));
  for (int r = 0; r < size_; ++r) {
    auto it = std::lower_bound(unique_leaders.begin(), unique_leaders.end(), leaders[static_cast<std::size_t>(r)]);
    node_.node_of_rank[static_cast<std::size_t>(r)] = static_cast<int>(it - unique_leaders.begin());
  }
  node_.index = node_.node_of_rank[static_cast<std::size_t>(rank_)];

  char id[64] = {};
  if (rank_ == 0) {
    auto us = std::chrono::duration_cast<std::chrono::microseconds>(
                  std::chrono::system_clock::now().time_since_epoch())
                  .count();
    std::snprintf(id, sizeof(id), "%08x-%x-%llx", fnv1a(node_.hostname), static_cast<unsigned>(getpid()),
                  static_cast<unsigned long long>(us));
  }
  broadcast(comm_, id, sizeof(id), 0);
  job_id_ = id;

  // Every rank fails alike on a bad value (ConfigError on the rank that has it),
  // and ranks that disagree are refused: array creation must agree on storage.
  agree(comm_, [&] { colocale_segments_ = parse_colocale_segments(std::getenv(kColocaleSegmentsVariable)); });
  int on_off[2] = {colocale_segments_ ? 1 : 0, colocale_segments_ ? 0 : 1};
  all_reduce(comm_, on_off, 2, MPI_MAX);
  if (on_off[0] == 1 && on_off[1] == 1)
    throw ConfigError(std::string(kColocaleSegmentsVariable) + " differs between ranks; set it alike for the whole job");
  comm_counters_.resize(size_);

  // TESSERA_TRACE=FILE records this job from here to the destructor.
  trace::Options trace_options;
  agree(comm_, [&] { trace_options = trace::options_from_environment(); });
  if (!trace_options.path.empty()) trace::start(*this, trace_options);
}

// What the job says at its end, before MPI goes: the trace file and the
// communication counts. Collective; an error is printed, not thrown (a
// destructor), and the job still ends.
void Runtime::finish_reports() noexcept {
  try {
    if (trace::active()) {
      const std::string path = trace::stop(*this);
      if (rank_ == 0)
        std::fprintf(stderr, "trace written to %s (tessera trace summary %s)\n", path.c_str(), path.c_str());
    }
    if (comm_stats_requested()) {
      const std::string table = comm_counters_table(*this);
      if (rank_ == 0) std::fputs(table.c_str(), stderr);
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "tessera: at the end of the job: %s\n", e.what());
  }
}

Runtime::~Runtime() {
  g_current = nullptr;
  // Unwinding after an error: leave MPI running so abort_job can stop every
  // rank with MPI_Abort (finalizing here would hang or hide the other ranks).
  if (std::uncaught_exceptions() > 0) {
    if (singleton_session_base_) singleton_session_base_->keep();  // MPI still runs; a later launch removes it
    return;
  }
  g_current = this;  // the reports are collectives of this runtime
  finish_reports();
  g_current = nullptr;
  if (node_.comm != MPI_COMM_NULL) MPI_Comm_free(&node_.comm);
  if (comm_ != MPI_COMM_NULL) MPI_Comm_free(&comm_);
  if (owns_mpi_) {
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (!finalized) MPI_Finalize();
  }
}

const Topology& Runtime::topology() const {
  if (!topology_) topology_ = std::make_unique<Topology>(Topology::discover());
  return *topology_;
}

Runtime& Runtime::current() {
  if (!g_current) throw Error("no tessera::Runtime exists; construct one in main() before using Tessera");
  return *g_current;
}

}  // namespace tessera
