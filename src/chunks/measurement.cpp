#include "tessera/chunks/measurement.hpp"

#include <algorithm>
#include <cstdio>

#include "tessera/runtime/collective.hpp"

namespace tessera::chunks {

void LoadDatabase::end_step() {
  previous_step_.swap(last_step_);
  last_step_.assign(seconds_.size(), 0.0);
  ++steps_;
}

void LoadDatabase::reset() {
  std::fill(seconds_.begin(), seconds_.end(), 0.0);
  std::fill(last_step_.begin(), last_step_.end(), 0.0);
  previous_step_.clear();
  for (auto& mine : sent_) mine.clear();
  steps_ = 0;
}

std::vector<double> LoadDatabase::gather_loads(MPI_Comm comm) const {
  std::vector<double> load = seconds_;
  // A partial step (compute since the last end_step) counts as one more.
  double steps = steps_ + (std::any_of(last_step_.begin(), last_step_.end(), [](double s) { return s > 0; }) ? 1 : 0);
  steps = all_reduce(comm, steps, MPI_MAX);
  if (!load.empty()) all_reduce(comm, load.data(), static_cast<int>(load.size()), MPI_SUM);
  if (steps > 0)
    for (double& l : load) l /= steps;
  return load;
}

std::vector<ChunkEdge> LoadDatabase::gather_edges(MPI_Comm comm, int root) const {
  std::vector<ChunkEdge> mine;
  for (std::uint64_t from = 0; from < sent_.size(); ++from)
    for (auto [to, bytes] : sent_[from]) mine.push_back({from, to, bytes});
  auto all = gather_to_root<ChunkEdge>(comm, mine, root);
  std::sort(all.begin(), all.end(), [](const ChunkEdge& a, const ChunkEdge& b) {
    return a.from != b.from ? a.from < b.from : a.to < b.to;
  });
  return all;
}

std::string LoadDatabase::summary(MPI_Comm comm, const Placement& placement, int root, int top) const {
  auto load = gather_loads(comm);
  auto edges = gather_edges(comm, root);
  int rank = 0, ranks = 1;
  MPI_Comm_rank(comm, &rank);
  MPI_Comm_size(comm, &ranks);
  if (rank != root) return "";
  std::string out;
  char line[200];
  auto per_rank = rank_loads(load, placement, ranks);
  auto counts = chunks_per_rank(placement, ranks);
  std::snprintf(line, sizeof line, "measurements: %zu chunks, %d steps\n  rank  chunks  ms/step\n", load.size(), steps_);
  out += line;
  for (int r = 0; r < ranks; ++r) {
    std::snprintf(line, sizeof line, "  %4d  %6zu  %8.3f\n", r, counts[static_cast<std::size_t>(r)],
                  per_rank[static_cast<std::size_t>(r)] * 1e3);
    out += line;
  }
  std::vector<std::size_t> order(load.size());
  for (std::size_t c = 0; c < order.size(); ++c) order[c] = c;
  std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) { return load[a] > load[b]; });
  out += "  heaviest chunks (id rank ms/step):";
  for (std::size_t k = 0; k < order.size() && k < static_cast<std::size_t>(top); ++k) {
    std::snprintf(line, sizeof line, " %zu@%d:%.3f", order[k], placement[order[k]], load[order[k]] * 1e3);
    out += line;
  }
  std::stable_sort(edges.begin(), edges.end(), [](const ChunkEdge& a, const ChunkEdge& b) { return a.bytes > b.bytes; });
  std::uint64_t total = 0;
  for (auto& e : edges) total += e.bytes;
  std::snprintf(line, sizeof line, "\n  %zu chunk pairs, %llu bytes; heaviest (from->to bytes):", edges.size(),
                static_cast<unsigned long long>(total));
  out += line;
  for (std::size_t k = 0; k < edges.size() && k < static_cast<std::size_t>(top); ++k) {
    std::snprintf(line, sizeof line, " %llu->%llu:%llu", static_cast<unsigned long long>(edges[k].from),
                  static_cast<unsigned long long>(edges[k].to), static_cast<unsigned long long>(edges[k].bytes));
    out += line;
  }
  return out + "\n";
}

}  // namespace tessera::chunks
