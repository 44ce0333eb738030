// The trace recorder (trace.hpp): per-thread bounded buffers of fixed-size
// events, clock offsets to rank 0 measured at start and stop, and one Chrome
// Trace Event JSON file written by rank 0.
#include "tessera/runtime/trace.hpp"

#include <sched.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <memory>
#include <mutex>
#include <set>
#include <vector>

#include "tessera/runtime/collective.hpp"
#include "tessera/runtime/comm_counters.hpp"
#include "tessera/runtime/error.hpp"
#include "tessera/runtime/runtime.hpp"
#include "tessera/runtime/wait.hpp"

namespace tessera::trace {

namespace detail {
std::atomic<bool> g_recording{false};
}

namespace {

// A thread's events: appended until the capacity, then a ring that
// overwrites the oldest (counted as dropped).
struct ThreadBuffer {
  int tid = 0;
  std::string name;
  std::vector<Event> events;
  std::size_t head = 0;  // the oldest event once the ring has wrapped
  std::uint64_t dropped = 0;
  std::atomic_flag busy = ATOMIC_FLAG_INIT;  // record() against stop()'s read

  void lock() noexcept {
    while (busy.test_and_set(std::memory_order_acquire)) sched_yield();
  }
  void unlock() noexcept { busy.clear(std::memory_order_release); }
};

struct Recorder {
  std::mutex mutex;  // threads joining, interning
  std::vector<std::unique_ptr<ThreadBuffer>> threads;
  std::uint64_t generation = 0;  // a start() makes threads re-register
  std::size_t capacity = 0;      // events per thread
  bool active = false;
  Options options;
  std::int64_t start_ns = 0;  // local clock
  double start_offset_ns = 0, start_uncertainty_ns = 0;
  std::set<std::string, std::less<>> names;  // intern()'s texts
};

Recorder& recorder() {
  static Recorder r;
  return r;
}

thread_local ThreadBuffer* t_buffer = nullptr;
thread_local std::uint64_t t_generation = ~std::uint64_t{0};
thread_local const char* t_thread_name = nullptr;

ThreadBuffer* this_thread_buffer() noexcept {
  if (t_buffer && t_generation == recorder().generation) [[likely]]
    return t_buffer;
  Recorder& r = recorder();
  std::lock_guard lock(r.mutex);
  try {
    auto b = std::make_unique<ThreadBuffer>();
    b->tid = static_cast<int>(r.threads.size());
    b->name = t_thread_name ? t_thread_name : (b->tid == 0 ? "main" : "thread " + std::to_string(b->tid));
    b->events.reserve(std::min<std::size_t>(r.capacity, 4096));
    t_buffer = b.get();
    r.threads.push_back(std::move(b));
  } catch (...) {
    return nullptr;
  }
  t_generation = r.generation;
  return t_buffer;
}

// ---- clocks -----------------------------------------------------------------

struct ClockOffset {
  double offset_ns = 0;       // add to this rank's clock to get rank 0's
  double uncertainty_ns = 0;  // half the best round trip
};

// A receive or send that yields between polls, so the ranks not yet being
// measured give the core to the pair that is.
void complete(MPI_Request& request) {
  for (;;) {
    int done = 0;
    {
      MpiPollScope quiet;
      TESSERA_MPI(MPI_Test(&request, &done, MPI_STATUS_IGNORE));
    }
    if (done) return;
    sched_yield();
  }
}

// Rank 0 ping-pongs with each rank in turn; the sample with the shortest
// round trip bounds the offset best (Cristian's algorithm).
ClockOffset measure_offset(MPI_Comm comm, int rank, int size) {
  constexpr int kRounds = 16;
  ClockOffset mine;
  for (int peer = 1; peer < size; ++peer) {
    if (rank == 0) {
      double best_rtt = 1e300, best_offset = 0;
      for (int k = 0; k < kRounds; ++k) {
        std::int64_t remote = 0;
        MPI_Request reqs[2];
        const std::int64_t t0 = now_ns();
        TESSERA_MPI(MPI_Irecv(&remote, 1, MPI_INT64_T, peer, 2, comm, &reqs[1]));
        TESSERA_MPI(MPI_Isend(&t0, 1, MPI_INT64_T, peer, 1, comm, &reqs[0]));
        complete(reqs[1]);
        const std::int64_t t1 = now_ns();
        complete(reqs[0]);
        const double rtt = static_cast<double>(t1 - t0);
        if (rtt < best_rtt) {
          best_rtt = rtt;
          best_offset = static_cast<double>(t0) + rtt / 2 - static_cast<double>(remote);
        }
      }
      double result[2] = {best_offset, best_rtt / 2};
      MPI_Request req;
      TESSERA_MPI(MPI_Isend(result, 2, MPI_DOUBLE, peer, 3, comm, &req));
      complete(req);
    } else if (rank == peer) {
      for (int k = 0; k < kRounds; ++k) {
        std::int64_t t0 = 0;
        MPI_Request req;
        TESSERA_MPI(MPI_Irecv(&t0, 1, MPI_INT64_T, 0, 1, comm, &req));
        complete(req);
        const std::int64_t here = now_ns();
        TESSERA_MPI(MPI_Isend(&here, 1, MPI_INT64_T, 0, 2, comm, &req));
        complete(req);
      }
      double result[2];
      MPI_Request req;
      TESSERA_MPI(MPI_Irecv(result, 2, MPI_DOUBLE, 0, 3, comm, &req));
      complete(req);
      mine.offset_ns = result[0];
      mine.uncertainty_ns = result[1];
    }
  }
  return mine;
}

// ---- writing -----------------------------------------------------------------

void append_escaped(std::string& out, const char* text) {
  out += '"';
  for (const char* p = text; *p; ++p) {
    const auto c = static_cast<unsigned char>(*p);
    if (c == '"' || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c < 0x20) {
      char esc[8];
      std::snprintf(esc, sizeof(esc), "\\u%04x", c);
      out += esc;
    } else {
      out += static_cast<char>(c);
    }
  }
  out += '"';
}

void append_number(std::string& out, double v) {
  char text[40];
  if (!std::isfinite(v)) {
    out += "null";
    return;
  }
  std::snprintf(text, sizeof(text), "%.3f", v);
  out += text;
}

void append_integer(std::string& out, std::int64_t v) { out += std::to_string(v); }

void append_args(std::string& out, const Event& e) {
  out += ",\"args\":{";
  for (int i = 0; i < e.args; ++i) {
    const Arg& a = e.arg[i];
    if (i) out += ',';
    append_escaped(out, a.key);
    out += ':';
    switch (a.type) {
      case Arg::Type::integer: append_integer(out, a.integer); break;
      case Arg::Type::real: {
        char text[40];
        if (std::isfinite(a.real)) {
          std::snprintf(text, sizeof(text), "%.9g", a.real);
          out += text;
        } else {
          out += "null";
        }
        break;
      }
      case Arg::Type::text: append_escaped(out, a.text ? a.text : ""); break;
      case Arg::Type::none: out += "null"; break;
    }
  }
  out += '}';
}

// Local nanoseconds -> microseconds on the job clock (rank 0's, 0 at its
// start), the offset interpolated between the start's and the stop's.
struct JobClock {
  std::int64_t local_start = 0, local_end = 0;
  double offset_start = 0, offset_end = 0, epoch = 0;
  double us(std::int64_t t) const {
    const double span = static_cast<double>(local_end - local_start);
    const double f = span > 0 ? static_cast<double>(t - local_start) / span : 0.0;
    const double offset = offset_start + (offset_end - offset_start) * std::clamp(f, 0.0, 1.0);
    return (static_cast<double>(t) + offset - epoch) / 1000.0;
  }
};

void append_event(std::string& out, const Event& e, int pid, int tid, const JobClock& clock) {
  if (!out.empty()) out += ",\n";
  const double ts = clock.us(e.start_ns);
  out += "{\"name\":";
  append_escaped(out, e.name ? e.name : "?");
  if (e.phase == 'C') {
    out += ",\"ph\":\"C\",\"ts\":";
    append_number(out, ts);
    out += ",\"pid\":" + std::to_string(pid);
    append_args(out, e);
    out += '}';
    return;
  }
  out += ",\"cat\":\"";
  out += category_name(e.category);
  out += "\",\"ph\":\"";
  out += e.phase;
  out += "\",\"ts\":";
  append_number(out, ts);
  if (e.phase == 'X') {
    out += ",\"dur\":";
    append_number(out, std::max(0.0, clock.us(e.start_ns + e.duration_ns) - ts));
  } else {
    out += ",\"s\":\"t\"";
  }
  out += ",\"pid\":" + std::to_string(pid) + ",\"tid\":" + std::to_string(tid);
  if (e.args) append_args(out, e);
  out += '}';
  if (e.flow_phase) {
    // The arrow's end binds to the slice that encloses its time stamp: the
    // middle of this one.
    out += ",\n{\"name\":\"batch\",\"cat\":\"batch\",\"ph\":\"";
    out += e.flow_phase;
    out += "\",\"id\":" + std::to_string(e.flow) + ",\"ts\":";
    append_number(out, ts + std::max(0.0, clock.us(e.start_ns + e.duration_ns) - ts) / 2);
    out += ",\"pid\":" + std::to_string(pid) + ",\"tid\":" + std::to_string(tid);
    if (e.flow_phase == 'f') out += ",\"bp\":\"e\"";
    out += '}';
  }
}

// What rank 0 needs of every rank besides its events.
struct RankInfo {
  char host[64] = {};
  std::int64_t pid = 0;
  std::int32_t node = 0;
  std::int32_t threads = 0;
  double start_us = 0, end_us = 0;
  double offset_us = 0, uncertainty_us = 0, skew_us = 0;
  std::uint64_t dropped = 0;
};

std::string this_command_line() {
  std::ifstream in("/proc/self/cmdline", std::ios::binary);
  std::string raw((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::string out;
  for (char c : raw) out += c == '\0' ? ' ' : c;
  while (!out.empty() && out.back() == ' ') out.pop_back();
  return out;
}

void write_file(const std::string& path, const std::string& text) {
  const std::string temporary = path + ".tmp." + std::to_string(getpid());
  std::FILE* f = std::fopen(temporary.c_str(), "wb");
  if (!f) throw SystemError("cannot write the trace file " + temporary, errno);
  const bool ok = std::fwrite(text.data(), 1, text.size(), f) == text.size();
  const int error = errno;
  if (std::fclose(f) != 0 || !ok) {
    std::remove(temporary.c_str());
    throw SystemError("cannot write the trace file " + temporary, ok ? errno : error);
  }
  if (std::rename(temporary.c_str(), path.c_str()) != 0) {
    const int e = errno;
    std::remove(temporary.c_str());
    throw SystemError("cannot put the trace file in place at " + path, e);
  }
}

// The event's next argument, or null when it has kMaxArgs already.
Arg* next_arg(Event& e, const char* key, Arg::Type type) noexcept {
  if (e.args >= kMaxArgs) return nullptr;
  Arg& a = e.arg[e.args++];
  a.key = key;
  a.type = type;
  return &a;
}

void add_integers(Event& e, std::initializer_list<std::pair<const char*, std::int64_t>> args) noexcept {
  for (const auto& [key, value] : args)
    if (Arg* a = next_arg(e, key, Arg::Type::integer)) a->integer = value;
}

}  // namespace

const char* category_name(Category c) noexcept {
  switch (c) {
    case Category::phase: return "phase";
    case Category::round: return "round";
    case Category::wait: return "wait";
    case Category::comm: return "comm";
    case Category::checkpoint: return "checkpoint";
    case Category::balance: return "balance";
    case Category::io: return "io";
    case Category::storage: return "storage";
  }
  return "phase";
}

std::int64_t now_ns() noexcept {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<std::int64_t>(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
}

const char* intern(std::string_view text) {
  Recorder& r = recorder();
  std::lock_guard lock(r.mutex);
  auto it = r.names.find(text);
  if (it == r.names.end()) it = r.names.emplace(text).first;
  return it->c_str();
}

void record(const Event& event) noexcept {
  ThreadBuffer* b = this_thread_buffer();
  if (!b) return;
  b->lock();
  const std::size_t capacity = recorder().capacity;
  if (b->events.size() < capacity) {
    try {
      b->events.push_back(event);
    } catch (...) {
      ++b->dropped;
    }
  } else if (capacity > 0) {
    b->events[b->head] = event;
    b->head = (b->head + 1) % capacity;
    ++b->dropped;
  }
  b->unlock();
}

void Span::begin(Category category, const char* name) noexcept {
  event_.name = name;
  event_.category = category;
  event_.start_ns = now_ns();
}

void Span::end() noexcept {
  if (!on_) return;
  on_ = false;
  if (!recording()) return;  // stopped meanwhile
  event_.duration_ns = now_ns() - event_.start_ns;
  record(event_);
  if (event_.category == Category::phase) sample_memory();
}

void Span::add_integer(const char* key, std::int64_t value) noexcept {
  if (Arg* a = next_arg(event_, key, Arg::Type::integer)) a->integer = value;
}

void Span::add_real(const char* key, double value) noexcept {
  if (Arg* a = next_arg(event_, key, Arg::Type::real)) a->real = value;
}

void Span::add_text(const char* key, const char* text) noexcept {
  if (Arg* a = next_arg(event_, key, Arg::Type::text)) a->text = text;
}

void Span::set_flow(char phase, std::uint64_t id) noexcept {
  event_.flow_phase = phase;
  event_.flow = id;
}

void RoundClock::record_round(std::initializer_list<std::pair<const char*, std::int64_t>> args) noexcept {
  const std::int64_t now = now_ns();
  Event e;
  e.name = name_;
  e.category = Category::round;
  // Recording began after this clock was made: the round starts then.
  e.start_ns = last_ns_ != 0 ? last_ns_ : now;
  e.duration_ns = now - e.start_ns;
  add_integers(e, args);
  record(e);
  last_ns_ = now;
}

namespace {
thread_local int t_wait_depth = 0;
thread_local std::int64_t t_idle_ns = 0;
}  // namespace

void Wait::begin() noexcept {
  start_ns_ = now_ns();
  outermost_ = t_wait_depth++ == 0;
}

void Wait::finish() noexcept {
  --t_wait_depth;
  const std::int64_t duration = now_ns() - start_ns_;
  if (outermost_) t_idle_ns += duration;
  if (!recording()) return;
  Event e;
  e.name = name_;
  e.category = Category::wait;
  e.start_ns = start_ns_;
  e.duration_ns = duration;
  record(e);
}

double idle_seconds() noexcept { return static_cast<double>(t_idle_ns) / 1e9; }

void instant(Category category, const char* name, std::initializer_list<std::pair<const char*, std::int64_t>> args,
             const char* text_key, const char* text) noexcept {
  if (!recording()) return;
  Event e;
  e.name = name;
  e.category = category;
  e.phase = 'i';
  e.start_ns = now_ns();
  add_integers(e, args);
  if (text_key)
    if (Arg* a = next_arg(e, text_key, Arg::Type::text)) a->text = text;
  record(e);
}

void counter(const char* name, const char* key, double value) noexcept {
  if (!recording()) return;
  Event e;
  e.name = name;
  e.phase = 'C';
  e.start_ns = now_ns();
  next_arg(e, key, Arg::Type::real)->real = value;
  record(e);
}

void sample_memory() noexcept {
  if (!recording()) return;
  // statm's second field: resident pages. One small read, no parsing of smaps.
  std::FILE* f = std::fopen("/proc/self/statm", "r");
  if (!f) return;
  unsigned long size = 0, resident = 0;
  const int n = std::fscanf(f, "%lu %lu", &size, &resident);
  std::fclose(f);
  if (n == 2)
    counter("resident memory", "MiB", static_cast<double>(resident) * static_cast<double>(sysconf(_SC_PAGESIZE)) /
                                          (1024.0 * 1024.0));
}

std::uint64_t batch_flow_id(std::uint32_t exchange, int channel, int source, int dest, std::uint64_t k) noexcept {
  // SplitMix64 of the fields: unique in practice, and below 2^53 so that a
  // JSON reader keeps it exact.
  std::uint64_t x = (static_cast<std::uint64_t>(exchange) << 40) ^ (static_cast<std::uint64_t>(channel) << 38) ^
                    (static_cast<std::uint64_t>(source) << 19) ^ static_cast<std::uint64_t>(dest);
  x ^= k * 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  x ^= x >> 31;
  return (x & ((std::uint64_t{1} << 53) - 1)) | 1;
}

void name_thread(const char* name) {
  t_thread_name = name;
  if (t_buffer && t_generation == recorder().generation) {
    std::lock_guard lock(recorder().mutex);
    t_buffer->name = name;
  }
}

Options options_from_environment() {
  Options o;
  if (const char* path = std::getenv(kTraceVariable)) o.path = path;
  if (const char* mb = std::getenv(kTraceBufferVariable); mb && *mb) {
    char* end = nullptr;
    const unsigned long long v = std::strtoull(mb, &end, 10);
    if (end == mb || *end != '\0' || v == 0 || v > (1ull << 20))
      throw ConfigError(std::string(kTraceBufferVariable) + "=" + mb +
                        ": give the trace buffer per thread in MiB, a whole number from 1 to 1048576");
    o.buffer_bytes = static_cast<std::size_t>(v) << 20;
  }
  return o;
}

std::string companion_path(const std::string& path, const std::string& role) {
  const std::size_t slash = path.rfind('/');
  const std::size_t dot = path.rfind('.');
  if (dot == std::string::npos || (slash != std::string::npos && dot < slash) || dot == slash + 1)
    return path + "." + role;
  return path.substr(0, dot) + "." + role + path.substr(dot);
}

bool active() noexcept { return recorder().active; }

void start(Runtime& rt, const Options& options) {
  Recorder& r = recorder();
  if (r.active) throw ConfigError("a trace is already being recorded (to " + r.options.path + "); stop it first");
  if (options.path.empty()) throw ConfigError("a trace needs a file to write: give its path");
  barrier(rt.comm());
  const ClockOffset offset = measure_offset(rt.comm(), rt.rank(), rt.size());
  {
    std::lock_guard lock(r.mutex);
    r.threads.clear();
    ++r.generation;
    r.capacity = std::max<std::size_t>(1, options.buffer_bytes / sizeof(Event));
    r.options = options;
    if (r.options.command.empty()) r.options.command = this_command_line();
    r.start_offset_ns = offset.offset_ns;
    r.start_uncertainty_ns = offset.uncertainty_ns;
    r.active = true;
  }
  barrier(rt.comm());
  r.start_ns = now_ns();
  detail::g_recording.store(true, std::memory_order_relaxed);
  sample_memory();
}

std::string stop(Runtime& rt) {
  Recorder& r = recorder();
  if (!r.active) throw ConfigError("no trace is being recorded");
  const std::int64_t end_ns = now_ns();
  detail::g_recording.store(false, std::memory_order_relaxed);
  r.active = false;
  barrier(rt.comm());
  const ClockOffset at_end = measure_offset(rt.comm(), rt.rank(), rt.size());

  JobClock clock;
  clock.local_start = r.start_ns;
  clock.local_end = end_ns;
  clock.offset_start = r.start_offset_ns;
  clock.offset_end = at_end.offset_ns;
  // The job clock's zero: rank 0's start.
  clock.epoch = static_cast<double>(broadcast<std::int64_t>(rt.comm(), r.start_ns, 0));

  std::string events;
  RankInfo info;
  {
    std::lock_guard lock(r.mutex);
    for (auto& b : r.threads) {
      b->lock();
      const std::size_t n = b->events.size();
      for (std::size_t i = 0; i < n; ++i) append_event(events, b->events[(b->head + i) % n], rt.rank(), b->tid, clock);
      info.dropped += b->dropped;
      b->unlock();
    }
    // Thread names, so Perfetto labels the rows.
    for (auto& b : r.threads) {
      if (!events.empty()) events += ",\n";
      events += "{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":" + std::to_string(rt.rank()) +
                ",\"tid\":" + std::to_string(b->tid) + ",\"args\":{\"name\":";
      append_escaped(events, b->name.c_str());
      events += "}}";
    }
    info.threads = static_cast<std::int32_t>(r.threads.size());
    r.threads.clear();
    ++r.generation;
  }
  std::snprintf(info.host, sizeof(info.host), "%s", rt.node().hostname.c_str());
  info.pid = getpid();
  info.node = rt.node().index;
  info.start_us = clock.us(r.start_ns);
  info.end_us = clock.us(end_ns);
  info.offset_us = r.start_offset_ns / 1000.0;
  info.uncertainty_us = std::max(r.start_uncertainty_ns, at_end.uncertainty_ns) / 1000.0;
  info.skew_us = std::abs(at_end.offset_ns - r.start_offset_ns) / 1000.0;

  // Ranks' texts separated: each non-empty one is a list of events.
  if (!events.empty()) events.insert(0, ",\n");
  const std::vector<char> all = gather_to_root<char>(rt.comm(), std::span<const char>(events.data(), events.size()));
  const std::vector<RankInfo> infos = gather_to_root<RankInfo>(rt.comm(), std::span<const RankInfo>(&info, 1));
  const std::string counters = gather_comm_counters_json(rt);
  if (rt.rank() != 0) return r.options.path;

  std::string out = "{\"traceEvents\":[\n";
  std::string meta;
  for (int p = 0; p < rt.size(); ++p) {
    const RankInfo& ri = infos[static_cast<std::size_t>(p)];
    if (p) meta += ",\n";
    meta += "{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":" + std::to_string(p) + ",\"args\":{\"name\":";
    append_escaped(meta, ("rank " + std::to_string(p) + " (" + ri.host + ")").c_str());
    meta += "}},\n{\"name\":\"process_sort_index\",\"ph\":\"M\",\"pid\":" + std::to_string(p) +
            ",\"args\":{\"sort_index\":" + std::to_string(p) + "}}";
  }
  out += meta;
  out.append(all.data(), all.size());
  out += "\n],\n\"displayTimeUnit\":\"ms\",\n\"otherData\":{\"tessera\":{\"format\":1,\"version\":";
  append_escaped(out, TESSERA_VERSION);
  out += ",\"command\":";
  append_escaped(out, r.options.command.c_str());
  out += ",\"ranks\":" + std::to_string(rt.size());
  auto list = [&](const char* key, auto field) {
    out += ",\"";
    out += key;
    out += "\":[";
    for (std::size_t p = 0; p < infos.size(); ++p) {
      if (p) out += ',';
      field(infos[p]);
    }
    out += ']';
  };
  list("hosts", [&](const RankInfo& i) { append_escaped(out, i.host); });
  list("pids", [&](const RankInfo& i) { append_integer(out, i.pid); });
  list("nodes", [&](const RankInfo& i) { append_integer(out, i.node); });
  list("threads", [&](const RankInfo& i) { append_integer(out, i.threads); });
  list("start_us", [&](const RankInfo& i) { append_number(out, i.start_us); });
  list("end_us", [&](const RankInfo& i) { append_number(out, i.end_us); });
  list("dropped_events", [&](const RankInfo& i) { append_integer(out, static_cast<std::int64_t>(i.dropped)); });
  double max_skew = 0;
  for (const RankInfo& i : infos) max_skew = std::max(max_skew, i.skew_us);
  out += ",\"clock\":{\"reference\":0,\"method\":\"ping-pong with rank 0 at start and stop, best of 16 round trips; "
         "offsets interpolated between the two\"";
  list("offset_us", [&](const RankInfo& i) { append_number(out, i.offset_us); });
  list("uncertainty_us", [&](const RankInfo& i) { append_number(out, i.uncertainty_us); });
  list("skew_at_end_us", [&](const RankInfo& i) { append_number(out, i.skew_us); });
  out += ",\"max_skew_us\":";
  append_number(out, max_skew);
  out += "},\"buffer_events\":" + std::to_string(r.capacity);
  out += ",\"comm_stats\":" + counters + "}}}\n";
  write_file(r.options.path, out);
  return r.options.path;
}

}  // namespace tessera::trace
