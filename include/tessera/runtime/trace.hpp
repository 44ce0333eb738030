// The trace recorder: where a parallel run spends its time, as Chrome Trace
// Event JSON (one file per job; a rank is a process, a thread a thread) that
// the Perfetto UI and chrome://tracing open as it is, and that `tessera trace
// summary|plot` read (docs/trace.md has the format and the definitions).
//
// Off by default and then free: every recording call is one predictable
// branch on a process-wide flag. On, each thread appends fixed-size events to
// a buffer of its own (bounded: when full, the oldest events are dropped and
// counted, so a long run keeps its newest events and says how many it lost).
// Clocks: at start every rank measures its offset to rank 0 by ping-pong
// (best of several round trips), and again at stop; times are mapped to rank
// 0's clock by interpolating between the two, and the difference (the skew)
// is written in the file.
//
// Who records what: the runtime records waits (collectives, barriers, a
// progress loop that blocks: the idle time); comm/ its batches (with one flow
// arrow per batch); the pipeline its stages; kernels their rounds; the
// resilience store its checkpoints; chunks/ its balancing and migrations;
// storage/ its allocations.
#pragma once
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>

namespace tessera {

class Runtime;

namespace trace {

// What kind of time an event is; the summary adds them up by category.
enum class Category : std::uint8_t { phase, round, wait, comm, checkpoint, balance, io, storage };
const char* category_name(Category c) noexcept;

namespace detail {
extern std::atomic<bool> g_recording;
}
// Whether this process records now (a relaxed load: the one branch).
inline bool recording() noexcept { return detail::g_recording.load(std::memory_order_relaxed); }

// CLOCK_MONOTONIC in nanoseconds.
std::int64_t now_ns() noexcept;

// A name that outlives the call (event names and string arguments must be
// static): returns a stable copy, one per distinct text.
const char* intern(std::string_view text);

// One argument of an event: a key and an integer, a real or a static text.
struct Arg {
  enum class Type : std::uint8_t { none, integer, real, text };
  const char* key = nullptr;
  Type type = Type::none;
  union {
    std::int64_t integer;
    double real;
    const char* text;
  };
  Arg() : integer(0) {}
};

inline constexpr int kMaxArgs = 5;

// One recorded event (fixed size, in a thread's buffer).
struct Event {
  const char* name = nullptr;
  std::int64_t start_ns = 0;
  std::int64_t duration_ns = 0;
  std::uint64_t flow = 0;  // 0: none; else the flow arrow's id
  Category category = Category::phase;
  char phase = 'X';        // X complete, i instant, C counter
  char flow_phase = 0;     // 's' (arrow starts here), 'f' (ends here) or 0
  std::uint8_t args = 0;
  Arg arg[kMaxArgs];
};

// Appends a finished event to this thread's buffer (recording() is true).
void record(const Event& event) noexcept;

// A span of time: an "X" event from construction to destruction. Off, it
// costs the branch on recording() and a bool.
class Span {
 public:
  Span(Category category, const char* name) noexcept : on_(recording()) {
    if (on_) [[unlikely]] begin(category, name);
  }
  ~Span() {
    if (on_) [[unlikely]] end();
  }
  Span(const Span&) = delete;
  Span& operator=(const Span&) = delete;

  template <class T>
    requires std::is_arithmetic_v<T>
  Span& arg(const char* key, T value) noexcept {
    if (on_) [[unlikely]] {
      if constexpr (std::is_floating_point_v<T>) add_real(key, static_cast<double>(value));
      else add_integer(key, static_cast<std::int64_t>(value));
    }
    return *this;
  }
  // `text` must be static (a literal, or intern()'s).
  Span& arg(const char* key, const char* text) noexcept {
    if (on_) [[unlikely]] add_text(key, text);
    return *this;
  }
  // This span starts (out) or ends (in) the flow arrow `id` (one per batch).
  Span& flow_out(std::uint64_t id) noexcept {
    if (on_) [[unlikely]] set_flow('s', id);
    return *this;
  }
  Span& flow_in(std::uint64_t id) noexcept {
    if (on_) [[unlikely]] set_flow('f', id);
    return *this;
  }
  bool on() const noexcept { return on_; }
  // Ends the span now (the destructor then does nothing).
  void end() noexcept;

 private:
  void begin(Category category, const char* name) noexcept;
  void add_integer(const char* key, std::int64_t value) noexcept;
  void add_real(const char* key, double value) noexcept;
  void add_text(const char* key, const char* text) noexcept;
  void set_flow(char phase, std::uint64_t id) noexcept;

  bool on_;
  Event event_;
};

// A wait: idle time. Counted when it lasted beyond its first poll (a wait
// that found its condition at once is free): added to this thread's idle
// seconds (idle_seconds(), with or without a trace) and, when recording, a
// "wait" event. Call started_waiting() after the first poll found nothing.
// Nested waits count once, the outermost.
class Wait {
 public:
  explicit Wait(const char* name) noexcept : name_(name) {}
  ~Wait() {
    if (start_ns_ != 0) [[unlikely]] finish();
  }
  Wait(const Wait&) = delete;
  Wait& operator=(const Wait&) = delete;
  void started_waiting() noexcept {
    if (start_ns_ == 0) [[unlikely]] begin();
  }

 private:
  void begin() noexcept;
  void finish() noexcept;
  const char* name_;
  std::int64_t start_ns_ = 0;
  bool outermost_ = false;
};

// Seconds this thread has spent in waits (collectives, barriers, a progress
// loop that blocked) since it started: a benchmark's idle share is the
// difference over its timed run, divided by the run's time.
double idle_seconds() noexcept;

// Rounds told by their end (a kernel's on_round/on_iteration points): each
// done() records the span since the previous one (or construction) as a
// "round" event named `name`, with up to kMaxArgs integer arguments.
class RoundClock {
 public:
  explicit RoundClock(const char* name) noexcept : name_(name), last_ns_(recording() ? now_ns() : 0) {}
  void done(std::initializer_list<std::pair<const char*, std::int64_t>> args = {}) noexcept {
    if (recording()) [[unlikely]] record_round(args);
  }

 private:
  void record_round(std::initializer_list<std::pair<const char*, std::int64_t>> args) noexcept;
  const char* name_;
  std::int64_t last_ns_;
};

// An instant event ("i"): an allocation, a decision. Static texts only.
void instant(Category category, const char* name, std::initializer_list<std::pair<const char*, std::int64_t>> args,
             const char* text_key = nullptr, const char* text = nullptr) noexcept;
// A counter sample ("C"): `name` (e.g. "resident memory") with one value.
void counter(const char* name, const char* key, double value) noexcept;
// This process's resident memory as a counter sample (read from /proc).
void sample_memory() noexcept;

// The flow id of the k-th batch from `source` to `dest` on `channel` of the
// job's `exchange`-th aggregation exchange: both ends compute it alike, so no
// id travels on the wire.
std::uint64_t batch_flow_id(std::uint32_t exchange, int channel, int source, int dest, std::uint64_t k) noexcept;

// Names this thread in the file (thread 0 is "main").
void name_thread(const char* name);

// ---- starting and stopping (collective over the runtime's ranks) -----------

struct Options {
  std::string path;                       // the file rank 0 writes
  std::size_t buffer_bytes = 64u << 20;   // per thread; TESSERA_TRACE_BUFFER_MB
  std::string command;                    // what ran; default: this process's command line
};

// Starts recording on every rank: measures the clock offsets and clears the
// buffers. Collective. Throws ConfigError when already recording.
void start(Runtime& rt, const Options& options);
// Stops recording, gathers every rank's events on rank 0, which writes the
// file (atomically: a temporary file renamed). Collective. Returns the path.
std::string stop(Runtime& rt);
// Whether start() was called and stop() not yet.
bool active() noexcept;

// TESSERA_TRACE=FILE (and TESSERA_TRACE_BUFFER_MB): what Runtime reads at
// construction to start recording, and stops at its destruction.
inline constexpr const char* kTraceVariable = "TESSERA_TRACE";
inline constexpr const char* kTraceBufferVariable = "TESSERA_TRACE_BUFFER_MB";
// Options from the environment; empty path when TESSERA_TRACE is unset.
Options options_from_environment();
// The trace file of a job this job launches (an out-of-process analysis):
// beside FILE, the role before its extension ("t.json" -> "t.analysis.json"),
// so neither job's file replaces the other's.
std::string companion_path(const std::string& path, const std::string& role);

}  // namespace trace
}  // namespace tessera
