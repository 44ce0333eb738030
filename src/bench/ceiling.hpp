// The per-core ceiling in the indexgather and histogram reports, measured in
// the same run: the benchmark's kernel on a private table with no
// communication ("local loop"), and memcpy bandwidth. Each aggregated row
// then carries its rate as a fraction of the local loop (extra
// fraction_of_ceiling) and how many bytes memcpy copies in the time one of
// its records takes (extra memcpy_bytes_per_record), so the bytes the engine
// moves per record can be set against what the memory system allows.
#pragma once
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "tessera/bench/report.hpp"
#include "tessera/runtime/collective.hpp"

namespace tessera::bench {

inline constexpr const char* kLocalLoopRow = "local loop (no communication)";
inline constexpr const char* kMemcpyGroup = "memcpy";
inline constexpr const char* kMemcpyRow = "memcpy (no communication)";

// One row, in its own group (its unit is GB/s): every rank copies `source`
// into `copy` with memcpy; work is the bytes copied, summed over ranks. The
// copy is checked element by element.
inline Variant memcpy_variant(Runtime& rt, const std::vector<std::uint64_t>& source, std::vector<std::uint64_t>& copy,
                              int reps) {
  const double bytes = static_cast<double>(source.size() * sizeof(std::uint64_t)) * static_cast<double>(rt.size());
  return {.group = kMemcpyGroup, .variant = kMemcpyRow, .storage = "heap", .reps = reps, .work = bytes,
          .prepare = [&copy] { std::fill(copy.begin(), copy.end(), 0); },
          .run = [&source, &copy] { std::memcpy(copy.data(), source.data(), source.size() * sizeof(std::uint64_t)); },
          .verify = [&rt, &source, &copy](bool& ok) {
            std::uint64_t bad = source.size() == copy.size() ? 0 : 1;
            for (std::size_t k = 0; k < std::min(source.size(), copy.size()); ++k) bad += copy[k] != source[k];
            bad = all_reduce(rt.comm(), bad, MPI_SUM);
            ok = bad == 0;
            return std::to_string(bad) + " words differ from the source";
          }};
}

// Adds fraction_of_ceiling and memcpy_bytes_per_record to every aggregated
// row that ran, and one summary line with both per row.
inline void add_ceiling_summary(Report& report, const std::vector<Result>& rows, const Result& local,
                                const Result& memcpy_row) {
  if (local.rate <= 0 || memcpy_row.rate <= 0 || !local.verified || !memcpy_row.verified) return;
  const double record_scale = 1e6, byte_scale = 1e9;  // the rows' units: M records/s, GB/s
  char head[200];
  std::snprintf(head, sizeof(head), "per-core ceiling (same run): local loop %.4g %s, memcpy %.4g GB/s; aggregated rows:",
                local.rate, local.unit.c_str(), memcpy_row.rate);
  std::string text = head;
  nlohmann::json fractions = nlohmann::json::object();
  for (const Result& r : rows) {
    if (r.variant != "aggregated" || !r.skipped.empty() || r.rate <= 0) continue;
    double fraction = r.rate / local.rate;
    double bytes_per_record = memcpy_row.rate * byte_scale / (r.rate * record_scale);
    report.add_extra(r, {{"fraction_of_ceiling", fraction}, {"memcpy_bytes_per_record", bytes_per_record}});
    fractions[r.storage] = fraction;
    char part[160];
    std::snprintf(part, sizeof(part), " %s %.3g of the local loop (%.0f B of memcpy per record);", r.storage.c_str(),
                  fraction, bytes_per_record);
    text += part;
  }
  if (!text.empty() && text.back() == ';') text.pop_back();
  report.add_summary(text, {{"ceiling_rate", local.rate},
                            {"ceiling_unit", local.unit},
                            {"memcpy_gb_per_s", memcpy_row.rate},
                            {"fraction_of_ceiling", fractions}});
}

}  // namespace tessera::bench
