#include "tessera/storage/registry.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <sstream>

#include "tessera/runtime/error.hpp"
#include "tessera/storage/disk_tier.hpp"
#include "tessera/storage/metadata.hpp"

namespace tessera {

namespace {
bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// Seconds since the epoch at which this kernel booted (/proc/stat btime).
long long boot_time() {
  std::ifstream in("/proc/stat");
  std::string key;
  long long value = 0;
  while (in >> key) {
    if (key == "btime" && in >> value) return value;
    in.ignore(1 << 20, '\n');
  }
  return 0;
}

// A file system only this machine's kernel writes to (not NFS, FUSE, 9p,
// virtiofs, a cluster file system...): the ones Tessera's Shared storage
// normally lives on.
bool is_local_file_system(const std::string& dir) {
  struct statfs st {};
  if (::statfs(dir.c_str(), &st) != 0) return false;
  if (is_memory_file_system(static_cast<unsigned long>(st.f_type))) return true;
  switch (static_cast<unsigned long>(st.f_type)) {
    case 0xEF53:      // ext2/3/4
    case 0x58465342:  // xfs
    case 0x9123683E:  // btrfs
    case 0xF2F52010:  // f2fs
      return true;
    default:
      return false;
  }
}

// ProcessIdentity::check, plus the one proof that needs the file: a creator
// of this host under another boot id, whose file on a local file system is
// older than this boot, died with that boot.
ProcessIdentity::Verdict judge(const ProcessIdentity& creator, const std::string& dir, const struct stat& st) {
  auto verdict = creator.check();
  if (verdict.liveness != ProcessIdentity::Liveness::unknown || creator.boot_id.empty()) return verdict;
  std::string boot_here = current_boot_id();
  if (boot_here.empty() || creator.boot_id == boot_here || creator.host != current_host_name()) return verdict;
  long long booted = boot_time();
  if (booted > 0 && static_cast<long long>(st.st_ctime) < booted && is_local_file_system(dir))
    return {ProcessIdentity::Liveness::dead, "created before this machine's last boot"};
  return verdict;
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
    default: return "unknown";
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
        entry.creator = {h.host, h.creator_pid, h.creator_start_time, h.creator_pid_namespace, h.creator_boot_id};
        entry.persist = h.persist != 0;
        auto verdict = judge(entry.creator, dir, st);
        entry.liveness = verdict.liveness;
        entry.liveness_reason = verdict.reason;
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
        auto verdict = judge(m.creator, dir, st);
        entry.liveness = verdict.liveness;
        entry.liveness_reason = verdict.reason;
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

namespace {
bool is_mpi_file(const std::string& name) { return name.rfind("vader_segment.", 0) == 0; }

// Paths under `dir` that some process maps or holds open; `complete` is
// false when a process could not be inspected.
std::vector<std::string> paths_in_use(const std::string& dir, bool& complete) {
  complete = true;
  std::vector<std::string> used;
  std::unique_ptr<DIR, int (*)(DIR*)> proc(::opendir("/proc"), ::closedir);
  if (!proc) {
    complete = false;
    return used;
  }
  const std::string prefix = dir + "/";
  while (dirent* e = ::readdir(proc.get())) {
    std::string pid = e->d_name;
    if (pid.empty() || pid.find_first_not_of("0123456789") != std::string::npos) continue;
    std::ifstream maps("/proc/" + pid + "/maps");
    if (!maps) {
      // Hidden from us (another user's, or the namespace's init, which even
      // root may not read in a container): the scan cannot vouch for it.
      // Init (PID 1) is no rank of an mpirun (ranks are its or its daemons'
      // children), so it does not count against completeness.
      if (pid != "1" && ::access(("/proc/" + pid).c_str(), F_OK) == 0) complete = false;
      continue;
    }
    std::string line;
    while (std::getline(maps, line)) {
      auto at = line.find(prefix);
      if (at != std::string::npos) used.push_back(line.substr(at));
    }
    std::string fd_dir = "/proc/" + pid + "/fd";
    std::unique_ptr<DIR, int (*)(DIR*)> fds(::opendir(fd_dir.c_str()), ::closedir);
    if (!fds) {
      // Gone since its maps were read (a busy machine starts and ends
      // processes all the time): it holds nothing. Else it is hidden from us.
      if (::access(("/proc/" + pid).c_str(), F_OK) == 0) complete = false;
      continue;
    }
    while (dirent* f = ::readdir(fds.get())) {
      char target[4096];
      ssize_t n = ::readlink((fd_dir + "/" + f->d_name).c_str(), target, sizeof(target) - 1);
      if (n > 0 && std::string(target, static_cast<std::size_t>(n)).rfind(prefix, 0) == 0)
        used.emplace_back(target, static_cast<std::size_t>(n));
    }
  }
  return used;
}
// The subdirectories of `dir` whose names start with `prefix`.
std::vector<std::string> subdirectories(const std::string& dir, const std::string& prefix) {
  std::vector<std::string> out;
  std::unique_ptr<DIR, int (*)(DIR*)> d(::opendir(dir.c_str()), ::closedir);
  if (!d) return out;
  while (dirent* e = ::readdir(d.get())) {
    std::string name = e->d_name;
    struct stat st {};
    if (name == "." || name == ".." || name.rfind(prefix, 0) != 0) continue;
    if (::lstat((dir + "/" + name).c_str(), &st) == 0 && S_ISDIR(st.st_mode)) out.push_back(dir + "/" + name);
  }
  return out;
}

// Where Open MPI's session directories may be: TMP itself (its default
// base), and the bases every Tessera launch on one node gives its mpirun
// (runtime/launch.hpp: TMP/tessera-mpirun.UID.PIDNS/PID[.TAG], any PID
// namespace's).
std::vector<std::string> session_bases(const std::string& tmp, const std::string& uid) {
  std::vector<std::string> bases = {tmp};
  for (const auto& launches : subdirectories(tmp, "tessera-mpirun." + uid + "."))
    for (const auto& base : subdirectories(launches, "")) bases.push_back(base);
  return bases;
}

// The mpirun that started job `jobid` (the hex field of a vader_segment
// name), from Open MPI 4's session directory: its PMIx store
// BASE/ompi.HOST.UID/pid.PID/pmix_dstor_ds21_PID/ holds smseg-JOBID-*. Returns
// 0 when no such directory names the job.
int mpirun_of_job(const std::string& uid, std::uint64_t jobid) {
  const char* env = std::getenv("TMPDIR");
  const std::string tmp = env && *env ? env : "/tmp";
  const std::string want = "smseg-" + std::to_string(jobid) + "-";
  for (const auto& base : session_bases(tmp, uid)) {
    for (const auto& session_dir : subdirectories(base, "ompi.")) {
      if (!ends_with(session_dir, "." + uid)) continue;
      for (const auto& job_dir : subdirectories(session_dir, "pid.")) {
        std::string pid = job_dir.substr(job_dir.rfind("/pid.") + 5);
        std::unique_ptr<DIR, int (*)(DIR*)> files(::opendir((job_dir + "/pmix_dstor_ds21_" + pid).c_str()),
                                                  ::closedir);
        if (!files) continue;
        while (dirent* f = ::readdir(files.get()))
          if (std::string(f->d_name).rfind(want, 0) == 0) return std::atoi(pid.c_str());
      }
    }
  }
  return 0;
}
}  // namespace

std::vector<MpiLeftover> scan_mpi_files(const std::string& dir) {
  std::unique_ptr<DIR, int (*)(DIR*)> d(::opendir(dir.c_str()), ::closedir);
  if (!d) throw SystemError("cannot list shared storage directory " + dir, errno);
  std::vector<MpiLeftover> out;
  while (dirent* e = ::readdir(d.get())) {
    std::string name = e->d_name;
    struct stat st {};
    if (!is_mpi_file(name) || ::lstat((dir + "/" + name).c_str(), &st) != 0 || !S_ISREG(st.st_mode)) continue;
    out.push_back({name, static_cast<std::uint64_t>(st.st_size), true});
  }
  if (out.empty()) return out;
  bool complete = false;
  auto used = paths_in_use(dir, complete);
  for (auto& f : out) {
    std::string path = dir + "/" + f.file;
    bool seen = std::any_of(used.begin(), used.end(), [&](const std::string& u) { return u.rfind(path, 0) == 0; });
    // vader_segment.HOST.UID.JOBID.RANK (HOST may hold dots): read from the end.
    int mpirun = 0;
    auto r = f.file.rfind('.');
    auto j = r == std::string::npos ? r : f.file.rfind('.', r - 1);
    auto u = j == std::string::npos || j == 0 ? std::string::npos : f.file.rfind('.', j - 1);
    if (u != std::string::npos) {
      std::string uid = f.file.substr(u + 1, j - u - 1), job = f.file.substr(j + 1, r - j - 1);
      char* end = nullptr;
      std::uint64_t jobid = std::strtoull(job.c_str(), &end, 16);
      if (!job.empty() && end && *end == '\0') mpirun = mpirun_of_job(uid, jobid);
    }
    bool mpirun_alive = mpirun > 0 && (::kill(mpirun, 0) == 0 || errno == EPERM);
    // Unknown mpirun and processes we could not inspect: assume in use.
    f.in_use = seen || mpirun_alive || (mpirun == 0 && !complete);
  }
  std::sort(out.begin(), out.end(), [](const MpiLeftover& a, const MpiLeftover& b) { return a.file < b.file; });
  return out;
}

std::vector<std::string> remove_mpi_leftovers(const std::string& dir, bool dry_run, std::vector<GcFailure>* failures) {
  std::vector<std::string> removed;
  for (const auto& f : scan_mpi_files(dir)) {
    if (f.in_use) continue;
    std::string path = dir + "/" + f.file;
    if (!dry_run && ::unlink(path.c_str()) != 0 && errno != ENOENT) {
      if (failures) failures->push_back({f.file, SystemError("cannot remove " + path, errno).what()});
      continue;
    }
    removed.push_back(f.file);
  }
  return removed;
}

}  // namespace tessera
