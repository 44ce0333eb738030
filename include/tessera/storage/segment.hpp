// One rank's shared segment: a file (under /dev/shm or any directory) that
// starts with a fixed header page and then holds the elements. The header lets
// `tessera shm gc` find the creator without the metadata file, and lets an
// attaching process check the bytes before it trusts them.
#pragma once
#include <cstdint>
#include <sys/types.h>

#include <string>
#include <utility>

#include "tessera/storage/mapping.hpp"

namespace tessera {

// Who created a file: enough to tell later whether that process still lives,
// even if its pid was reused (start time from /proc/<pid>/stat), and even
// from another PID namespace (a container) or after a reboot: a pid means
// nothing outside its namespace, so the namespace and the kernel's boot id
// are recorded too.
//
// The rule (`tessera shm list|gc`): a creator is `dead` only when that is
// proven, `unknown` whenever it cannot be seen, and gc removes dead ones only.
//  - Same boot id: the same kernel, whatever the host names say (containers
//    have their own). Otherwise a different host name is another machine
//    (unknown); the same host name with another boot id is a former boot of
//    this machine: dead when the file lies on a local file system and is
//    older than this boot (checked by the registry), else unknown.
//  - Same PID namespace: kill(pid, 0) and the start time decide.
//  - Another PID namespace: its processes are looked up through /proc (we see
//    a namespace's processes when it is ours or below ours). Found with the
//    same pid (NSpid) and start time: alive. Dead when the scan saw every
//    process and either the namespace still has processes but not this one,
//    or we are in the initial PID namespace and the namespace has none left.
//    Anything else (a sibling container, an unreadable process): unknown.
//  - No namespace recorded (files written before it was): alive when the
//    pid lives here with the same start time, else unknown, never dead:
//    remove such files by hand once no job uses them.
struct ProcessIdentity {
  std::string host;
  std::int32_t pid = 0;
  std::uint64_t start_time = 0;
  std::uint64_t pid_namespace = 0;  // inode of /proc/self/ns/pid; 0 = not recorded
  std::string boot_id;              // /proc/sys/kernel/random/boot_id; empty = not recorded

  static ProcessIdentity self();
  enum class Liveness { alive, dead, unknown };
  struct Verdict {
    Liveness liveness = Liveness::unknown;
    std::string reason;  // why dead or unknown, for `shm list`
  };
  Verdict check() const;
  Liveness liveness() const { return check().liveness; }
};

// This process's view: host name, boot id ("" when unreadable), PID
// namespace inode (0 when unreadable).
std::string current_host_name();
std::string current_boot_id();
std::uint64_t current_pid_namespace();

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
  // Appended in place of zero bytes of the header page: files written before
  // hold 0 and "" here and read as "not recorded" (same format version).
  std::uint64_t creator_pid_namespace;
  char creator_boot_id[40];
};
static_assert(sizeof(SegmentHeader) <= 4096);

// A header naming this process as the creator (pid, start time, PID
// namespace, boot id, host) of the array `name` of `element_type`; the
// caller fills in the sizes and where the segment sits.
SegmentHeader new_segment_header(const std::string& name, const std::string& element_type);

// Bytes reserved for the header: one page of the file system holding `dir`
// (4 KiB on tmpfs, the huge-page size on hugetlbfs, so data stays mappable).
std::uint32_t segment_header_bytes(const std::string& dir);

// Reads and checks a segment header from an open file; throws FormatError
// naming `path` when it is not a Tessera segment.
SegmentHeader read_segment_header(int fd, const std::string& path);

// A segment file that appears at `path` only once it is complete: made
// without a name (O_TMPFILE) and linked into place by publish(), so a
// process killed while writing its header, sizing it or reserving its
// blocks leaves nothing behind (a file with no header yet is one `tessera
// shm gc` could not attribute). Where the file system has no unnamed files,
// it is made under a temporary name beside `path` ending in ".seg", which the
// destructor removes.
class NewSegmentFile {
 public:
  NewSegmentFile(std::string path, mode_t mode);  // SystemError naming `path`
  ~NewSegmentFile();
  NewSegmentFile(const NewSegmentFile&) = delete;
  NewSegmentFile& operator=(const NewSegmentFile&) = delete;
  int fd() const noexcept { return fd_.get(); }
  // Writes `header`, sizes the file to `bytes` and reserves them (before
  // publish): a full file system is "PATH needs N MiB in DIR, M MiB free"
  // whichever step finds it.
  void fill(const SegmentHeader& header, std::uint64_t bytes, const std::string& dir);
  // Links the file at `path`, never replacing one (SystemError, EEXIST),
  // and from then fd() is the file opened by that name: map it after this
  // call, so /proc/PID/maps names `path`. With `remove_at_exit`, registers
  // `path` with exit_cleanup first and returns the slot (-1 otherwise).
  int publish(bool remove_at_exit);
  // The open file, for a caller that keeps it (after publish()).
  FileDescriptor take() noexcept { return std::move(fd_); }

 private:
  std::string path_, temporary_;  // temporary_: empty when unnamed
  int temporary_slot_ = -1;
  FileDescriptor fd_;
};

// True for names that stay inside their directory: no '/', not "." or "..",
// only [A-Za-z0-9._-].
bool is_safe_file_name(const std::string& name);

}  // namespace tessera
