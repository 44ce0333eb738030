#include "tessera/storage/registry.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <fstream>
#include <memory>
#include <sstream>

#include "tessera/runtime/error.hpp"
#include "tessera/storage/metadata.hpp"

namespace tessera {

namespace {
bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

std::string read_small_file(const std::string& path) {
  try {
    return read_small_regular_file(path, "file");
  } catch (const Error&) {
    return {};  // unreadable: not listed as ours
  }
}
}  // namespace

const char* liveness_name(ProcessIdentity::Liveness l) {
  switch (l) {
    case ProcessIdentity::Liveness::alive: return "alive";
    case ProcessIdentity::Liveness::dead: return "dead";
    default: return "other-host";
  }
}

std::vector<ShmEntry> scan_shared_dir(const std::string& dir) {
  std::unique_ptr<DIR, int (*)(DIR*)> d(::opendir(dir.c_str()), ::closedir);
  if (!d) throw SystemError("cannot list shared storage directory " + dir, errno);
  std::vector<ShmEntry> out;
  while (dirent* e = ::readdir(d.get())) {
    std::string name = e->d_name;
    std::string path = dir + "/" + name;
    struct stat st {};
    if (::lstat(path.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) continue;
    ShmEntry entry;
    entry.file = name;
    entry.bytes = static_cast<std::uint64_t>(st.st_size);
    if (ends_with(name, ".seg")) {
      int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
      if (fd < 0) continue;
      FileDescriptor guard(fd);
      char magic[8] = {};
      if (::pread(fd, magic, sizeof(magic), 0) != sizeof(magic) ||
          std::string(magic, 8) != std::string(SegmentHeader::kMagic, 8))
        continue;  // not ours
      entry.kind = ShmEntry::Kind::segment;
      try {
        SegmentHeader h = read_segment_header(fd, path);
        entry.array_name = h.array_name;
        entry.rank = h.rank;
        entry.creator = {h.host, h.creator_pid, h.creator_start_time};
        entry.persist = h.persist != 0;
        entry.liveness = entry.creator.liveness();
      } catch (const Error& err) {
        entry.problem = err.what();
      }
      out.push_back(std::move(entry));
    } else if (ends_with(name, ".json") && st.st_size < (16 << 20)) {
      std::string text = read_small_file(path);
      if (text.find(SharedArrayMetadata::kFormat) == std::string::npos) continue;
      entry.kind = ShmEntry::Kind::metadata;
      try {
        auto m = SharedArrayMetadata::parse(text, path);
        entry.array_name = m.name;
        entry.creator = m.creator;
        entry.persist = m.persist;
        entry.liveness = m.creator.liveness();
      } catch (const Error& err) {
        entry.problem = err.what();
      }
      out.push_back(std::move(entry));
    }
  }
  std::sort(out.begin(), out.end(), [](const ShmEntry& a, const ShmEntry& b) { return a.file < b.file; });
  return out;
}

std::vector<std::string> collect_garbage(const std::string& dir, const GcOptions& options,
                                         std::vector<GcFailure>* failures) {
  std::vector<std::string> removed;
  std::vector<GcFailure> skipped;
  for (const auto& e : scan_shared_dir(dir)) {
    if (!e.problem.empty()) continue;  // never delete what we cannot read: list shows it
    if (e.liveness != ProcessIdentity::Liveness::dead) continue;
    if (e.persist && !options.include_persistent) continue;
    std::string path = dir + "/" + e.file;
    if (!options.dry_run && ::unlink(path.c_str()) != 0 && errno != ENOENT) {
      skipped.push_back({e.file, SystemError("cannot remove " + path, errno).what()});
      continue;
    }
    removed.push_back(e.file);
  }
  if (failures) {
    *failures = std::move(skipped);
  } else if (!skipped.empty()) {
    std::string all;
    for (const auto& f : skipped) all += (all.empty() ? "" : "; ") + f.reason;
    throw SystemError(std::to_string(skipped.size()) + " file(s) could not be removed (" + all + ")", EPERM);
  }
  return removed;
}

}  // namespace tessera
