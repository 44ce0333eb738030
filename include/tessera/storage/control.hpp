// The control segment: how a caller (a Tessera job) and a separate analysis
// process (tessera-analyze, perhaps in a container) hand work over on shared
// memory without POSIX semaphores, which do not cross container namespaces.
// This layer owns the mechanism only; what is asked and answered is the
// upper layer's (analyze/protocol.hpp), kept in an opaque payload area.
//
// A small file in the same Shared directory as the arrays, mmapped by both
// sides. It opens with a standard segment header page (magic TESSSEG1,
// element type "control", creator = the caller's rank 0), so `tessera shm
// list|gc` see and collect it like any other segment, then holds a
// ControlBlock: version words (this layout's and the payload's schema), the
// caller's rank count, the failure word and message, each side's process
// identity per rank, per-rank "pseudo-semaphore" words and the payload. A
// word counts posts: the poster increments it and FUTEX_WAKEs (shared futex:
// the word is in a MAP_SHARED file mapping, so the kernel keys it by inode
// and offset and it wakes processes in other PID/IPC/user namespaces); the
// waiter FUTEX_WAITs on the value it last saw, with a timeout, and runs a
// liveness check every period. No spinning.
//
// Liveness: each attached rank holds an open-file-description lock (OFD,
// F_OFD_SETLK) on one byte of the file past its end: caller rank r at
// kLockBase + r, analysis rank r at kLockBase + kMaxRanks + r. The kernel
// drops it when the process dies however it dies (SIGKILL included), and the
// lock lives on the inode, so a peer in another PID namespace (bwrap, a
// container) is still checked exactly: an attached rank whose byte nobody
// holds is dead. The recorded identity (host, pid, start time, PID namespace
// inode, boot id) names the peer in messages and, in the same PID namespace,
// is a second check through /proc.
#pragma once
#include <sys/types.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <type_traits>

#include "tessera/storage/mapping.hpp"

namespace tessera::control {

inline constexpr int kMaxRanks = 256;
inline constexpr std::size_t kMessageBytes = 1024;
// The upper layer's request and reply live here; its types must fit.
inline constexpr std::size_t kPayloadBytes = 16384;
inline constexpr std::size_t kPayloadAlignment = 64;
inline constexpr char kBlockMagic[8] = {'T', 'E', 'S', 'S', 'C', 'T', 'L', '1'};
inline constexpr std::uint32_t kVersion = 3;
inline constexpr const char* kElementType = "control";

enum class Side : std::uint32_t { caller = 0, analysis = 1 };
const char* to_string(Side side) noexcept;

// One process as recorded in the segment. attached != 0 once it took its lock.
struct PeerRecord {
  char host[64];
  char boot_id[40];
  char program[32];
  std::int32_t pid;
  std::uint32_t attached;
  std::uint64_t start_time;     // /proc/<pid>/stat field 22 (clock ticks since boot)
  std::uint64_t pid_namespace;  // inode of /proc/self/ns/pid
};

struct ControlBlock {
  char magic[8];
  std::uint32_t version;        // kVersion: this layout
  std::uint32_t block_bytes;
  std::uint32_t max_ranks;
  std::uint32_t payload_bytes;  // kPayloadBytes
  std::uint32_t schema;         // the payload's schema version, set and checked by the layer that reads it
  std::uint32_t ranks;          // the caller's rank count = segments per array
  std::uint32_t failed;         // 1: a side gave up; message says why
  std::uint32_t failed_side;    // Side that wrote the failure
  std::uint32_t error_category; // tessera::ErrorCategory of the failure
  std::uint32_t failing;        // claimed by the one process that writes the failure
  char message[kMessageBytes];
  PeerRecord peers[2][kMaxRanks];     // [Side][rank]
  std::uint32_t words[2][kMaxRanks];  // [Side of the waiter][rank]: posts counted
  alignas(kPayloadAlignment) unsigned char payload[kPayloadBytes];
};

// A live process identity for this process (host, pid, start time, PID
// namespace inode, boot id, program name).
PeerRecord self_record(const std::string& program);
// "tessera-analyze pid 123 on host h (PID namespace 4026531836)".
std::string describe(const PeerRecord& p);

// CLOCK_MONOTONIC in nanoseconds.
std::int64_t monotonic_ns() noexcept;

class ControlSegment {
 public:
  // The caller's rank 0: creates `path` new (O_EXCL, never follows a
  // symlink) for `ranks` caller ranks, its payload tagged with `schema`; it
  // is removed on abnormal exit (exit-cleanup table) and by remove().
  // ConfigError for ranks outside 1..kMaxRanks. `prepare` (when given)
  // fills the payload before the file appears under `path`, so an opener
  // never sees the payload's initial contents half-written.
  static std::unique_ptr<ControlSegment> create(const std::string& path, int ranks, mode_t mode, std::uint32_t schema,
                                                const std::function<void(ControlSegment&)>& prepare = {});
  // Any other process: opens and checks every field (FormatError naming the
  // file when it is not a control segment of this version, or its payload
  // is not of `schema`).
  static std::unique_ptr<ControlSegment> open(const std::string& path, std::uint32_t schema);

  ControlSegment() = default;
  ControlSegment(const ControlSegment&) = delete;
  ControlSegment& operator=(const ControlSegment&) = delete;
  ~ControlSegment();

  const std::string& path() const noexcept { return path_; }
  int ranks() const noexcept { return ranks_; }
  ControlBlock& block() const noexcept { return *block_; }

  // The payload area as the upper layer's type: trivially copyable, no
  // larger and no more aligned than the area (checked when compiled).
  template <class T>
  T& payload_as() const noexcept {
    static_assert(std::is_trivially_copyable_v<T>, "a control payload is plain bytes shared between processes");
    static_assert(sizeof(T) <= kPayloadBytes, "the payload type does not fit the control segment's payload area");
    static_assert(alignof(T) <= kPayloadAlignment, "the payload type needs more alignment than the payload area");
    return *reinterpret_cast<T*>(block_->payload);
  }

  // Records this process as `side` rank `rank` and takes its liveness lock.
  void attach(Side side, int rank, const std::string& program);
  // Copies of the peer records (validated: strings terminated).
  PeerRecord peer(Side side, int rank) const;
  enum class Liveness { not_attached, alive, dead };
  // Whether `side` rank `rank` is attached and still holds its lock.
  Liveness liveness(Side side, int rank) const;
  // The first dead rank of `side` among 0..ranks-1, or -1.
  int first_dead(Side side) const;

  // The pseudo-semaphore of `side` rank `rank`.
  std::uint32_t load(Side waiter, int rank) const noexcept;
  void post(Side waiter, int rank) noexcept;
  // Blocks until the word of (waiter, rank) differs from `seen`; every
  // `period_seconds` calls `check` (which throws to give up). Returns the new value.
  std::uint32_t wait(Side waiter, int rank, std::uint32_t seen, double period_seconds,
                     const std::function<void()>& check) const;

  // A side gives up: writes the message and category, sets `failed` and
  // posts every rank of the other side and of its own, so nobody waits on.
  // The first failure wins; several processes may fail at once (the ranks of
  // one node), and none posts before the winner's message is complete.
  void fail(Side by, int category, const std::string& message) noexcept;
  bool failed() const noexcept;
  // The failure's message, validated (terminated, printable), its side and category.
  std::string message() const;
  Side failed_side() const noexcept;
  int error_category() const noexcept;

  // Unlinks the file (the creator at the end; the analysis when the caller died).
  void remove() noexcept;

 private:
  std::string path_;
  FileDescriptor fd_;
  Mapping mapping_;
  ControlBlock* block_ = nullptr;
  int ranks_ = 0;
  int cleanup_slot_ = -1;
  bool owner_ = false;
};

// A string field the other side wrote, up to its terminator, which must be
// there, and printable (FormatError naming `what` and `path` otherwise).
std::string checked_string(const char* field, std::size_t bytes, const std::string& what, const std::string& path);

// The file name of a control segment for a base name ("<base>.control.seg").
std::string control_file_name(const std::string& base);

}  // namespace tessera::control
