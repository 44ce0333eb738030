#include "tessera/storage/durable_file.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <cstring>

#include "tessera/runtime/error.hpp"
#include "tessera/storage/metadata.hpp"

#if defined(__x86_64__)
#include <nmmintrin.h>
#endif

namespace tessera {

namespace {

constexpr std::uint32_t kPoly = 0x82F63B78u;  // CRC32C, reflected

using Tables = std::array<std::array<std::uint32_t, 256>, 8>;
constexpr Tables make_tables() {
  Tables t{};
  for (std::uint32_t i = 0; i < 256; ++i) {
    std::uint32_t c = i;
    for (int k = 0; k < 8; ++k) c = (c >> 1) ^ ((c & 1u) ? kPoly : 0u);
    t[0][i] = c;
  }
  for (std::size_t i = 0; i < 256; ++i)
    for (std::size_t s = 1; s < 8; ++s) t[s][i] = (t[s - 1][i] >> 8) ^ t[0][t[s - 1][i] & 0xFFu];
  return t;
}
constexpr Tables kTables = make_tables();

std::uint32_t portable_raw(const unsigned char* p, std::size_t n, std::uint32_t c) noexcept {
  while (n >= 8) {
    std::uint64_t v;
    std::memcpy(&v, p, 8);
    v ^= c;
    c = kTables[7][v & 0xFF] ^ kTables[6][(v >> 8) & 0xFF] ^ kTables[5][(v >> 16) & 0xFF] ^
        kTables[4][(v >> 24) & 0xFF] ^ kTables[3][(v >> 32) & 0xFF] ^ kTables[2][(v >> 40) & 0xFF] ^
        kTables[1][(v >> 48) & 0xFF] ^ kTables[0][v >> 56];
    p += 8;
    n -= 8;
  }
  while (n--) c = (c >> 8) ^ kTables[0][(c ^ *p++) & 0xFFu];
  return c;
}

#if defined(__x86_64__)
__attribute__((target("sse4.2"))) std::uint32_t hardware_raw(const unsigned char* p, std::size_t n,
                                                              std::uint32_t c) noexcept {
  std::uint64_t c64 = c;
  while (n >= 8) {
    std::uint64_t v;
    std::memcpy(&v, p, 8);
    c64 = _mm_crc32_u64(c64, v);
    p += 8;
    n -= 8;
  }
  c = static_cast<std::uint32_t>(c64);
  while (n--) c = _mm_crc32_u8(c, *p++);
  return c;
}
const bool kHasSse42 = __builtin_cpu_supports("sse4.2");
#endif

std::string directory_of(const std::string& path) {
  auto slash = path.rfind('/');
  if (slash == std::string::npos) return ".";
  return slash == 0 ? "/" : path.substr(0, slash);
}

}  // namespace

std::uint32_t crc32c_portable(std::span<const std::byte> data, std::uint32_t crc) noexcept {
  return ~portable_raw(reinterpret_cast<const unsigned char*>(data.data()), data.size(), ~crc);
}

std::uint32_t crc32c(std::span<const std::byte> data, std::uint32_t crc) noexcept {
#if defined(__x86_64__)
  if (kHasSse42) return ~hardware_raw(reinterpret_cast<const unsigned char*>(data.data()), data.size(), ~crc);
#endif
  return crc32c_portable(data, crc);
}

std::uint64_t free_bytes(const std::string& dir) {
  struct statvfs s {};
  if (::statvfs(dir.c_str(), &s) != 0) return 0;
  return static_cast<std::uint64_t>(s.f_bavail) * s.f_frsize;
}

void fsync_directory(const std::string& dir) {
  FileDescriptor fd(::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (!fd) throw SystemError("cannot open directory " + dir + " to sync it", errno);
  if (::fsync(fd.get()) != 0 && errno != EINVAL) throw SystemError("cannot sync directory " + dir, errno);
}

DurableFile::DurableFile(std::string path, std::uint64_t bytes, bool durable)
    : path_(std::move(path)), tmp_(unique_temporary_name(path_)), bytes_(bytes), durable_(durable) {
  int fd = create_exclusive(tmp_, 0600);
  if (fd < 0) throw SystemError("cannot create " + tmp_, errno);
  fd_ = FileDescriptor(fd);
  if (bytes_ == 0) return;
  int err = ::posix_fallocate(fd, 0, static_cast<off_t>(bytes_));
  if (err != 0) {
    ::unlink(tmp_.c_str());
    std::string dir = directory_of(path_);
    if (err == ENOSPC || err == EFBIG || err == EDQUOT)
      throw SystemError("no room for " + path_ + ": it needs " + std::to_string(bytes_) + " bytes and " + dir +
                            " has " + std::to_string(free_bytes(dir)) + " bytes free",
                        err);
    throw SystemError("cannot reserve " + std::to_string(bytes_) + " bytes for " + path_, err);
  }
}

DurableFile::~DurableFile() {
  if (!committed_ && !tmp_.empty()) ::unlink(tmp_.c_str());
}

void DurableFile::write_at(std::uint64_t offset, std::span<const std::byte> data) {
  if (offset + data.size() > bytes_)
    throw RangeError("write of " + std::to_string(data.size()) + " bytes at " + std::to_string(offset) +
                     " past the reserved " + std::to_string(bytes_) + " bytes of " + path_);
  std::size_t done = 0;
  while (done < data.size()) {
    ssize_t n = ::pwrite(fd_.get(), data.data() + done, data.size() - done, static_cast<off_t>(offset + done));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) throw SystemError("cannot write " + tmp_, n < 0 ? errno : ENOSPC);
    done += static_cast<std::size_t>(n);
  }
}

void DurableFile::commit() {
  if (durable_ && ::fsync(fd_.get()) != 0 && errno != EINVAL) throw SystemError("cannot sync " + tmp_, errno);
  if (::rename(tmp_.c_str(), path_.c_str()) != 0) throw SystemError("cannot rename " + tmp_ + " to " + path_, errno);
  committed_ = true;
  fd_ = FileDescriptor();
  if (durable_) fsync_directory(directory_of(path_));
}

void write_file_atomically(const std::string& path, std::span<const std::byte> text, bool durable) {
  DurableFile f(path, text.size(), durable);
  f.write_at(0, text);
  f.commit();
}

void read_exactly(int fd, std::uint64_t offset, std::span<std::byte> data, const std::string& path) {
  std::size_t done = 0;
  while (done < data.size()) {
    ssize_t n = ::pread(fd, data.data() + done, data.size() - done, static_cast<off_t>(offset + done));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) throw SystemError("cannot read " + path, errno);
    if (n == 0)
      throw FormatError(path + " is truncated: " + std::to_string(offset + done) + " bytes where at least " +
                        std::to_string(offset + data.size()) + " were expected");
    done += static_cast<std::size_t>(n);
  }
}

}  // namespace tessera
