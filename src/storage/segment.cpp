#include "tessera/storage/segment.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <signal.h>
#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <memory>
#include <sstream>

#include "tessera/runtime/error.hpp"
#include "tessera/runtime/exit_cleanup.hpp"
#include "tessera/storage/metadata.hpp"
#include "tessera/storage/storage.hpp"

namespace tessera {

namespace {
struct ProcStat {
  char state = '?';
  std::uint64_t start_time = 0;
};

// State (field 3) and start time (field 22) of /proc/<pid>/stat; state '?'
// when the process does not exist.
ProcStat read_proc_stat(int pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  ProcStat st;
  if (!std::getline(in, line)) return st;
  // The command name (field 2) may contain spaces; fields resume after ')'.
  auto close = line.rfind(')');
  if (close == std::string::npos) return st;
  std::istringstream rest(line.substr(close + 2));
  std::string field;
  rest >> st.state;
  // After the state (field 3), start time (field 22) is 19 fields on.
  for (int i = 0; i < 18 && rest >> field; ++i) {
  }
  rest >> st.start_time;
  return st;
}

std::string hostname() {
  char name[256] = {};
  if (gethostname(name, sizeof(name) - 1) != 0) return "unknown";
  return name;
}

// Inode of a /proc/<pid>/ns/pid link ("pid:[4026531836]"), 0 when unreadable.
std::uint64_t pid_namespace_of(const std::string& proc_entry) {
  char target[64] = {};
  ssize_t n = ::readlink((proc_entry + "/ns/pid").c_str(), target, sizeof(target) - 1);
  if (n <= 0) return 0;
  std::string t(target, static_cast<std::size_t>(n));
  auto open = t.find('[');
  return open == std::string::npos ? 0 : std::strtoull(t.c_str() + open + 1, nullptr, 10);
}

// True when /proc is the proc of our own PID namespace (after `unshare --pid
// --fork` without --mount-proc it is the parent's, and /proc/<pid> there
// names another process than our pid <pid>).
bool proc_is_ours() {
  char target[32] = {};
  ssize_t n = ::readlink("/proc/self", target, sizeof(target) - 1);
  return n > 0 && std::strtol(target, nullptr, 10) == getpid();
}

// The pid a process has inside its own (innermost) namespace: the last
// field of NSpid in /proc/<pid>/status; 0 when unreadable.
long innermost_pid(const std::string& proc_entry) {
  std::ifstream in(proc_entry + "/status");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("NSpid:", 0) != 0) continue;
    std::istringstream fields(line.substr(6));
    long pid = 0, last = 0;
    while (fields >> pid) last = pid;
    return last;
  }
  return 0;
}

// The kernel's first PID namespace (PROC_PID_INIT_INO): from it every
// process of the machine is visible.
constexpr std::uint64_t kInitialPidNamespace = 0xEFFFFFFCu;

using Verdict = ProcessIdentity::Verdict;
using Liveness = ProcessIdentity::Liveness;

// The creator lives in our PID namespace (or we cannot tell: older files).
Verdict check_here(const ProcessIdentity& id, bool namespace_recorded) {
  auto unknown = [&](std::string why) {
    return Verdict{Liveness::unknown, namespace_recorded ? why
                                                         : why + "; no PID namespace recorded (file from an older "
                                                                 "Tessera): remove it by hand once no job uses it"};
  };
  if (id.pid <= 0) return namespace_recorded ? Verdict{Liveness::dead, "no creator pid"} : unknown("no creator pid");
  bool exists = ::kill(id.pid, 0) == 0 || errno == EPERM;
  if (!exists) {
    if (namespace_recorded) return {Liveness::dead, "no process " + std::to_string(id.pid)};
    return unknown("pid " + std::to_string(id.pid) + " does not exist here (it may be in another PID namespace)");
  }
  if (!proc_is_ours()) return unknown("/proc is not this PID namespace's, cannot check the start time");
  ProcStat now = read_proc_stat(id.pid);
  if (now.state == '?') return unknown("cannot read /proc/" + std::to_string(id.pid) + "/stat");
  // A killed process stays a zombie until reaped (in a container, perhaps
  // never) and still answers kill(): it is dead all the same. A reaped and
  // reused pid has another start time.
  bool same = now.state != 'Z' && now.state != 'X' && (id.start_time == 0 || now.start_time == id.start_time);
  if (same) return {Liveness::alive, ""};
  if (namespace_recorded)
    return {Liveness::dead, now.state == 'Z' || now.state == 'X' ? "zombie" : "pid reused by a newer process"};
  return unknown("pid " + std::to_string(id.pid) + " here is another process (the creator may be in another PID namespace)");
}

// The creator lives in another PID namespace: look for it through /proc.
Verdict check_elsewhere(const ProcessIdentity& id, std::uint64_t here) {
  const std::string ns = "PID namespace pid:[" + std::to_string(id.pid_namespace) + "]";
  if (!proc_is_ours()) return {Liveness::unknown, "another " + ns + " (and /proc is not ours)"};
  std::unique_ptr<DIR, int (*)(DIR*)> proc(::opendir("/proc"), ::closedir);
  if (!proc) return {Liveness::unknown, "another " + ns + " (cannot list /proc)"};
  // Only a process with the creator's innermost pid and start time can be
  // it: one of those whose namespace we may not read leaves the answer open.
  bool undecided = false;
  std::size_t members = 0;  // processes seen in the creator's namespace
  while (dirent* e = ::readdir(proc.get())) {
    std::string pid = e->d_name;
    if (pid.empty() || pid.find_first_not_of("0123456789") != std::string::npos) continue;
    std::string entry = "/proc/" + pid;
    std::uint64_t inode = pid_namespace_of(entry);
    bool candidate = false;
    if (inode == 0 || inode == id.pid_namespace) {
      ProcStat st = read_proc_stat(std::atoi(pid.c_str()));
      candidate = st.state != '?' && st.state != 'Z' && st.state != 'X' &&
                  (id.start_time == 0 || st.start_time == id.start_time) && innermost_pid(entry) == id.pid;
    }
    if (inode == 0) {
      undecided = undecided || candidate;
      continue;
    }
    if (inode != id.pid_namespace) continue;
    ++members;
    if (candidate) return {Liveness::alive, ""};
  }
  bool complete = !undecided;
  if (!complete) return {Liveness::unknown, "another " + ns + " (some processes cannot be inspected)"};
  if (members > 0) return {Liveness::dead, "no process " + std::to_string(id.pid) + " left in its " + ns};
  if (here == kInitialPidNamespace) return {Liveness::dead, "its " + ns + " no longer exists"};
  return {Liveness::unknown, "another " + ns + ", not visible from this one"};
}
}  // namespace

std::string current_host_name() { return hostname(); }

std::string current_boot_id() {
  std::ifstream in("/proc/sys/kernel/random/boot_id");
  std::string id;
  in >> id;
  return id;
}

std::uint64_t current_pid_namespace() { return pid_namespace_of("/proc/self"); }

ProcessIdentity ProcessIdentity::self() {
  ProcessIdentity id;
  id.host = hostname();
  id.pid = static_cast<std::int32_t>(getpid());
  id.start_time = read_proc_stat(id.pid).start_time;
  id.pid_namespace = current_pid_namespace();
  id.boot_id = current_boot_id();
  return id;
}

ProcessIdentity::Verdict ProcessIdentity::check() const {
  std::string boot_here = current_boot_id();
  if (!boot_id.empty() && !boot_here.empty()) {
    // The same kernel whatever the host names (a container has its own).
    if (boot_id != boot_here)
      return {Liveness::unknown, host == hostname() ? "created under another boot (" + boot_id + ")"
                                                    : "another host (" + host + ")"};
  } else if (host != hostname()) {
    return {Liveness::unknown, "another host (" + host + ")"};
  }
  if (pid_namespace == 0) return check_here(*this, false);
  std::uint64_t here = current_pid_namespace();
  if (here == pid_namespace) return check_here(*this, true);
  return check_elsewhere(*this, here);
}

std::uint32_t segment_header_bytes(const std::string& dir) {
  struct statvfs st {};
  std::uint32_t page = 4096;
  if (::statvfs(dir.c_str(), &st) == 0 && st.f_bsize > page && st.f_bsize <= (1u << 30))
    page = static_cast<std::uint32_t>(st.f_bsize);
  return page;
}

SegmentHeader read_segment_header(int fd, const std::string& path) {
  SegmentHeader h{};
  ssize_t got = ::pread(fd, &h, sizeof(h), 0);
  if (got < 0) throw SystemError("cannot read segment " + path, errno);
  if (static_cast<std::size_t>(got) < sizeof(h) || std::memcmp(h.magic, SegmentHeader::kMagic, 8) != 0)
    throw FormatError(path + " is not a Tessera segment (bad or missing header)");
  if (h.version != 1) throw FormatError(path + ": segment format version " + std::to_string(h.version) + " is not supported (expected 1)");
  if (h.header_bytes < sizeof(SegmentHeader) || h.header_bytes % 4096 != 0)
    throw FormatError(path + ": corrupt segment header (header size " + std::to_string(h.header_bytes) + ")");
  h.host[sizeof(h.host) - 1] = '\0';
  h.array_name[sizeof(h.array_name) - 1] = '\0';
  h.element_type[sizeof(h.element_type) - 1] = '\0';
  h.creator_boot_id[sizeof(h.creator_boot_id) - 1] = '\0';
  return h;
}

bool is_safe_file_name(const std::string& name) {
  if (name.empty() || name.size() > 200 || name == "." || name == "..") return false;
  if (name.find("..") != std::string::npos) return false;
  for (char c : name)
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '_' || c == '-')) return false;
  return true;
}

NewSegmentFile::NewSegmentFile(std::string path, mode_t mode) : path_(std::move(path)) {
  auto slash = path_.rfind('/');
  std::string dir = slash == std::string::npos ? "." : slash == 0 ? "/" : path_.substr(0, slash);
  // Linking an unnamed file goes through /proc/self/fd (AT_EMPTY_PATH needs
  // a capability), so without /proc the named fallback is used.
  if (::access("/proc/self/fd", X_OK) == 0)
    fd_ = FileDescriptor(::open(dir.c_str(), O_TMPFILE | O_RDWR | O_CLOEXEC, mode));
  if (fd_) return;
  temporary_ = unique_temporary_name(path_) + ".seg";
  fd_ = FileDescriptor(::open(temporary_.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, mode));
  if (!fd_) throw SystemError("cannot create " + path_, errno);
  temporary_slot_ = exit_cleanup::add(temporary_);
}

NewSegmentFile::~NewSegmentFile() {
  if (temporary_.empty()) return;
  ::unlink(temporary_.c_str());
  exit_cleanup::remove(temporary_slot_);
}

SegmentHeader new_segment_header(const std::string& name, const std::string& element_type) {
  SegmentHeader h{};
  std::memcpy(h.magic, SegmentHeader::kMagic, sizeof(h.magic));
  h.version = 1;
  auto self = ProcessIdentity::self();
  h.creator_pid = self.pid;
  h.creator_start_time = self.start_time;
  h.creator_pid_namespace = self.pid_namespace;
  std::strncpy(h.creator_boot_id, self.boot_id.c_str(), sizeof(h.creator_boot_id) - 1);
  std::strncpy(h.host, self.host.c_str(), sizeof(h.host) - 1);
  std::strncpy(h.array_name, name.c_str(), sizeof(h.array_name) - 1);
  std::strncpy(h.element_type, element_type.c_str(), sizeof(h.element_type) - 1);
  return h;
}

void NewSegmentFile::fill(const SegmentHeader& header, std::uint64_t bytes, const std::string& dir) {
  // A file system already full fails at the header, before the reservation.
  if (::pwrite(fd_.get(), &header, sizeof(header), 0) != static_cast<ssize_t>(sizeof(header)))
    throw_write_failure("write the header of", path_, bytes, dir, errno);
  if (::ftruncate(fd_.get(), static_cast<off_t>(bytes)) != 0)
    throw_write_failure("size", path_, bytes, dir, errno);
  // Reserved now: a sparse file on a full file system would kill the job
  // with SIGBUS at the first write through the mapping.
  reserve_space(fd_.get(), bytes, path_, dir);
}

int NewSegmentFile::publish(bool remove_at_exit) {
  int slot = remove_at_exit ? exit_cleanup::add(path_) : -1;
  int rc = temporary_.empty()
               ? ::linkat(AT_FDCWD, ("/proc/self/fd/" + std::to_string(fd_.get())).c_str(), AT_FDCWD,
                          path_.c_str(), AT_SYMLINK_FOLLOW)
               : ::link(temporary_.c_str(), path_.c_str());  // link(), not rename(): never replaces
  if (rc != 0) {
    int err = errno;
    exit_cleanup::remove(slot);
    throw SystemError("cannot create " + path_, err);
  }
  {
    // Opened again by its name: mappings made through the unnamed (or the
    // temporary) descriptor show "/dir/#inode (deleted)" in /proc/PID/maps,
    // and `shm gc` and people find a file's users by its name there.
    FileDescriptor named(::open(path_.c_str(), O_RDWR | O_CLOEXEC | O_NOFOLLOW));
    if (!named) {
      int err = errno;
      ::unlink(path_.c_str());
      exit_cleanup::remove(slot);
      throw SystemError("cannot open " + path_ + " again after creating it", err);
    }
    struct stat a {}, b {};
    if (::fstat(named.get(), &a) != 0 || ::fstat(fd_.get(), &b) != 0 || a.st_ino != b.st_ino || a.st_dev != b.st_dev) {
      exit_cleanup::remove(slot);  // another file took the name meanwhile: not ours to remove
      throw SystemError("cannot create " + path_ + ": another file replaced it as it was created", EEXIST);
    }
    fd_ = std::move(named);
  }
  return slot;
}

}  // namespace tessera
