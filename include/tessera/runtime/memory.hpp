// What this process's memory costs, from /proc (Linux). Tessera's Shared
// arrays are file-backed mappings, so they are never anonymous memory:
// anonymous memory grows only with heap data (copies, vectors, buffers),
// which is how benchmarks and the pipeline prove "no copy". (Private_* would
// not do: a shared file page only one process has touched counts as private.)
#pragma once
#include <cstdint>

namespace tessera {

// Anonymous memory of /proc/self/smaps_rollup, in bytes, after returning
// freed heap pages to the system (malloc_trim).
std::uint64_t anonymous_memory_bytes();
// Peak resident set (VmHWM of /proc/self/status), in bytes.
std::uint64_t peak_rss_bytes();

}  // namespace tessera
