// The time and memory report (include/tessera/pipeline/report.hpp).
#include "tessera/pipeline/report.hpp"

#include <nlohmann/json.hpp>

#include <cstdio>

#include "tessera/graph/read.hpp"
#include "tessera/runtime/collective.hpp"
#include "tessera/runtime/memory.hpp"

namespace tessera::pipeline {

ArrayBytes array_bytes(const graph::EdgeList& g) {
  return {g.edge_array_bytes(), g.vertices() * graph::kVertexArrayBytes + g.offset_array_bytes(), g.vertices()};
}

Report::Report(Runtime& rt, Progress& progress)
    : rt_(rt), progress_(progress), start_peak_(peak_rss_bytes()), start_libraries_(library_code_bytes()) {}

void Report::add(const std::string& name, double seconds) {
  for (auto& [step, total] : steps_)
    if (step == name) return void(total += seconds);
  steps_.emplace_back(name, seconds);
}

void Report::finish(nlohmann::json& document, const ArrayBytes& arrays) {
  std::vector<double> seconds;
  for (auto& step : steps_) seconds.push_back(step.second);
  seconds.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0_).count());
  all_reduce(rt_.comm(), seconds.data(), seconds.size(), MPI_MAX);
  auto step_seconds = nlohmann::json::object();
  std::string line = "time:";
  char text[480];
  for (std::size_t k = 0; k < steps_.size(); ++k) {
    step_seconds[steps_[k].first] = seconds[k];
    std::snprintf(text, sizeof(text), " %s %.3f s,", steps_[k].first.c_str(), seconds[k]);
    line += text;
  }
  step_seconds["total"] = seconds.back();
  std::snprintf(text, sizeof(text), " total %.3f s (slowest rank)", seconds.back());
  progress_.step(line + text);

  const std::uint64_t peak = peak_rss_bytes();
  const std::uint64_t peak_sum = all_reduce<std::uint64_t>(rt_.comm(), peak, MPI_SUM);
  const std::uint64_t peak_max = all_reduce<std::uint64_t>(rt_.comm(), peak, MPI_MAX);
  const std::uint64_t start_sum = all_reduce<std::uint64_t>(rt_.comm(), start_peak_, MPI_SUM);
  const std::uint64_t growth = peak_sum > start_sum ? peak_sum - start_sum : 0;
  // Library code paged in since the start (a plugin's, Trilinos's) is in the
  // peak but is not data: it is reported, and left out of the budget.
  const std::uint64_t libraries_now = library_code_bytes();
  const std::uint64_t library_growth = all_reduce<std::uint64_t>(
      rt_.comm(), libraries_now > start_libraries_ ? libraries_now - start_libraries_ : 0, MPI_SUM);
  const std::uint64_t data_growth = growth > library_growth ? growth - library_growth : 0;
  const double ratio = arrays.edges ? static_cast<double>(growth) / static_cast<double>(arrays.edges) : 0;
  document["step_seconds"] = std::move(step_seconds);
  document["memory"] = {{"peak_rss_bytes_sum", peak_sum},
                        {"peak_rss_bytes_max_rank", peak_max},
                        {"start_rss_bytes_sum", start_sum},
                        {"peak_growth_bytes", growth},
                        {"edge_array_bytes", arrays.edges},
                        {"vertex_array_bytes", arrays.vertices},
                        {"peak_to_edge_arrays", ratio},
                        {"library_code_growth_bytes", library_growth},
                        {"data_growth_bytes", data_growth},
                        {"growth_budget_bytes", arrays.growth_budget()},
                        {"growth_to_budget", arrays.growth_budget() ? static_cast<double>(data_growth) /
                                                                          static_cast<double>(arrays.growth_budget())
                                                                    : 0.0},
                        {"ranks", rt_.size()}};
  // The memory line tells something only on a graph large enough for its
  // arrays to dominate the process (below that, MPI and the libraries do),
  // when the command used more than it should; -v shows it always.
  const bool over = arrays.growth_budget() && data_growth > arrays.growth_budget();
  if (!progress_.verbose() && !(over && arrays.edges >= kMemoryLineEdgeBytes)) return;
  const int ranks = rt_.size();
  auto mib = [](std::uint64_t bytes) { return static_cast<double>(bytes) / 1048576.0; };
  std::snprintf(text, sizeof(text),
                "memory: %.1f MiB at the peak over %d rank%s (largest rank %.1f MiB); this command added %.1f MiB "
                "of data (and %.1f MiB of library code) to hold a graph of %.1f MiB of edges and %.1f MiB of vertex "
                "arrays: %s",
                mib(peak_sum), ranks, ranks == 1 ? "" : "s", mib(peak_max), mib(data_growth), mib(library_growth),
                mib(arrays.edges), mib(arrays.vertices),
                over ? "more than the edges + 20% + 96 B a vertex it should need"
                     : "within the edges + 20% + 96 B a vertex it should need");
  progress_.step(text);
}

}  // namespace tessera::pipeline
