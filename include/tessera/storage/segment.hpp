// One rank's shared segment: a file (under /dev/shm or any directory) that
// starts with a fixed header page and then holds the elements. The header lets
// `tessera shm gc` find the creator without the metadata file, and lets an
// attaching process check the bytes before it trusts them.
#pragma once
#include <cstdint>
#include <string>

#include "tessera/storage/mapping.hpp"

namespace tessera {

// Who created a file: enough to tell later whether that process still lives,
// even if its pid was reused (start time from /proc/<pid>/stat).
struct ProcessIdentity {
  std::string host;
  std::int32_t pid = 0;
  std::uint64_t start_time = 0;

  static ProcessIdentity self();
  enum class Liveness { alive, dead, unknown };  // unknown: another host
  Liveness liveness() const;
};

struct SegmentHeader {
  static constexpr char kMagic[8] = {'T', 'E', 'S', 'S', 'S', 'E', 'G', '1'};
  char magic[8];
  std::uint32_t version;
  std::uint32_t header_bytes;  // where the elements start (a page multiple)
  std::uint64_t element_size;
  std::uint64_t count;         // elements in this segment
  std::uint64_t global_begin;  // global index of the first element
  std::int32_t rank;
  std::int32_t creator_pid;
  std::uint64_t creator_start_time;
  std::uint32_t persist;
  std::uint32_t reserved;
  char host[64];
  char array_name[128];
  char element_type[32];
};
static_assert(sizeof(SegmentHeader) <= 4096);

// Bytes reserved for the header: one page of the file system holding `dir`
// (4 KiB on tmpfs, the huge-page size on hugetlbfs, so data stays mappable).
std::uint32_t segment_header_bytes(const std::string& dir);

// Reads and checks a segment header from an open file; throws FormatError
// naming `path` when it is not a Tessera segment.
SegmentHeader read_segment_header(int fd, const std::string& path);

// True for names that stay inside their directory: no '/', not "." or "..",
// only [A-Za-z0-9._-].
bool is_safe_file_name(const std::string& name);

}  // namespace tessera
