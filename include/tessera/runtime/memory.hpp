// What this process's memory costs, from /proc (Linux). Tessera's Shared
// arrays are file-backed mappings, so they are never anonymous memory:
// anonymous memory grows only with heap data (copies, vectors, buffers),
// which is how benchmarks and the pipeline prove "no copy". (Private_* would
// not do: a shared file page only one process has touched counts as private.)
#pragma once
#include <mpi.h>

#include <cstdint>
#include <string>

namespace tessera {

// Anonymous memory of /proc/self/smaps_rollup, in bytes, after returning
// freed heap pages to the system (malloc_trim).
std::uint64_t anonymous_memory_bytes();
// This process's proportional share of the shared memory (tmpfs, memfd) it
// maps: Pss_Shmem of /proc/self/smaps_rollup, in bytes. A page mapped by k
// processes counts 1/k in each, so the sum over a node's processes counts
// every shared page once: how co-locale segments prove they hold one copy.
std::uint64_t shared_memory_pss_bytes();
// Resident pages of shared libraries (mappings of *.so files: code and its
// read-only data), in bytes. Loading a plugin (Trilinos) makes the resident
// set grow by its code, which is not data a job holds; the pipeline's
// memory report tells the two apart.
std::uint64_t library_code_bytes();
// Memory the kernel could give without swapping (MemAvailable of
// /proc/meminfo), in bytes, for the whole machine.
std::uint64_t available_memory_bytes();
// Peak resident set (VmHWM of /proc/self/status), in bytes.
std::uint64_t peak_rss_bytes();

// A byte count a user typed: digits with an optional binary suffix, K, M, G
// or T (any case, or KiB, MiB, GiB, TiB): "65536", "64K", "1G". Throws
// ConfigError naming `what` unless it lies in [1, max].
std::uint64_t parse_bytes(const std::string& text, const std::string& what, std::uint64_t max);
// The same count the way parse_bytes reads it back: "64M", "1G", "1000".
std::string format_bytes(std::uint64_t bytes);

// Heap growth of a whole job over a step: anonymous memory summed over the
// ranks of `comm` at construction, compared with the sum at growth_bytes().
// Both are collective. What the pipeline reports as its "no copy" evidence.
class AnonymousMemoryMeter {
 public:
  explicit AnonymousMemoryMeter(MPI_Comm comm);
  std::uint64_t growth_bytes() const;  // 0 when memory shrank

 private:
  MPI_Comm comm_;
  std::uint64_t start_ = 0;
};

}  // namespace tessera
