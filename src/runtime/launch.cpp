#include "tessera/runtime/launch.hpp"

#include <hwloc.h>
#include <signal.h>
#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string_view>

#include "tessera/runtime/error.hpp"
#include "tessera/runtime/topology.hpp"
#include "loaded_topology.hpp"

namespace tessera {

bool launched_by_mpi() {
  for (const char* var : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_RANK", "MPI_LOCALNRANKS", "PMI_RANK"})
    if (std::getenv(var)) return true;
  return false;
}

namespace {
pid_t g_mpirun = 0;

// mpirun's stderr, passed on line by line except Open MPI's boxed messages
// (between lines of dashes). Of those only one matters to a Tessera user: a
// lost node's daemon (a node crashed, was killed or left the network), which
// becomes one line naming the node; the rest (MPI_ABORT, "Primary job
// terminated normally", "mpirun detected that one or more processes exited")
// only repeat Tessera's own error line.
class MpirunStderr {
 public:
  void feed(std::string_view data) {
    for (char c : data) {
      line_ += c;
      if (c == '\n') take_line();
    }
  }
  void finish() {
    if (!line_.empty()) take_line();
    if (in_box_) close_box();
  }

 private:
  static bool is_rule(const std::string& line) {
    std::size_t dashes = line.find_first_not_of('-');
    return dashes >= 20 && (dashes == std::string::npos || line.find_first_not_of("\r\n", dashes) == std::string::npos);
  }
  void take_line() {
    std::string line = std::move(line_);
    line_.clear();
    if (is_rule(line)) {
      if (in_box_) {
        close_box();
      } else {
        in_box_ = true;
      }
      return;
    }
    if (in_box_) {
      box_ += line;
      return;
    }
    // "[host:pid] 1 more process has sent help message ..." and the hint
    // after it only count the boxes dropped above.
    if (line.find("more process has sent help message") != std::string::npos ||
        line.find("more processes have sent help message") != std::string::npos ||
        line.find("\"orte_base_help_aggregate\" to 0") != std::string::npos)
      return;
    std::fwrite(line.data(), 1, line.size(), stderr);
    std::fflush(stderr);
  }
  void close_box() {
    in_box_ = false;
    std::string box = std::move(box_);
    box_.clear();
    if (box.find("lost communication with a remote daemon") == std::string::npos) return;
    std::string node = "another node";
    std::size_t at = box.find("Remote daemon");
    if (at != std::string::npos && (at = box.find(" on node ", at)) != std::string::npos) {
      std::size_t end = box.find_first_of("\r\n", at + 9);
      node = "node " + box.substr(at + 9, end == std::string::npos ? std::string::npos : end - at - 9);
    }
    std::fprintf(stderr,
                 "tessera: error: lost %s: mpirun lost contact with its Open MPI daemon there (the node went down, "
                 "was killed or left the network); the job was aborted. Run 'tessera shm gc' on the other nodes to "
                 "remove this job's segments\n",
                 node.c_str());
    std::fflush(stderr);
  }
  std::string line_, box_;
  bool in_box_ = false;
};

void forward_to_mpirun(int sig) {
  if (g_mpirun > 0) ::kill(g_mpirun, sig);
}
}  // namespace

void relaunch_under_mpirun(int ranks, const std::string& program, const std::vector<std::string>& args,
                           const std::vector<std::string>& mpirun_options) {
  if (ranks < 1) throw ConfigError("-n must be at least 1, got " + std::to_string(ranks));
  // Same settings as scripts/mpirun.sh: containers and CI run as root, and
  // oversubscribed ranks must give the core away while idle.
  setenv("OMPI_ALLOW_RUN_AS_ROOT", "1", 0);
  setenv("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1", 0);
  setenv("OMPI_MCA_mpi_yield_when_idle", "1", 0);
  // Not --quiet: it also silences the one message that names a lost node.
  // mpirun's stderr goes through MpirunStderr instead, which drops Open MPI's
  // boxed banners (MPI_ABORT, "Primary job terminated normally...") so the
  // user sees Tessera's one error line (tests/cli/test_cli.sh).
  // The ranks still run quiet: their help messages (the MPI_ABORT banner)
  // stay local instead of being forwarded to mpirun, which in Open MPI 4.1
  // can fail mid-abort with "ORTE_ERROR_LOG: Data unpack had inadequate space".
  std::vector<std::string> argv_s = {"mpirun", "-n", std::to_string(ranks), "--oversubscribe",
                                     "-x", "OMPI_MCA_orte_execute_quiet=1"};
  argv_s.insert(argv_s.end(), mpirun_options.begin(), mpirun_options.end());
  argv_s.push_back(program);
  argv_s.insert(argv_s.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (auto& a : argv_s) argv.push_back(a.data());
  argv.push_back(nullptr);

  // The job's error line comes back through a file, not through mpirun's
  // stderr forwarding: when several ranks fail alike, which rank's line gets
  // printed (or whether mpirun forwards it before MPI_Abort tears the job
  // down) would depend on timing. The first failing rank claims the report
  // (abort_job); this process prints it once after mpirun has exited.
  std::string tmp = std::getenv("TMPDIR") && *std::getenv("TMPDIR") ? std::getenv("TMPDIR") : "/tmp";
  std::string dir_template = tmp + "/tessera-launch-XXXXXX";
  std::string report_dir;
  if (::mkdtemp(dir_template.data()) != nullptr) report_dir = dir_template;
  std::fflush(nullptr);
  int err_pipe[2] = {-1, -1};
  if (::pipe2(err_pipe, O_CLOEXEC) != 0) throw SystemError("cannot start mpirun (pipe)", errno);
  pid_t child = ::fork();
  if (child < 0) throw SystemError("cannot start mpirun", errno);
  if (child == 0) {
    ::dup2(err_pipe[1], STDERR_FILENO);  // dup2 clears close-on-exec on fd 2
    // "PID:FILE": only mpirun's own children (the ranks) report there, not
    // processes they start (tessera-analyze) nor ranks on other nodes.
    if (!report_dir.empty())
      setenv(kErrorReportVariable, (std::to_string(::getpid()) + ":" + report_dir + "/error").c_str(), 1);
    execvp("mpirun", argv.data());
    std::fprintf(stderr, "tessera: error: cannot start mpirun (is openmpi-bin installed? run scripts/setup.sh): %s\n",
                 std::strerror(errno));
    std::_Exit(127);
  }
  // Ctrl-C reaches mpirun from the terminal directly (same process group);
  // a signal sent to this process alone is passed on.
  g_mpirun = child;
  struct sigaction ignore {}, forward {};
  ignore.sa_handler = SIG_IGN;
  forward.sa_handler = forward_to_mpirun;
  sigemptyset(&ignore.sa_mask);
  sigemptyset(&forward.sa_mask);
  sigaction(SIGINT, &ignore, nullptr);
  sigaction(SIGQUIT, &ignore, nullptr);
  sigaction(SIGTERM, &forward, nullptr);
  sigaction(SIGHUP, &forward, nullptr);
  ::close(err_pipe[1]);
  // The ranks' own stderr comes through here too: pass it on as it arrives.
  MpirunStderr filter;
  char buffer[4096];
  for (;;) {
    ssize_t got = ::read(err_pipe[0], buffer, sizeof(buffer));
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) break;
    filter.feed(std::string_view(buffer, static_cast<std::size_t>(got)));
  }
  filter.finish();
  ::close(err_pipe[0]);
  int status = 0;
  while (::waitpid(child, &status, 0) < 0 && errno == EINTR) {
  }
  if (!report_dir.empty()) {
    std::ifstream in(report_dir + "/error");
    std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    if (!text.empty()) {
      std::fputs(text.c_str(), stderr);
      std::fflush(stderr);
    }
    std::error_code ignored;
    std::filesystem::remove_all(report_dir, ignored);
  }
  std::exit(WIFEXITED(status) ? WEXITSTATUS(status) : 128 + (WIFSIGNALED(status) ? WTERMSIG(status) : 0));
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
