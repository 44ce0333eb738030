// Progress lines (include/tessera/pipeline/progress.hpp).
#include "tessera/pipeline/progress.hpp"

#include <cstdarg>
#include <cstdint>
#include <cstdio>

namespace tessera::pipeline {

ProgressSink stderr_sink(bool enabled) {
  if (!enabled) return {};
  return [](double seconds, const std::string& text, bool detail) {
    std::fprintf(stderr, "[%7.2f s] %s%s\n", seconds, detail ? "  " : "", text.c_str());
  };
}

void Progress::step(const std::string& what) const {
  last_tick_ = -1;  // a step's first detail line is always shown
  if (sink_) sink_(elapsed(), what, false);
}

void Progress::tick(bool last, const char* format, ...) {
  if (!sink_) return;
  const double now = elapsed();
  if (!last && now - last_tick_ < 0.25) return;
  last_tick_ = now;
  char text[512];
  va_list args;
  va_start(args, format);
  std::vsnprintf(text, sizeof(text), format, args);
  va_end(args);
  sink_(now, text, true);
}

double Progress::elapsed() const noexcept {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0_).count();
}

std::string count_of(std::uint64_t n, const std::string& one, const std::string& many) {
  return std::to_string(n) + " " + (n == 1 ? one : many);
}
std::string count_of(std::uint64_t n, const std::string& one) { return count_of(n, one, one + "s"); }

std::string shown(const std::string& path) { return path == "-" ? "standard output" : path; }

}  // namespace tessera::pipeline
