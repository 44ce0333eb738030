// The caller's side of an out-of-process analysis (include/tessera/analyze/client.hpp).
#include "tessera/analyze/client.hpp"
#include "tessera/runtime/wait.hpp"

#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <optional>
#include <sstream>
#include <thread>

#include "tessera/analyze/protocol.hpp"
#include "tessera/linalg/vector.hpp"
#include "tessera/runtime/child_process.hpp"
#include "tessera/runtime/collective.hpp"
#include "tessera/runtime/error.hpp"
#include "tessera/runtime/launch.hpp"
#include "tessera/runtime/runtime.hpp"
#include "tessera/runtime/trace.hpp"

extern char** environ;

namespace tessera::analyze {

namespace {
using control::ControlSegment;
using control::Side;
namespace proto = protocol;

std::string directory_of(const std::string& path) {
  auto slash = path.rfind('/');
  if (slash == std::string::npos) return ".";
  return slash == 0 ? "/" : path.substr(0, slash);
}

std::string analyze_program(const ProcessOptions& o) {
  if (!o.program.empty()) return o.program;
  if (const char* env = std::getenv("TESSERA_ANALYZE"); env && *env) return env;
  std::error_code ec;
  auto self = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (!ec) {
    auto beside = self.parent_path() / "tessera-analyze";
    if (::access(beside.c_str(), X_OK) == 0) return beside.string();
  }
  return "tessera-analyze";
}

// The environment without the caller's MPI job: a nested mpirun (or
// singleton) that inherits OMPI_/PMIX_ variables would try to join this job.
// In a container, the analysis' mpirun runs in a PID namespace of its own,
// where its pid (hence Open MPI's job id) is the same small number every
// time, while the Shared directory bound in is usually the host's /dev/shm,
// where Open MPI keeps its shared-memory segments by default: two sandboxed
// analyses on one host (or one and another's leftovers) would open each
// other's segments and crash in MPI_Init. The sandbox's private /tmp holds
// them instead.
//
// Across nodes the nested mpirun needs the user's Open MPI settings (how to
// reach the other nodes: plm_rsh_agent, a hostfile, the interfaces), which
// mpirun passed on to this job as OMPI_MCA_ variables: those are kept, and
// only the ones mpirun sets for each job (its identity, session and
// placement) are dropped.
bool job_specific_mca(const std::string& name) {
  static const char* const names[] = {"ess", "pmix", "initial_wdir", "mpi_oversubscribe", "shmem_RUNTIME_QUERY_hint",
                                      "orte_app_num", "orte_bound_at_launch", "orte_launch", "orte_num_nodes",
                                      "orte_precondition_transports", "orte_hnp_uri", "orte_local_daemon_uri",
                                      "orte_jobfam_session_dir", "orte_top_session_dir", "orte_tmpdir_base"};
  for (const char* n : names)
    if (name == n) return true;
  return name.rfind("ess_", 0) == 0 || name.rfind("orte_ess_", 0) == 0;
}

enum class Sandbox { none, around_mpirun, per_rank };

std::vector<std::string> analysis_environment(Sandbox sandbox, bool across_nodes) {
  std::vector<std::string> env;
  for (char** e = environ; e && *e; ++e) {
    std::string v = *e;
    bool mpi = false;
    for (const char* prefix : {"OMPI_", "PMIX_", "PMI_", "OPAL_", "ORTE_", "HYDRA_", "MPIR_", "MPI_LOCAL"})
      mpi = mpi || v.rfind(prefix, 0) == 0;
    if (mpi && across_nodes) {
      const std::string name = v.substr(0, v.find('='));
      if (name.rfind("OMPI_MCA_", 0) == 0) mpi = job_specific_mca(name.substr(9));
      else if (name == "OPAL_PREFIX") mpi = false;
    }
    if (mpi) continue;
    // A traced job's analysis records a trace of its own beside the job's.
    const std::string traced = std::string(trace::kTraceVariable) + "=";
    if (v.rfind(traced, 0) == 0) v = traced + trace::companion_path(v.substr(traced.size()), "analysis");
    env.push_back(v);
  }
  // The caller's OMPI_ variables are gone, so the defaults are set as they are.
  for (const auto& [name, value] : mpirun_defaults(!across_nodes)) env.push_back(name + "=" + value);
  if (sandbox != Sandbox::none) {
    // In a sandbox (runtime/launch.hpp says what changes, and why); the
    // sandbox's values replace the caller's.
    for (const auto& [name, value] : mpirun_sandbox_environment(sandbox == Sandbox::per_rank)) {
      std::erase_if(env, [&name](const std::string& v) { return v.rfind(name + "=", 0) == 0; });
      env.push_back(name + "=" + value);
    }
  }
  return env;
}

// The launched analysis (mpirun, or the container launcher around it): its
// output goes to our stderr (stdout may carry --json), and it is stopped
// and reaped whatever happens to this call.
class Child {
 public:
  Child() = default;
  Child(const Child&) = delete;
  Child& operator=(const Child&) = delete;
  ~Child() { stop(); }

  void start(const std::vector<std::string>& argv_s, Sandbox sandbox, bool across_nodes) {
    std::vector<char*> argv, envp;
    for (auto& a : argv_s) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    env_ = analysis_environment(sandbox, across_nodes);
    // On one node, mpirun gets a session directory base of its own
    // (runtime/launch.hpp). Not in a container: the sandbox's /tmp is its own.
    if (sandbox == Sandbox::none && !across_nodes) env_.push_back(session_base_.emplace().environment_entry());
    for (auto& e : env_) envp.push_back(e.data());
    envp.push_back(nullptr);
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_adddup2(&actions, 2, 1);
    // Across nodes, a process group of its own: when an analysis rank dies,
    // mpirun ends the analysis and the caller's job ends too, and the
    // caller's mpirun signals each rank's whole process group; a signal that
    // reaches the analysis' mpirun in the middle of its own teardown crashes it.
    posix_spawnattr_t attributes;
    posix_spawnattr_init(&attributes);
    if (across_nodes) {
      posix_spawnattr_setpgroup(&attributes, 0);
      posix_spawnattr_setflags(&attributes, POSIX_SPAWN_SETPGROUP);
    }
    int err = ::posix_spawnp(&pid_, argv[0], &actions, &attributes, argv.data(), envp.data());
    posix_spawnattr_destroy(&attributes);
    posix_spawn_file_actions_destroy(&actions);
    if (err != 0) {
      pid_ = -1;
      throw ConfigError("cannot start the analysis (" + argv_s[0] + "): " + std::strerror(err));
    }
  }
  bool running() const noexcept { return pid_ > 0; }
  // True (and the status in *how) once the child has exited; reaps it.
  bool exited(std::string* how = nullptr) {
    if (pid_ <= 0) return true;
    int status = 0;
    pid_t r = ::waitpid(pid_, &status, WNOHANG);
    if (r == 0) return false;
    pid_ = -1;
    if (how) {
      if (r < 0) *how = "could not be waited for";
      else if (WIFEXITED(status)) *how = "exited with status " + std::to_string(WEXITSTATUS(status));
      else if (WIFSIGNALED(status)) *how = std::string("was killed by signal ") + strsignal(WTERMSIG(status));
    }
    if (r > 0 && WIFEXITED(status)) status_ = WEXITSTATUS(status);
    return true;
  }
  // Waits up to `seconds` for a clean exit (sleeping between checks).
  bool wait_exit(double seconds) {
    auto until = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
    while (!exited()) {
      if (std::chrono::steady_clock::now() > until) return false;
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
    return true;
  }
  // Left to end by itself, neither signalled nor waited for (reaped by init
  // once this process is gone).
  void abandon() noexcept {
    pid_ = -1;
    if (session_base_) session_base_->keep();
  }
  void stop() noexcept {
    if (pid_ <= 0) return;
    stop_child(pid_, 3.0);
    pid_ = -1;
  }

 private:
  std::optional<MpiSessionBase> session_base_;  // removed after stop() has reaped mpirun
  pid_t pid_ = -1;
  int status_ = -1;
  std::vector<std::string> env_;
};

double seconds_between(std::int64_t from_ns, std::int64_t to_ns) {
  if (from_ns <= 0 || to_ns <= 0) return -1;
  return static_cast<double>(to_ns - from_ns) * 1e-9;
}

std::atomic<int> analysis_counter{0};

std::string seconds_text(double s) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%g s", s);
  return buf;
}

std::string launcher_text(const ProcessOptions& options) {
  if (!options.launcher.empty()) return options.launcher;
  const char* env = std::getenv("TESSERA_ANALYZE_LAUNCHER");
  return env && *env ? env : kDefaultLauncher;
}

// The container launcher's words, ready to run `program` for the Shared
// directory `dir`; *control becomes the control path as the sandbox sees it.
// `per_rank`: the sandbox holds one analysis rank that talks TCP to ranks on
// other nodes, so it must keep the network.
std::vector<std::string> launcher_words(const ProcessOptions& options, const std::string& dir,
                                        const std::string& program, std::string* control, bool per_rank) {
  const std::string launcher = launcher_text(options);
  auto words = split_words(launcher);
  // "--bind SHMDIR /data": the sandbox sees the directory at /data, so
  // the analysis is told /data/NAME.control.seg (array names in the
  // request are relative to it).
  for (std::size_t i = 0; i + 1 < words.size(); ++i)
    if (words[i] == "SHMDIR" && words[i + 1] != "SHMDIR" && words[i + 1].rfind('/', 0) == 0)
      *control = words[i + 1] + control->substr(control->rfind('/'));
  for (auto& w : words)
    for (auto at = w.find("SHMDIR"); at != std::string::npos; at = w.find("SHMDIR", at + dir.size()))
      w.replace(at, 6, dir);
  // bwrap's --tmpfs DIR hides whatever lies under DIR (a checkout built
  // in /tmp): bind the top directory under DIR that holds the program
  // (and its libraries) back, read-only, right after it (bwrap mounts in
  // order).
  for (std::size_t i = 0; i + 1 < words.size(); ++i)
    if (words[i] == "--tmpfs" && program.rfind(words[i + 1] + "/", 0) == 0) {
      const std::string rest = program.substr(words[i + 1].size() + 1);
      const std::string top = words[i + 1] + "/" + rest.substr(0, rest.find('/'));
      words.insert(words.begin() + static_cast<std::ptrdiff_t>(i + 2), {"--ro-bind", top, top});
      break;
    }
  if (words.empty() || !on_path(words[0]))
    throw ConfigError("--analysis container: the launcher '" + (words.empty() ? launcher : words[0]) +
                      "' is not installed (Debian: apt-get install bubblewrap), or set --analysis-launcher");
  if (per_rank && std::filesystem::path(words[0]).filename() == "bwrap") {
    std::erase(words, std::string("--unshare-net"));
    auto all = std::find(words.begin(), words.end(), "--unshare-all");
    if (all != words.end() && std::find(words.begin(), words.end(), "--share-net") == words.end())
      words.insert(all + 1, "--share-net");
  }
  return words;
}

// Consecutive caller ranks on one host: one app context of the analysis'
// mpirun each, so analysis rank r starts on the node of caller rank r.
struct HostRun {
  std::string host;
  int ranks = 0;
};

std::vector<HostRun> host_runs(const std::vector<std::string>& hosts) {
  std::vector<HostRun> runs;
  for (const auto& h : hosts) {
    if (runs.empty() || runs.back().host != h) runs.push_back({h, 0});
    ++runs.back().ranks;
  }
  return runs;
}

std::string joined(const std::vector<std::string>& words) {
  std::string out;
  for (const auto& w : words) out += (out.empty() ? "" : " ") + w;
  return out;
}

// Failure notices between the caller's ranks when they span nodes: each
// node's ranks wait on their own node's control segment, so a rank that
// sees its node's analysis fail (or a launcher exit, a timeout) tells every
// other rank over MPI; each tests its one posted receive every wait period
// and fails its own node's segment with the same message, so the whole job
// ends within a few periods and every node's analysis is released.
class Notices {
 public:
  struct Notice {
    int category = 0;
    bool rank_lost = false;  // an analysis rank died: its mpirun is ending the analysis
    std::string message;
  };

  explicit Notices(MPI_Comm comm) {  // collective
    TESSERA_MPI(MPI_Comm_dup(comm, &comm_));
    TESSERA_MPI(MPI_Comm_rank(comm_, &rank_));
    TESSERA_MPI(MPI_Comm_size(comm_, &size_));
    TESSERA_MPI(MPI_Irecv(incoming_.data(), static_cast<int>(incoming_.size()), MPI_CHAR, MPI_ANY_SOURCE, kTag, comm_,
                          &receive_));
  }
  Notices(const Notices&) = delete;
  Notices& operator=(const Notices&) = delete;
  ~Notices() {
    if (receive_ != MPI_REQUEST_NULL) {
      MPI_Cancel(&receive_);
      MPI_Wait(&receive_, MPI_STATUS_IGNORE);
    }
    // Sent only when the job is failing: they complete (or are dropped) in the background.
    for (auto& r : sends_) MPI_Request_free(&r);
    MPI_Comm_free(&comm_);
  }

  // The notice another rank sent, if one has come.
  std::optional<Notice> received() {
    if (receive_ == MPI_REQUEST_NULL) return std::nullopt;
    int done = 0;
    {
      MpiPollScope quiet;
      TESSERA_MPI(MPI_Test(&receive_, &done, MPI_STATUS_IGNORE));
    }
    if (!done) return std::nullopt;
    Notice n;
    int head[2];
    std::memcpy(head, incoming_.data(), sizeof(head));
    n.category = head[0];
    n.rank_lost = head[1] != 0;
    n.message.assign(incoming_.data() + sizeof(head), strnlen(incoming_.data() + sizeof(head), control::kMessageBytes));
    return n;
  }

  // To every other rank, once.
  void send(int category, const std::string& message, bool rank_lost) {
    if (!sends_.empty()) return;
    std::memset(outgoing_.data(), 0, outgoing_.size());
    const int head[2] = {category, rank_lost ? 1 : 0};
    std::memcpy(outgoing_.data(), head, sizeof(head));
    std::memcpy(outgoing_.data() + sizeof(head), message.data(), std::min(message.size(), control::kMessageBytes - 1));
    sends_.reserve(static_cast<std::size_t>(size_));
    for (int r = 0; r < size_; ++r) {
      if (r == rank_) continue;
      sends_.push_back(MPI_REQUEST_NULL);
      TESSERA_MPI(MPI_Isend(outgoing_.data(), static_cast<int>(outgoing_.size()), MPI_CHAR, r, kTag, comm_,
                            &sends_.back()));
    }
  }

 private:
  static constexpr int kTag = 23;
  MPI_Comm comm_ = MPI_COMM_NULL;
  int rank_ = 0, size_ = 1;
  std::array<char, 2 * sizeof(int) + control::kMessageBytes> incoming_{}, outgoing_{};
  MPI_Request receive_ = MPI_REQUEST_NULL;
  std::vector<MPI_Request> sends_;
};

struct HostName {
  char name[proto::kHostBytes];
};
}  // namespace

bool launcher_available(const ProcessOptions& options, std::string* program) {
  auto words = split_words(launcher_text(options));
  if (program) *program = words.empty() ? std::string() : words[0];
  return !words.empty() && on_path(words[0]);
}

namespace {

// What one request brought back: the result vector, the reply, the handshake.
struct Outcome {
  linalg::Vector result;
  proto::Reply reply;
  Handshake handshake;
};

// One request of kind `analysis` (hitting times: `targets`, `hitting`; a
// spectral kind: `spectral`) served by a started or user-started analysis,
// in the phases run_out_of_process calls in order. Every phase is collective
// over the caller's ranks unless it says otherwise.
class OutOfProcessRun {
 public:
  OutOfProcessRun(const graph::EdgeList& g, proto::Analysis analysis, std::span<const std::uint64_t> targets,
                  const linalg::HittingOptions& hitting, const SpectralRequest& spectral,
                  const ProcessOptions& options)
      : g_(g),
        analysis_(analysis),
        targets_(targets),
        hitting_(hitting),
        spectral_(spectral),
        options_(options),
        hitting_kind_(analysis == proto::Analysis::hitting_times),
        rt_(g.runtime()),
        root_(rt_.rank() == 0),
        node_(rt_.node()),
        // Each node's lowest rank creates, fills and shuts down its node's control
        // segment; with one node that is rank 0 and everything is as it always was.
        leader_(node_.rank == 0),
        across_nodes_(node_.count > 1),
        offsets_(g.offsets_metadata_path()),
        dst_(g.dst_metadata_path()),
        weight_(g.weight() ? g.weight()->metadata_path() : std::string()),
        here_("host " + node_.hostname) {}

  // The graph's arrays are shared files, and the request fits the protocol.
  void check_request() {
    agree(rt_.comm(), [&] {
      if (offsets_.empty() || dst_.empty() || (g_.weighted() && weight_.empty()))
        throw ConfigError("an out-of-process analysis needs the graph in Shared storage (its arrays have no metadata file)");
      if (g_.directed())
        throw ConfigError("the " + std::string(proto::analysis_name(static_cast<std::uint32_t>(analysis_))) +
                          " analysis needs an undirected graph");
      if (hitting_kind_ && (targets_.empty() || targets_.size() > static_cast<std::size_t>(proto::kMaxTargets)))
        throw ConfigError("an out-of-process analysis takes 1 to " + std::to_string(proto::kMaxTargets) +
                          " targets, not " + std::to_string(targets_.size()));
      if (rt_.size() > control::kMaxRanks)
        throw ConfigError("an out-of-process analysis supports at most " + std::to_string(control::kMaxRanks) +
                          " ranks");
    });
  }

  // The run's name, every caller rank's host, and the result array the
  // analysis writes (hitting times or an eigenvector on the graph's vertex
  // ranges) beside the graph.
  void name_result_and_hosts() {
    dir_ = directory_of(offsets_);
    base_ = broadcast(rt_.comm(),
                      root_ ? "tessera-" + rt_.job_id() + "-analysis" + std::to_string(analysis_counter++)
                            : std::string(),
                      0);
    // In rank order: analysis rank r starts on caller rank r's host.
    HostName mine{};
    std::snprintf(mine.name, sizeof(mine.name), "%s", node_.hostname.c_str());
    std::vector<std::string> hosts;
    for (const auto& h : all_gather(rt_.comm(), mine)) hosts.emplace_back(h.name, strnlen(h.name, sizeof(h.name)));
    runs_ = host_runs(hosts);
    if (across_nodes_) notices_.emplace(rt_.comm());

    auto result_storage = StorageOptions::shared(base_ + (hitting_kind_ ? "-times" : "-vector"), dir_);
    result_storage.group_access = options_.group_access;
    result_.emplace(g_.vertex_map(), result_storage);
    hs_.control_path = options_.control.empty() ? dir_ + "/" + control::control_file_name(base_) : options_.control;
    hs_.result_path = result_->array().metadata_path();
    hs_.period_seconds = options_.period;
  }

  // Node leaders create their node's control segment; every rank attaches.
  void open_control_segment() {
    proto::Placement placement{};
    placement.node = static_cast<std::uint32_t>(node_.index);
    placement.nodes = static_cast<std::uint32_t>(node_.count);
    std::snprintf(placement.host, sizeof(placement.host), "%s", node_.hostname.c_str());
    for (int r = 0; r < rt_.size(); ++r)
      placement.serves[r] = node_.node_of_rank[static_cast<std::size_t>(r)] == node_.index ? 1 : 0;
    agree(rt_.comm(), [&] {
      if (leader_) ctl_ = proto::create(hs_.control_path, rt_.size(), options_.group_access ? 0660 : 0600, &placement);
    });
    agree(rt_.comm(), [&] {
      if (!leader_) ctl_ = proto::open(hs_.control_path);
      ctl_->attach(Side::caller, rt_.rank(), "tessera");
    });
  }

  // Rank 0 starts the analysis (one mpirun) or, given a control path, tells
  // the user how to start it and waits.
  void launch_or_wait_for_user() {
    program_ = analyze_program(options_);
    user_command_ = across_nodes_ ? "mpirun " + joined(mpmd({}, hs_.control_path)) +
                                        " (one analysis rank per caller rank, on that rank's node)"
                                  : "mpirun -n " + std::to_string(rt_.size()) + " " + program_ + " --control " +
                                        hs_.control_path;
    t_launch_ = control::monotonic_ns();
    agree(rt_.comm(), [&] {
      if (!root_) return;
      if (!options_.control.empty()) {
        std::fprintf(stderr, "waiting up to %.0f s for a user-started analysis: %s\n", options_.attach_timeout,
                     user_command_.c_str());
        return;
      }
      start_analysis();
    });
  }

  // 1. Every analysis rank attached and checked the rank count.
  void handshake() {
    agree(rt_.comm(), [&] { wait_for(0, "starting", true); });
    const std::int64_t t_ready = control::monotonic_ns();
    hs_.launch_seconds = seconds_between(t_launch_, t_ready);
    if (root_) hs_.analysis = control::describe(ctl_->peer(Side::analysis, 0));
  }

  // 2. The request: each node's leader posts it to its node's analysis
  // ranks. Returns this rank's word count before the analysis' answer.
  std::uint32_t post_request() {
    const std::uint32_t before_result = ctl_->load(Side::caller, rt_.rank());
    if (leader_) {
      auto& payload = proto::payload(*ctl_);
      std::memset(&payload.request, 0, sizeof(payload.request));
      std::memset(&payload.reply, 0, sizeof(payload.reply));
      fill_request(payload.request);
      payload.reply.request_posted_ns = control::monotonic_ns();
      for (int r : node_.world_ranks) ctl_->post(Side::analysis, r);
    }
    return before_result;
  }

  // 3. Every analysis rank's word, then the reply it left in the segment.
  proto::Reply read_reply(std::uint32_t before_result) {
    std::int64_t t_resumed = 0;
    agree(rt_.comm(), [&] {
      wait_for(before_result, "solving", false);
      t_resumed = control::monotonic_ns();
    });
    proto::Reply reply{};
    std::memcpy(&reply, &proto::payload(*ctl_).reply, sizeof(reply));
    agree(rt_.comm(), [&] {
      if (reply.status != static_cast<std::uint32_t>(proto::Status::ok))
        throw PeerError("the analysis answered with status " + std::to_string(reply.status) +
                        ", not ok (corrupt reply)");
    });
    hs_.request_to_start_seconds = seconds_between(reply.request_posted_ns, reply.analysis_woke_ns);
    hs_.result_to_resume_seconds = seconds_between(reply.result_posted_ns, t_resumed);
    return reply;
  }

  // 4. Shutdown: the analysis leaves; a started one is reaped.
  void shut_down() {
    if (leader_) {
      proto::payload(*ctl_).request.analysis = static_cast<std::uint32_t>(proto::Analysis::shutdown);
      for (int r : node_.world_ranks) ctl_->post(Side::analysis, r);
    }
    if (root_) {
      const std::int64_t t_shutdown = control::monotonic_ns();
      if (child_.running() && !child_.wait_exit(10.0))
        std::fprintf(stderr, "tessera: warning: the analysis did not exit within 10 s of its shutdown; stopping it\n");
      hs_.shutdown_seconds = seconds_between(t_shutdown, control::monotonic_ns());
    }
  }

  // Everything rank 0 measured, on every rank, with the result.
  Outcome outcome(const proto::Reply& reply) {
    double measured[5] = {hs_.launch_seconds, hs_.request_to_start_seconds, hs_.result_to_resume_seconds,
                          hs_.shutdown_seconds, 0};
    broadcast(rt_.comm(), measured, 5, 0);
    hs_.launch_seconds = measured[0];
    hs_.request_to_start_seconds = measured[1];
    hs_.result_to_resume_seconds = measured[2];
    hs_.shutdown_seconds = measured[3];
    hs_.command = broadcast(rt_.comm(), hs_.command, 0);
    hs_.analysis = broadcast(rt_.comm(), hs_.analysis, 0);
    return {std::move(*result_), reply, std::move(hs_)};
  }

 private:
  // What to run: one mpirun; across nodes, one app context per run of
  // consecutive ranks on a host (Open MPI's MPMD form), so analysis rank r
  // lands on caller rank r's node and maps that node's segments.
  std::vector<std::string> app_context(const std::vector<std::string>& prefix, const std::string& control_path) const {
    std::vector<std::string> words = prefix;
    words.insert(words.end(), {program_, "--control", control_path});
    if (options_.quiet) words.push_back("-q");
    return words;
  }
  std::vector<std::string> mpmd(const std::vector<std::string>& prefix, const std::string& control_path) const {
    std::vector<std::string> words;
    for (const auto& run : runs_) {
      if (!words.empty()) words.push_back(":");
      words.insert(words.end(), {"-n", std::to_string(run.ranks), "--host", run.host + ":" + std::to_string(run.ranks)});
      auto app = app_context(prefix, control_path);
      words.insert(words.end(), app.begin(), app.end());
    }
    return words;
  }

  // Rank 0 only.
  void start_analysis() {
    std::vector<std::string> args = {"--quiet"}, words;
    Sandbox sandbox = Sandbox::none;
    if (!across_nodes_) {
      // One node: mpirun on this node, inside the launcher when contained.
      std::string control_path = hs_.control_path;
      if (options_.isolation == Isolation::container) {
        words = launcher_words(options_, dir_, program_, &control_path, false);
        sandbox = Sandbox::around_mpirun;
      }
      args.insert(args.end(), {"-n", std::to_string(rt_.size())});
      auto app = app_context({}, control_path);
      args.insert(args.end(), app.begin(), app.end());
    } else {
      // Across nodes the launcher wraps each analysis rank, not mpirun: the
      // sandbox must hold what runs on every node, and mpirun starts the
      // other nodes' daemons (through ssh or the site's launcher), which
      // inside a sandbox could neither reach them nor would be sandboxed
      // themselves. mpirun and its daemons stay outside and start each rank
      // through the launcher on its node.
      std::string control_path = hs_.control_path;
      std::vector<std::string> rank_words;
      if (options_.isolation == Isolation::container) {
        rank_words = launcher_words(options_, dir_, program_, &control_path, true);
        sandbox = Sandbox::per_rank;
      }
      auto contexts = mpmd(rank_words, control_path);
      args.insert(args.end(), contexts.begin(), contexts.end());
    }
    // mpirun's words (runtime/launch.hpp), inside the launcher when contained.
    std::vector<std::string> command = words;
    const auto mpirun = mpirun_argv(args);
    command.insert(command.end(), mpirun.begin(), mpirun.end());
    hs_.command = joined(command);
    child_.start(command, sandbox, across_nodes_);
  }

  // Leaders only: the request's fields, in the segment.
  void fill_request(proto::Request& req) const {
    req.analysis = static_cast<std::uint32_t>(analysis_);
    req.solver = static_cast<std::uint32_t>(options_.solver == "belos" ? proto::Solver::belos : proto::Solver::tessera);
    req.preconditioner = static_cast<std::uint32_t>(options_.preconditioner == "relaxation"
                                                        ? proto::Preconditioner::relaxation
                                                        : proto::Preconditioner::diagonal);
    req.target_count = hitting_kind_ ? static_cast<std::uint32_t>(targets_.size()) : 0;
    req.connected = hitting_.connected ? 1 : 0;
    req.vertices = g_.vertices();
    req.tolerance = hitting_kind_ ? hitting_.cg.tolerance : spectral_.tolerance;
    req.max_iterations = hitting_kind_ ? hitting_.cg.max_iterations : spectral_.max_iterations;
    // Arrays beside the control segment are named by file name alone, so an
    // analysis that sees the directory elsewhere (bwrap --bind DIR /data)
    // resolves them beside its own view of the control segment.
    const std::string control_dir = directory_of(hs_.control_path);
    auto put = [&](char (&field)[proto::kPathBytes], std::string path) {
      if (!path.empty() && directory_of(path) == control_dir) path = path.substr(path.rfind('/') + 1);
      if (path.size() >= proto::kPathBytes)
        throw ConfigError("array path " + path + " is longer than the control segment's " +
                          std::to_string(proto::kPathBytes - 1) + " bytes");
      std::memcpy(field, path.c_str(), path.size() + 1);
    };
    put(req.offsets, offsets_);
    put(req.dst, dst_);
    put(req.weight, weight_);
    put(req.result, hs_.result_path);
    if (hitting_kind_) std::copy(targets_.begin(), targets_.end(), req.targets);
  }

  // Every period: another rank's notice, a dead analysis rank of this node,
  // an exited launcher, a timeout each end the wait on every caller rank
  // (fail() posts this node's, a notice the other nodes'). Across nodes, a
  // rank that was stopped (mpirun ends every rank when one dies) or an
  // exited launcher is reported only after a grace of a few periods, so the
  // node where the failure began names it.
  void wait_for(std::uint32_t seen, const char* phase, bool attach_phase) {
    stopped_since_ = 0;
    ctl_->wait(Side::caller, rt_.rank(), seen, options_.period, [&] { check_peers(phase, attach_phase); });
    if (ctl_->failed()) {
      // Across nodes, mpirun is ending an analysis that lost a rank or
      // refused (its ranks exit) by itself: left to it, as in give_up.
      if (across_nodes_ && (ctl_->failed_side() == Side::analysis ||
                            std::atomic_ref<std::uint32_t>(proto::payload(*ctl_).analysis_lost).load() != 0))
        child_.abandon();
      const std::string msg = (ctl_->failed_side() == Side::analysis ? "tessera-analyze: " : "") + ctl_->message();
      if (notices_) notices_->send(ctl_->error_category(), msg, false);
      throw_error(static_cast<ErrorCategory>(ctl_->error_category()), msg);
    }
  }

  // One period of wait_for: throws when the wait must end.
  void check_peers(const char* phase, bool attach_phase) {
    if (notices_) {
      if (auto n = notices_->received()) {
        if (n->rank_lost) std::atomic_ref<std::uint32_t>(proto::payload(*ctl_).analysis_lost).store(1);
        ctl_->fail(Side::caller, n->category, n->message);
        if (n->rank_lost) child_.abandon();
        throw_error(static_cast<ErrorCategory>(n->category), n->message);
      }
    }
    const double waited = seconds_between(t_launch_, control::monotonic_ns());
    int dead = ctl_->first_dead(Side::analysis);
    if (dead >= 0) {
      auto p = ctl_->peer(Side::analysis, dead);
      const std::uint32_t signal = std::atomic_ref<std::uint32_t>(proto::payload(*ctl_).stopped[dead]).load();
      const std::string how = signal != 0 ? "was stopped by signal " + std::to_string(signal) + " (" +
                                                strsignal(static_cast<int>(signal)) + ") while " + phase
                                          : "died while " + std::string(phase);
      give_up("on " + here_ + " the analysis process (" + control::describe(p) + ", rank " + std::to_string(dead) +
                  ") " + how + ": it no longer holds its lock on " + hs_.control_path +
                  " (killed or crashed; its own messages, if any, are above)",
              signal != 0, true);
    }
    std::string how;
    if (root_ && child_.running() && child_.exited(&how)) launcher_exit_ = how;
    if (!launcher_exit_.empty())
      give_up("the analysis launcher (" + hs_.command + ") " + launcher_exit_ + " while " + phase +
                  (attach_phase ? " before the analysis attached" : ""),
              true, false);
    if (attach_phase && waited > options_.attach_timeout)
      give_up("no tessera-analyze attached to " + hs_.control_path + (across_nodes_ ? " on " + here_ : "") +
                  " within " + seconds_text(options_.attach_timeout) +
                  (options_.control.empty() ? "" : " (start one with: " + user_command_ + ")"),
              false, false);
    if (waited > options_.timeout)
      give_up("the analysis gave no result within the timeout of " + seconds_text(options_.timeout) + " (" + phase +
                  ")",
              false, false);
  }

  // Ends the wait with `msg` on every caller rank, unless a `stopped` rank
  // is still within its grace. `rank_lost`: an analysis rank is gone, so
  // mpirun is ending the analysis by itself; across nodes that takes it
  // seconds (the other nodes' daemons report back) and a signal in the
  // middle of it crashes mpirun: it is left to finish (in a process group
  // of its own, see Child::start).
  void give_up(const std::string& msg, bool stopped, bool rank_lost) {
    const double grace = across_nodes_ ? std::max(5 * options_.period, 0.5) : 0;
    if (stopped && grace > 0) {
      if (stopped_since_ == 0) stopped_since_ = control::monotonic_ns();
      if (seconds_between(stopped_since_, control::monotonic_ns()) < grace) return;
    }
    if (notices_) notices_->send(static_cast<int>(ErrorCategory::peer), msg, rank_lost);
    if (rank_lost) std::atomic_ref<std::uint32_t>(proto::payload(*ctl_).analysis_lost).store(1);
    ctl_->fail(Side::caller, static_cast<int>(ErrorCategory::peer), msg);
    if (rank_lost && across_nodes_) child_.abandon();
    throw PeerError(msg);
  }

  // The request.
  const graph::EdgeList& g_;
  const proto::Analysis analysis_;
  const std::span<const std::uint64_t> targets_;
  const linalg::HittingOptions& hitting_;
  const SpectralRequest& spectral_;
  const ProcessOptions& options_;
  const bool hitting_kind_;
  // Where it runs.
  Runtime& rt_;
  const bool root_;
  const NodeGroup& node_;
  const bool leader_, across_nodes_;
  // The graph's arrays, the run's name, directory and hosts.
  const std::string offsets_, dst_, weight_;
  const std::string here_;
  std::string dir_, base_;
  std::vector<HostRun> runs_;
  std::optional<Notices> notices_;
  // What the run makes.
  std::optional<linalg::Vector> result_;
  Handshake hs_;
  std::unique_ptr<ControlSegment> ctl_;
  std::string program_, user_command_;
  Child child_;
  std::int64_t t_launch_ = 0;
  std::int64_t stopped_since_ = 0;  // when a stopped rank or exited launcher was first seen, in this wait
  std::string launcher_exit_;       // how the launcher exited, once it has (rank 0)
};

Outcome run_out_of_process(const graph::EdgeList& g, proto::Analysis analysis, std::span<const std::uint64_t> targets,
                           const linalg::HittingOptions& hitting, const SpectralRequest& spectral,
                           const ProcessOptions& options) {
  OutOfProcessRun run(g, analysis, targets, hitting, spectral, options);
  run.check_request();
  run.name_result_and_hosts();
  run.open_control_segment();
  run.launch_or_wait_for_user();
  run.handshake();
  const proto::Reply reply = run.read_reply(run.post_request());
  run.shut_down();
  return run.outcome(reply);
}

}  // namespace

ProcessHittingTimes hitting_times_out_of_process(const graph::EdgeList& g, std::span<const std::uint64_t> targets,
                                                 const linalg::HittingOptions& hitting, const ProcessOptions& options) {
  auto [times, reply, hs] = run_out_of_process(g, proto::Analysis::hitting_times, targets, hitting, {}, options);

  linalg::CgResult solve;
  solve.iterations = reply.iterations;
  solve.converged = reply.converged != 0;
  if (reply.solve_status > static_cast<std::uint32_t>(linalg::SolveStatus::not_converged))
    throw FormatError("the analysis replied with an unknown solve status " + std::to_string(reply.solve_status));
  solve.status = static_cast<linalg::SolveStatus>(reply.solve_status);
  solve.rounds = reply.rounds;
  solve.relative_residual = reply.relative_residual;
  solve.backward_error = reply.backward_error;
  solve.reason.assign(reply.solve_reason, strnlen(reply.solve_reason, sizeof(reply.solve_reason)));
  solve.seconds = reply.solve_seconds;
  return {linalg::HittingTimes{std::move(times), reply.unreachable, reply.targets, std::move(solve), reply.setup_seconds},
          reply.matrix_extra_bytes, reply.belos_solves, reply.anonymous_growth_bytes, std::move(hs)};
}

ProcessSpectrum spectral_out_of_process(const graph::EdgeList& g, const SpectralRequest& request,
                                        const ProcessOptions& options) {
  const auto kind = request.what == SpectralKind::fiedler ? proto::Analysis::fiedler : proto::Analysis::centrality;
  auto [vector, reply, hs] = run_out_of_process(g, kind, {}, {}, request, options);
  if (reply.eigen_method > static_cast<std::uint32_t>(proto::EigenMethod::lobpcg))
    throw FormatError("the analysis replied with an unknown eigensolver " + std::to_string(reply.eigen_method));
  const char* method = reply.iterations == 0 ? "dense (LAPACK)"
                       : reply.eigen_method == static_cast<std::uint32_t>(proto::EigenMethod::lobpcg) ? "lobpcg"
                                                                                                      : "krylov-schur";
  return {std::move(vector), reply.lambda,           reply.next_lambda,
          reply.eigen_residual, reply.iterations,    reply.converged != 0,
          reply.solve_seconds,  method,              reply.matrix_extra_bytes,
          reply.anonymous_growth_bytes, std::move(hs)};
}

}  // namespace tessera::analyze
