#include "tessera/runtime/memory.hpp"

#include <fcntl.h>
#include <malloc.h>
#include <unistd.h>

#include <cctype>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <string>
#include <string_view>
#include <vector>

#include "tessera/runtime/collective.hpp"
#include "tessera/runtime/error.hpp"

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
// True for a mapping of a shared library: "*.so" or "*.so.N...".
bool is_library(std::string_view path) {
  const auto so = path.rfind(".so");
  return so != std::string_view::npos && (so + 3 == path.size() || path[so + 3] == '.');
}
}  // namespace

std::uint64_t anonymous_memory_bytes() {
  // Give freed heap pages back first, or a new copy could land in pages that
  // were already resident and not show.
  malloc_trim(0);
  return sum_kib("/proc/self/smaps_rollup", {"Anonymous:"});
}
std::uint64_t shared_memory_pss_bytes() { return sum_kib("/proc/self/smaps_rollup", {"Pss_Shmem:"}); }
std::uint64_t library_code_bytes() {
  // The pages of each library mapping present in this process's page
  // table: its Rss in /proc/self/smaps, but read from /proc/self/pagemap
  // for the library ranges alone. smaps would walk every mapping (a graph's
  // too) and print all of them: 6 ms at kron-20, twice per analysis.
  static const long page = ::sysconf(_SC_PAGESIZE);
  std::ifstream maps("/proc/self/maps");
  struct Pagemap {
    int fd = ::open("/proc/self/pagemap", O_RDONLY | O_CLOEXEC);
    ~Pagemap() {
      if (fd >= 0) ::close(fd);
    }
  } pagemap;
  if (!maps || pagemap.fd < 0) return 0;  // no /proc: nothing to tell apart
  std::vector<std::uint64_t> entries;
  std::uint64_t pages = 0;
  std::string line;
  while (std::getline(maps, line)) {
    // "start-end perms offset dev inode [path]"
    const auto slash = line.find('/');
    if (slash == std::string::npos || !is_library(std::string_view(line).substr(slash))) continue;
    unsigned long long start = 0, end = 0;
    if (std::sscanf(line.c_str(), "%llx-%llx", &start, &end) != 2 || end <= start) continue;
    entries.resize((end - start) / static_cast<unsigned long long>(page));
    const std::size_t bytes = entries.size() * sizeof(std::uint64_t);
    const auto at = static_cast<off_t>(start / static_cast<unsigned long long>(page) * sizeof(std::uint64_t));
    if (::pread(pagemap.fd, entries.data(), bytes, at) != static_cast<ssize_t>(bytes)) continue;
    for (std::uint64_t e : entries) pages += e >> 63;  // bit 63: present
  }
  return pages * static_cast<std::uint64_t>(page);
}

std::uint64_t available_memory_bytes() { return sum_kib("/proc/meminfo", {"MemAvailable:"}); }

std::uint64_t peak_rss_bytes() { return sum_kib("/proc/self/status", {"VmHWM:"}); }

AnonymousMemoryMeter::AnonymousMemoryMeter(MPI_Comm comm)
    : comm_(comm), start_(all_reduce<std::uint64_t>(comm, anonymous_memory_bytes(), MPI_SUM)) {}

std::uint64_t AnonymousMemoryMeter::growth_bytes() const {
  std::uint64_t now = all_reduce<std::uint64_t>(comm_, anonymous_memory_bytes(), MPI_SUM);
  return now > start_ ? now - start_ : 0;
}

std::string format_bytes(std::uint64_t bytes) {
  static const char* const kSuffix[] = {"", "K", "M", "G", "T"};
  int k = 0;
  while (k < 4 && bytes >= 1024 && bytes % 1024 == 0) {
    bytes /= 1024;
    ++k;
  }
  return std::to_string(bytes) + kSuffix[k];
}

std::uint64_t parse_bytes(const std::string& text, const std::string& what, std::uint64_t max) {
  std::size_t digits = 0;
  while (digits < text.size() && text[digits] >= '0' && text[digits] <= '9') ++digits;
  std::string suffix = text.substr(digits);
  for (char& c : suffix) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  if (suffix.size() == 3 && suffix.compare(1, 2, "IB") == 0) suffix.resize(1);
  int shift = -1;
  if (suffix.empty()) shift = 0;
  else if (suffix == "K") shift = 10;
  else if (suffix == "M") shift = 20;
  else if (suffix == "G") shift = 30;
  else if (suffix == "T") shift = 40;
  std::uint64_t value = 0;
  bool ok = digits > 0 && digits <= 19 && shift >= 0;  // 19 digits cannot overflow 64 bits
  if (ok) {
    value = std::stoull(text.substr(0, digits));
    ok = value > 0 && value <= (max >> shift);
  }
  if (!ok)
    throw ConfigError(what + " must be a byte count between 1 and " + format_bytes(max) +
                      " such as 65536, 64K, 1M or 1G; got '" + text + "'");
  return value << shift;
}

}  // namespace tessera
