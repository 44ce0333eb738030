#include "tessera/storage/durable_file.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstring>

#include "tessera/runtime/error.hpp"
#include "tessera/storage/metadata.hpp"

#if defined(__x86_64__)
#include <immintrin.h>
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

// The instruction has a latency of 3 cycles and a throughput of 1: three
// independent streams over adjacent blocks of kStream bytes run 3x faster
// than one, and are joined by shifting a stream's state over the kStream
// zero bytes that follow it (the raw CRC state is linear over GF(2)).
constexpr std::size_t kStream = 8192;
struct Shift {
  std::array<std::array<std::uint32_t, 256>, 4> t{};
  std::uint32_t operator()(std::uint32_t c) const noexcept {
    return t[0][c & 0xFFu] ^ t[1][(c >> 8) & 0xFFu] ^ t[2][(c >> 16) & 0xFFu] ^ t[3][c >> 24];
  }
};
const Shift& stream_shift() {
  static const Shift s = [] {
    static const std::array<unsigned char, kStream> zeros{};
    std::array<std::uint32_t, 32> basis{};
    for (int i = 0; i < 32; ++i) basis[static_cast<std::size_t>(i)] = hardware_raw(zeros.data(), kStream, 1u << i);
    Shift out;
    for (std::size_t k = 0; k < 4; ++k)
      for (std::uint32_t v = 0; v < 256; ++v) {
        std::uint32_t x = 0;
        for (std::size_t b = 0; b < 8; ++b)
          if (v & (1u << b)) x ^= basis[8 * k + b];
        out.t[k][v] = x;
      }
    return out;
  }();
  return s;
}

__attribute__((target("sse4.2"))) std::uint32_t hardware3_raw(const unsigned char* p, std::size_t n,
                                                               std::uint32_t c) noexcept {
  if (n >= 3 * kStream) {
    const Shift& shift = stream_shift();
    while (n >= 3 * kStream) {
      std::uint64_t a = c, b = 0, d = 0;
      for (std::size_t i = 0; i < kStream; i += 8) {
        std::uint64_t x, y, z;
        std::memcpy(&x, p + i, 8);
        std::memcpy(&y, p + kStream + i, 8);
        std::memcpy(&z, p + 2 * kStream + i, 8);
        a = _mm_crc32_u64(a, x);
        b = _mm_crc32_u64(b, y);
        d = _mm_crc32_u64(d, z);
      }
      c = shift(shift(static_cast<std::uint32_t>(a)) ^ static_cast<std::uint32_t>(b)) ^ static_cast<std::uint32_t>(d);
      p += 3 * kStream;
      n -= 3 * kStream;
    }
  }
  return hardware_raw(p, n, c);
}

// `n` bytes from `p` (just read, so in cache) to `to` (16-byte aligned) with
// streamed stores: the destination, a file's pages, is not read back soon,
// and a cached store would first read every line it overwrites.
void stream_copy(unsigned char* to, const unsigned char* p, std::size_t n) noexcept {
  std::size_t i = 0;
  for (; i + 64 <= n; i += 64) {
    const __m128i w = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p + i));
    const __m128i x = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p + i + 16));
    const __m128i y = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p + i + 32));
    const __m128i z = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p + i + 48));
    _mm_stream_si128(reinterpret_cast<__m128i*>(to + i), w);
    _mm_stream_si128(reinterpret_cast<__m128i*>(to + i + 16), x);
    _mm_stream_si128(reinterpret_cast<__m128i*>(to + i + 32), y);
    _mm_stream_si128(reinterpret_cast<__m128i*>(to + i + 48), z);
  }
  std::memcpy(to + i, p + i, n - i);
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
  if (kHasSse42) return ~hardware3_raw(reinterpret_cast<const unsigned char*>(data.data()), data.size(), ~crc);
#endif
  return crc32c_portable(data, crc);
}

std::uint32_t crc32c_copy(std::byte* to, std::span<const std::byte> from, std::uint32_t crc) noexcept {
#if defined(__x86_64__)
  // A block of the three streams is checksummed (read from memory), then
  // copied from the cache with streamed stores: 1.1-1.4x the checksum
  // followed by memcpy, at any relative alignment. Checksumming and storing
  // each word in one pass was faster when the two addresses differed
  // modulo 4 KiB in one way and 25x slower in another (a load waiting on a
  // streamed store that only looks like the same address).
  if (kHasSse42) {
    auto* out = reinterpret_cast<unsigned char*>(to);
    const auto* p = reinterpret_cast<const unsigned char*>(from.data());
    std::size_t n = from.size();
    std::uint32_t c = ~crc;
    const std::size_t head = std::min(n, (16 - reinterpret_cast<std::uintptr_t>(out) % 16) % 16);
    c = hardware_raw(p, head, c);
    std::memcpy(out, p, head);
    p += head, out += head, n -= head;
    if (n >= 3 * kStream) {
      while (n >= 3 * kStream) {
        c = hardware3_raw(p, 3 * kStream, c);
        stream_copy(out, p, 3 * kStream);
        p += 3 * kStream, out += 3 * kStream, n -= 3 * kStream;
      }
      _mm_sfence();  // the streamed stores are ordered before whatever follows (a rename)
    }
    c = hardware_raw(p, n, c);
    std::memcpy(out, p, n);
    return ~c;
  }
#endif
  // Blocks small enough to stay in L2 between the checksum and the copy.
  constexpr std::size_t kBlock = 8 * 3 * 8192;
  for (std::size_t at = 0; at < from.size(); at += kBlock) {
    auto part = from.subspan(at, std::min(kBlock, from.size() - at));
    crc = crc32c(part, crc);
    std::memcpy(to + at, part.data(), part.size());
  }
  return crc;
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
  reserve(0);
}

DurableFile::DurableFile(std::string path, std::uint64_t bytes, bool durable, const std::string& spare)
    : path_(std::move(path)), tmp_(unique_temporary_name(path_)), bytes_(bytes), durable_(durable) {
  if (::rename(spare.c_str(), tmp_.c_str()) == 0) {
    fd_ = FileDescriptor(::open(tmp_.c_str(), O_RDWR | O_CLOEXEC | O_NOFOLLOW));
    struct stat st {};
    if (!fd_ || ::fstat(fd_.get(), &st) != 0) {
      const int err = errno;
      ::unlink(tmp_.c_str());
      throw SystemError("cannot open " + tmp_ + " (taken over from " + spare + ")", err);
    }
    adopted_ = static_cast<std::uint64_t>(st.st_size);
    if (adopted_ > bytes_) {
      fd_ = FileDescriptor();
      ::unlink(tmp_.c_str());
      adopted_ = 0;
    }
  }
  if (!fd_) {  // readable too: a file taking over spares is filled through a mapping
    fd_ = FileDescriptor(::open(tmp_.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600));
    if (!fd_) throw SystemError("cannot create " + tmp_, errno);
  }
  reserve(adopted_);
}

// Reserves [from, bytes_): a full file system is an error naming the bytes
// needed and free, never a SIGBUS through a mapping later.
void DurableFile::reserve(std::uint64_t from) {
  if (bytes_ <= from) return;
  int err = ::posix_fallocate(fd_.get(), static_cast<off_t>(from), static_cast<off_t>(bytes_ - from));
  if (err == 0) return;
  ::unlink(tmp_.c_str());
  std::string dir = directory_of(path_);
  if (err == ENOSPC || err == EFBIG || err == EDQUOT)
    throw SystemError("no room for " + path_ + ": it needs " + std::to_string(bytes_) + " bytes and " + dir + " has " +
                          std::to_string(free_bytes(dir)) + " bytes free",
                      err);
  throw SystemError("cannot reserve " + std::to_string(bytes_) + " bytes for " + path_, err);
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
