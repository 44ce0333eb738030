// RAII owners of memory mappings and file descriptors.
#pragma once
#include <cstddef>
#include <span>
#include <string>
#include <utility>

namespace tessera {

class FileDescriptor {
 public:
  FileDescriptor() = default;
  explicit FileDescriptor(int fd) : fd_(fd) {}
  ~FileDescriptor();
  FileDescriptor(FileDescriptor&& o) noexcept : fd_(std::exchange(o.fd_, -1)) {}
  FileDescriptor& operator=(FileDescriptor&& o) noexcept;
  FileDescriptor(const FileDescriptor&) = delete;
  FileDescriptor& operator=(const FileDescriptor&) = delete;
  int get() const noexcept { return fd_; }
  explicit operator bool() const noexcept { return fd_ >= 0; }

 private:
  int fd_ = -1;
};

// Asks for transparent huge pages under the whole 2 MiB pages inside
// `bytes` of private memory, before its first touch: one fault and one
// TLB entry per 2 MiB instead of 512. For arrays written at random or
// first touched inside a timed kernel (a search's outputs, a sort's
// scratch). A hint: ignored where THP is off and by tmpfs (Shared) pages.
// Not the default (Mapping::anonymous says why).
void prefer_huge_pages(std::span<std::byte> bytes) noexcept;

class Mapping {
 public:
  Mapping() = default;
  ~Mapping();
  Mapping(Mapping&& o) noexcept
      : base_(std::exchange(o.base_, nullptr)), bytes_(std::exchange(o.bytes_, 0)) {}
  Mapping& operator=(Mapping&& o) noexcept;
  Mapping(const Mapping&) = delete;
  Mapping& operator=(const Mapping&) = delete;

  // Private zero-filled memory; pages are placed when first touched, so the
  // rank that touches first (the owner) gets them on its NUMA domain.
  static Mapping anonymous(std::size_t bytes);
  // A whole file, shared with every process that maps it.
  static Mapping file(int fd, std::size_t bytes, bool writable, const std::string& path_for_errors);

  // Address space only (no access, no memory), for map_file_at to fill.
  static Mapping reserved(std::size_t bytes);
  // Maps `bytes` of the open file `fd` from `file_offset` (both page
  // multiples, as is `offset`) over [offset, offset + bytes) of this
  // mapping, shared with every process that maps the file.
  void map_file_at(std::size_t offset, int fd, std::size_t file_offset, std::size_t bytes, bool writable,
                   const std::string& path_for_errors);

  std::byte* data() const noexcept { return static_cast<std::byte*>(base_); }
  std::size_t size() const noexcept { return bytes_; }
  // Keeps the first `bytes` (at most size()) and unmaps whole pages past
  // them, so an anonymous mapping's tail goes back to the system at once.
  // Pages a shared file keeps stay in the file until it is truncated too.
  void shrink(std::size_t bytes) noexcept;

 private:
  void* base_ = nullptr;
  std::size_t bytes_ = 0;
};

}  // namespace tessera
