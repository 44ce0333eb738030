// Where the bytes of an output path go. A regular file (or a new path) is
// replaced whole: its writer puts a temporary beside the real file and
// renames it over the file, so a failed or killed writer leaves the old one.
// Anything else a path can name that takes bytes -- a character device, a
// FIFO, a socket, an open descriptor ("-", /dev/stdout, /proc/self/fd/N) --
// is a stream, written in place: opened and written, never renamed over,
// unlinked or truncated (the rename dance would replace /dev/null with a
// file).
#pragma once
#include <string>
#include <string_view>

namespace tessera {

struct OutputPath {
  enum class Kind { file, stream, directory };
  Kind kind = Kind::file;
  // file: the file to replace or create, symbolic links followed (the link
  // survives; its target gets the new bytes). directory: the directory, links
  // followed. stream: what to open when `descriptor` < 0.
  std::string path;
  // stream: an open descriptor of this process to write to ("-": 1).
  int descriptor = -1;
  // "standard output", "descriptor 3", "character device", "FIFO", "socket";
  // empty for files and directories.
  std::string what;

  bool stream() const noexcept { return kind == Kind::stream; }
  bool standard_output() const noexcept { return kind == Kind::stream && descriptor == 1; }
};

// Looks at `path` in this process (following symbolic links) and says where
// its bytes go. Throws ConfigError naming the path and the reason when it
// cannot be an output: a block device, a directory that does not exist or is
// not writable, a descriptor not open for writing, a descriptor above 2 in a
// job started by mpirun (mpirun hands the ranks only 0, 1 and 2), a symlink
// loop. An existing directory is Kind::directory; the caller decides.
OutputPath resolve_output_path(const std::string& path);

// `path` with every symbolic link followed, to the first path that is not a
// link (it need not exist).
std::string follow_symlinks(const std::string& path);

// A stream output opened for writing. Opening a FIFO waits for its reader.
// Every write is complete or throws SystemError naming the output; a reader
// that went away is EPIPE, not SIGPIPE (the job then removes its temporaries
// instead of dying).
class OutputStream {
 public:
  explicit OutputStream(const OutputPath& out);
  ~OutputStream();
  OutputStream(const OutputStream&) = delete;
  OutputStream& operator=(const OutputStream&) = delete;
  void write(std::string_view data);
  // Closes, reporting a failed close (data lost on the way).
  void close();

 private:
  int fd_ = -1;
  std::string name_;
};

}  // namespace tessera
