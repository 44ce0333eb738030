#include "tessera/storage/metadata.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <ctime>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "tessera/runtime/error.hpp"

namespace tessera {

using nlohmann::json;

namespace {
json identity_json(const ProcessIdentity& id) {
  return json{{"host", id.host},
              {"pid", id.pid},
              {"start_time", id.start_time},
              {"pid_namespace", id.pid_namespace},
              {"boot_id", id.boot_id}};
}
ProcessIdentity identity_from(const json& j) {
  ProcessIdentity id;
  id.host = j.at("host").get<std::string>();
  id.pid = j.at("pid").get<std::int32_t>();
  id.start_time = j.at("start_time").get<std::uint64_t>();
  // Absent in files written before they were recorded: "not recorded".
  id.pid_namespace = j.value("pid_namespace", std::uint64_t{0});
  id.boot_id = j.value("boot_id", std::string());
  return id;
}
}  // namespace

std::string utc_now_iso8601() {
  std::time_t t = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof(buf), "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

std::string SharedArrayMetadata::to_json() const {
  json segs = json::array();
  for (const auto& s : segments)
    segs.push_back(json{{"rank", s.rank}, {"file", s.file}, {"begin", s.begin}, {"count", s.count},
                        {"bytes", s.bytes}, {"creator", identity_json(s.creator)}});
  json j{{"format", kFormat},
         {"version", kVersion},
         {"name", name},
         {"element", {{"type", element.name}, {"size", element.size}}},
         {"length", length},
         {"distribution", {{"kind", distribution}, {"offsets", offsets}}},
         {"header_bytes", header_bytes},
         {"segments", segs},
         {"creator", {{"job", job_id}, {"process", identity_json(creator)}, {"created", created}}},
         {"persist", persist}};
  return j.dump(2) + "\n";
}

SharedArrayMetadata SharedArrayMetadata::parse(const std::string& text, const std::string& path) {
  json j;
  try {
    j = json::parse(text);
  } catch (const json::parse_error& e) {
    throw FormatError(path + ": not valid JSON metadata (" + e.what() + ")");
  }
  SharedArrayMetadata m;
  auto bad = [&](const std::string& why) { return FormatError(path + ": " + why); };
  try {
    if (!j.is_object() || j.value("format", std::string()) != kFormat)
      throw bad(std::string("not a Tessera shared-array metadata file (\"format\" must be \"") + kFormat + "\")");
    int version = j.at("version").get<int>();
    if (version != kVersion)
      throw bad("metadata version " + std::to_string(version) + " is not supported (expected " +
                std::to_string(kVersion) + ")");
    m.name = j.at("name").get<std::string>();
    m.element.name = j.at("element").at("type").get<std::string>();
    m.element.size = j.at("element").at("size").get<std::size_t>();
    m.length = j.at("length").get<std::uint64_t>();
    m.distribution = j.at("distribution").at("kind").get<std::string>();
    m.offsets = j.at("distribution").at("offsets").get<std::vector<std::uint64_t>>();
    m.header_bytes = j.at("header_bytes").get<std::uint32_t>();
    for (const auto& s : j.at("segments")) {
      SegmentRecord r;
      r.rank = s.at("rank").get<int>();
      r.file = s.at("file").get<std::string>();
      r.begin = s.at("begin").get<std::uint64_t>();
      r.count = s.at("count").get<std::uint64_t>();
      r.bytes = s.at("bytes").get<std::uint64_t>();
      r.creator = identity_from(s.at("creator"));
      m.segments.push_back(std::move(r));
    }
    m.job_id = j.at("creator").at("job").get<std::string>();
    m.creator = identity_from(j.at("creator").at("process"));
    m.created = j.at("creator").at("created").get<std::string>();
    m.persist = j.at("persist").get<bool>();
  } catch (const json::exception& e) {
    throw bad(std::string("missing or mistyped field (") + e.what() + ")");
  }

  // Every number must agree with every other before anything is mapped.
  if (m.element.size == 0 || m.element.size > (1u << 20))
    throw bad("element size " + std::to_string(m.element.size) + " is out of range");
  validate_element_name(m.element.name);
  if (auto implied = implied_element_size(m.element.name); implied != 0 && implied != m.element.size)
    throw bad("element type " + m.element.name + " has " + std::to_string(implied) + "-byte elements, not " +
              std::to_string(m.element.size));
  if (m.distribution != "block" && m.distribution != "weighted_block")
    throw bad("unknown distribution kind '" + m.distribution + "'");
  if (m.header_bytes < sizeof(SegmentHeader) || m.header_bytes % 4096 != 0)
    throw bad("header_bytes " + std::to_string(m.header_bytes) + " is not a page multiple");
  if (m.segments.empty()) throw bad("no segments listed");
  if (m.offsets.size() != m.segments.size() + 1)
    throw bad("distribution has " + std::to_string(m.offsets.size()) + " offsets for " +
              std::to_string(m.segments.size()) + " segments (expected segments + 1)");
  if (m.offsets.front() != 0 || m.offsets.back() != m.length)
    throw bad("distribution offsets must run from 0 to the length " + std::to_string(m.length));
  for (std::size_t r = 0; r < m.segments.size(); ++r) {
    const auto& s = m.segments[r];
    std::string which = "segment " + std::to_string(r);
    if (s.rank != static_cast<int>(r)) throw bad(which + " has rank " + std::to_string(s.rank));
    if (!is_safe_file_name(s.file))
      throw bad(which + " names file '" + s.file + "': segment names must be plain file names in the metadata's directory");
    if (m.offsets[r + 1] < m.offsets[r]) throw bad("distribution offsets decrease at rank " + std::to_string(r));
    if (s.begin != m.offsets[r] || s.count != m.offsets[r + 1] - m.offsets[r])
      throw bad(which + " covers [" + std::to_string(s.begin) + ", " + std::to_string(s.begin + s.count) +
                ") but the distribution gives it [" + std::to_string(m.offsets[r]) + ", " +
                std::to_string(m.offsets[r + 1]) + ")");
    if (s.count > (std::uint64_t{1} << 50) / m.element.size || s.bytes != m.header_bytes + s.count * m.element.size)
      throw bad(which + " records " + std::to_string(s.bytes) + " bytes, expected " +
                std::to_string(m.header_bytes + s.count * m.element.size));
  }
  return m;
}

std::string read_small_regular_file(const std::string& path, const std::string& what, std::size_t max_bytes) {
  // O_NONBLOCK: opening a FIFO must not wait for a writer.
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) throw SystemError("cannot open " + what + " " + path, errno);
  FileDescriptor guard(fd);
  struct stat st {};
  if (::fstat(fd, &st) != 0) throw SystemError("cannot stat " + what + " " + path, errno);
  if (!S_ISREG(st.st_mode)) throw FormatError(what + " " + path + " is not a regular file");
  if (static_cast<std::uint64_t>(st.st_size) > max_bytes)
    throw FormatError(what + " " + path + " is " + std::to_string(st.st_size) + " bytes; more than " +
                      std::to_string(max_bytes) + " is not a metadata file");
  std::string text(static_cast<std::size_t>(st.st_size), '\0');
  std::size_t done = 0;
  while (done < text.size()) {
    ssize_t n = ::pread(fd, text.data() + done, text.size() - done, static_cast<off_t>(done));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) throw SystemError("cannot read " + what + " " + path, errno);
    if (n == 0) break;
    done += static_cast<std::size_t>(n);
  }
  text.resize(done);
  return text;
}

int create_exclusive(const std::string& path, mode_t mode) {
  return ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, mode);
}

std::string unique_temporary_name(const std::string& path) {
  static std::atomic<unsigned> counter{0};
  struct timespec ts {};
  ::clock_gettime(CLOCK_REALTIME, &ts);
  return path + ".tmp-" + std::to_string(getpid()) + "-" + std::to_string(counter++) + "-" +
         std::to_string(static_cast<unsigned long>(ts.tv_nsec));
}

SharedArrayMetadata SharedArrayMetadata::read(const std::string& path) {
  return parse(read_small_regular_file(path, "shared-array metadata"), path);
}

void SharedArrayMetadata::write(const std::string& path, mode_t mode, gid_t group) const {
  std::string tmp = unique_temporary_name(path);
  std::string text = to_json();
  int fd = create_exclusive(tmp, mode);
  if (fd < 0) throw SystemError("cannot create metadata " + tmp, errno);
  FileDescriptor guard(fd);
  if (group != static_cast<gid_t>(-1) && ::fchown(fd, static_cast<uid_t>(-1), group) != 0) {
    int err = errno;
    ::unlink(tmp.c_str());
    throw SystemError("cannot give metadata " + path + " to group " + std::to_string(group) +
                          " (TESSERA_SHM_GROUP): the creator must be a member of that group",
                      err);
  }
  ::fchmod(fd, mode);  // the umask must not widen or narrow what the caller asked
  std::size_t done = 0;
  while (done < text.size()) {
    ssize_t n = ::write(fd, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      int err = n < 0 ? errno : ENOSPC;
      ::unlink(tmp.c_str());
      throw SystemError("cannot write metadata " + tmp, err);
    }
    done += static_cast<std::size_t>(n);
  }
  if (::fsync(fd) != 0 && errno != EINVAL) {
    int err = errno;
    ::unlink(tmp.c_str());
    throw SystemError("cannot write metadata " + tmp, err);
  }
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    int err = errno;
    ::unlink(tmp.c_str());
    throw SystemError("cannot rename metadata into place at " + path, err);
  }
}

}  // namespace tessera
