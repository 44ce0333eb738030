// Co-locale segments in the indexgather and histogram reports:
// the rate of the aggregated row on a co-locale segment (what default storage
// becomes under --colocales) against the same row on Heap and on Shared with
// the same-node path, all measured in the same run.
#pragma once
#include <cstdio>
#include <string>
#include <vector>

#include "tessera/bench/report.hpp"
#include "tessera/storage/storage.hpp"

namespace tessera::bench {

inline constexpr const char* kColocaleRow = "colocale+direct";

inline void add_colocale_summary(Report& report, const Runtime& rt, const std::vector<Result>& rows) {
  const Result* heap = find_result(rows, "aggregated", "heap");
  const Result* shared = find_result(rows, "aggregated", "shared+direct");
  const Result* colocale = find_result(rows, "aggregated", kColocaleRow);
  if (!heap || !shared || !colocale || heap->rate <= 0 || shared->rate <= 0) return;
  const char* default_kind = storage_kind_name(resolved_storage_kind(rt, {}));
  char text[240];
  std::snprintf(text, sizeof(text),
                "co-locale segments (default storage here: %s): colocale+direct rate / heap = %.2f, "
                "/ shared+direct = %.2f",
                default_kind, colocale->rate / heap->rate, colocale->rate / shared->rate);
  report.add_summary(text, {{"default_storage", default_kind},
                            {"colocale_over_heap_rate", colocale->rate / heap->rate},
                            {"colocale_over_shared_direct_rate", colocale->rate / shared->rate}});
}

}  // namespace tessera::bench
