#include "tessera/runtime/fault_injection.hpp"
#include "tessera/runtime/heartbeat_files.hpp"

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <charconv>
#include <cinttypes>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <fstream>
#include <limits>
#include <memory>
#include <mutex>
#include <sstream>

#include "tessera/runtime/error.hpp"

namespace tessera {

namespace {

std::int64_t now_ns() {
  timespec ts{};
  ::clock_gettime(CLOCK_REALTIME, &ts);
  return static_cast<std::int64_t>(ts.tv_sec) * 1000000000 + ts.tv_nsec;
}

std::string env(const char* name) {
  const char* v = std::getenv(name);
  return v ? v : "";
}

// A decimal number of at most `max` into `value`: "", or what is wrong with
// `text` ("'x' is not a number", "'9...' is out of range (at most N)").
std::string read_number(const std::string& text, std::uint64_t max, std::uint64_t& value) {
  if (text.empty() || text.find_first_not_of("0123456789") != std::string::npos)
    return "'" + text + "' is not a number";
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || end != text.data() + text.size() || value > max)
    return "'" + text + "' is out of range (at most " + std::to_string(max) + ")";
  return "";
}
constexpr std::uint64_t kMaxInt = static_cast<std::uint64_t>(std::numeric_limits<int>::max());

// The process's view of the variables, read once.
struct State {
  int attempt = 1;
  std::string heartbeat_dir, kill_file;
  std::vector<InjectedFault> faults;
  std::vector<bool> fired;
  int heartbeat_fd = -1;
  int heartbeat_rank = -1;
  int wait_fd = -1;
  std::string wait_path;  // RANK.wait, named with the heartbeat: waiting() allocates nothing
  std::uint64_t wait_seq = 0;
  std::string host;  // gethostname(), at the first heartbeat
  std::mutex mutex;  // a drain thread never calls in, but keep the hook safe
};

// The State once state() has read the variables, for FaultInjection::waiting:
// noexcept, it must not read them itself (a malformed TESSERA_FAULTS throws).
std::atomic<State*> g_read{nullptr};

State& state() {
  static State* s = [] {
    auto st = std::make_unique<State>();  // kept for good: a hook may run during exit
    std::string a = env(FaultInjection::kAttempt);
    if (!a.empty()) st->attempt = std::max(1, std::atoi(a.c_str()));
    st->heartbeat_dir = env(FaultInjection::kHeartbeatDir);
    st->kill_file = env(FaultInjection::kKillFile);
    st->faults = FaultInjection::parse(env(FaultInjection::kFaults));
    std::string kr = env(FaultInjection::kKillRank), ks = env(FaultInjection::kKillAtStep);
    if (!kr.empty() || !ks.empty()) {
      if (kr.empty() || ks.empty())
        throw ConfigError(std::string(FaultInjection::kKillRank) + " and " + FaultInjection::kKillAtStep +
                          " go together (a rank and a step); got only one");
      // Named as given: a bad value is reported under its own variable.
      std::uint64_t rank = 0, step = 0;
      if (std::string why = read_number(kr, kMaxInt, rank); !why.empty())
        throw ConfigError(std::string(FaultInjection::kKillRank) + ": " + why + " (the rank to kill, with " +
                          FaultInjection::kKillAtStep + ")");
      if (std::string why = read_number(ks, std::numeric_limits<std::uint64_t>::max(), step); !why.empty())
        throw ConfigError(std::string(FaultInjection::kKillAtStep) + ": " + why +
                          " (the step after which the rank is killed, with " + FaultInjection::kKillRank + ")");
      st->faults.push_back({1, static_cast<int>(rank), FaultPoint::step, step});
    }
    st->fired.assign(st->faults.size(), false);
    g_read.store(st.get(), std::memory_order_release);
    return st.release();
  }();
  return *s;
}

State& state();
// A normal exit (exit(), return from main) leaves exited.RANK, so the
// supervisor tells a rank that finished from one that died (SIGKILL, a
// crash: no atexit handler runs).
void mark_exit() {
  State& s = state();
  if (s.heartbeat_dir.empty() || s.heartbeat_rank < 0) return;
  std::string path = heartbeat_files::exited(s.heartbeat_dir, s.heartbeat_rank);
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
  if (fd >= 0) ::close(fd);
}

// The records the supervisor reads (RANK.hb, RANK.wait): `size` bytes (at
// most kHeartbeatRecordBytes) rewritten in place at offset 0, so a reader
// never sees a mix of two lengths. The formatted text, cut to size - 1
// bytes, padded with spaces, ends with a newline. Allocates nothing and
// throws nothing: FaultInjection::waiting calls it from a noexcept wait.
[[gnu::format(printf, 3, 4)]] void rewrite_record(int fd, int size, const char* format, ...) noexcept {
  char line[kHeartbeatRecordBytes];
  size = std::clamp(size, 1, static_cast<int>(sizeof line));
  va_list args;
  va_start(args, format);
  int n = std::vsnprintf(line, static_cast<std::size_t>(size), format, args);
  va_end(args);
  n = std::clamp(n, 0, size - 1);
  std::memset(line + n, ' ', static_cast<std::size_t>(size - 1 - n));
  line[size - 1] = '\n';
  ssize_t ignored = ::pwrite(fd, line, static_cast<std::size_t>(size), 0);
  (void)ignored;
}

void write_heartbeat(State& s, int rank, std::int64_t step) {
  if (s.heartbeat_dir.empty()) return;
  if (s.heartbeat_fd < 0 || s.heartbeat_rank != rank) {
    if (s.heartbeat_fd >= 0) ::close(s.heartbeat_fd);
    std::string path = heartbeat_files::heartbeat(s.heartbeat_dir, rank);
    s.heartbeat_fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
    s.heartbeat_rank = rank;
    s.wait_path = heartbeat_files::wait_note(s.heartbeat_dir, rank);
    static bool registered = (std::atexit(mark_exit), true);
    (void)registered;
    if (s.heartbeat_fd < 0) return;  // no heartbeat: the supervisor then only sees exits
  }
  // The host names the PID namespace the pid belongs to: the supervisor
  // checks a rank's process only when it runs on its own node.
  if (s.host.empty()) {
    char name[256] = {};
    if (::gethostname(name, sizeof name - 1) != 0 || name[0] == '\0') std::snprintf(name, sizeof name, "unknown");
    s.host = name;
  }
  rewrite_record(s.heartbeat_fd, kHeartbeatRecordBytes, "%d %d %" PRId64 " %" PRId64 " %.*s",
                 static_cast<int>(::getpid()), s.attempt, step, now_ns(), 160, s.host.c_str());
}

[[noreturn]] void die(State& s, int rank, FaultPoint point, std::uint64_t step) {
  if (!s.heartbeat_dir.empty()) {
    std::string path = heartbeat_files::killed(s.heartbeat_dir, rank);
    if (FILE* f = std::fopen(path.c_str(), "w")) {
      std::fprintf(f, "%" PRIu64 " %s %" PRId64 "\n", step, FaultInjection::point_name(point), now_ns());
      std::fclose(f);
    }
  }
  std::fflush(nullptr);
  ::kill(::getpid(), SIGKILL);
  for (;;) ::pause();
}

[[noreturn]] void hang(State& s, int rank, std::uint64_t step) {
  if (!s.heartbeat_dir.empty()) {
    std::string path = heartbeat_files::hung(s.heartbeat_dir, rank);
    if (FILE* f = std::fopen(path.c_str(), "w")) {
      std::fprintf(f, "%" PRIu64 " hang %" PRId64 "\n", step, now_ns());
      std::fclose(f);
    }
  }
  for (;;) ::pause();  // until the supervisor's SIGTERM/SIGKILL
}

// The first pending fault of this attempt and rank due at `point`/`step`.
void fire_due(State& s, int rank, FaultPoint point, std::uint64_t step) {
  for (std::size_t i = 0; i < s.faults.size(); ++i) {
    const auto& f = s.faults[i];
    if (s.fired[i] || f.attempt != s.attempt || f.rank != rank) continue;
    bool due = point == FaultPoint::restart ? f.point == FaultPoint::restart
                                            : f.point == point && step >= f.step;
    if (point == FaultPoint::step && f.point == FaultPoint::hang && step >= f.step) due = true;
    if (!due) continue;
    s.fired[i] = true;
    if (f.point == FaultPoint::hang) hang(s, rank, step);
    die(s, rank, f.point, step);
  }
}

}  // namespace

const char* FaultInjection::point_name(FaultPoint point) {
  switch (point) {
    case FaultPoint::step: return "step";
    case FaultPoint::checkpoint: return "checkpoint";
    case FaultPoint::restart: return "restart";
    case FaultPoint::hang: return "hang";
    case FaultPoint::spare: return "spare";
  }
  return "?";
}

std::vector<InjectedFault> FaultInjection::parse(const std::string& text) {
  std::vector<InjectedFault> out;
  std::stringstream all(text);
  std::string item;
  while (std::getline(all, item, ',')) {
    if (item.empty()) continue;
    std::vector<std::string> parts;
    std::stringstream one(item);
    for (std::string p; std::getline(one, p, ':');) parts.push_back(p);
    auto bad = [&](const std::string& why) {
      return ConfigError(std::string(kFaults) + ": '" + item + "': " + why +
                         " (expected ATTEMPT:RANK:POINT[:STEP], POINT one of step, checkpoint, spare, restart, hang)");
    };
    if (parts.size() < 3 || parts.size() > 4) throw bad("wrong number of fields");
    // Bounded: an attempt or a rank past int would wrap (to rank 0, say).
    auto number = [&](const std::string& s, const char* what, std::uint64_t max) {
      std::uint64_t value = 0;
      if (std::string why = read_number(s, max, value); !why.empty()) throw bad(std::string(what) + " " + why);
      return value;
    };
    InjectedFault f;
    f.attempt = static_cast<int>(number(parts[0], "attempt", kMaxInt));
    f.rank = static_cast<int>(number(parts[1], "rank", kMaxInt));
    if (f.attempt < 1) throw bad("attempts count from 1");
    const std::string& p = parts[2];
    if (p == "step") f.point = FaultPoint::step;
    else if (p == "checkpoint") f.point = FaultPoint::checkpoint;
    else if (p == "spare") f.point = FaultPoint::spare;
    else if (p == "restart") f.point = FaultPoint::restart;
    else if (p == "hang") f.point = FaultPoint::hang;
    else throw bad("unknown point '" + p + "'");
    if (parts.size() == 4) f.step = number(parts[3], "step", std::numeric_limits<std::uint64_t>::max());
    else if (f.point == FaultPoint::step || f.point == FaultPoint::hang) throw bad("a step is needed");
    out.push_back(f);
  }
  return out;
}

std::string FaultInjection::format(const std::vector<InjectedFault>& faults) {
  std::string out;
  for (const auto& f : faults) {
    if (!out.empty()) out += ',';
    out += std::to_string(f.attempt) + ":" + std::to_string(f.rank) + ":" + point_name(f.point);
    if (f.point != FaultPoint::restart) out += ":" + std::to_string(f.step);
  }
  return out;
}

int FaultInjection::attempt() { return state().attempt; }

void FaultInjection::heartbeat(int rank) {
  State& s = state();
  std::lock_guard lock(s.mutex);
  write_heartbeat(s, rank, -1);
}

void FaultInjection::started(int rank) {
  State& s = state();
  std::lock_guard lock(s.mutex);
  write_heartbeat(s, rank, kStartedStep);
}

void FaultInjection::waiting(bool begins) noexcept {
  // A Backoff may wait before any Runtime, so this never reads the variables
  // (reading a malformed TESSERA_FAULTS throws, and here that would end the
  // process in std::terminate): until something has read them there is no
  // heartbeat, so nothing to note. The Runtime reads them first in every
  // Tessera program, and reports a bad one as a ConfigError.
  State* read = g_read.load(std::memory_order_acquire);
  if (!read) return;
  State& s = *read;
  std::unique_lock lock(s.mutex, std::try_to_lock);  // never block a waiting rank on this
  if (!lock.owns_lock() || s.heartbeat_dir.empty() || s.heartbeat_rank < 0) return;
  if (s.wait_fd < 0) {
    s.wait_fd = ::open(s.wait_path.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
    if (s.wait_fd < 0) return;
  }
  if (begins) ++s.wait_seq;
  rewrite_record(s.wait_fd, kWaitRecordBytes, "%" PRIu64 " %d", s.wait_seq, begins ? 1 : 0);
}

void FaultInjection::at_step(int rank, std::uint64_t step) {
  State& s = state();
  std::lock_guard lock(s.mutex);
  write_heartbeat(s, rank, static_cast<std::int64_t>(step));
  if (!s.kill_file.empty()) {
    struct stat st {};
    if (::stat(s.kill_file.c_str(), &st) == 0) {
      std::ifstream in(s.kill_file);
      int named = -1;
      if (in >> named && named == rank && ::unlink(s.kill_file.c_str()) == 0) die(s, rank, FaultPoint::step, step);
    }
  }
  if (!s.faults.empty()) fire_due(s, rank, FaultPoint::step, step);
}

void FaultInjection::at_point(int rank, FaultPoint point, std::uint64_t step) {
  State& s = state();
  if (s.faults.empty()) return;
  std::lock_guard lock(s.mutex);
  fire_due(s, rank, point, step);
}

void FaultInjection::note_resume(std::uint64_t step, int level, const std::string& path) {
  State& s = state();
  if (s.heartbeat_dir.empty()) return;
  std::string file = heartbeat_files::resumed(s.heartbeat_dir, s.attempt);
  if (FILE* f = std::fopen(file.c_str(), "w")) {
    std::fprintf(f, "%" PRIu64 " %d %" PRId64 " %s\n", step, level, now_ns(), path.c_str());
    std::fclose(f);
  }
}

}  // namespace tessera
