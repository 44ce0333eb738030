// The metadata file of a shared array: a small JSON document beside the
// segments, naming each one (relative to the document's own directory) with
// its element range, plus element type, global length, distribution and
// creator. It is the only thing another process needs to attach.
#pragma once
#include <sys/types.h>

#include <cstdint>
#include <string>
#include <vector>

#include "tessera/storage/element_type.hpp"
#include "tessera/storage/segment.hpp"

namespace tessera {

struct SegmentRecord {
  int rank = 0;
  std::string file;          // a plain file name in the metadata's directory
  std::uint64_t begin = 0;   // first global index
  std::uint64_t count = 0;   // elements
  std::uint64_t bytes = 0;   // file size: header_bytes + count * element size
  ProcessIdentity creator;
};

struct SharedArrayMetadata {
  static constexpr const char* kFormat = "tessera.shared-array";
  static constexpr int kVersion = 1;

  std::string name;
  ElementType element;
  std::uint64_t length = 0;
  std::string distribution = "block";  // "block" or "weighted_block"
  std::vector<std::uint64_t> offsets;  // ranks + 1 entries, offsets[r] = first index of rank r
  std::uint32_t header_bytes = 4096;
  std::vector<SegmentRecord> segments;
  std::string job_id;
  ProcessIdentity creator;  // the rank that wrote this file
  bool persist = false;
  std::string created;      // UTC, ISO 8601

  std::string to_json() const;
  // Parses and checks every field and their agreement; throws FormatError
  // naming `path` and the field.
  static SharedArrayMetadata parse(const std::string& text, const std::string& path);
  static SharedArrayMetadata read(const std::string& path);
  // Writes atomically (temporary file, then rename) with the given mode and,
  // unless (gid_t)-1, group.
  void write(const std::string& path, mode_t mode, gid_t group = static_cast<gid_t>(-1)) const;
};

std::string utc_now_iso8601();

// The whole of a small regular file: refuses FIFOs, devices and directories
// (opened without blocking) and files over `max_bytes`, naming `what`.
inline constexpr std::size_t kMaxMetadataBytes = 16u << 20;
std::string read_small_regular_file(const std::string& path, const std::string& what,
                                    std::size_t max_bytes = kMaxMetadataBytes);

// Creates `path` new for writing: never follows a symlink, never truncates
// an existing file (O_CREAT | O_EXCL | O_NOFOLLOW). Returns the descriptor.
int create_exclusive(const std::string& path, mode_t mode);

// A temporary name beside `path` no other process or call uses.
std::string unique_temporary_name(const std::string& path);

}  // namespace tessera
