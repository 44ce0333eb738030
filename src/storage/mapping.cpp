#include "tessera/storage/mapping.hpp"

#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>

#include "tessera/runtime/error.hpp"

namespace tessera {

FileDescriptor::~FileDescriptor() {
  if (fd_ >= 0) ::close(fd_);
}

FileDescriptor& FileDescriptor::operator=(FileDescriptor&& o) noexcept {
  if (this != &o) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = std::exchange(o.fd_, -1);
  }
  return *this;
}

void prefer_huge_pages(std::span<std::byte> bytes) noexcept {
  constexpr std::uintptr_t kHuge = std::uintptr_t{2} << 20;
  const auto at = reinterpret_cast<std::uintptr_t>(bytes.data());
  const std::uintptr_t begin = (at + kHuge - 1) & ~(kHuge - 1), end = (at + bytes.size()) & ~(kHuge - 1);
  if (end > begin) ::madvise(reinterpret_cast<void*>(begin), end - begin, MADV_HUGEPAGE);
}

Mapping::~Mapping() {
  if (base_) ::munmap(base_, bytes_);
}

Mapping& Mapping::operator=(Mapping&& o) noexcept {
  if (this != &o) {
    if (base_) ::munmap(base_, bytes_);
    base_ = std::exchange(o.base_, nullptr);
    bytes_ = std::exchange(o.bytes_, 0);
  }
  return *this;
}

void Mapping::shrink(std::size_t bytes) noexcept {
  if (!base_ || bytes >= bytes_) return;
  const auto page = static_cast<std::size_t>(::sysconf(_SC_PAGESIZE));
  const std::size_t keep = (bytes + page - 1) / page * page;
  if (keep < bytes_) ::munmap(static_cast<std::byte*>(base_) + keep, bytes_ - keep);
  if (keep == 0) base_ = nullptr;
  bytes_ = bytes;
}

Mapping Mapping::anonymous(std::size_t bytes) {
  Mapping m;
  if (bytes == 0) return m;
  void* p = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) throw SystemError("cannot allocate " + std::to_string(bytes) + " bytes", errno);
  // No MADV_HUGEPAGE: 2 MiB-aligned arrays put a[j], b[j], c[j] in the same
  // cache sets (measured: STREAM triad slower than on 4 KiB tmpfs pages),
  // and Heap should behave like Shared storage, which tmpfs gives 4 KiB pages.
  m.base_ = p;
  m.bytes_ = bytes;
  return m;
}

Mapping Mapping::reserved(std::size_t bytes) {
  Mapping m;
  if (bytes == 0) return m;
  void* p = ::mmap(nullptr, bytes, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (p == MAP_FAILED) throw SystemError("cannot reserve " + std::to_string(bytes) + " bytes of address space", errno);
  m.base_ = p;
  m.bytes_ = bytes;
  return m;
}

void Mapping::map_file_at(std::size_t offset, int fd, std::size_t file_offset, std::size_t bytes, bool writable,
                          const std::string& path_for_errors) {
  if (bytes == 0) return;
  if (offset + bytes > bytes_) throw MismatchError("mapping " + path_for_errors + " past the reserved range");
  int prot = PROT_READ | (writable ? PROT_WRITE : 0);
  void* p = ::mmap(data() + offset, bytes, prot, MAP_SHARED | MAP_FIXED, fd, static_cast<off_t>(file_offset));
  if (p == MAP_FAILED) throw SystemError("cannot map " + path_for_errors, errno);
}

Mapping Mapping::file(int fd, std::size_t bytes, bool writable, const std::string& path_for_errors) {
  Mapping m;
  if (bytes == 0) return m;
  int prot = PROT_READ | (writable ? PROT_WRITE : 0);
  void* p = ::mmap(nullptr, bytes, prot, MAP_SHARED, fd, 0);
  if (p == MAP_FAILED) throw SystemError("cannot map " + path_for_errors, errno);
  m.base_ = p;
  m.bytes_ = bytes;
  return m;
}

}  // namespace tessera
