#include "tessera/storage/output_path.hpp"

#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstring>
#include <filesystem>
#include <system_error>
#include <utility>

#include "tessera/runtime/error.hpp"
#include "tessera/runtime/launch.hpp"

namespace tessera {

namespace {

namespace fs = std::filesystem;

constexpr int kMaxLinks = 40;  // the kernel's own limit (ELOOP)

// Whether mpirun started this process, looked at when the program loads:
// after MPI_Init a singleton has the launcher's variables too.
const bool g_started_by_mpirun = launched_by_mpi();

std::string link_target(const std::string& link) {
  std::error_code ec;
  fs::path target = fs::read_symlink(link, ec);
  if (ec) throw ConfigError("cannot write " + link + ": cannot read the symbolic link (" + ec.message() + ")");
  if (target.is_relative()) target = fs::path(link).parent_path() / target;
  return target.string();
}

// N when `path` names this process's descriptor N (/proc/self/fd/N,
// /dev/fd/N, /proc/<our pid>/fd/N, /proc/thread-self/fd/N), else -1. Such a
// path is a descriptor, not a file: opening it anew would not write where
// the descriptor points (a socket cannot be opened at all, a regular file
// would be written from offset 0 or renamed over).
int descriptor_named(const std::string& path) {
  fs::path p(path);
  const std::string name = p.filename().string();
  if (name.empty() || name.size() > 9 || name.find_first_not_of("0123456789") != std::string::npos) return -1;
  fs::path parent = p.parent_path();
  if (parent.empty()) parent = ".";
  std::error_code ec;
  const fs::path dir = fs::canonical(parent, ec);
  if (ec) return -1;
  for (const char* fds : {"/proc/self/fd", "/proc/thread-self/fd"}) {
    std::error_code ec2;
    if (dir == fs::canonical(fds, ec2) && !ec2) return std::stoi(name);
  }
  return -1;
}

OutputPath descriptor_output(const std::string& path, int fd) {
  const std::string shown = path == "-" ? std::string("standard output (-)") : path;
  if (fd > 2 && g_started_by_mpirun)
    throw ConfigError("cannot write " + shown + ": it is descriptor " + std::to_string(fd) +
                      ", and mpirun hands its ranks only descriptors 0, 1 and 2; run without -n/mpirun, or write to "
                      "a file, a FIFO or standard output (-)");
  const int flags = ::fcntl(fd, F_GETFL);
  if (flags < 0) throw ConfigError("cannot write " + shown + ": descriptor " + std::to_string(fd) + " is not open");
  if ((flags & O_ACCMODE) == O_RDONLY)
    throw ConfigError("cannot write " + shown + ": descriptor " + std::to_string(fd) + " is open for reading only");
  OutputPath out;
  out.kind = OutputPath::Kind::stream;
  out.path = path;
  out.descriptor = fd;
  out.what = fd == 1 ? "standard output" : "descriptor " + std::to_string(fd);
  return out;
}

// A regular file or a new one at `real` (links followed): its directory must
// take the temporary and the rename.
OutputPath file_output(const std::string& path, const std::string& real) {
  fs::path parent = fs::path(real).parent_path();
  if (parent.empty()) parent = ".";
  const std::string via = real == path ? "" : " (the link target " + real + ")";
  struct stat st {};
  if (::stat(parent.c_str(), &st) != 0) {
    if (errno == ENOENT)
      throw ConfigError("cannot write " + path + via + ": directory " + parent.string() + " does not exist");
    throw ConfigError("cannot write " + path + via + ": cannot look at directory " + parent.string() + " (" +
                      std::strerror(errno) + ")");
  }
  if (!S_ISDIR(st.st_mode))
    throw ConfigError("cannot write " + path + via + ": " + parent.string() + " is not a directory");
  if (::access(parent.c_str(), W_OK | X_OK) != 0)
    throw ConfigError("cannot write " + path + via + ": directory " + parent.string() + " is not writable");
  OutputPath out;
  out.kind = OutputPath::Kind::file;
  out.path = real;
  return out;
}

}  // namespace

std::string follow_symlinks(const std::string& path) {
  std::string current = path;
  for (int hop = 0; hop <= kMaxLinks; ++hop) {
    struct stat st {};
    if (::lstat(current.c_str(), &st) != 0 || !S_ISLNK(st.st_mode)) return current;
    current = link_target(current);
  }
  throw ConfigError("cannot write " + path + ": too many levels of symbolic links");
}

OutputPath resolve_output_path(const std::string& path) {
  if (path.empty()) throw ConfigError("an output path is empty");
  if (path == "-") return descriptor_output(path, 1);
  std::string current = path;
  for (int hop = 0; hop <= kMaxLinks; ++hop) {
    if (int fd = descriptor_named(current); fd >= 0) return descriptor_output(path, fd);
    struct stat st {};
    if (::lstat(current.c_str(), &st) != 0) {
      if (errno == ENOENT || errno == ENOTDIR) return file_output(path, current);  // a new file
      throw ConfigError("cannot write " + path + ": cannot look at " + current + " (" + std::strerror(errno) + ")");
    }
    if (S_ISLNK(st.st_mode)) {
      current = link_target(current);
      continue;
    }
    const std::string via = current == path ? "" : " (a link to " + current + ")";
    OutputPath out;
    out.path = current;
    if (S_ISREG(st.st_mode)) return file_output(path, current);
    if (S_ISDIR(st.st_mode)) {
      out.kind = OutputPath::Kind::directory;
      return out;
    }
    if (S_ISBLK(st.st_mode))
      throw ConfigError("cannot write " + path + via + ": it is a block device; Tessera writes files, character "
                        "devices, FIFOs, sockets and standard output, never onto a disk");
    if (S_ISCHR(st.st_mode)) out.what = "character device";
    else if (S_ISFIFO(st.st_mode)) out.what = "FIFO";
    else if (S_ISSOCK(st.st_mode)) out.what = "socket";
    else throw ConfigError("cannot write " + path + via + ": it is not a file, a device, a FIFO or a socket");
    if (::access(current.c_str(), W_OK) != 0)
      throw ConfigError("cannot write " + path + via + ": the " + out.what + " is not writable");
    out.kind = OutputPath::Kind::stream;
    return out;
  }
  throw ConfigError("cannot write " + path + ": too many levels of symbolic links");
}

OutputStream::OutputStream(const OutputPath& out)
    : name_(out.path == "-" ? std::string("standard output") : out.path) {
  int fd = -1;
  if (out.descriptor >= 0) {
    fd = ::fcntl(out.descriptor, F_DUPFD_CLOEXEC, 3);
  } else if (out.what == "socket") {
    sockaddr_un address{};
    address.sun_family = AF_UNIX;
    if (out.path.size() >= sizeof(address.sun_path))
      throw SystemError("cannot connect to socket " + name_, ENAMETOOLONG);
    std::memcpy(address.sun_path, out.path.c_str(), out.path.size() + 1);
    fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd >= 0 && ::connect(fd, reinterpret_cast<const sockaddr*>(&address), sizeof(address)) != 0) {
      const int err = errno;
      ::close(fd);
      throw SystemError("cannot connect to socket " + name_, err);
    }
  } else {
    // No O_CREAT: if the device or FIFO went away meanwhile, this fails
    // instead of creating a file; no O_TRUNC: nothing here is truncated.
    fd = ::open(out.path.c_str(), O_WRONLY | O_NOCTTY | O_CLOEXEC);
  }
  if (fd < 0) throw SystemError("cannot open " + name_ + " for writing", errno);
  fd_ = fd;
}

OutputStream::~OutputStream() {
  if (fd_ >= 0) ::close(fd_);
}

void OutputStream::write(std::string_view data) {
  // SIGPIPE blocked in this thread while writing: a reader that went away is
  // an EPIPE to report. A SIGPIPE our write raised is taken off the pending set.
  sigset_t pipe_set, old_mask, pending;
  sigemptyset(&pipe_set);
  sigaddset(&pipe_set, SIGPIPE);
  sigpending(&pending);
  const bool already_pending = sigismember(&pending, SIGPIPE) == 1;
  pthread_sigmask(SIG_BLOCK, &pipe_set, &old_mask);
  int err = 0;
  std::size_t done = 0;
  while (done < data.size()) {
    ssize_t n = ::write(fd_, data.data() + done, data.size() - done);
    if (n > 0) {
      done += static_cast<std::size_t>(n);
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {  // a descriptor the caller set non-blocking
      pollfd p{fd_, POLLOUT, 0};
      ::poll(&p, 1, -1);
      continue;
    }
    err = n < 0 ? errno : ENOSPC;
    break;
  }
  if (err == EPIPE && !already_pending) {
    const timespec zero{};
    sigtimedwait(&pipe_set, nullptr, &zero);
  }
  pthread_sigmask(SIG_SETMASK, &old_mask, nullptr);
  if (err) throw SystemError("cannot write " + name_, err);
}

void OutputStream::close() {
  const int fd = std::exchange(fd_, -1);
  if (fd >= 0 && ::close(fd) != 0 && errno != EINTR) throw SystemError("cannot write " + name_ + " (close)", errno);
}

}  // namespace tessera
