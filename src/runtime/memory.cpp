#include "tessera/runtime/memory.hpp"

#include <malloc.h>

#include <cstdio>
#include <cstring>
#include <fstream>
#include <string>

#include "tessera/runtime/collective.hpp"

namespace tessera {

namespace {
// Sum of the kB values of the lines of `path` starting with one of `keys`.
std::uint64_t sum_kib(const char* path, std::initializer_list<const char*> keys) {
  std::ifstream in(path);
  std::string line;
  std::uint64_t total = 0;
  while (std::getline(in, line))
    for (const char* k : keys)
      if (line.rfind(k, 0) == 0) {
        unsigned long long v = 0;
        if (std::sscanf(line.c_str() + std::strlen(k), " %llu", &v) == 1) total += v;
      }
  return total * 1024;
}
}  // namespace

std::uint64_t anonymous_memory_bytes() {
  // Give freed heap pages back first, or a new copy could land in pages that
  // were already resident and not show.
  malloc_trim(0);
  return sum_kib("/proc/self/smaps_rollup", {"Anonymous:"});
}
std::uint64_t shared_memory_pss_bytes() { return sum_kib("/proc/self/smaps_rollup", {"Pss_Shmem:"}); }
std::uint64_t peak_rss_bytes() { return sum_kib("/proc/self/status", {"VmHWM:"}); }

AnonymousMemoryMeter::AnonymousMemoryMeter(MPI_Comm comm)
    : comm_(comm), start_(all_reduce<std::uint64_t>(comm, anonymous_memory_bytes(), MPI_SUM)) {}

std::uint64_t AnonymousMemoryMeter::growth_bytes() const {
  std::uint64_t now = all_reduce<std::uint64_t>(comm_, anonymous_memory_bytes(), MPI_SUM);
  return now > start_ ? now - start_ : 0;
}

}  // namespace tessera
