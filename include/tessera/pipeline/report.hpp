// The time and memory report every workflow ends with: the wall time of
// each step the user waits for, on the slowest rank, and the job's peak
// resident memory (VmHWM) summed over the ranks (its footprint) and of the
// largest rank, with the sum's growth over the start (runtime and MPI) as a
// multiple of the edge arrays. Printed as one "time:" line and, with -v
// (Progress::verbose) or when a graph of kMemoryLineEdgeBytes of edges or
// more went over its budget, one "memory:" line in plain words; always in
// the result document as "step_seconds" and "memory".
#pragma once
#include <nlohmann/json_fwd.hpp>

#include <chrono>
#include <cstdint>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "tessera/graph/edge_list.hpp"
#include "tessera/pipeline/progress.hpp"
#include "tessera/runtime/trace.hpp"

namespace tessera::pipeline {

// The bytes of a graph's arrays the memory is measured against.
struct ArrayBytes {
  std::uint64_t edges = 0;     // destinations (and weights): 4 or 8 (+8) bytes an arc
  std::uint64_t vertices = 0;  // row offsets and graph::kVertexArrayBytes a vertex (labels, degrees, ids, ...)
  std::uint64_t vertex_count = 0;
  // What the pipeline may add to the memory at its peak: 1.2x the edge
  // arrays (the one resident copy and slack) + 96 bytes a vertex.
  std::uint64_t growth_budget() const noexcept { return edges + edges / 5 + 96 * vertex_count; }
};
ArrayBytes array_bytes(const graph::EdgeList& g);
// Edge arrays from which a command over its budget says so without -v.
inline constexpr std::uint64_t kMemoryLineEdgeBytes = std::uint64_t{64} << 20;

class Report {
 public:
  // Notes the peak resident memory so far: the part no graph size changes.
  Report(Runtime& rt, Progress& progress);

  // Runs `step`, adding its wall time to `name` (a step may run several
  // times: its times add up); returns what `step` returns.
  template <class F>
  decltype(auto) timed(const std::string& name, F&& step) {
    // A stage of the workflow in a trace, under the name its report gives it.
    trace::Span traced(trace::Category::phase, trace::recording() ? trace::intern(name) : nullptr);
    const auto t0 = std::chrono::steady_clock::now();
    struct Add {
      Report* report;
      const std::string& name;
      std::chrono::steady_clock::time_point t0;
      ~Add() { report->add(name, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count()); }
    } add{this, name, t0};
    return std::forward<F>(step)();
  }
  void add(const std::string& name, double seconds);

  // Collective (every rank took the same steps): prints the two lines and
  // adds "step_seconds" (each step and "total", slowest rank) and "memory"
  // to `document`.
  void finish(nlohmann::json& document, const ArrayBytes& arrays);

 private:
  Runtime& rt_;
  Progress& progress_;
  std::chrono::steady_clock::time_point t0_ = std::chrono::steady_clock::now();
  std::uint64_t start_peak_ = 0;
  std::uint64_t start_libraries_ = 0;  // library_code_bytes() at the start
  std::vector<std::pair<std::string, double>> steps_;
};

}  // namespace tessera::pipeline
