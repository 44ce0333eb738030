#include "tessera/storage/segment.hpp"

#include <sys/statvfs.h>
#include <signal.h>
#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

#include "tessera/runtime/error.hpp"

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
}  // namespace

ProcessIdentity ProcessIdentity::self() {
  ProcessIdentity id;
  id.host = hostname();
  id.pid = static_cast<std::int32_t>(getpid());
  id.start_time = read_proc_stat(id.pid).start_time;
  return id;
}

ProcessIdentity::Liveness ProcessIdentity::liveness() const {
  if (host != hostname()) return Liveness::unknown;
  if (pid <= 0) return Liveness::dead;
  if (::kill(pid, 0) != 0 && errno == ESRCH) return Liveness::dead;
  ProcStat now = read_proc_stat(pid);
  if (now.state == '?') return ::kill(pid, 0) == 0 || errno == EPERM ? Liveness::alive : Liveness::dead;
  // A killed process stays a zombie until reaped (in a container, perhaps
  // never) and still answers kill(): it is dead all the same. A reaped and
  // reused pid has another start time.
  if (now.state == 'Z' || now.state == 'X') return Liveness::dead;
  if (start_time != 0 && now.start_time != start_time) return Liveness::dead;
  return Liveness::alive;
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
  return h;
}

bool is_safe_file_name(const std::string& name) {
  if (name.empty() || name.size() > 200 || name == "." || name == "..") return false;
  if (name.find("..") != std::string::npos) return false;
  for (char c : name)
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '_' || c == '-')) return false;
  return true;
}

}  // namespace tessera
