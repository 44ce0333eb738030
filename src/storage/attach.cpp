#include "tessera/storage/attach.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace tessera {

namespace {
std::string directory_of(const std::string& path) {
  auto slash = path.rfind('/');
  if (slash == std::string::npos) return ".";
  return slash == 0 ? "/" : path.substr(0, slash);
}
}  // namespace

AttachedArray AttachedArray::open(const std::string& metadata_path, Access access) {
  return open_checked(metadata_path, access, false);
}

AttachedArray AttachedArray::open_contiguous(const std::string& metadata_path, Access access) {
  return open_checked(metadata_path, access, true);
}

AttachedArray AttachedArray::open_checked(const std::string& metadata_path, Access access, bool contiguous) {
  AttachedArray a;
  a.path_ = metadata_path;
  a.access_ = access;
  a.meta_ = SharedArrayMetadata::read(metadata_path);
  const std::string dir = directory_of(metadata_path);
  const auto& m = a.meta_;

  // Check every segment first; map only when all of them are sound.
  std::vector<FileDescriptor> fds;
  for (const auto& s : m.segments) {
    std::string path = dir + "/" + s.file;
    int fd = ::open(path.c_str(), (access == Access::read_write ? O_RDWR : O_RDONLY) | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
    if (fd < 0) {
      int err = errno;
      if (err == ENOENT)
        throw FormatError("segment " + s.file + " listed in " + metadata_path +
                          " is missing (was its creator stopped, or the array destroyed?)");
      throw SystemError("cannot open segment " + path + " listed in " + metadata_path, err);
    }
    FileDescriptor guard(fd);
    struct stat st {};
    if (::fstat(fd, &st) != 0) throw SystemError("cannot stat segment " + path, errno);
    if (!S_ISREG(st.st_mode)) throw FormatError("segment " + path + " is not a regular file");
    if (static_cast<std::uint64_t>(st.st_size) != s.bytes)
      throw FormatError("segment " + path + " is " + std::to_string(st.st_size) + " bytes but " + metadata_path +
                        " records " + std::to_string(s.bytes) + " (truncated or replaced)");
    SegmentHeader h = read_segment_header(fd, path);
    if (h.header_bytes != m.header_bytes || h.element_size != m.element.size || h.count != s.count ||
        h.global_begin != s.begin || h.rank != s.rank || m.element.name != h.element_type)
      throw MismatchError("segment " + path + " does not match " + metadata_path + ": header says " +
                          std::to_string(h.count) + " elements of " + h.element_type + " (" +
                          std::to_string(h.element_size) + " bytes) from index " + std::to_string(h.global_begin) +
                          ", metadata says " + std::to_string(s.count) + " of " + m.element.name + " (" +
                          std::to_string(m.element.size) + " bytes) from " + std::to_string(s.begin));
    fds.push_back(std::move(guard));
  }
  const bool writable = access == Access::read_write;
  if (contiguous) {
    const auto page = static_cast<std::uint64_t>(::sysconf(_SC_PAGESIZE));
    const std::uint64_t size = m.element.size;
    if (m.header_bytes % page != 0)
      throw MismatchError(metadata_path + ": segment headers of " + std::to_string(m.header_bytes) +
                          " bytes are not whole pages; attach it segment by segment");
    for (std::size_t i = 0; i + 1 < m.segments.size(); ++i)
      if (m.segments[i].count * size % page != 0)
        throw MismatchError("segment " + m.segments[i].file + " of " + metadata_path + " holds " +
                            std::to_string(m.segments[i].count * size) +
                            " bytes, not whole pages: its parts cannot lie at consecutive addresses "
                            "(made without aligned ranges); attach it segment by segment");
    const std::uint64_t bytes = m.length * size;
    a.mappings_.push_back(Mapping::reserved((bytes + page - 1) / page * page));
    for (std::size_t i = 0; i < m.segments.size(); ++i) {
      const auto& s = m.segments[i];
      a.mappings_.back().map_file_at(s.begin * size, fds[i].get(), m.header_bytes, s.count * size, writable,
                                     dir + "/" + s.file);
      a.segments_.push_back(Segment{s.rank, s.begin, s.count, a.mappings_.back().data() + s.begin * size});
    }
    a.contiguous_ = a.mappings_.back().data();
    return a;
  }
  for (std::size_t i = 0; i < m.segments.size(); ++i) {
    const auto& s = m.segments[i];
    a.mappings_.push_back(Mapping::file(fds[i].get(), s.bytes, writable, dir + "/" + s.file));
    a.segments_.push_back(Segment{s.rank, s.begin, s.count, a.mappings_.back().data() + m.header_bytes});
  }
  return a;
}

void AttachedArray::check_type(const ElementType& expected) const {
  if (expected != meta_.element)
    throw MismatchError(path_ + " holds elements of type " + meta_.element.name + " (" +
                        std::to_string(meta_.element.size) + " bytes), not " + expected.name + " (" +
                        std::to_string(expected.size) + " bytes)");
}

}  // namespace tessera
