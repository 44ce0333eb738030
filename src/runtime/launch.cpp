#include "tessera/runtime/launch.hpp"

#include <hwloc.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>

#include "tessera/runtime/error.hpp"
#include "tessera/runtime/topology.hpp"
#include "loaded_topology.hpp"

namespace tessera {

bool launched_by_mpi() {
  for (const char* var : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_RANK", "MPI_LOCALNRANKS", "PMI_RANK"})
    if (std::getenv(var)) return true;
  return false;
}

// ---- mpirun, built in one place ----------------------------------------------

std::vector<std::pair<std::string, std::string>> mpirun_defaults(bool single_node) {
  std::vector<std::pair<std::string, std::string>> v = {{"OMPI_ALLOW_RUN_AS_ROOT", "1"},
                                                        {"OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1"},
                                                        {"OMPI_MCA_mpi_yield_when_idle", "1"}};
  if (single_node) v.emplace_back("OMPI_MCA_pml", "ob1");
  return v;
}

bool mpirun_single_node(const std::vector<std::string>& mpirun_args) {
  if (const char* f = std::getenv("OMPI_MCA_orte_default_hostfile"); f && *f) return false;
  for (const auto& a : mpirun_args) {
    if (a == "--host" || a == "-host" || a == "-H" || a == "--hostfile" || a == "-hostfile" || a == "--machinefile" ||
        a == "-machinefile" || a == "--default-hostfile" || a.rfind("--host=", 0) == 0 || a.rfind("--hostfile=", 0) == 0)
      return false;
  }
  return true;
}

std::vector<std::string> mpirun_argv(const std::vector<std::string>& mpirun_args,
                                     const std::vector<std::string>& forward) {
  std::vector<std::string> argv = {"mpirun", "--oversubscribe"};
  std::vector<std::string> names = forward;
  if (std::getenv("PYTHONPATH")) names.emplace_back("PYTHONPATH");
  for (char** e = ::environ; e && *e; ++e) {
    const std::string entry = *e;
    if (entry.rfind("TESSERA_", 0) == 0) names.push_back(entry.substr(0, entry.find('=')));
  }
  std::sort(names.begin(), names.end());
  names.erase(std::unique(names.begin(), names.end()), names.end());
  for (const auto& name : names) argv.insert(argv.end(), {"-x", name});
  argv.insert(argv.end(), mpirun_args.begin(), mpirun_args.end());
  return argv;
}

std::vector<std::pair<std::string, std::string>> mpirun_relaunch_environment() {
  return {{"OMPI_MCA_odls_base_sigkill_timeout", "0"}};
}

std::vector<std::pair<std::string, std::string>> mpirun_sandbox_environment(bool per_rank) {
  if (!per_rank) return {{"OMPI_MCA_btl_vader_backing_directory", "/tmp"}};
  return {{"OMPI_MCA_btl", "self,tcp"}, {"PMIX_MCA_gds", "hash"}};
}

std::unique_ptr<MpiSessionBase> prepare_singleton_mpi() {
  if (launched_by_mpi()) return nullptr;
  ::setenv("OMPI_MCA_pml", "ob1", 0);
  if (mpi_session_base_chosen()) return nullptr;
  auto base = std::make_unique<MpiSessionBase>();
  ::setenv(MpiSessionBase::kVariable, base->path().c_str(), 1);
  return base;
}

void exec_mpirun(const std::vector<std::string>& mpirun_args) {
  const bool single_node = mpirun_single_node(mpirun_args);
  for (const auto& [name, value] : mpirun_defaults(single_node)) ::setenv(name.c_str(), value.c_str(), 0);
  if (single_node && !mpi_session_base_chosen()) {
    MpiSessionBase base;  // named by this PID, mpirun's after the exec
    ::setenv(MpiSessionBase::kVariable, base.path().c_str(), 1);
    base.keep();  // removed by a later launch once mpirun has ended
  }
  auto words = mpirun_argv(mpirun_args);
  std::vector<char*> argv;
  for (auto& w : words) argv.push_back(w.data());
  argv.push_back(nullptr);
  std::fflush(nullptr);
  ::execvp("mpirun", argv.data());
  throw SystemError("cannot start mpirun (is openmpi-bin installed? run scripts/setup.sh)", errno);
}

// ---- Open MPI session directories -------------------------------------------

bool mpi_session_base_chosen() {
  for (const char* var : {"OMPI_MCA_orte_tmpdir_base", "OMPI_MCA_orte_local_tmpdir_base",
                          "OMPI_MCA_orte_remote_tmpdir_base"})
    if (std::getenv(var)) return true;
  return false;
}

std::string mpi_shared_memory_dir() {
  const char* dir = std::getenv("OMPI_MCA_btl_vader_backing_directory");
  return dir && *dir ? dir : "/dev/shm";
}

std::string mpi_session_bases_dir() {
  const char* tmp = std::getenv("TMPDIR");
  struct stat ns {};
  const auto pid_namespace = ::stat("/proc/self/ns/pid", &ns) == 0 ? static_cast<unsigned long>(ns.st_ino) : 0ul;
  return std::string(tmp && *tmp ? tmp : "/tmp") + "/tessera-mpirun." + std::to_string(::getuid()) + "." +
         std::to_string(pid_namespace);
}

MpiSessionBase::MpiSessionBase(const std::string& tag) {
  namespace fs = std::filesystem;
  const fs::path bases = mpi_session_bases_dir();
  path_ = (bases / (std::to_string(::getpid()) + (tag.empty() ? "" : "." + tag))).string();
  // The directory of bases goes with its last base (nothing is left in
  // TMPDIR): a launch beside may remove it between our two mkdirs, so the
  // pair is tried again.
  for (int attempt = 0;; ++attempt) {
    if (::mkdir(bases.c_str(), 0700) != 0 && errno != EEXIST)
      throw SystemError("cannot make the directory of Open MPI session bases " + bases.string(), errno);
    if (::mkdir(path_.c_str(), 0700) == 0 || errno == EEXIST) break;
    if (errno != ENOENT || attempt == 100)
      throw SystemError("cannot make an Open MPI session directory base " + path_, errno);
  }
  // The bases of ended launches: PID or PID.TAG, PID the process whose life
  // bounds the base's mpirun.
  std::error_code ec;
  for (fs::directory_iterator it(bases, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    const std::string pid = name.substr(0, name.find('.'));
    if (pid.empty() || pid.find_first_not_of("0123456789") != std::string::npos || pid.size() > 9) continue;
    if (::kill(static_cast<pid_t>(std::stol(pid)), 0) != 0 && errno == ESRCH) {
      std::error_code ignored;
      fs::remove_all(it->path(), ignored);
    }
  }
}

MpiSessionBase::~MpiSessionBase() {
  if (path_.empty()) return;
  std::error_code ignored;
  std::filesystem::remove_all(path_, ignored);
  ::rmdir(std::filesystem::path(path_).parent_path().c_str());  // only when empty: the last base
}

// ---- co-locales -------------------------------------------------------------

ColocaleKind parse_colocale_kind(const std::string& text) {
  if (text == "socket") return ColocaleKind::socket;
  if (text == "numa") return ColocaleKind::numa;
  if (text == "core") return ColocaleKind::core;
  throw ConfigError("--colocales must be socket, numa or core; got '" + text + "'");
}

const char* colocale_name(ColocaleKind kind) {
  return kind == ColocaleKind::socket ? "socket" : kind == ColocaleKind::numa ? "numa" : "core";
}

bool parse_colocale_segments(const char* text) {
  std::string v = text ? text : "";
  if (v.empty() || v == "0") return false;
  if (v == "1") return true;
  throw ConfigError(std::string(kColocaleSegmentsVariable) +
                    " must be 0 (arrays with default storage on the Heap) or 1 (in co-locale segments, node-shared "
                    "memory that co-located ranks access directly); got '" + v + "'");
}

namespace {

// The node's domains of `kind`, each as the OS indices of its PUs. A machine
// hwloc reports none of (no package or NUMA information) is one domain.
std::vector<std::vector<int>> domains_of(hwloc_topology_t topo, ColocaleKind kind) {
  hwloc_obj_type_t type = kind == ColocaleKind::socket ? HWLOC_OBJ_PACKAGE
                          : kind == ColocaleKind::numa ? HWLOC_OBJ_NUMANODE
                                                       : HWLOC_OBJ_CORE;
  std::vector<std::vector<int>> out;
  int n = hwloc_get_nbobjs_by_type(topo, type);
  int pus = hwloc_get_nbobjs_by_type(topo, HWLOC_OBJ_PU);
  for (int i = 0; i < std::max(n, 0); ++i) {
    hwloc_obj_t domain = hwloc_get_obj_by_type(topo, type, static_cast<unsigned>(i));
    std::vector<int> members;
    for (int p = 0; p < pus; ++p) {
      hwloc_obj_t pu = hwloc_get_obj_by_type(topo, HWLOC_OBJ_PU, static_cast<unsigned>(p));
      if (domain->cpuset && hwloc_bitmap_isset(domain->cpuset, pu->os_index)) members.push_back(static_cast<int>(pu->os_index));
    }
    if (!members.empty()) out.push_back(std::move(members));
  }
  if (out.empty()) {
    std::vector<int> all;
    for (int p = 0; p < pus; ++p)
      all.push_back(static_cast<int>(hwloc_get_obj_by_type(topo, HWLOC_OBJ_PU, static_cast<unsigned>(p))->os_index));
    out.push_back(std::move(all));
  }
  return out;
}

ColocalePlan plan_from(hwloc_topology_t topo, ColocaleKind kind, int ranks) {
  if (ranks < 1) throw ConfigError("co-locales need at least one rank, got " + std::to_string(ranks));
  auto domains = domains_of(topo, kind);
  const int D = static_cast<int>(domains.size());
  ColocalePlan plan;
  plan.kind = kind;
  plan.domains = D;
  plan.domain_of_rank.resize(static_cast<std::size_t>(ranks));
  plan.pus_of_rank.resize(static_cast<std::size_t>(ranks));
  for (int r = 0; r < ranks; ++r)
    plan.domain_of_rank[static_cast<std::size_t>(r)] =
        static_cast<int>(static_cast<long long>(r) * D / ranks);
  bool shared_pus = false;
  for (int d = 0; d < D; ++d) {
    std::vector<int> sharing;
    for (int r = 0; r < ranks; ++r)
      if (plan.domain_of_rank[static_cast<std::size_t>(r)] == d) sharing.push_back(r);
    const auto& pus = domains[static_cast<std::size_t>(d)];
    const std::size_t q = sharing.size(), n = pus.size();
    for (std::size_t j = 0; j < q; ++j) {
      auto& mine = plan.pus_of_rank[static_cast<std::size_t>(sharing[j])];
      if (n >= q) {
        mine.assign(pus.begin() + static_cast<std::ptrdiff_t>(j * n / q),
                    pus.begin() + static_cast<std::ptrdiff_t>((j + 1) * n / q));
      } else {
        mine = {pus[j % n]};
        shared_pus = true;
      }
    }
  }
  std::string name = kind == ColocaleKind::numa ? "NUMA domain" : colocale_name(kind);
  std::string domains_text = std::to_string(D) + " " + name + (D == 1 ? "" : "s");
  if (ranks == D)
    plan.note = "one rank per " + name + " (" + domains_text + ")";
  else if (ranks < D)
    plan.note = std::to_string(ranks) + " ranks spread over " + domains_text + ", one each, the rest unused";
  else
    plan.note = std::to_string(ranks) + " ranks on " + domains_text + ": ranks sharing a " + name +
                (shared_pus ? " share its PUs round-robin (more ranks than PUs: oversubscribed)" : " split its PUs");
  return plan;
}

int env_int(const char* name, int fallback) {
  const char* v = std::getenv(name);
  return v && *v ? std::atoi(v) : fallback;
}
}  // namespace

ColocalePlan plan_colocales_synthetic(const std::string& synthetic, ColocaleKind kind, int ranks) {
  LoadedTopology t(&synthetic);
  return plan_from(t.topo, kind, ranks);
}

ColocalePlan plan_colocales_here(ColocaleKind kind, int ranks) {
  LoadedTopology t(nullptr);
  return plan_from(t.topo, kind, ranks);
}

ColocalePlan bind_colocale(ColocaleKind kind) {
  int local_rank = env_int("OMPI_COMM_WORLD_LOCAL_RANK", env_int("MPI_LOCALRANKID", 0));
  int local_size = env_int("OMPI_COMM_WORLD_LOCAL_SIZE", env_int("MPI_LOCALNRANKS", 1));
  if (local_rank < 0 || local_rank >= local_size) local_rank = 0, local_size = 1;
  LoadedTopology t(nullptr);
  ColocalePlan plan = plan_from(t.topo, kind, local_size);
  hwloc_bitmap_t set = hwloc_bitmap_alloc();
  for (int pu : plan.pus_of_rank[static_cast<std::size_t>(local_rank)]) hwloc_bitmap_set(set, static_cast<unsigned>(pu));
  // The whole process (every thread, OpenMP's too); memory follows by first
  // touch once the threads run there.
  int rc = hwloc_set_cpubind(t.topo, set, HWLOC_CPUBIND_PROCESS);
  int err = errno;
  hwloc_bitmap_free(set);
  if (rc != 0)
    throw SystemError("cannot bind rank " + std::to_string(local_rank) + " to PUs " +
                          format_index_list(plan.pus_of_rank[static_cast<std::size_t>(local_rank)]) + " (--colocales " +
                          colocale_name(kind) + ")",
                      err);
  setenv("TESSERA_COLOCALES", (std::string(colocale_name(kind)) + ": " + plan.note).c_str(), 1);
  // Co-locales share the node's memory: default-storage arrays go into
  // co-locale segments so the same-node path serves every array. An explicit
  // TESSERA_COLOCALE_SEGMENTS=0 keeps them on the Heap.
  const char* segments = std::getenv(kColocaleSegmentsVariable);
  if (segments == nullptr || *segments == '\0') setenv(kColocaleSegmentsVariable, "1", 1);
  return plan;
}

}  // namespace tessera
