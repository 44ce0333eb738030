// The control segment: how a caller (a Tessera job) and a separate analysis
// process (tessera-analyze, perhaps in a container) hand work over on shared
// memory without POSIX semaphores, which do not cross container namespaces.
//
// A small file in the same Shared directory as the arrays, mmapped by both
// sides. It opens with a standard segment header page (magic TESSSEG1,
// element type "control", creator = the caller's rank 0), so `tessera shm
// list|gc` see and collect it like any other segment, then holds a
// ControlBlock: version words, the caller's rank count, each side's process
// identity per rank, one request, one reply, and per-rank "pseudo-semaphore"
// words. A word counts posts: the poster increments it and FUTEX_WAKEs
// (shared futex: the word is in a MAP_SHARED file mapping, so the kernel keys
// it by inode and offset and it wakes processes in other PID/IPC/user
// namespaces); the waiter FUTEX_WAITs on the value it last saw, with a
// timeout, and runs a liveness check every period. No spinning.
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

#include "tessera/storage/mapping.hpp"

namespace tessera::control {

inline constexpr int kMaxRanks = 256;
inline constexpr int kMaxTargets = 1024;
inline constexpr std::size_t kPathBytes = 512;
inline constexpr std::size_t kMessageBytes = 1024;
inline constexpr char kBlockMagic[8] = {'T', 'E', 'S', 'S', 'C', 'T', 'L', '1'};
inline constexpr std::uint32_t kVersion = 2;
inline constexpr const char* kElementType = "control";

enum class Side : std::uint32_t { caller = 0, analysis = 1 };
const char* to_string(Side side) noexcept;

enum class Analysis : std::uint32_t { none = 0, hitting_times = 1, shutdown = 2 };
enum class Solver : std::uint32_t { tessera = 1, belos = 2 };
// Belos' Ifpack2 Jacobi: Diagonal (the RowMatrix then omits Tpetra's column
// Map and Import) or Relaxation. 0 is what an older caller left reserved.
enum class Preconditioner : std::uint32_t { diagonal = 0, relaxation = 1 };
enum class Status : std::uint32_t { pending = 0, ok = 1, failed = 2 };

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

struct Request {
  std::uint32_t analysis;  // Analysis
  std::uint32_t solver;    // Solver
  std::uint32_t target_count;
  std::uint32_t connected;  // the caller knows every vertex reaches a target
  std::uint64_t vertices;
  double tolerance;
  std::int32_t max_iterations;
  std::uint32_t preconditioner;  // Preconditioner (belos only)
  // Metadata paths of Shared arrays: edge sources, destinations, weights
  // (empty: unweighted) and the result (float64 over the vertex ranges).
  char src[kPathBytes];
  char dst[kPathBytes];
  char weight[kPathBytes];
  char result[kPathBytes];
  std::uint64_t targets[kMaxTargets];
};

struct Reply {
  std::uint32_t status;          // Status
  std::uint32_t error_category;  // tessera::ErrorCategory when failed
  std::int32_t iterations;
  std::uint32_t converged;
  std::int32_t belos_solves;
  std::uint32_t failed_side;     // Side that wrote the failure
  std::uint32_t solve_status;    // linalg::SolveStatus
  std::int32_t rounds;           // inner solves (restarts from the answer + 1)
  double relative_residual;      // true ||b - A x|| / ||b|| of the answer
  double backward_error;         // ||b - A x|| / (||A|| ||x|| + ||b||)
  double solve_seconds;
  double setup_seconds;
  std::uint64_t unreachable;
  std::uint64_t targets;
  std::uint64_t matrix_extra_bytes;
  std::uint64_t anonymous_growth_bytes;  // the analysis job's heap growth over the request (no-copy evidence)
  // CLOCK_MONOTONIC nanoseconds (one clock per host, across namespaces).
  std::int64_t request_posted_ns;  // caller rank 0, just before posting the request
  std::int64_t analysis_woke_ns;   // analysis rank 0, just after its wait returned
  std::int64_t result_posted_ns;   // analysis rank 0, just before posting the reply
  char message[kMessageBytes];
  char solve_reason[kMessageBytes];  // why the solve stopped when it did not converge
};

struct ControlBlock {
  char magic[8];
  std::uint32_t version;
  std::uint32_t block_bytes;
  std::uint32_t max_ranks;
  std::uint32_t max_targets;
  std::uint32_t ranks;   // the caller's rank count = segments per array
  std::uint32_t failed;  // 1: a side gave up; reply.message says why
  PeerRecord peers[2][kMaxRanks];  // [Side][rank]
  Request request;
  Reply reply;
  std::uint32_t words[2][kMaxRanks];  // [Side of the waiter][rank]: posts counted
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
  // symlink) for `ranks` caller ranks; it is removed on abnormal exit
  // (exit-cleanup table) and by remove(). ConfigError for ranks outside
  // 1..kMaxRanks.
  static std::unique_ptr<ControlSegment> create(const std::string& path, int ranks, mode_t mode);
  // Any other process: opens and checks every field (FormatError naming the
  // file when it is not a control segment of this version).
  static std::unique_ptr<ControlSegment> open(const std::string& path);

  ControlSegment() = default;
  ControlSegment(const ControlSegment&) = delete;
  ControlSegment& operator=(const ControlSegment&) = delete;
  ~ControlSegment();

  const std::string& path() const noexcept { return path_; }
  int ranks() const noexcept { return ranks_; }
  ControlBlock& block() const noexcept { return *block_; }

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

  // A side gives up: writes the message into the reply, sets `failed` and
  // posts every rank of the other side and of its own, so nobody waits on.
  void fail(Side by, int category, const std::string& message) noexcept;
  bool failed() const noexcept;
  // The reply's message, validated (terminated, printable).
  std::string reply_message() const;

  // Validated copy of the request (FormatError naming what is wrong).
  Request read_request() const;

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

// The file name of a control segment for a base name ("<base>.control.seg").
std::string control_file_name(const std::string& base);

}  // namespace tessera::control
