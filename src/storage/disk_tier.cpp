#include "tessera/storage/disk_tier.hpp"

#include <sys/mman.h>
#include <sys/statfs.h>
#include <unistd.h>

#include <cstdint>
#include <string>

namespace tessera {

bool on_disk(const Runtime& rt, const StorageOptions& options) {
  if (resolved_storage_kind(rt, options) != StorageKind::shared) return false;
  struct statfs st {};
  const std::string dir = options.dir.empty() ? default_shared_dir() : options.dir;
  if (::statfs(dir.c_str(), &st) != 0) return false;  // creating the array names the problem
  return !is_memory_file_system(static_cast<unsigned long>(st.f_type));
}

bool is_memory_file_system(unsigned long f_type) noexcept {
  switch (f_type) {
    case 0x01021994:  // tmpfs
    case 0x858458f6:  // ramfs
    case 0x958458f6:  // hugetlbfs
      return true;
    default:
      return false;
  }
}

void release_file_pages(const std::byte* begin, const std::byte* end) noexcept {
  const auto page = static_cast<std::uintptr_t>(::sysconf(_SC_PAGESIZE));
  const auto from = (reinterpret_cast<std::uintptr_t>(begin) + page - 1) / page * page;
  const auto to = reinterpret_cast<std::uintptr_t>(end) / page * page;
  if (to > from) ::madvise(reinterpret_cast<void*>(from), to - from, MADV_DONTNEED);
}

}  // namespace tessera
