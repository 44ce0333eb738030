// The control segment (see include/tessera/storage/control.hpp): shared futex
// words, OFD-lock liveness, the failure message; the payload is the upper layer's.
#include "tessera/storage/control.hpp"

#include <fcntl.h>
#include <sched.h>
#include <linux/futex.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <cctype>
#include <cerrno>
#include <climits>
#include <cstring>
#include <ctime>

#include "tessera/runtime/error.hpp"
#include "tessera/runtime/exit_cleanup.hpp"
#include "tessera/storage/metadata.hpp"
#include "tessera/storage/segment.hpp"
#include "tessera/storage/storage.hpp"

namespace tessera::control {

namespace {
constexpr std::uint32_t kHeaderBytes = 4096;
constexpr off_t kLockBase = off_t{1} << 40;  // past any control file's end

off_t lock_offset(Side side, int rank) {
  return kLockBase + static_cast<off_t>(side == Side::analysis ? kMaxRanks : 0) + rank;
}

std::uint32_t* word_of(ControlBlock& b, Side waiter, int rank) {
  return &b.words[static_cast<std::uint32_t>(waiter)][rank];
}

template <std::size_t N>
void copy_string(char (&out)[N], const std::string& s) {
  std::memset(out, 0, N);
  std::memcpy(out, s.data(), std::min(s.size(), N - 1));
}

long futex(std::uint32_t* addr, int op, std::uint32_t value, const timespec* timeout) {
  return ::syscall(SYS_futex, addr, op, value, timeout, nullptr, 0);
}
}  // namespace

std::string checked_string(const char* field, std::size_t bytes, const std::string& what, const std::string& path) {
  const char* end = static_cast<const char*>(std::memchr(field, '\0', bytes));
  if (!end) throw FormatError(path + ": " + what + " is not terminated (corrupt control segment)");
  std::string s(field, end);
  for (char c : s)
    if (!std::isprint(static_cast<unsigned char>(c)) && c != '\n' && c != '\t')
      throw FormatError(path + ": " + what + " holds non-printable bytes (corrupt control segment)");
  return s;
}

const char* to_string(Side side) noexcept { return side == Side::caller ? "caller" : "analysis"; }

std::int64_t monotonic_ns() noexcept {
  timespec t{};
  ::clock_gettime(CLOCK_MONOTONIC, &t);
  return static_cast<std::int64_t>(t.tv_sec) * 1000000000 + t.tv_nsec;
}

PeerRecord self_record(const std::string& program) {
  PeerRecord p{};
  auto id = ProcessIdentity::self();
  copy_string(p.host, id.host);
  copy_string(p.boot_id, id.boot_id);
  copy_string(p.program, program);
  p.pid = id.pid;
  p.start_time = id.start_time;
  p.pid_namespace = id.pid_namespace;
  return p;
}

std::string describe(const PeerRecord& p) {
  return std::string(p.program[0] ? p.program : "process") + " pid " + std::to_string(p.pid) + " on host " + p.host +
         " (PID namespace " + std::to_string(p.pid_namespace) + ")";
}

std::string control_file_name(const std::string& base) { return base + ".control.seg"; }

std::unique_ptr<ControlSegment> ControlSegment::create(const std::string& path, int ranks, mode_t mode,
                                                       std::uint32_t schema,
                                                       const std::function<void(ControlSegment&)>& prepare) {
  if (ranks < 1 || ranks > kMaxRanks)
    throw ConfigError("an out-of-process analysis supports 1 to " + std::to_string(kMaxRanks) + " ranks, not " +
                      std::to_string(ranks));
  auto c = std::make_unique<ControlSegment>();
  c->path_ = path;
  c->ranks_ = ranks;
  // Linked into place only when complete, so an analysis waiting for `path`
  // never opens a half-written file, and a SIGKILL here leaves nothing.
  NewSegmentFile file(path, mode);
  ::fchmod(file.fd(), mode);
  const std::uint64_t bytes = kHeaderBytes + sizeof(ControlBlock);
  // The standard segment header, so `tessera shm gc` knows the file and its
  // creator once it has its name.
  auto slash = path.rfind('/');
  SegmentHeader h = new_segment_header(slash == std::string::npos ? path : path.substr(slash + 1), kElementType);
  h.header_bytes = kHeaderBytes;
  h.element_size = 1;
  h.count = sizeof(ControlBlock);
  file.fill(h, bytes, slash == std::string::npos ? "." : path.substr(0, slash));
  c->mapping_ = Mapping::file(file.fd(), bytes, true, path);  // filled before it has a name
  c->block_ = reinterpret_cast<ControlBlock*>(c->mapping_.data() + kHeaderBytes);
  ControlBlock& b = *c->block_;
  b.version = kVersion;
  b.block_bytes = sizeof(ControlBlock);
  b.max_ranks = kMaxRanks;
  b.payload_bytes = kPayloadBytes;
  b.schema = schema;
  b.ranks = static_cast<std::uint32_t>(ranks);
  if (prepare) prepare(*c);
  // The magic last: an opener never sees a half-initialised block as valid.
  std::atomic_thread_fence(std::memory_order_release);
  std::memcpy(b.magic, kBlockMagic, sizeof(b.magic));
  c->cleanup_slot_ = file.publish(true);
  c->fd_ = file.take();
  c->mapping_ = Mapping::file(c->fd_.get(), bytes, true, path);  // by its name now (see publish)
  c->block_ = reinterpret_cast<ControlBlock*>(c->mapping_.data() + kHeaderBytes);
  c->owner_ = true;
  return c;
}

std::unique_ptr<ControlSegment> ControlSegment::open(const std::string& path, std::uint32_t schema) {
  auto c = std::make_unique<ControlSegment>();
  c->path_ = path;
  int fd = ::open(path.c_str(), O_RDWR | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
  if (fd < 0) {
    int err = errno;
    if (err == ENOENT) throw FormatError("control segment " + path + " does not exist (has its caller ended?)");
    throw SystemError("cannot open control segment " + path, err);
  }
  c->fd_ = FileDescriptor(fd);
  struct stat st {};
  if (::fstat(fd, &st) != 0) throw SystemError("cannot stat control segment " + path, errno);
  if (!S_ISREG(st.st_mode)) throw FormatError("control segment " + path + " is not a regular file");
  SegmentHeader h = read_segment_header(fd, path);
  const std::uint64_t bytes = kHeaderBytes + sizeof(ControlBlock);
  if (std::string(h.element_type) != kElementType || h.header_bytes != kHeaderBytes || h.count != sizeof(ControlBlock) ||
      static_cast<std::uint64_t>(st.st_size) != bytes)
    throw FormatError(path + " is not a Tessera control segment of this version (element type '" +
                      std::string(h.element_type) + "', " + std::to_string(st.st_size) + " bytes, expected '" +
                      kElementType + "', " + std::to_string(bytes) + ")");
  c->mapping_ = Mapping::file(fd, bytes, true, path);
  c->block_ = reinterpret_cast<ControlBlock*>(c->mapping_.data() + kHeaderBytes);
  const ControlBlock& b = *c->block_;
  if (std::memcmp(b.magic, kBlockMagic, sizeof(b.magic)) != 0)
    throw FormatError(path + ": control block not initialised (bad magic; is its creator still starting, or dead?)");
  std::atomic_thread_fence(std::memory_order_acquire);
  if (b.version != kVersion || b.block_bytes != sizeof(ControlBlock) || b.max_ranks != kMaxRanks ||
      b.payload_bytes != kPayloadBytes)
    throw FormatError(path + ": control block version " + std::to_string(b.version) + " (" +
                      std::to_string(b.block_bytes) + " bytes) is not this program's version " +
                      std::to_string(kVersion) + " (" + std::to_string(sizeof(ControlBlock)) + " bytes)");
  if (b.schema != schema)
    throw FormatError(path + ": its request and reply follow schema " + std::to_string(b.schema) +
                      ", this program speaks schema " + std::to_string(schema) +
                      " (caller and analysis come from different Tessera versions: use one build for both)");
  const std::uint32_t ranks = b.ranks;
  if (ranks < 1 || ranks > static_cast<std::uint32_t>(kMaxRanks))
    throw FormatError(path + ": rank count " + std::to_string(ranks) + " outside 1.." + std::to_string(kMaxRanks));
  c->ranks_ = static_cast<int>(ranks);
  return c;
}

ControlSegment::~ControlSegment() {
  if (owner_) remove();
}

void ControlSegment::remove() noexcept {
  if (!path_.empty()) ::unlink(path_.c_str());
  exit_cleanup::remove(cleanup_slot_);
  cleanup_slot_ = -1;
  owner_ = false;
}

void ControlSegment::attach(Side side, int rank, const std::string& program) {
  if (rank < 0 || rank >= kMaxRanks)
    throw ConfigError("rank " + std::to_string(rank) + " cannot attach to control segment " + path_ + " (at most " +
                      std::to_string(kMaxRanks) + " ranks)");
  struct flock lock {};
  lock.l_type = F_WRLCK;
  lock.l_whence = SEEK_SET;
  lock.l_start = lock_offset(side, rank);
  lock.l_len = 1;
  if (::fcntl(fd_.get(), F_OFD_SETLK, &lock) != 0) {
    int err = errno;
    if (err == EAGAIN || err == EACCES)
      throw ConfigError("another live " + std::string(to_string(side)) + " process is already attached as rank " +
                        std::to_string(rank) + " to " + path_);
    throw SystemError("cannot take the liveness lock in control segment " + path_, err);
  }
  PeerRecord& p = block_->peers[static_cast<std::uint32_t>(side)][rank];
  PeerRecord me = self_record(program);
  me.attached = 0;
  std::memcpy(&p, &me, sizeof(p));
  std::atomic_ref<std::uint32_t>(p.attached).store(1, std::memory_order_release);
}

PeerRecord ControlSegment::peer(Side side, int rank) const {
  PeerRecord p{};
  std::memcpy(&p, &block_->peers[static_cast<std::uint32_t>(side)][rank], sizeof(p));
  p.host[sizeof(p.host) - 1] = '\0';
  p.boot_id[sizeof(p.boot_id) - 1] = '\0';
  p.program[sizeof(p.program) - 1] = '\0';
  return p;
}

ControlSegment::Liveness ControlSegment::liveness(Side side, int rank) const {
  auto& attached = block_->peers[static_cast<std::uint32_t>(side)][rank].attached;
  if (std::atomic_ref<std::uint32_t>(attached).load(std::memory_order_acquire) == 0) return Liveness::not_attached;
  struct flock lock {};
  lock.l_type = F_WRLCK;
  lock.l_whence = SEEK_SET;
  lock.l_start = lock_offset(side, rank);
  lock.l_len = 1;
  if (::fcntl(fd_.get(), F_OFD_GETLK, &lock) != 0) {
    // No OFD locks on this file system: fall back to the pid, which only
    // answers in the same PID namespace on the same boot.
    PeerRecord p = peer(side, rank);
    PeerRecord me = self_record("");
    if (p.pid_namespace != me.pid_namespace || std::strcmp(p.boot_id, me.boot_id) != 0) return Liveness::alive;
    ProcessIdentity id;
    id.host = p.host;
    id.pid = p.pid;
    id.start_time = p.start_time;
    // Same namespace and boot (checked above): recorded, so a vanished pid is
    // provably dead (without them the identity counts as legacy: never dead).
    id.pid_namespace = p.pid_namespace;
    id.boot_id = p.boot_id;
    return id.liveness() == ProcessIdentity::Liveness::dead ? Liveness::dead : Liveness::alive;
  }
  return lock.l_type == F_UNLCK ? Liveness::dead : Liveness::alive;
}

int ControlSegment::first_dead(Side side) const {
  for (int r = 0; r < ranks_; ++r)
    if (liveness(side, r) == Liveness::dead) return r;
  return -1;
}

std::uint32_t ControlSegment::load(Side waiter, int rank) const noexcept {
  return std::atomic_ref<std::uint32_t>(*word_of(*block_, waiter, rank)).load(std::memory_order_acquire);
}

void ControlSegment::post(Side waiter, int rank) noexcept {
  std::uint32_t* w = word_of(*block_, waiter, rank);
  std::atomic_ref<std::uint32_t>(*w).fetch_add(1, std::memory_order_acq_rel);
  // Shared futex (no FUTEX_PRIVATE_FLAG): the waiter is another process.
  futex(w, FUTEX_WAKE, INT_MAX, nullptr);
}

std::uint32_t ControlSegment::wait(Side waiter, int rank, std::uint32_t seen, double period_seconds,
                                   const std::function<void()>& check) const {
  std::uint32_t* w = word_of(*block_, waiter, rank);
  const auto period_ns = static_cast<std::int64_t>(std::max(period_seconds, 1e-3) * 1e9);
  for (;;) {
    std::uint32_t now = std::atomic_ref<std::uint32_t>(*w).load(std::memory_order_acquire);
    if (now != seen) return now;
    timespec timeout{static_cast<time_t>(period_ns / 1000000000), static_cast<long>(period_ns % 1000000000)};
    long rc = futex(w, FUTEX_WAIT, seen, &timeout);
    if (rc != 0 && errno == ETIMEDOUT) check();
    else if (rc != 0 && errno != EAGAIN && errno != EINTR)
      throw SystemError("futex wait on control segment " + path_ + " failed", errno);
  }
}

void ControlSegment::fail(Side by, int category, const std::string& message) noexcept {
  ControlBlock& b = *block_;
  std::uint32_t unclaimed = 0;
  if (std::atomic_ref<std::uint32_t>(b.failing).compare_exchange_strong(unclaimed, 1, std::memory_order_acq_rel)) {
    copy_string(b.message, message);
    b.error_category = static_cast<std::uint32_t>(category);
    b.failed_side = static_cast<std::uint32_t>(by);
    std::atomic_ref<std::uint32_t>(b.failed).store(1, std::memory_order_release);
  } else {
    // Another process is writing its failure: a waiter woken before it is
    // complete would take the post for an answer. Bounded: that writer may die.
    const std::int64_t until = monotonic_ns() + 1000000000;
    while (!failed() && monotonic_ns() < until) ::sched_yield();
  }
  for (int r = 0; r < ranks_; ++r) {
    post(Side::caller, r);
    post(Side::analysis, r);
  }
}

bool ControlSegment::failed() const noexcept {
  return std::atomic_ref<std::uint32_t>(block_->failed).load(std::memory_order_acquire) != 0;
}

std::string ControlSegment::message() const {
  char copy[kMessageBytes];
  std::memcpy(copy, block_->message, sizeof(copy));
  copy[sizeof(copy) - 1] = '\0';
  return checked_string(copy, sizeof(copy), "failure message", path_);
}

Side ControlSegment::failed_side() const noexcept {
  return block_->failed_side == static_cast<std::uint32_t>(Side::analysis) ? Side::analysis : Side::caller;
}

int ControlSegment::error_category() const noexcept { return static_cast<int>(block_->error_category); }

}  // namespace tessera::control
