// The caller's side of an out-of-process analysis (include/tessera/analyze/client.hpp).
#include "tessera/analyze/client.hpp"

#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <sstream>
#include <thread>

#include "tessera/linalg/vector.hpp"
#include "tessera/runtime/collective.hpp"
#include "tessera/runtime/error.hpp"
#include "tessera/analyze/protocol.hpp"

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

std::vector<std::string> split_words(const std::string& s) {
  std::istringstream in(s);
  std::vector<std::string> out;
  for (std::string w; in >> w;) out.push_back(w);
  return out;
}

bool on_path(const std::string& program) {
  if (program.find('/') != std::string::npos) return ::access(program.c_str(), X_OK) == 0;
  const char* path = std::getenv("PATH");
  std::istringstream in(path ? path : "/usr/bin:/bin");
  for (std::string dir; std::getline(in, dir, ':');)
    if (!dir.empty() && ::access((dir + "/" + program).c_str(), X_OK) == 0) return true;
  return false;
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
std::vector<std::string> analysis_environment() {
  std::vector<std::string> env;
  for (char** e = environ; e && *e; ++e) {
    std::string v = *e;
    bool mpi = false;
    for (const char* prefix : {"OMPI_", "PMIX_", "PMI_", "OPAL_", "ORTE_", "HYDRA_", "MPIR_", "MPI_LOCAL"})
      mpi = mpi || v.rfind(prefix, 0) == 0;
    if (!mpi) env.push_back(v);
  }
  env.push_back("OMPI_ALLOW_RUN_AS_ROOT=1");
  env.push_back("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1");
  env.push_back("OMPI_MCA_mpi_yield_when_idle=1");
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

  void start(const std::vector<std::string>& argv_s) {
    std::vector<char*> argv, envp;
    for (auto& a : argv_s) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    env_ = analysis_environment();
    for (auto& e : env_) envp.push_back(e.data());
    envp.push_back(nullptr);
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_adddup2(&actions, 2, 1);
    int err = ::posix_spawnp(&pid_, argv[0], &actions, nullptr, argv.data(), envp.data());
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
  void stop() noexcept {
    if (pid_ <= 0) return;
    ::kill(pid_, SIGTERM);
    if (!wait_exit(3.0)) {
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, nullptr, 0);
      pid_ = -1;
    }
  }

 private:
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
}  // namespace

bool launcher_available(const ProcessOptions& options, std::string* program) {
  std::string launcher = options.launcher;
  if (launcher.empty()) {
    const char* env = std::getenv("TESSERA_ANALYZE_LAUNCHER");
    launcher = env && *env ? env : kDefaultLauncher;
  }
  auto words = split_words(launcher);
  if (program) *program = words.empty() ? std::string() : words[0];
  return !words.empty() && on_path(words[0]);
}

ProcessHittingTimes hitting_times_out_of_process(const graph::EdgeList& g, std::span<const std::uint64_t> targets,
                                                 const linalg::HittingOptions& hitting, const ProcessOptions& options) {
  Runtime& rt = g.runtime();
  const bool root = rt.rank() == 0;
  const std::string src = g.src().metadata_path(), dst = g.dst().metadata_path();
  const std::string weight = g.weight() ? g.weight()->metadata_path() : std::string();
  agree(rt.comm(), [&] {
    if (src.empty() || dst.empty() || (g.weighted() && weight.empty()))
      throw ConfigError("an out-of-process analysis needs the graph in Shared storage (its arrays have no metadata file)");
    if (g.directed()) throw ConfigError("hitting times need an undirected graph");
    if (targets.empty() || targets.size() > static_cast<std::size_t>(proto::kMaxTargets))
      throw ConfigError("an out-of-process analysis takes 1 to " + std::to_string(proto::kMaxTargets) +
                        " targets, not " + std::to_string(targets.size()));
    if (rt.size() > control::kMaxRanks)
      throw ConfigError("an out-of-process analysis supports at most " + std::to_string(control::kMaxRanks) + " ranks");
  });
  const std::string dir = directory_of(src);
  std::string base = broadcast(
      rt.comm(), root ? "tessera-" + rt.job_id() + "-analysis" + std::to_string(analysis_counter++) : std::string(), 0);

  // The result: hitting times on the graph's vertex ranges, written by the analysis.
  auto result_storage = StorageOptions::shared(base + "-times", dir);
  result_storage.group_access = options.group_access;
  linalg::Vector times(g.vertex_map(), result_storage);
  Handshake hs;
  hs.control_path = options.control.empty() ? dir + "/" + control::control_file_name(base) : options.control;
  hs.result_path = times.array().metadata_path();
  hs.period_seconds = options.period;

  std::unique_ptr<ControlSegment> ctl;
  agree(rt.comm(), [&] {
    if (root) ctl = proto::create(hs.control_path, rt.size(), options.group_access ? 0660 : 0600);
  });
  agree(rt.comm(), [&] {
    if (!root) ctl = proto::open(hs.control_path);
    ctl->attach(Side::caller, rt.rank(), "tessera");
  });

  Child child;
  const std::int64_t t_launch = control::monotonic_ns();
  agree(rt.comm(), [&] {
    if (!root) return;
    const std::string program = analyze_program(options);
    std::vector<std::string> command = {"mpirun", "--quiet", "-n", std::to_string(rt.size()), "--oversubscribe",
                                        program, "--control", hs.control_path};
    if (options.quiet) command.push_back("-q");
    if (!options.control.empty()) {
      std::fprintf(stderr, "waiting up to %.0f s for a user-started analysis: mpirun -n %d %s --control %s\n",
                   options.attach_timeout, rt.size(), program.c_str(), hs.control_path.c_str());
      return;
    }
    if (options.isolation == Isolation::container) {
      std::string launcher = options.launcher;
      if (launcher.empty()) {
        const char* env = std::getenv("TESSERA_ANALYZE_LAUNCHER");
        launcher = env && *env ? env : kDefaultLauncher;
      }
      auto words = split_words(launcher);
      // "--bind SHMDIR /data": the sandbox sees the directory at /data, so
      // the analysis is told /data/NAME.control.seg (array names in the
      // request are relative to it).
      for (std::size_t i = 0; i + 1 < words.size(); ++i)
        if (words[i] == "SHMDIR" && words[i + 1] != "SHMDIR" && words[i + 1].rfind('/', 0) == 0)
          command[7] = words[i + 1] + hs.control_path.substr(hs.control_path.rfind('/'));
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
      command.insert(command.begin(), words.begin(), words.end());
    }
    for (auto& w : command) hs.command += (hs.command.empty() ? "" : " ") + w;
    child.start(command);
  });

  // Every period: a dead analysis rank, an exited launcher, a timeout each
  // end the wait on every caller rank (fail() posts them all).
  const std::string how_to_start =
      "start one with: mpirun -n " + std::to_string(rt.size()) + " tessera-analyze --control " + hs.control_path;
  auto wait_for = [&](std::uint32_t seen, const char* phase, bool attach_phase) {
    ctl->wait(Side::caller, rt.rank(), seen, options.period, [&] {
      const double waited = seconds_between(t_launch, control::monotonic_ns());
      int dead = ctl->first_dead(Side::analysis);
      if (dead >= 0) {
        auto p = ctl->peer(Side::analysis, dead);
        std::string msg = "the analysis process (" + control::describe(p) + ", rank " + std::to_string(dead) +
                          ") died while " + phase + ": it no longer holds its lock on " + hs.control_path +
                          " (killed or crashed; its own messages, if any, are above)";
        ctl->fail(Side::caller, static_cast<int>(ErrorCategory::peer), msg);
        throw PeerError(msg);
      }
      std::string how;
      if (root && child.running() && child.exited(&how)) {
        std::string msg = "the analysis launcher (" + hs.command + ") " + how + " while " + phase +
                          (attach_phase ? " before the analysis attached" : "");
        ctl->fail(Side::caller, static_cast<int>(ErrorCategory::peer), msg);
        throw PeerError(msg);
      }
      if (attach_phase && waited > options.attach_timeout) {
        std::string msg = "no tessera-analyze attached to " + hs.control_path + " within " +
                          seconds_text(options.attach_timeout) +
                          (options.control.empty() ? "" : " (" + how_to_start + ")");
        ctl->fail(Side::caller, static_cast<int>(ErrorCategory::peer), msg);
        throw PeerError(msg);
      }
      if (waited > options.timeout) {
        std::string msg = "the analysis gave no result within the timeout of " + seconds_text(options.timeout) +
                          " (" + phase + ")";
        ctl->fail(Side::caller, static_cast<int>(ErrorCategory::peer), msg);
        throw PeerError(msg);
      }
    });
    if (ctl->failed())
      throw_error(static_cast<ErrorCategory>(ctl->error_category()),
                  (ctl->failed_side() == Side::analysis ? "tessera-analyze: " : "") + ctl->message());
  };

  // 1. Every analysis rank attached and checked the rank count.
  agree(rt.comm(), [&] { wait_for(0, "starting", true); });
  const std::int64_t t_ready = control::monotonic_ns();
  hs.launch_seconds = seconds_between(t_launch, t_ready);
  hs.analysis = control::describe(ctl->peer(Side::analysis, 0));

  // 2. The request, then every analysis rank's word.
  const std::uint32_t before_result = ctl->load(Side::caller, rt.rank());
  if (root) {
    auto& payload = proto::payload(*ctl);
    auto& req = payload.request;
    std::memset(&req, 0, sizeof(req));
    std::memset(&payload.reply, 0, sizeof(payload.reply));
    req.analysis = static_cast<std::uint32_t>(proto::Analysis::hitting_times);
    req.solver = static_cast<std::uint32_t>(options.solver == "belos" ? proto::Solver::belos : proto::Solver::tessera);
    req.preconditioner = static_cast<std::uint32_t>(options.preconditioner == "relaxation"
                                                        ? proto::Preconditioner::relaxation
                                                        : proto::Preconditioner::diagonal);
    req.target_count = static_cast<std::uint32_t>(targets.size());
    req.connected = hitting.connected ? 1 : 0;
    req.vertices = g.vertices();
    req.tolerance = hitting.cg.tolerance;
    req.max_iterations = hitting.cg.max_iterations;
    // Arrays beside the control segment are named by file name alone, so an
    // analysis that sees the directory elsewhere (bwrap --bind DIR /data)
    // resolves them beside its own view of the control segment.
    const std::string control_dir = directory_of(hs.control_path);
    auto put = [&](char (&field)[proto::kPathBytes], std::string path) {
      if (!path.empty() && directory_of(path) == control_dir) path = path.substr(path.rfind('/') + 1);
      if (path.size() >= proto::kPathBytes)
        throw ConfigError("array path " + path + " is longer than the control segment's " +
                          std::to_string(proto::kPathBytes - 1) + " bytes");
      std::memcpy(field, path.c_str(), path.size() + 1);
    };
    put(req.src, src);
    put(req.dst, dst);
    put(req.weight, weight);
    put(req.result, hs.result_path);
    std::copy(targets.begin(), targets.end(), req.targets);
    payload.reply.request_posted_ns = control::monotonic_ns();
    for (int r = 0; r < rt.size(); ++r) ctl->post(Side::analysis, r);
  }

  // 3. The reply.
  std::int64_t t_resumed = 0;
  agree(rt.comm(), [&] {
    wait_for(before_result, "solving", false);
    t_resumed = control::monotonic_ns();
  });
  proto::Reply reply{};
  std::memcpy(&reply, &proto::payload(*ctl).reply, sizeof(reply));
  agree(rt.comm(), [&] {
    if (reply.status != static_cast<std::uint32_t>(proto::Status::ok))
      throw PeerError("the analysis answered with status " + std::to_string(reply.status) + ", not ok (corrupt reply)");
  });
  hs.request_to_start_seconds = seconds_between(reply.request_posted_ns, reply.analysis_woke_ns);
  hs.result_to_resume_seconds = seconds_between(reply.result_posted_ns, t_resumed);

  // 4. Shutdown: the analysis leaves; a started one is reaped.
  if (root) {
    proto::payload(*ctl).request.analysis = static_cast<std::uint32_t>(proto::Analysis::shutdown);
    for (int r = 0; r < rt.size(); ++r) ctl->post(Side::analysis, r);
    const std::int64_t t_shutdown = control::monotonic_ns();
    if (child.running() && !child.wait_exit(10.0))
      std::fprintf(stderr, "tessera: warning: the analysis did not exit within 10 s of its shutdown; stopping it\n");
    hs.shutdown_seconds = seconds_between(t_shutdown, control::monotonic_ns());
  }
  // Everything rank 0 measured, on every rank.
  double measured[5] = {hs.launch_seconds, hs.request_to_start_seconds, hs.result_to_resume_seconds,
                        hs.shutdown_seconds, 0};
  broadcast(rt.comm(), measured, 5, 0);
  hs.launch_seconds = measured[0];
  hs.request_to_start_seconds = measured[1];
  hs.result_to_resume_seconds = measured[2];
  hs.shutdown_seconds = measured[3];
  hs.command = broadcast(rt.comm(), hs.command, 0);

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

}  // namespace tessera::analyze
