// What this process's memory costs, from /proc (Linux). Tessera's Shared
// arrays are file-backed mappings, so they count as shared, not private:
// private memory grows only with real copies, which is how benchmarks and
// the pipeline prove "no copy".
#pragma once
#include <cstdint>

namespace tessera {

// Private_Clean + Private_Dirty of /proc/self/smaps_rollup, in bytes, after
// returning freed heap pages to the system (malloc_trim).
std::uint64_t private_memory_bytes();
// Peak resident set (VmHWM of /proc/self/status), in bytes.
std::uint64_t peak_rss_bytes();

}  // namespace tessera
