// Files that are either complete or absent: written under a temporary name
// with their space reserved first, optionally fsync'd, then renamed into
// place; plus the CRC32C that checks what was written. Used by checkpoints
// (resilience/checkpoint.hpp); nothing here knows about their layout.
#pragma once
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>

#include "tessera/storage/mapping.hpp"

namespace tessera {

// CRC32C (Castagnoli), chainable: crc32c(b, crc32c(a)) == crc32c(a ++ b).
// Uses the SSE4.2 instruction when the CPU has it, else crc32c_portable.
std::uint32_t crc32c(std::span<const std::byte> data, std::uint32_t crc = 0) noexcept;
// The table-driven version (slicing by 8): the reference the fast one is
// tested against, and the fallback.
std::uint32_t crc32c_portable(std::span<const std::byte> data, std::uint32_t crc = 0) noexcept;
// Copies `from` to `to` (`from.size()` bytes, not overlapping) and returns
// the CRC32C of `from` chained onto `crc`, reading `from` from memory once.
std::uint32_t crc32c_copy(std::byte* to, std::span<const std::byte> from, std::uint32_t crc = 0) noexcept;

// A new file at `path` of exactly `bytes` bytes, written at offsets. The
// bytes are reserved before anything is written (posix_fallocate), so a full
// file system is an Error naming the directory, the bytes needed and the
// bytes free, never a SIGBUS or a half-written file. Until commit() the
// data lives under a temporary name beside `path` (PATH.tmp-…), which the
// destructor removes when commit() was not reached.
//
// With `spare` (the path of a file to take over, such as a pruned
// checkpoint's data file, whose pages exist already): when it exists and is
// no larger than `bytes`, it becomes the temporary file and only what it
// lacks is reserved; a larger one is removed instead (never shrunk: a reader
// may still map it, and a shrink would turn its reads into SIGBUS).
class DurableFile {
 public:
  DurableFile(std::string path, std::uint64_t bytes, bool durable);
  DurableFile(std::string path, std::uint64_t bytes, bool durable, const std::string& spare);
  ~DurableFile();
  DurableFile(const DurableFile&) = delete;
  DurableFile& operator=(const DurableFile&) = delete;

  void write_at(std::uint64_t offset, std::span<const std::byte> data);
  // fsync (when durable), rename into place, fsync the directory (when
  // durable). After this the file is `path`, complete.
  void commit();
  const std::string& temporary_path() const noexcept { return tmp_; }
  // The open file (for a mapping of it), until commit().
  int fd() const noexcept { return fd_.get(); }
  // The bytes the spare had when it was taken over (0: a new file).
  std::uint64_t adopted_bytes() const noexcept { return adopted_; }

 private:
  void reserve(std::uint64_t from);
  std::string path_, tmp_;
  std::uint64_t bytes_ = 0, adopted_ = 0;
  bool durable_ = false, committed_ = false;
  FileDescriptor fd_;
};

// Writes `text` to `path` through DurableFile (all or nothing).
void write_file_atomically(const std::string& path, std::span<const std::byte> text, bool durable);

// Reads exactly `data.size()` bytes at `offset`; throws FormatError naming
// `path` when the file is shorter, SystemError on a read error.
void read_exactly(int fd, std::uint64_t offset, std::span<std::byte> data, const std::string& path);

// fsync of a directory, so a rename inside it survives a power cut.
void fsync_directory(const std::string& dir);

// Bytes free for an unprivileged writer in the file system holding `dir`
// (0 when it cannot be asked).
std::uint64_t free_bytes(const std::string& dir);

}  // namespace tessera
