// tessera bench faults (faults.hpp). Every trial runs the recoverable
// Jacobi3D under the supervisor with one or two injected failures and checks
// the final iterate bit for bit against the plain sequential loop's,
// computed here; then counts hangs, stale segments and SIGBUS.
#include "tessera/bench/faults.hpp"

#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "jacobi3d.hpp"
#include "tessera/resilience/checkpoint.hpp"
#include "tessera/resilience/supervisor.hpp"
#include "tessera/runtime/collective.hpp"
#include "tessera/runtime/error.hpp"
#include "tessera/runtime/fault_injection.hpp"
#include "tessera/runtime/splitmix64.hpp"
#include "tessera/storage/registry.hpp"
#include "tessera/storage/storage.hpp"

namespace tessera::bench {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {


void write_json(const std::string& path, const json& j) {
  std::ofstream out(path + ".tmp");
  out << j.dump() << "\n";
  out.close();
  if (!out) throw SystemError("cannot write " + path, errno);
  fs::rename(path + ".tmp", path);
}

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

std::string make_temp_dir(const std::string& base, const std::string& prefix) {
  std::string t = base + "/" + prefix + "XXXXXX";
  if (::mkdtemp(t.data()) == nullptr) throw SystemError("cannot create a directory under " + base, errno);
  return t;
}

double median(std::vector<double> v) {
  if (v.empty()) return -1;
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}
double maximum(const std::vector<double>& v) { return v.empty() ? -1 : *std::max_element(v.begin(), v.end()); }

// Nearest-rank percentile q (0 < q <= 1); -1 for none.
double percentile(std::vector<double> v, double q) {
  if (v.empty()) return -1;
  std::sort(v.begin(), v.end());
  const auto rank = static_cast<std::size_t>(std::ceil(q * static_cast<double>(v.size())));
  return v[std::clamp<std::size_t>(rank, 1, v.size()) - 1];
}

// resume-state: word `g`'s value before the first step, and one step's update
// (odd multiplier: a bijection, so a lost or repeated step changes the word).
std::uint64_t initial_word(std::uint64_t g) {
  std::uint64_t s = g * 0x2545f4914f6cdd1dULL + 1;
  return splitmix64(s);
}
std::uint64_t step_word(std::uint64_t w, std::uint64_t step) { return w * 0x5851f42d4c957f2dULL + (2 * step + 1); }

struct Scenario {
  std::string name;
  int trials = 0, recovered = 0, bit_identical = 0, hangs = 0, stale_segments = 0, sigbus = 0, second_kills = 0;
  std::vector<double> detection, resume, trial_seconds;
  std::vector<double> kill_to_step;  // the injected kill to the relaunch's first completed step
  std::vector<std::string> problems;  // the first few failed trials, said
};

}  // namespace

int run_recover_jacobi(Runtime& rt, const RecoverJacobiOptions& o) {
  jacobi::Problem p{o.n, o.iterations, false};
  auto grid = chunks::ChunkGrid::parse(o.chunks);
  jacobi::Recovery r;
  r.every = o.every;
  r.checkpoint.levels = resilience::parse_levels(o.levels, "--levels");
  r.checkpoint.dir = o.dir;
  r.checkpoint.node_dir = o.node_dir;
  r.checkpoint.name = o.name;
  r.checkpoint.async_drain = o.async;
  r.remove_at_end = !o.keep;
  std::uint64_t resumed = 0;
  auto out = jacobi::run_recoverable(rt, p, grid, r, &resumed);
  std::string check = jacobi::check(p, out);
  if (rt.rank() == 0) {
    if (!o.quiet)
      std::printf("jacobi3d-recover: n %d, %d iterations, chunks %s, checkpoint every %d; attempt %d%s: %s, checksum %016llx\n",
                  o.n, o.iterations, o.chunks.c_str(), o.every, FaultInjection::attempt(),
                  resumed ? (", resumed from step " + std::to_string(resumed)).c_str() : ", from the start", check.c_str(),
                  static_cast<unsigned long long>(out.checksum));
    json j{{"checksum", out.checksum}, {"resumed_from", resumed}, {"attempt", FaultInjection::attempt()},
           {"check", check}, {"ranks", rt.size()}, {"seconds_per_iteration", out.seconds_per_iteration},
           {"checkpoint_seconds", out.checkpoint_seconds}, {"checkpoint_bytes_per_rank", out.checkpoint_bytes_per_rank},
           {"restore_seconds", out.restore_seconds}};
    if (o.plain) j["plain_checksum"] = jacobi::run_plain(p).checksum;
    if (!o.result.empty()) write_json(o.result, j);
  }
  return check.rfind("ok", 0) == 0 ? 0 : 2;
}

int run_resume_state(Runtime& rt, const ResumeStateOptions& o) {
  const std::size_t words = static_cast<std::size_t>(o.bytes / sizeof(std::uint64_t));
  if (words == 0) throw ConfigError("resume-state: --bytes must be at least 8");
  if (o.steps < 1 || o.every < 0) throw ConfigError("resume-state: --steps must be at least 1, --every at least 0");
  const std::uint64_t first = words * static_cast<std::uint64_t>(rt.rank());  // this rank's first global word
  resilience::CheckpointOptions co;
  co.levels = resilience::Level::node;
  co.node_dir = o.node_dir;
  co.name = o.name;
  resilience::Checkpoint ck(rt, co);
  std::vector<std::uint64_t> state;
  std::uint64_t step = 0, resumed = 0;
  if (auto found = ck.latest()) {
    auto r = ck.restore(*found.info);
    if (r.length("state") != words * static_cast<std::uint64_t>(rt.size()))
      throw MismatchError("resume-state: checkpoint " + found.info->path + " holds " + std::to_string(r.length("state")) +
                          " words, this job " + std::to_string(words * static_cast<std::uint64_t>(rt.size())));
    state = r.read<std::uint64_t>("state", first, words);
    step = resumed = found.info->step;
  } else {
    state.resize(words);
    for (std::size_t k = 0; k < words; ++k) state[k] = initial_word(first + k);
  }
  while (step < static_cast<std::uint64_t>(o.steps)) {
    ++step;
    for (auto& w : state) w = step_word(w, step);
    if (step == static_cast<std::uint64_t>(o.wrong_word_at_step) && rt.rank() == rt.size() - 1) state[0] ^= 1;
    if (o.every > 0 && step % static_cast<std::uint64_t>(o.every) == 0 && step < static_cast<std::uint64_t>(o.steps)) {
      auto w = ck.begin(step);
      w.add("state", std::span<const std::uint64_t>(state));
      w.commit();
    }
    FaultInjection::at_step(rt.rank(), step);  // the step, and its checkpoint, completed
  }
  // Every word against its update replayed from the start.
  std::uint64_t wrong = 0;
  for (std::size_t k = 0; k < words; ++k) {
    std::uint64_t w = initial_word(first + k);
    for (std::uint64_t t = 1; t <= step; ++t) w = step_word(w, t);
    wrong += w != state[k] ? 1 : 0;
  }
  wrong = all_reduce(rt.comm(), wrong, MPI_SUM);
  ck.remove();
  if (rt.rank() == 0 && !o.result.empty())
    write_json(o.result, {{"ok", wrong == 0}, {"wrong_words", wrong}, {"resumed_from", resumed},
                          {"attempt", FaultInjection::attempt()}, {"ranks", rt.size()}});
  return wrong == 0 ? 0 : 2;
}

namespace {

// A directory removed with everything under it when this goes (none when
// the path is empty).
struct RemoveTree {
  std::string path;
  ~RemoveTree() {
    std::error_code ec;
    if (!path.empty()) fs::remove_all(path, ec);
  }
};

// The slowest rank's memcpy bandwidth of `data`, every rank copying at
// once as they do when they write a checkpoint (the best of `reps`).
double memcpy_bandwidth(Runtime& rt, const std::vector<std::uint64_t>& data, int reps) {
  std::vector<std::uint64_t> copy(data.size());
  const std::size_t bytes = data.size() * sizeof(std::uint64_t);
  std::memcpy(copy.data(), data.data(), bytes);  // first touch, untimed
  double best = 1e300;
  for (int rep = 0; rep < std::max(1, reps); ++rep) {
    barrier(rt.comm());
    auto t0 = std::chrono::steady_clock::now();
    std::memcpy(copy.data(), data.data(), bytes);
    best = std::min(best, seconds_since(t0));
  }
  if (copy.back() != data.back()) throw Error("checkpoint-cost: memcpy lost bytes");
  return all_reduce(rt.comm(), static_cast<double>(bytes) / best, MPI_MIN);
}

// Restores ck's newest checkpoint; true on every rank when every rank's
// restored bytes equal `data`. `seconds`: the slowest rank's restore.
bool restored_equal(Runtime& rt, resilience::Checkpoint& ck, const std::vector<std::uint64_t>& data,
                    double& seconds) {
  const std::uint64_t words = data.size();
  barrier(rt.comm());
  auto t0 = std::chrono::steady_clock::now();
  auto found = ck.latest();
  bool same = false;
  if (found) {
    auto r = ck.restore(*found.info);
    auto got = r.read<std::uint64_t>("data", words * static_cast<std::uint64_t>(rt.rank()), words);
    same = r.length("data") == words * static_cast<std::uint64_t>(rt.size()) &&
           std::memcmp(got.data(), data.data(), words * sizeof(std::uint64_t)) == 0;
  }
  seconds = all_reduce(rt.comm(), seconds_since(t0), MPI_MAX);
  FaultInjection::heartbeat(rt.rank());
  return all_reduce(rt.comm(), same ? 1 : 0, MPI_MIN) == 1;
}

// One way of checkpointing that checkpoint-cost measures: level 2 (node),
// level 1 (buddy) with its copy inside commit() or travelling after it
// (async_drain, committed by finish_drain()), level 3 (disk, drained from
// level 2).
struct CostVariant {
  resilience::Level level;
  bool async;
};

// Where and how variant v checkpoints.
resilience::CheckpointOptions cost_options(const CheckpointCostOptions& o, CostVariant v, const std::string& disk_dir) {
  using resilience::Level;
  resilience::CheckpointOptions co;
  co.levels = v.level == Level::disk ? (Level::node | Level::disk) : resilience::Levels(v.level);
  co.node_dir = o.node_dir;
  co.dir = disk_dir;
  co.async_drain = v.async;
  co.name = "checkpoint-cost-l" + std::to_string(resilience::level_number(v.level)) + (v.async ? "a" : "");
  return co;
}

// `reps` checkpoints of `data`: each commit's stall and (async) drain, slowest rank.
void time_checkpoints(Runtime& rt, resilience::Checkpoint& ck, int reps, bool async,
                      const std::vector<std::uint64_t>& data, std::vector<double>& stalls, std::vector<double>& drains) {
  for (int rep = 0; rep < std::max(1, reps); ++rep) {
    barrier(rt.comm());
    auto t0 = std::chrono::steady_clock::now();
    auto w = ck.begin(static_cast<std::uint64_t>(rep + 1));
    w.add("data", std::span<const std::uint64_t>(data));
    w.commit();
    stalls.push_back(all_reduce(rt.comm(), seconds_since(t0), MPI_MAX));
    // The supervisor takes a rank silent for heartbeat_timeout as hung: a
    // gigabyte checkpoint, its drain and its restore each take seconds.
    FaultInjection::heartbeat(rt.rank());
    if (async) {
      auto t1 = std::chrono::steady_clock::now();
      ck.finish_drain();
      drains.push_back(all_reduce(rt.comm(), seconds_since(t1), MPI_MAX));
    }
  }
}

// One row of checkpoint-cost: `reps` checkpoints of `data` at one variant,
// their stalls against `bound` (the slowest rank's), each restore compared
// byte for byte.
json checkpoint_cost_row(Runtime& rt, const CheckpointCostOptions& o, CostVariant v, const std::string& disk_dir,
                         const std::vector<std::uint64_t>& data, double bound) {
  using resilience::Level;
  const Level level = v.level;
  const resilience::CheckpointOptions co = cost_options(o, v, disk_dir);
  resilience::Checkpoint ck(rt, co);
  std::vector<double> stalls, drains;
  time_checkpoints(rt, ck, o.reps, v.async, data, stalls, drains);
  double restore_seconds = 0, disk_restore_seconds = 0;
  bool same = restored_equal(rt, ck, data, restore_seconds);
  if (level == Level::disk) {  // the disk copy alone, as after losing the node
    resilience::CheckpointOptions disk = co;
    disk.levels = Level::disk;
    disk.async_drain = false;
    resilience::Checkpoint dk(rt, disk);
    same = restored_equal(rt, dk, data, disk_restore_seconds) && same;
  }
  ck.remove();
  // The first two checkpoints write into new shared memory (the previous
  // one is kept until the next completes): their stall includes the kernel
  // allocating and zeroing every page, which the memcpy (into touched
  // pages) does not. From the third on the commit reuses the spare, as
  // every checkpoint of a long run does: that is the stall compared with
  // the bound; the first is reported apart.
  const std::size_t cold = stalls.size() > 2 ? 2 : 0;
  const double stall = median(std::vector<double>(stalls.begin() + static_cast<std::ptrdiff_t>(cold), stalls.end()));
  json row{{"level", level},
           {"stall_seconds", stall},
           {"stall_seconds_max", maximum(stalls)},
           {"stall_seconds_first", stalls.front()},
           {"stall_reps_warm", stalls.size() - cold},
           {"bound_seconds", bound},
           {"restore_seconds", restore_seconds},
           {"restored_bit_identical", same},
           {"pass", stall <= bound && same}};
  if (level == Level::buddy) {
    row["one_node"] = rt.node().count < 2;  // there level 1 is level 2
    row["async"] = v.async;
    if (v.async) row["copy_seconds"] = median(drains);  // commit() to the copies committed at level 1
  }
  if (level == Level::disk) {
    row["drain_seconds"] = median(drains);
    row["disk_restore_seconds"] = disk_restore_seconds;
  }
  return row;
}

}  // namespace

int run_checkpoint_cost(Runtime& rt, const CheckpointCostOptions& o) {
  using resilience::Level;
  const resilience::Levels levels = resilience::parse_levels(o.levels, "--levels");
  const std::size_t words = static_cast<std::size_t>(o.bytes / sizeof(std::uint64_t));
  if (words == 0) throw ConfigError("checkpoint-cost: --bytes must be at least 8");
  std::vector<std::uint64_t> data(words);
  std::uint64_t state = 0x9e3779b97f4a7c15ULL * static_cast<std::uint64_t>(rt.rank() + 1);
  for (auto& w : data) w = splitmix64(state);
  const double bandwidth = memcpy_bandwidth(rt, data, o.reps);
  // Level 2's stall is bounded by writing the bytes at half the memcpy
  // bandwidth (and 10 ms); level 1 writes them twice.
  const double bound2 = static_cast<double>(words * sizeof(std::uint64_t)) / (0.5 * bandwidth) + 0.010;

  // The disk level's directory: given, or one of our own under $TMPDIR.
  std::string disk_dir = o.dir;
  RemoveTree remove_disk;
  if (has_level(levels, Level::disk) && disk_dir.empty()) {
    const char* t = std::getenv("TMPDIR");
    if (rt.rank() == 0) disk_dir = make_temp_dir(t && *t ? t : "/tmp", "tessera-checkpoint-cost-");
    disk_dir = broadcast(rt.comm(), disk_dir, 0);
    if (rt.rank() == 0) remove_disk.path = disk_dir;
  }

  json rows = json::array();
  bool pass = true;
  for (const CostVariant v : {CostVariant{Level::node, false}, CostVariant{Level::buddy, false},
                              CostVariant{Level::buddy, true}, CostVariant{Level::disk, true}}) {
    if (!has_level(levels, v.level)) continue;
    rows.push_back(checkpoint_cost_row(rt, o, v, disk_dir, data, v.level == Level::buddy ? 2 * bound2 : bound2));
    pass = pass && rows.back()["pass"].get<bool>();
  }
  if (rt.rank() == 0 && !o.result.empty())
    write_json(o.result, {{"bytes_per_rank", words * sizeof(std::uint64_t)}, {"ranks", rt.size()},
                          {"memcpy_bytes_per_second", bandwidth}, {"rows", rows}, {"pass", pass}});
  return 0;
}

namespace {

// One supervised run of the job; returns the supervisor's result, the
// job's checksum (0 when it wrote none) and the stale segments left.
struct Trial {
  resilience::SuperviseResult result;
  std::uint64_t checksum = 0;
  bool wrote = false;
  bool verified = false;  // resume-state: every word right
  int stale = 0;
  double seconds = 0;
};

// resume_time's state, split over the ranks in whole words.
std::uint64_t state_bytes_per_rank(const FaultsBenchOptions& o) {
  return o.resume_state_bytes / static_cast<std::uint64_t>(o.ranks) / sizeof(std::uint64_t) * sizeof(std::uint64_t);
}

// The options checked; the scenarios to run (the default three when none are named).
std::vector<std::string> checked_scenarios(const FaultsBenchOptions& o) {
  if (o.ranks < 1) throw ConfigError("bench faults: --ranks must be at least 1");
  if (o.trials < 1) throw ConfigError("bench faults: --trials must be at least 1");
  if (o.iterations < 2 * o.every || o.every < 1)
    throw ConfigError("bench faults: --iterations must be at least twice --every (a checkpoint to resume from)");
  std::vector<std::string> scenarios = o.scenarios;
  if (scenarios.empty()) scenarios = {"random_kill", "kill_in_checkpoint", "kill_in_restart"};
  bool resume_time = false;
  for (const auto& s : scenarios) {
    if (s != "random_kill" && s != "kill_in_checkpoint" && s != "kill_in_restart" && s != "kill_in_spare" &&
        s != "resume_time")
      throw ConfigError("bench faults: unknown scenario '" + s +
                        "' (random_kill, kill_in_checkpoint, kill_in_restart, kill_in_spare, resume_time)");
    // The third commit is the first to reuse a spare (keep 1): it must come before the end.
    if (s == "kill_in_spare" && (o.iterations - 1) / o.every < 3)
      throw ConfigError("bench faults: kill_in_spare needs --iterations above 3 x --every (a third checkpoint)");
    resume_time = resume_time || s == "resume_time";
  }
  if (resume_time && state_bytes_per_rank(o) == 0)
    throw ConfigError("bench faults: --state-bytes must give each rank at least 8 bytes");
  return scenarios;
}

std::string temp_base() {
  return std::getenv("TMPDIR") && *std::getenv("TMPDIR") ? std::getenv("TMPDIR") : "/tmp";
}

// The benchmark's phases, in the order run_faults_bench calls them: the
// failure-free runs, each scenario's trials (kills, hangs, stale segments,
// SIGBUS), the checkpoint-cost jobs, then the table or JSON lines.
class FaultsBench {
 public:
  FaultsBench(const FaultsBenchOptions& o, std::vector<std::string> scenarios)
      : o_(o),
        scenarios_(std::move(scenarios)),
        resume_time_(std::find(scenarios_.begin(), scenarios_.end(), "resume_time") != scenarios_.end()),
        state_bytes_per_rank_(state_bytes_per_rank(o)),
        shm_base_(default_shared_dir()),
        // The reference: the plain sequential loop, in this process.
        reference_(jacobi::run_plain(jacobi::Problem{o.n, o.iterations, false}).checksum),
        work_{make_temp_dir(temp_base(), "tessera-faults-")},
        rng_(o.seed),
        last_checkpoint_(static_cast<std::uint64_t>((o.iterations - 1) / o.every * o.every)) {}

  // The failure-free run: the time a trial may take (+ 60 s) and the first check.
  void run_failure_free() {
    note("failure-free run at " + std::to_string(o_.ranks) + " ranks ...");
    Trial clean = run_trial({}, false);
    if (!clean.result.finished || clean.checksum != reference_)
      throw Error("bench faults: the failure-free run " +
                  std::string(!clean.result.finished ? "did not finish: " + clean.result.message
                                                     : "differs from the plain loop's iterate") +
                  "; nothing to compare the trials with");
    free_seconds_ = clean.seconds;
    if (resume_time_) {
      note("failure-free resume-state run, " + std::to_string(state_bytes_per_rank_) + " bytes per rank ...");
      Trial c = run_trial({}, true);
      if (!c.result.finished || !c.verified)
        throw Error("bench faults: the failure-free resume-state run " +
                    std::string(!c.result.finished ? "did not finish: " + c.result.message : "has wrong words"));
      free_state_seconds_ = c.seconds;
    }
  }

  void run_scenarios() {
    for (const auto& name : scenarios_) rows_.push_back(run_scenario(name));
  }

  // Checkpoint cost: each size S per rank, one job measuring every level.
  void run_checkpoint_costs() {
    for (std::uint64_t bytes : o_.cost_bytes) {
      note("checkpoint cost: " + std::to_string(bytes) + " bytes per rank at levels " + o_.cost_levels + " ...");
      const std::string node_dir = make_temp_dir(shm_base_, "tessera-faults-");
      RemoveTree remove_node{node_dir};
      resilience::SuperviseOptions so;
      so.ranks = o_.ranks;
      so.program = o_.program;
      const std::string result_file = work_.path + "/cost" + std::to_string(costs_.size()) + ".json";
      so.args = {"bench", "checkpoint-cost", "--bytes", std::to_string(bytes), "--levels", o_.cost_levels,
                 "--node-dir", node_dir, "--result", result_file};
      if (!o_.cost_dir.empty()) so.args.insert(so.args.end(), {"--dir", o_.cost_dir});
      so.retries = 0;
      so.shm_dir = node_dir;
      so.environment = {{"TESSERA_SHM_DIR", node_dir}, {"OMPI_MCA_btl_vader_backing_directory", node_dir}};
      so.log = [&](const std::string& line) { note("  " + line); };
      auto r = resilience::supervise(so);
      std::ifstream in(result_file);
      if (!r.finished || !in) throw Error("bench faults: the checkpoint cost job failed: " + r.message);
      json cost = json::parse(in);
      cost_ok_ = cost_ok_ && cost.at("pass").get<bool>();
      costs_.push_back(std::move(cost));
    }
  }

  // Every scenario recovered bit for bit, without hangs, stale segments or
  // SIGBUS, resume_time met its targets, and every checkpoint cost passed.
  bool passed() const {
    bool ok = cost_ok_;
    for (const auto& s : rows_)
      ok = ok && s.recovered == s.trials && s.bit_identical == s.trials && s.hangs == 0 && s.stale_segments == 0 &&
           s.sigbus == 0 && (s.name != "resume_time" || meets_targets(s));
    return ok;
  }

  void print_json() const {
    for (const auto& s : rows_) std::printf("%s\n", scenario_json(s).dump().c_str());
    for (const auto& line : cost_lines()) std::printf("%s\n", line.dump().c_str());
  }

  void print_table() const {
    std::printf("tessera bench faults: Jacobi3D n=%d, %d iterations, chunks %s, checkpoint every %d (level 2), %d ranks; "
                "failure-free run %.2f s\n",
                o_.n, o_.iterations, o_.chunks.c_str(), o_.every, o_.ranks, free_seconds_);
    std::printf("%-20s %6s %9s %13s %5s %6s %6s %14s %14s\n", "scenario", "trials", "recovered", "bit-identical", "hangs",
                "stale", "sigbus", "detect med/max", "resume med/max");
    for (const auto& s : rows_) print_scenario_row(s);
    for (const auto& c : cost_lines()) print_cost_line(c);
  }

 private:
  void note(const std::string& line) const {
    if (!o_.quiet) std::fprintf(stderr, "bench faults: %s\n", line.c_str());
  }

  std::uint64_t uniform(std::uint64_t lo, std::uint64_t hi) { return lo + splitmix64(rng_) % (hi - lo + 1); }

  Trial run_trial(const std::vector<InjectedFault>& faults, bool state_job) {
    Trial t;
    const std::string node_dir = make_temp_dir(shm_base_, "tessera-faults-");
    RemoveTree remove_node{node_dir};
    const std::string result_file = work_.path + "/result" + std::to_string(++counter_) + ".json";
    resilience::SuperviseOptions so;
    so.ranks = o_.ranks;
    so.program = o_.program;
    if (state_job)
      so.args = {"bench", "resume-state", "--bytes", std::to_string(state_bytes_per_rank_), "--steps",
                 std::to_string(o_.iterations), "--every", std::to_string(o_.every), "--node-dir", node_dir,
                 "--result", result_file};
    else
      so.args = {"bench", "jacobi3d-recover", "--n", std::to_string(o_.n), "--iterations", std::to_string(o_.iterations),
                 "--chunks", o_.chunks, "--every", std::to_string(o_.every), "--node-dir", node_dir,
                 "--result", result_file, "-q"};
    so.retries = 3;
    so.heartbeat_timeout = o_.heartbeat_timeout;
    so.faults = faults;
    so.shm_dir = node_dir;
    // Open MPI's shared memory there too: what a trial leaves is all in one place.
    so.environment = {{"TESSERA_SHM_DIR", node_dir}, {"OMPI_MCA_btl_vader_backing_directory", node_dir}};
    so.log = [&](const std::string& line) { note("  " + line); };
    auto t0 = std::chrono::steady_clock::now();
    t.result = resilience::supervise(so);
    t.seconds = seconds_since(t0);
    try {
      std::ifstream in(result_file);
      if (in) {
        json j = json::parse(in);
        if (state_job) t.verified = j.at("ok").get<bool>();
        else t.checksum = j.at("checksum").get<std::uint64_t>();
        t.wrote = true;
      }
    } catch (const std::exception&) {
    }
    // Segments left in the job's directory once the supervisor has cleaned
    // (checkpoint files are not segments: they are kept by design).
    for (const auto& e : scan_shared_dir(node_dir)) t.stale += e.kind == ShmEntry::Kind::segment ? 1 : 0;
    t.stale += static_cast<int>(scan_mpi_files(node_dir).size());
    return t;
  }

  Scenario run_scenario(const std::string& name) {
    Scenario s;
    s.name = name;
    // 10% of the random kills (at least one trial) get a second kill in the relaunch.
    const int seconds_wanted = name == "random_kill" ? std::max(1, static_cast<int>(std::lround(o_.trials * 0.1))) : 0;
    for (int trial = 0; trial < o_.trials; ++trial) {
      const std::vector<InjectedFault> faults = faults_for(s, trial >= o_.trials - seconds_wanted);
      note(name + " trial " + std::to_string(trial + 1) + "/" + std::to_string(o_.trials) + ": " +
           FaultInjection::format(faults));
      const bool state_job = name == "resume_time";
      tally(s, trial, faults, state_job, run_trial(faults, state_job));
    }
    return s;
  }

  // One trial's failures for scenario `s`, drawn from the seed; `second_kill`:
  // a random kill gets another in the relaunch.
  std::vector<InjectedFault> faults_for(Scenario& s, bool second_kill) {
    const std::string& name = s.name;
    std::vector<InjectedFault> faults;
    const int rank = static_cast<int>(uniform(0, static_cast<std::uint64_t>(o_.ranks - 1)));
    if (name == "random_kill") {
      faults.push_back({1, rank, FaultPoint::step, uniform(1, static_cast<std::uint64_t>(o_.iterations))});
      if (second_kill) {
        faults.push_back({2, static_cast<int>(uniform(0, static_cast<std::uint64_t>(o_.ranks - 1))), FaultPoint::step,
                          uniform(1, static_cast<std::uint64_t>(o_.iterations))});
        ++s.second_kills;
      }
    } else if (name == "resume_time") {
      // After a checkpoint exists and before the last step: the relaunch resumes and completes a step.
      faults.push_back({1, rank, FaultPoint::step, uniform(static_cast<std::uint64_t>(o_.every), static_cast<std::uint64_t>(o_.iterations - 1))});
    } else if (name == "kill_in_spare") {
      // Halfway through copying into the reused spare, in the first commit at or after the step that reuses one.
      faults.push_back({1, rank, FaultPoint::spare, uniform(1, last_checkpoint_)});
    } else if (name == "kill_in_checkpoint") {
      faults.push_back({1, rank, FaultPoint::checkpoint, uniform(1, last_checkpoint_)});
    } else {
      // Killed after the first checkpoint, then again while restarting from it.
      faults.push_back({1, rank, FaultPoint::step, uniform(static_cast<std::uint64_t>(o_.every), static_cast<std::uint64_t>(o_.iterations))});
      faults.push_back({2, static_cast<int>(uniform(0, static_cast<std::uint64_t>(o_.ranks - 1))), FaultPoint::restart, 0});
    }
    return faults;
  }

  // Trial `trial` of scenario `s`, counted: recovered, bit-identical, hung, SIGBUS, stale segments.
  void tally(Scenario& s, int trial, const std::vector<InjectedFault>& faults, bool state_job, const Trial& t) const {
    ++s.trials;
    const auto& attempts = t.result.attempts;
    bool hung = t.seconds > (state_job ? free_state_seconds_ : free_seconds_) + 60;
    bool bus = false;
    for (std::size_t a = 0; a < attempts.size(); ++a) {
      hung = hung || attempts[a].outcome == "hung";
      bus = bus || attempts[a].signal == SIGBUS || attempts[a].exit_code == 128 + SIGBUS;
      if (attempts[a].outcome != "finished" && attempts[a].detection_seconds >= 0)
        s.detection.push_back(attempts[a].detection_seconds);
      if (a > 0 && attempts[a].resume_seconds >= 0) s.resume.push_back(attempts[a].resume_seconds);
      // Kill to the relaunch's first completed step: detection, then relaunch, restore and a step.
      if (a > 0 && attempts[a].resume_seconds >= 0 && attempts[a - 1].detection_seconds >= 0)
        s.kill_to_step.push_back(attempts[a - 1].detection_seconds + attempts[a].resume_seconds);
    }
    const bool recovered = t.result.finished && attempts.size() >= 2;  // it failed, then finished
    const bool same = t.result.finished && t.wrote && (state_job ? t.verified : t.checksum == reference_);
    s.recovered += recovered ? 1 : 0;
    s.bit_identical += same ? 1 : 0;
    s.hangs += hung ? 1 : 0;
    s.sigbus += bus ? 1 : 0;
    s.stale_segments += t.stale;
    s.trial_seconds.push_back(t.seconds);
    if ((!recovered || !same || hung || bus || t.stale) && s.problems.size() < 5)
      s.problems.push_back("trial " + std::to_string(trial + 1) + " (" + FaultInjection::format(faults) + "): " +
                           t.result.message + (same ? "" : "; result not bit-identical") +
                           (t.stale ? "; " + std::to_string(t.stale) + " stale segment(s)" : ""));
  }

  // resume_time's targets: kill to the next completed step (median, p99), detection (p99).
  bool meets_targets(const Scenario& s) const {
    return !s.kill_to_step.empty() && median(s.kill_to_step) <= o_.resume_median_target &&
           percentile(s.kill_to_step, 0.99) <= o_.resume_p99_target && percentile(s.detection, 0.99) >= 0 &&
           percentile(s.detection, 0.99) <= o_.detection_target;
  }

  json scenario_json(const Scenario& s) const {
    json j{{"benchmark", "faults"},
           {"scenario", s.name},
           {"ranks", o_.ranks},
           {"trials", s.trials},
           {"recovered", s.recovered},
           {"bit_identical", s.bit_identical},
           {"hangs", s.hangs},
           {"stale_segments", s.stale_segments},
           {"sigbus", s.sigbus},
           {"second_kills", s.second_kills},
           {"detection_seconds_median", median(s.detection)},
           {"detection_seconds_max", maximum(s.detection)},
           {"resume_seconds_median", median(s.resume)},
           {"resume_seconds_max", maximum(s.resume)},
           {"trial_seconds_median", median(s.trial_seconds)},
           {"failure_free_seconds", free_seconds_},
           {"problems", s.problems}};
    if (s.name == "resume_time") {
      j["state_bytes"] = state_bytes_per_rank_ * static_cast<std::uint64_t>(o_.ranks);
      j["detection_seconds_p99"] = percentile(s.detection, 0.99);
      j["kill_to_step_seconds_median"] = median(s.kill_to_step);
      j["kill_to_step_seconds_p99"] = percentile(s.kill_to_step, 0.99);
      j["target_median_seconds"] = o_.resume_median_target;
      j["target_p99_seconds"] = o_.resume_p99_target;
      j["target_detection_seconds"] = o_.detection_target;
      j["meets_targets"] = meets_targets(s);
    }
    return j;
  }

  // One line per size and level: the job's figures, its row beside them.
  std::vector<json> cost_lines() const {
    std::vector<json> lines;
    for (const auto& cost : costs_)
      for (const auto& row : cost.at("rows")) {
        json line{{"benchmark", "faults"},
                  {"scenario", "checkpoint_cost_level" + std::to_string(row.at("level").get<int>()) +
                                   (row.value("async", false) ? "_async" : "")},
                  {"ranks", cost.at("ranks")},
                  {"bytes_per_rank", cost.at("bytes_per_rank")},
                  {"memcpy_bytes_per_second", cost.at("memcpy_bytes_per_second")}};
        for (const auto& [k, v] : row.items()) line[k] = v;
        lines.push_back(std::move(line));
      }
    return lines;
  }

  void print_scenario_row(const Scenario& s) const {
    char d[32], r[32];
    std::snprintf(d, sizeof d, "%.3f/%.3f", median(s.detection), maximum(s.detection));
    std::snprintf(r, sizeof r, "%.3f/%.3f", median(s.resume), maximum(s.resume));
    std::printf("%-20s %6d %9d %13d %5d %6d %6d %14s %14s\n", s.name.c_str(), s.trials, s.recovered, s.bit_identical,
                s.hangs, s.stale_segments, s.sigbus, d, r);
    for (const auto& p : s.problems) std::printf("    FAILED %s\n", p.c_str());
    if (s.name == "resume_time")
      std::printf("resume time, %llu bytes of state from level 2 on %d ranks, %d trials: kill to the next completed step "
                  "median %.3f s (target %.1f), p99 %.3f s (target %.1f); detection p99 %.3f s (target %.3f): %s\n",
                  static_cast<unsigned long long>(state_bytes_per_rank_ * static_cast<std::uint64_t>(o_.ranks)), o_.ranks,
                  s.trials, median(s.kill_to_step), o_.resume_median_target, percentile(s.kill_to_step, 0.99),
                  o_.resume_p99_target, percentile(s.detection, 0.99), o_.detection_target,
                  meets_targets(s) ? "pass" : "FAIL");
  }

  static void print_cost_line(const json& c) {
    const int level = c.at("level").get<int>();
    std::string extra;
    char buf[160];
    if (level == 3) {
      std::snprintf(buf, sizeof buf, "; drained in %.4f s beside the application", c.at("drain_seconds").get<double>());
      extra = buf;
    }
    if (level == 1 && c.value("async", false)) {
      std::snprintf(buf, sizeof buf, "; buddy copies sent beside the application, in at level 1 after %.4f s",
                    c.at("copy_seconds").get<double>());
      extra = buf;
    }
    if (level == 1 && c.at("one_node").get<bool>()) extra = "; one node: level 1 is level 2 here";
    std::printf("checkpoint cost, level %d%s, %llu bytes per rank: stall %.4f s (median of %d into reused memory; "
                "the first, into new memory, %.4f s), bound %s(S/(0.5 x memcpy "
                "%.2f GB/s) + 10 ms) = %.4f s; restored %s in %.4f s: %s%s\n",
                level, c.value("async", false) ? " (async)" : "",
                static_cast<unsigned long long>(c.at("bytes_per_rank").get<std::uint64_t>()),
                c.at("stall_seconds").get<double>(), c.at("stall_reps_warm").get<int>(),
                c.at("stall_seconds_first").get<double>(), level == 1 ? "2 x " : "",
                c.at("memcpy_bytes_per_second").get<double>() / 1e9, c.at("bound_seconds").get<double>(),
                c.at("restored_bit_identical").get<bool>() ? "bit-identical" : "DIFFERENT",
                c.at("restore_seconds").get<double>(), c.at("pass").get<bool>() ? "pass" : "FAIL", extra.c_str());
  }

  const FaultsBenchOptions& o_;
  const std::vector<std::string> scenarios_;
  const bool resume_time_;
  const std::uint64_t state_bytes_per_rank_;
  const std::string shm_base_;
  const std::uint64_t reference_;  // the plain loop's checksum
  const RemoveTree work_;          // the trials' result files
  std::uint64_t rng_;
  const std::uint64_t last_checkpoint_;
  int counter_ = 0;
  double free_seconds_ = 0, free_state_seconds_ = 0;
  std::vector<Scenario> rows_;
  std::vector<json> costs_;
  bool cost_ok_ = true;
};

}  // namespace

int run_faults_bench(const FaultsBenchOptions& o) {
  FaultsBench bench(o, checked_scenarios(o));
  bench.run_failure_free();
  bench.run_scenarios();
  bench.run_checkpoint_costs();
  if (o.json) bench.print_json();
  else bench.print_table();
  return bench.passed() ? 0 : 2;
}

}  // namespace tessera::bench
