// Progress lines of a long workflow: the library says what it is doing, the
// caller decides where the lines go (the CLI: rank 0's stderr; Python:
// nowhere unless asked). Steps are timed from the Progress' construction.
#pragma once
#include <chrono>
#include <cstdint>
#include <functional>
#include <string>

namespace tessera::pipeline {

// `seconds` since the workflow began; `detail`: a sub-line of the step in
// progress (an iteration count), shown indented.
using ProgressSink = std::function<void(double seconds, const std::string& text, bool detail)>;

// Lines on standard error as "[  12.34 s] text" (details indented), the
// form of every front end (the CLI on rank 0, Python when verbose); an
// empty sink when `enabled` is false.
ProgressSink stderr_sink(bool enabled);

class Progress {
 public:
  // Without a sink nothing is shown (the timing still runs).
  // `verbose`: also the lines only a curious user wants (-v: the memory report).
  explicit Progress(ProgressSink sink = {}, bool verbose = false) : sink_(std::move(sink)), verbose_(verbose) {}
  bool verbose() const noexcept { return verbose_; }

  void step(const std::string& what) const;
  // A detail line, at most four a second unless `last` (or the first since
  // step()'s line).
  void tick(bool last, const char* format, ...) __attribute__((format(printf, 3, 4)));
  double elapsed() const noexcept;

 private:
  ProgressSink sink_;
  std::chrono::steady_clock::time_point t0_ = std::chrono::steady_clock::now();
  mutable double last_tick_ = -1;
  bool verbose_ = false;
};

// "1 component", "2 components"; "1 vertex", "2 vertices".
std::string count_of(std::uint64_t n, const std::string& one, const std::string& many);
std::string count_of(std::uint64_t n, const std::string& one);
// How progress lines name an output path ("-": "standard output").
std::string shown(const std::string& path);

}  // namespace tessera::pipeline
