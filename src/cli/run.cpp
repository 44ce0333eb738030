// tessera -n K run [--recover] CMD...   the job under the recovery supervisor
// tessera -n K bench faults            recovery trials with injected failures
// tessera bench jacobi3d-recover | checkpoint-cost | resume-state   the jobs bench faults runs
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>
#include <nlohmann/json.hpp>

#include "tessera/bench/faults.hpp"
#include "commands.hpp"
#include "tessera/comm/options.hpp"
#include "tessera/resilience/checkpoint.hpp"
#include "tessera/resilience/supervisor.hpp"
#include "tessera/runtime/error.hpp"
#include "tessera/runtime/fault_injection.hpp"
#include "tessera/runtime/memory.hpp"
#include "tessera/runtime/runtime.hpp"
#include "tessera/runtime/trace.hpp"

namespace tessera::cli {

// The largest byte count the faults benchmarks' size options take.
constexpr std::uint64_t kMaxBenchBytes = std::uint64_t{1} << 40;

namespace {

struct RunOptions {
  bool recover = false;
  int retries = 3;
  int kill_rank = -1;
  std::int64_t kill_at_step = -1;
  std::vector<std::string> faults;
  std::string kill_file;
  double heartbeat_timeout = 10;
  std::string report;
  bool quiet = false;
  std::string host, hostfile;
  double probe_timeout = 10;
  std::string trace;  // --trace: the job's trace file (each attempt writes it anew)
};

std::string self_exe() { return std::filesystem::read_symlink("/proc/self/exe").string(); }

nlohmann::json report_json(const resilience::SuperviseResult& r) {
  nlohmann::json attempts = nlohmann::json::array();
  for (const auto& a : r.attempts)
    attempts.push_back({{"attempt", a.attempt},
                        {"ranks", a.ranks},
                        {"hosts", a.hosts},
                        {"outcome", a.outcome},
                        {"lost_host", a.lost_host},
                        {"lost_how", a.lost_how},
                        {"exit_code", a.exit_code},
                        {"rank", a.rank},
                        {"signal", a.signal},
                        {"how", a.how},
                        {"last_step", a.last_step},
                        {"seconds", a.seconds},
                        {"detection_seconds", a.detection_seconds},
                        {"detection_is_bound", a.detection_is_bound},
                        {"cleanup_seconds", a.cleanup_seconds},
                        {"resumed_step", a.resumed_step},
                        {"resumed_level", a.resumed_level},
                        {"resumed_from", a.resumed_from},
                        {"resume_seconds", a.resume_seconds},
                        {"segments_removed", a.segments_removed}});
  return {{"command", "run"}, {"finished", r.finished}, {"exit_code", r.exit_code}, {"message", r.message},
          {"attempts", attempts}};
}

int run_supervised(const RunOptions& o, int ranks, std::vector<std::string> cmd) {
  if (ranks < 1) throw ConfigError("run: give the rank count before 'run': tessera -n K run [--recover] CMD ...");
  if (cmd.empty()) throw ConfigError("run: no command given (tessera -n K run [--recover] CMD ...)");
  if ((o.kill_rank >= 0) != (o.kill_at_step >= 0))
    throw ConfigError("run: --kill-rank and --kill-at-step go together");
  if (!o.host.empty() && !o.hostfile.empty()) throw ConfigError("run: give --host or --hostfile, not both");
  resilience::SuperviseOptions so;
  so.ranks = ranks;
  if (!o.trace.empty()) ::setenv(trace::kTraceVariable, std::filesystem::absolute(o.trace).string().c_str(), 1);
  so.environment = observability_environment();
  // The hosts: given, or mpirun's own default hostfile (which mpirun would
  // read anyway), so that a lost one can be left out of the relaunch.
  const char* default_hostfile = std::getenv("OMPI_MCA_orte_default_hostfile");
  if (!o.host.empty()) so.hosts = resilience::parse_host_list(o.host);
  else if (!o.hostfile.empty()) so.hosts = resilience::read_hostfile(o.hostfile);
  else if (default_hostfile && *default_hostfile) so.hosts = resilience::read_hostfile(default_hostfile), so.pass_hosts = false;
  so.probe_timeout = o.probe_timeout;
  // "tessera" is this very program (the build's, not whichever is on PATH).
  so.program = cmd[0] == "tessera" ? self_exe() : cmd[0];
  so.args.assign(cmd.begin() + 1, cmd.end());
  so.retries = o.recover ? o.retries : 0;
  so.heartbeat_timeout = o.heartbeat_timeout;
  so.kill_file = o.kill_file;
  for (const auto& f : o.faults) {
    auto parsed = FaultInjection::parse(f);
    so.faults.insert(so.faults.end(), parsed.begin(), parsed.end());
  }
  if (o.kill_rank >= 0)
    so.faults.push_back({1, o.kill_rank, FaultPoint::step, static_cast<std::uint64_t>(o.kill_at_step)});
  if (o.quiet) so.log = [](const std::string&) {};
  auto r = resilience::supervise(so);
  if (!o.report.empty()) {
    std::ofstream out(o.report);
    out << report_json(r).dump() << "\n";
    if (!out) throw SystemError("cannot write the run report " + o.report, errno);
  }
  if (r.finished) {
    if (!o.quiet) std::fprintf(stderr, "tessera run: %s\n", r.message.c_str());
    return 0;
  }
  std::fprintf(stderr, "tessera: error: %s\n", r.message.c_str());
  return r.exit_code == 0 ? 1 : r.exit_code;
}

}  // namespace

std::vector<std::pair<std::string, std::string>> observability_environment() {
  std::vector<std::pair<std::string, std::string>> vars;
  for (const char* name : {trace::kTraceVariable, trace::kTraceBufferVariable, kCommStatsVariable})
    if (const char* v = std::getenv(name); v && *v) vars.emplace_back(name, v);
  return vars;
}

int run_job(int ranks, const std::string& program, const std::vector<std::string>& args,
            const std::vector<std::string>& mpirun_options) {
  resilience::SuperviseOptions so;
  so.environment = observability_environment();
  so.ranks = ranks;
  so.program = program;
  so.args = args;
  so.mpirun_options = mpirun_options;
  so.retries = 0;
  so.own_process_group = false;
  // Without --recover a slow step must not kill the job (a solve at scale
  // 26 runs for minutes between two steps): only every rank waiting in
  // Tessera's communication for two minutes is taken as hung.
  so.heartbeat_timeout = 120;
  so.silent_steps_hang = false;
  so.log = [](const std::string&) {};
  // mpirun's default hostfile, when set: a node that does not answer is named lost.
  if (const char* f = std::getenv("OMPI_MCA_orte_default_hostfile"); f && *f) {
    try {
      so.hosts = resilience::read_hostfile(f);
      so.pass_hosts = false;
    } catch (const ConfigError&) {
      // mpirun reads it too and says what is wrong with it.
    }
  }
  const auto r = resilience::supervise(so);
  if (r.finished) return 0;
  const resilience::AttemptReport& a = r.attempts.back();
  auto cleaned = [&] {
    return a.segments_removed ? " and " + std::to_string(a.segments_removed) + " of its segment file(s) removed" : "";
  };
  if (!a.error.empty()) {
    // The job's own line (abort_job on its first failing rank), once.
    std::fputs(a.error.c_str(), stderr);
    if (a.error.back() != '\n') std::fputc('\n', stderr);
  } else if (a.outcome == "node lost" || !a.daemon_lost_on.empty()) {
    const std::string node = !a.lost_host.empty() ? a.lost_host
                             : a.daemon_lost_on == "?" ? std::string("another node")
                                                       : a.daemon_lost_on;
    std::fprintf(stderr,
                 "tessera: error: lost node %s: mpirun lost contact with its Open MPI daemon there (the node went "
                 "down, was killed or left the network); the job was stopped%s. Run 'tessera shm gc' on the other "
                 "nodes to remove this job's segments there\n",
                 node.c_str(), cleaned().c_str());
  } else if ((a.outcome == "rank died" || a.outcome == "hung") && a.rank >= 0) {
    std::string how = a.how.size() > 2 && a.how.front() == '(' ? a.how.substr(1, a.how.size() - 2) : a.how;
    const bool step_said = how.find("step") != std::string::npos;
    std::fprintf(stderr, "tessera: error: rank %d %s%s%s; the job was stopped%s\n", a.rank,
                 a.outcome == "hung" ? "hung" : "died", how.empty() ? "" : (": " + how).c_str(),
                 a.last_step >= 0 && !step_said ? (", its last completed step " + std::to_string(a.last_step)).c_str() : "",
                 cleaned().c_str());
  }
  std::fflush(stderr);
  return r.exit_code == 0 ? 1 : r.exit_code;
}

namespace {

// `tessera bench faults`: recovery trials under the supervisor.
void add_bench_faults(CLI::App& bench, Action& selected, const int& ranks, bool& launches_jobs) {
  auto f = std::make_shared<bench::FaultsBenchOptions>();
  auto* faults = bench.add_subcommand("faults", "Recovery trials: Jacobi3D under the supervisor with injected kills "
                                                 "(random, during a checkpoint, during a restart); level-2 checkpoint cost");
  faults->add_option("--trials", f->trials, "Trials per scenario")->check(CLI::Range(1, 100000));
  faults->add_option("--seed", f->seed, "Seed of the random ranks and steps");
  faults->add_option("--n", f->n, "Interior grid points per side")->check(CLI::Range(2, 2048));
  faults->add_option("--iterations", f->iterations, "Jacobi iterations")->check(CLI::Range(2, 100000));
  faults->add_option("--chunks", f->chunks, "Chunk grid, e.g. 2x2x2");
  faults->add_option("--every", f->every, "Checkpoint every this many iterations")->check(CLI::Range(1, 100000));
  auto cost_bytes = std::make_shared<std::string>("64M");
  faults->add_option("--checkpoint-bytes", *cost_bytes,
                     "Bytes per rank of the checkpoint cost rows, a comma list (e.g. 64M,256M,1G; 0: none)");
  faults->add_option("--checkpoint-levels", f->cost_levels, "Levels of the cost rows: node, buddy, disk, or a comma list");
  faults->add_option("--checkpoint-dir", f->cost_dir, "The disk level's directory for the cost rows (default: under $TMPDIR)");
  faults->add_option("--heartbeat-timeout", f->heartbeat_timeout, "Seconds without a heartbeat: hung")
      ->check(CLI::PositiveNumber);
  faults->add_option("--scenario", f->scenarios,
                     "random_kill, kill_in_checkpoint, kill_in_restart (the default: these three), kill_in_spare, "
                     "resume_time");
  auto state_bytes = std::make_shared<std::string>("64M");
  faults->add_option("--state-bytes", *state_bytes,
                     "resume_time: bytes of state in all, split over the ranks (e.g. 1G)");
  faults->add_flag("--json", f->json, "Only JSON lines on stdout (one per scenario and cost row)");
  faults->add_flag("-q,--quiet", f->quiet, "No progress notes on stderr");
  faults->callback([f, cost_bytes, state_bytes, &selected, &ranks, &launches_jobs] {
    launches_jobs = true;
    selected = [f, cost_bytes, state_bytes, &ranks] {
      bench::FaultsBenchOptions opts = *f;
      opts.resume_state_bytes = parse_bytes(*state_bytes, "--state-bytes", kMaxBenchBytes);
      if (ranks > 0) opts.ranks = ranks;
      opts.cost_bytes.clear();
      if (*cost_bytes != "0") {
        std::stringstream list(*cost_bytes);
        for (std::string size; std::getline(list, size, ',');)
          opts.cost_bytes.push_back(parse_bytes(size, "--checkpoint-bytes", kMaxBenchBytes));
      }
      resilience::parse_levels(opts.cost_levels, "--checkpoint-levels");  // refused before any trial runs
      opts.program = self_exe();
      return bench::run_faults_bench(opts);
    };
  });
}

// `tessera bench jacobi3d-recover`: the job the supervisor recovers.
void add_bench_jacobi3d_recover(CLI::App& bench, Action& selected) {
  auto j = std::make_shared<bench::RecoverJacobiOptions>();
  auto* jr = bench.add_subcommand("jacobi3d-recover", "Jacobi3D checkpointing every k iterations and resuming from "
                                                        "the newest checkpoint (run it under 'tessera run --recover')");
  jr->add_option("--n", j->n, "Interior grid points per side")->check(CLI::Range(2, 2048));
  jr->add_option("--iterations", j->iterations, "Jacobi iterations")->check(CLI::Range(1, 100000));
  jr->add_option("--chunks", j->chunks, "Chunk grid, e.g. 2x2x2");
  jr->add_option("--every", j->every, "Checkpoint every this many iterations (0: never)")->check(CLI::Range(0, 100000));
  jr->add_option("--levels", j->levels, "Checkpoint levels: node, buddy, disk, or a comma list");
  jr->add_option("--dir", j->dir, "The disk level's directory");
  jr->add_option("--node-dir", j->node_dir, "The node level's directory (default $TESSERA_SHM_DIR or /dev/shm)");
  jr->add_option("--name", j->name, "The checkpoints' name");
  jr->add_option("--result", j->result, "Rank 0 writes the checksum and check as JSON here");
  jr->add_flag("--plain", j->plain, "Also run the plain sequential loop on rank 0 (the result's plain_checksum)");
  jr->add_flag("--keep", j->keep, "Leave the checkpoints when finished: the next run restores the newest");
  jr->add_flag("--async", j->async, "The buddy and disk copies travel beside the iterations (async_drain)");
  jr->add_flag("-q,--quiet", j->quiet, "No result line on stdout");
  jr->callback([j, &selected] {
    selected = [j] {
      Runtime rt;
      return bench::run_recover_jacobi(rt, *j);
    };
  });
}

// `tessera bench resume-state`: state of a given size, resumed.
void add_bench_resume_state(CLI::App& bench, Action& selected) {
  auto rs = std::make_shared<bench::ResumeStateOptions>();
  auto rs_bytes = std::make_shared<std::string>("16M");
  auto* rsc = bench.add_subcommand("resume-state", "State of a given size updated every step, checkpointed at level 2, "
                                                     "resumed from the newest checkpoint (bench faults' resume_time job)");
  rsc->add_option("--bytes", *rs_bytes, "Bytes of state per rank, e.g. 256M");
  rsc->add_option("--steps", rs->steps, "Steps")->check(CLI::Range(1, 1000000));
  rsc->add_option("--every", rs->every, "Checkpoint every this many steps (0: never)")->check(CLI::Range(0, 1000000));
  rsc->add_option("--node-dir", rs->node_dir, "The node level's directory (default $TESSERA_SHM_DIR or /dev/shm)");
  rsc->add_option("--name", rs->name, "The checkpoints' name");
  rsc->add_option("--result", rs->result, "Rank 0 writes whether every word is right as JSON here");
  rsc->add_option("--wrong-word-at-step", rs->wrong_word_at_step,
                  "Tests of the check: at this step the last rank's first word goes wrong (0: never)")
      ->check(CLI::Range(0, 1000000));
  rsc->callback([rs, rs_bytes, &selected] {
    selected = [rs, rs_bytes] {
      bench::ResumeStateOptions opts = *rs;
      opts.bytes = parse_bytes(*rs_bytes, "--bytes", kMaxBenchBytes);
      Runtime rt;
      return bench::run_resume_state(rt, opts);
    };
  });
}

// `tessera bench checkpoint-cost`: each level's stall against memcpy.
void add_bench_checkpoint_cost(CLI::App& bench, Action& selected) {
  auto c = std::make_shared<bench::CheckpointCostOptions>();
  auto bytes = std::make_shared<std::string>("64M");
  auto* cc = bench.add_subcommand("checkpoint-cost", "Checkpoint stall of levels 2, 1 and 3 against memcpy bandwidth, "
                                                      "each restore compared byte for byte (bench faults runs it)");
  cc->add_option("--bytes", *bytes, "Bytes per rank, e.g. 64M");
  cc->add_option("--reps", c->reps, "Checkpoints per level (the median is reported)")->check(CLI::Range(1, 100));
  cc->add_option("--levels", c->levels, "Levels measured: node, buddy, disk, or a comma list");
  cc->add_option("--node-dir", c->node_dir, "The node level's directory");
  cc->add_option("--dir", c->dir, "The disk level's directory (default: one of its own under $TMPDIR, removed after)");
  cc->add_option("--result", c->result, "Rank 0 writes the figures as JSON here");
  cc->callback([c, bytes, &selected] {
    selected = [c, bytes] {
      bench::CheckpointCostOptions opts = *c;
      opts.bytes = parse_bytes(*bytes, "--bytes", kMaxBenchBytes);
      Runtime rt;
      return bench::run_checkpoint_cost(rt, opts);
    };
  });
}

}  // namespace

void add_run(CLI::App& app, Action& selected, const int& ranks, bool& launches_jobs) {
  auto o = std::make_shared<RunOptions>();
  auto* run = app.add_subcommand("run", "Run CMD under mpirun with K ranks (-n K), supervised: --recover relaunches "
                                        "it from its newest checkpoint when a rank dies or hangs");
  run->add_option("--trace", o->trace,
                  "Record the job into FILE (Chrome Trace Event JSON; with --recover, the last attempt's)")
      ->type_name("FILE");
  run->add_flag("--recover", o->recover, "Relaunch after a failure (a dead or hung rank, a non-zero exit)");
  run->add_option("--retries", o->retries, "Relaunches before giving up (with --recover)")->check(CLI::Range(0, 1000));
  run->add_option("--kill-rank", o->kill_rank, "Failure injection: SIGKILL this rank ...")->check(CLI::NonNegativeNumber);
  run->add_option("--kill-at-step", o->kill_at_step, "... after it completes this step, on the first attempt only")
      ->check(CLI::NonNegativeNumber);
  run->add_option("--fault", o->faults,
                  "Failure injection: ATTEMPT:RANK:POINT[:STEP] with POINT step, checkpoint (while writing one), "
                  "spare (halfway through copying into the node level's reused spare), restart (while restoring) "
                  "or hang; repeatable")
      ->allow_extra_args(false);  // one SPEC per --fault: CMD follows
  run->add_option("--kill-file", o->kill_file,
                  "When this file appears, the rank it names (its text) removes it and kills itself at its next step");
  run->add_option("--heartbeat-timeout", o->heartbeat_timeout,
                  "Seconds without a heartbeat (a completed step) from a rank before the job counts as hung")
      ->check(CLI::PositiveNumber);
  run->add_option("--host", o->host,
                  "Hosts and their slots, HOST:N,... (as mpirun's --host); a lost one is left out of the relaunch");
  run->add_option("--hostfile", o->hostfile,
                  "mpirun's hostfile (HOST slots=N per line); default: $OMPI_MCA_orte_default_hostfile when set");
  run->add_option("--probe-timeout", o->probe_timeout,
                  "Seconds a suspect host has to answer a probe through mpirun's launcher before it counts as lost")
      ->check(CLI::PositiveNumber);
  run->add_option("--report", o->report, "Write what happened, attempt by attempt, as JSON to this file");
  run->add_flag("-q,--quiet", o->quiet, "Only errors on stderr, no supervisor lines");
  run->footer("CMD: tessera -n K run [OPTIONS] CMD [ARGS...]; the first word of CMD ends these options, and "
              "'tessera' as CMD is this program. Failures and recovery: docs/checkpoint.md");
  run->prefix_command();  // CMD and its own options follow
  run->fallthrough(false);  // the first word of CMD ends the supervisor's options
  run->callback([o, run, &selected, &ranks, &launches_jobs] {
    launches_jobs = true;
    auto cmd = run->remaining();
    selected = [o, cmd, &ranks] { return run_supervised(*o, ranks, cmd); };
  });

  // The recovery benchmarks, under `tessera bench` (registered by bench.cpp before this).
  CLI::App* bench = app.get_subcommand("bench");
  add_bench_faults(*bench, selected, ranks, launches_jobs);
  add_bench_jacobi3d_recover(*bench, selected);
  add_bench_resume_state(*bench, selected);
  add_bench_checkpoint_cost(*bench, selected);
}

}  // namespace tessera::cli
