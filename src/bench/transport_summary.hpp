// What the same-node rings and node-first routing do, for the indexgather and
// histogram reports: the rate of the aggregated Heap row (rings between
// co-locales) against the same exchange with every batch through MPI, and
// node-first routing against direct routing, measured in the same run.
#pragma once
#include <cstdio>
#include <string>
#include <vector>

#include "tessera/bench/report.hpp"

namespace tessera::bench {

inline constexpr const char* kMpiTransportRow = "heap via MPI";
inline constexpr const char* kNodeFirstRow = "heap node-first";

inline void add_transport_summary(Report& report, const std::vector<Result>& rows) {
  const Result* rings = find_result(rows, "aggregated", "heap");
  const Result* mpi = find_result(rows, "aggregated", kMpiTransportRow);
  const Result* node_first = find_result(rows, "aggregated", kNodeFirstRow);
  if (!rings || !mpi || !node_first || mpi->rate <= 0 || rings->rate <= 0) return;
  char text[200];
  std::snprintf(text, sizeof(text),
                "same-node rings / MPI transport (measured here): %.2f; node-first routing / direct: %.2f",
                rings->rate / mpi->rate, node_first->rate / rings->rate);
  report.add_summary(text, {{"rings_over_mpi_rate", rings->rate / mpi->rate},
                            {"node_first_over_direct_rate", node_first->rate / rings->rate}});
}

}  // namespace tessera::bench
