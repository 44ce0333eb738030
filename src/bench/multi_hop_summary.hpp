// What grid (multi-hop) routing saves and costs, for the indexgather and
// histogram reports: per-rank buffer memory by the engine's own accounting
// (AggregationOptions::buffer_memory_bytes) at P = 16, 1,024 and 65,536,
// and the measured rate of the multi-hop row against the direct row.
#pragma once
#include <cstdio>
#include <string>
#include <vector>

#include "tessera/bench/report.hpp"
#include "tessera/comm/options.hpp"

namespace tessera::bench {

inline void add_multi_hop_summary(Report& report, const AggregationOptions& agg, const std::vector<Result>& rows,
                                  const std::string& direct_storage, const std::string& grid_storage) {
  const Result* direct = find_result(rows, "aggregated", direct_storage);
  const Result* grid = find_result(rows, "aggregated", grid_storage);
  nlohmann::json memory = nlohmann::json::object();
  std::string text = "multi-hop (grid) buffer memory per rank, engine accounting at " +
                     std::to_string(agg.buffer_bytes_for(1024)) + " B/buffer:";
  for (int P : {16, 1024, 65536}) {
    std::size_t d = agg.with_routing(AggregationRouting::direct).buffer_memory_bytes(P);
    std::size_t g = agg.with_routing(AggregationRouting::grid).buffer_memory_bytes(P);
    memory[std::to_string(P)] = {{"direct_bytes", d},
                                 {"grid_bytes", g},
                                 {"grid_buffers", agg.with_routing(AggregationRouting::grid).destinations(P)},
                                 {"direct_over_grid", static_cast<double>(d) / static_cast<double>(g)}};
    char part[160];
    std::snprintf(part, sizeof(part), " P=%d %.1f MiB direct vs %.2f MiB grid (%.1fx less);", P,
                  static_cast<double>(d) / (1 << 20), static_cast<double>(g) / (1 << 20),
                  static_cast<double>(d) / static_cast<double>(g));
    text += part;
  }
  nlohmann::json values{{"buffer_memory_per_rank", memory}};
  if (direct && grid && direct->rate > 0) {
    char part[96];
    std::snprintf(part, sizeof(part), "\nmulti-hop rate / direct rate (measured here): %.2f", grid->rate / direct->rate);
    text += part;
    values["grid_over_direct_rate"] = grid->rate / direct->rate;
  }
  report.add_summary(text, values);
}

}  // namespace tessera::bench
