#include "tessera/storage/node_segment.hpp"
#include "tessera/storage/storage.hpp"

#include <fcntl.h>
#include <grp.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <cstdio>
#include <cstring>

#include "tessera/runtime/collective.hpp"
#include "tessera/runtime/exit_cleanup.hpp"
#include "tessera/runtime/topology.hpp"
#include "tessera/runtime/trace.hpp"
#include "tessera/runtime/wait.hpp"

namespace tessera {

const char* storage_kind_name(StorageKind kind) noexcept {
  switch (kind) {
    case StorageKind::heap: return "heap";
    case StorageKind::shared: return "shared";
    case StorageKind::colocale: return "colocale";
  }
  return "unknown";
}

std::string default_shared_dir() {
  const char* env = std::getenv("TESSERA_SHM_DIR");
  return env && *env ? env : "/dev/shm";
}

gid_t shared_group_id(const std::string& name) {
  std::string group = name;
  if (group.empty()) {
    const char* env = std::getenv("TESSERA_SHM_GROUP");
    group = env ? env : "";
  }
  if (group.empty()) return static_cast<gid_t>(-1);
  if (group.find_first_not_of("0123456789") == std::string::npos) return static_cast<gid_t>(std::stoul(group));
  struct group entry {};
  struct group* found = nullptr;
  std::vector<char> buffer(16384);
  if (::getgrnam_r(group.c_str(), &entry, buffer.data(), buffer.size(), &found) != 0 || found == nullptr)
    throw ConfigError("shared storage group '" + group + "' (TESSERA_SHM_GROUP or the group option) does not exist");
  return found->gr_gid;
}

namespace {

// Bytes of this rank's part in `layout`; MismatchError (on every rank) when
// some rank's part would grow beyond its `now` bytes.
std::size_t part_bytes(Runtime& rt, const ArrayLayout& layout, std::size_t now) {
  const auto r = static_cast<std::size_t>(rt.rank());
  if (layout.offsets.size() != static_cast<std::size_t>(rt.size()) + 1)
    throw MismatchError("a shrunk array layout has " + std::to_string(layout.offsets.size()) + " offsets for " +
                        std::to_string(rt.size()) + " ranks");
  const std::uint64_t bytes = (layout.offsets[r + 1] - layout.offsets[r]) * layout.element.size;
  agree(rt.comm(), [&] {
    if (bytes > now)
      throw MismatchError("an array cannot shrink to a layout that gives rank " + std::to_string(r) + " " +
                          std::to_string(bytes) + " bytes where it holds " + std::to_string(now));
  });
  return static_cast<std::size_t>(bytes);
}

class HeapStorage final : public Storage {
 public:
  explicit HeapStorage(std::size_t bytes) : mapping_(Mapping::anonymous(bytes)) {
    local_ = {mapping_.data(), bytes};
  }
  StorageKind kind() const noexcept override { return StorageKind::heap; }
  void shrink(Runtime& rt, const ArrayLayout& smaller) override {
    const std::size_t bytes = part_bytes(rt, smaller, local_.size());
    mapping_.shrink(bytes);
    local_ = {mapping_.data(), bytes};
  }

 private:
  Mapping mapping_;
};

// Fixed-size record gathered to rank 0 so it can write the metadata.
struct CreatorRecord {
  char host[64];
  std::int32_t pid;
  std::uint64_t start_time;
  std::uint64_t pid_namespace;
  char boot_id[40];
};

std::string mebibytes(double bytes) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.1f MiB", bytes / double(1 << 20));
  return buf;
}

}  // namespace

namespace {
bool no_space(int err) { return err == ENOSPC || err == EFBIG || err == EDQUOT; }

// "PATH needs N MiB in DIR, M MiB free; ...": what a full file system says,
// whichever write found it full.
[[noreturn]] void throw_no_space(const std::string& path, std::uint64_t bytes, const std::string& dir, int err) {
  struct statvfs st {};
  std::string free = ::statvfs(dir.c_str(), &st) == 0
                         ? mebibytes(static_cast<double>(st.f_bavail) * static_cast<double>(st.f_frsize))
                         : std::string("unknown");
  throw SystemError(path + " needs " + mebibytes(static_cast<double>(bytes)) + " in " + dir + ", " + free +
                        " free; free space there or point TESSERA_SHM_DIR (or the output) elsewhere",
                    err);
}
}  // namespace

void reserve_space(int fd, std::uint64_t bytes, const std::string& path, const std::string& dir) {
  int err = ::posix_fallocate(fd, 0, static_cast<off_t>(bytes));
  if (err == 0 || err == EOPNOTSUPP || err == EINVAL) return;  // no fallocate here: best effort
  if (no_space(err)) throw_no_space(path, bytes, dir, err);
  throw SystemError("cannot reserve " + mebibytes(static_cast<double>(bytes)) + " for " + path, err);
}

void throw_write_failure(const std::string& what, const std::string& path, std::uint64_t bytes,
                         const std::string& dir, int err) {
  if (no_space(err)) throw_no_space(path, bytes, dir, err);
  throw SystemError("cannot " + what + " " + path + " (" + std::to_string(bytes) + " bytes)", err);
}

namespace {

class SharedStorage final : public Storage {
 public:
  SharedStorage(Runtime& rt, const ArrayLayout& layout, const StorageOptions& options);
  ~SharedStorage() override;
  StorageKind kind() const noexcept override { return StorageKind::shared; }
  std::byte* colocal_data(int world_rank) const noexcept override {
    auto r = static_cast<std::size_t>(world_rank);
    return r < peers_.size() && peers_[r].size() ? peers_[r].data() + header_bytes_ : nullptr;
  }
  std::string metadata_path() const override { return by_range_ ? std::string() : metadata_path_; }
  void shrink(Runtime& rt, const ArrayLayout& smaller) override;
  bool shrinkable() const noexcept override { return own_created_; }

 private:
  std::string segment_path(int rank) const { return dir_ + "/" + name_ + ".r" + std::to_string(rank) + ".seg"; }
  void create_segment(const Runtime& rt, const ArrayLayout& layout);
  void open_segment(const Runtime& rt, const ArrayLayout& layout);
  void open_range(const Runtime& rt, const ArrayLayout& layout);
  [[noreturn]] void refuse_in_place(const std::string& what) const;
  // The metadata, once it names the same element type and length as `layout`.
  SharedArrayMetadata metadata_of_same_array(const ArrayLayout& layout) const;
  void check_existing_metadata(const ArrayLayout& layout) const;
  void write_metadata(const Runtime& rt, const ArrayLayout& layout, const std::vector<CreatorRecord>& creators);
  void map_colocal_peers(const Runtime& rt, const ArrayLayout& layout);
  void give_to_group(int fd, const std::string& path) const;

  std::string dir_, name_, metadata_path_;
  bool persist_ = false;
  gid_t group_ = static_cast<gid_t>(-1);  // -1: the creator's own group
  mode_t mode_ = 0600;
  std::uint32_t header_bytes_ = 4096;
  Mapping own_;
  std::vector<Mapping> peers_;  // by world rank; empty for non co-locales and self
  int segment_slot_ = -1, metadata_slot_ = -1;
  bool own_created_ = false, metadata_created_ = false;
  bool writable_ = true;
  bool by_range_ = false;  // open_by_range: this rank's elements of another layout's segment
  int rank_ = 0;
};

SharedStorage::SharedStorage(Runtime& rt, const ArrayLayout& layout, const StorageOptions& options)
    : dir_(options.dir.empty() ? default_shared_dir() : options.dir),
      persist_(options.persist),
      group_(shared_group_id(options.group)),
      mode_(options.group_access || group_ != static_cast<gid_t>(-1) ? 0660 : 0600),
      writable_(!options.open_existing || options.open_writable),
      rank_(rt.rank()) {
  while (dir_.size() > 1 && dir_.back() == '/') dir_.pop_back();
  // Rank 0 picks the default name so every rank uses the same one.
  static std::atomic<int> counter{0};
  char name[256] = {};
  if (rt.rank() == 0) {
    std::string n = options.name.empty() ? "tessera-" + rt.job_id() + "-" + std::to_string(counter++) : options.name;
    std::strncpy(name, n.c_str(), sizeof(name) - 1);
  }
  broadcast(rt.comm(), name, sizeof(name), 0);
  name_ = name;
  metadata_path_ = dir_ + "/" + name_ + ".json";
  if (!is_safe_file_name(name_ + ".json"))
    throw ConfigError("shared array name '" + name_ + "' is not a plain file name (use [A-Za-z0-9._-], no '/' or '..')");

  if (options.open_existing && options.open_by_range) {
    persist_ = true;
    by_range_ = true;
    writable_ = false;
    agree(rt.comm(), [&] { open_range(rt, layout); });
    return;
  }
  if (options.open_existing) {
    persist_ = true;
    agree(rt.comm(), [&] {
      if (rt.rank() == 0) check_existing_metadata(layout);
    });
    agree(rt.comm(), [&] { open_segment(rt, layout); });
    agree(rt.comm(), [&] { map_colocal_peers(rt, layout); });
    return;
  }
  try {
    agree(rt.comm(), [&] {
      struct stat st {};
      if (::stat(dir_.c_str(), &st) != 0 || !S_ISDIR(st.st_mode))
        throw ConfigError("shared storage directory " + dir_ + " does not exist or is not a directory");
      if (rt.rank() == 0 && ::access(metadata_path_.c_str(), F_OK) == 0)
        throw ConfigError("a shared array named " + name_ + " already exists in " + dir_ +
                          " (" + metadata_path_ + "); choose another name or remove it with 'tessera shm gc'");
    });
    header_bytes_ = segment_header_bytes(dir_);
    agree(rt.comm(), [&] { create_segment(rt, layout); });

    auto self = ProcessIdentity::self();
    CreatorRecord mine{};
    std::strncpy(mine.host, self.host.c_str(), sizeof(mine.host) - 1);
    mine.pid = self.pid;
    mine.start_time = self.start_time;
    mine.pid_namespace = self.pid_namespace;
    std::strncpy(mine.boot_id, self.boot_id.c_str(), sizeof(mine.boot_id) - 1);
    auto creators = gather_to_root<CreatorRecord>(rt.comm(), std::span<const CreatorRecord>(&mine, 1), 0);
    agree(rt.comm(), [&] {
      if (rt.rank() == 0) write_metadata(rt, layout, creators);
    });
    agree(rt.comm(), [&] { map_colocal_peers(rt, layout); });
  } catch (...) {
    // Leave nothing behind: the destructor does not run for a failed constructor.
    if (own_created_) ::unlink(segment_path(rt.rank()).c_str());
    if (metadata_created_) ::unlink(metadata_path_.c_str());
    exit_cleanup::remove(segment_slot_);
    exit_cleanup::remove(metadata_slot_);
    throw;
  }
}

void SharedStorage::give_to_group(int fd, const std::string& path) const {
  if (group_ == static_cast<gid_t>(-1)) return;
  if (::fchown(fd, static_cast<uid_t>(-1), group_) != 0)
    throw SystemError("cannot give " + path + " to group " + std::to_string(group_) +
                          " (TESSERA_SHM_GROUP): the creator must be a member of that group",
                      errno);
}

void SharedStorage::create_segment(const Runtime& rt, const ArrayLayout& layout) {
  auto r = static_cast<std::size_t>(rt.rank());
  std::uint64_t count = layout.offsets[r + 1] - layout.offsets[r];
  std::uint64_t bytes = header_bytes_ + count * layout.element.size;
  std::string path = segment_path(rt.rank());
  // The file gets its name only when its header is written and its blocks
  // reserved: a process killed before leaves nothing (see NewSegmentFile).
  NewSegmentFile file(path, mode_);
  give_to_group(file.fd(), path);
  ::fchmod(file.fd(), mode_);
  SegmentHeader h = new_segment_header(name_, layout.element.name);
  h.header_bytes = header_bytes_;
  h.element_size = layout.element.size;
  h.count = count;
  h.global_begin = layout.offsets[r];
  h.rank = rt.rank();
  h.persist = persist_ ? 1 : 0;
  file.fill(h, bytes, dir_);
  segment_slot_ = file.publish(!persist_);
  own_created_ = true;
  own_ = Mapping::file(file.fd(), bytes, true, path);
  local_ = {own_.data() + header_bytes_, count * layout.element.size};
}

void SharedStorage::refuse_in_place(const std::string& what) const {
  throw MismatchError("shared array " + metadata_path_ + " cannot be opened in place: " + what);
}

SharedArrayMetadata SharedStorage::metadata_of_same_array(const ArrayLayout& layout) const {
  auto m = SharedArrayMetadata::read(metadata_path_);
  if (m.element.name != layout.element.name)
    refuse_in_place("it holds " + m.element.name + " elements, not " + layout.element.name);
  if (m.length != layout.length)
    refuse_in_place("it has " + std::to_string(m.length) + " elements, expected " + std::to_string(layout.length));
  return m;
}

void SharedStorage::check_existing_metadata(const ArrayLayout& layout) const {
  auto m = metadata_of_same_array(layout);
  if (m.offsets.size() != layout.offsets.size())
    refuse_in_place("it was written by " + std::to_string(m.offsets.size() - 1) + " ranks and this job has " +
                    std::to_string(layout.offsets.size() - 1));
  if (m.offsets != layout.offsets) refuse_in_place("its distribution over ranks differs from the requested one");
}

void SharedStorage::open_segment(const Runtime& rt, const ArrayLayout& layout) {
  auto r = static_cast<std::size_t>(rt.rank());
  std::uint64_t count = layout.offsets[r + 1] - layout.offsets[r];
  std::string path = segment_path(rt.rank());
  int fd = ::open(path.c_str(), (writable_ ? O_RDWR : O_RDONLY) | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
  if (fd < 0) throw SystemError("cannot open shared segment " + path, errno);
  FileDescriptor guard(fd);
  struct stat kind {};
  if (::fstat(fd, &kind) != 0 || !S_ISREG(kind.st_mode))
    throw FormatError("shared segment " + path + " is not a regular file");
  SegmentHeader h = read_segment_header(fd, path);
  if (h.rank != rt.rank() || h.count != count || h.element_size != layout.element.size ||
      h.global_begin != layout.offsets[r])
    throw MismatchError("segment " + path + " does not match its metadata: header says rank " +
                        std::to_string(h.rank) + ", " + std::to_string(h.count) + " elements from " +
                        std::to_string(h.global_begin) + ", expected rank " + std::to_string(rt.rank()) + ", " +
                        std::to_string(count) + " from " + std::to_string(layout.offsets[r]));
  header_bytes_ = h.header_bytes;
  struct stat st {};
  std::uint64_t bytes = header_bytes_ + count * layout.element.size;
  if (::fstat(fd, &st) != 0 || static_cast<std::uint64_t>(st.st_size) != bytes)
    throw FormatError("segment " + path + " is " + std::to_string(st.st_size) + " bytes, expected " +
                      std::to_string(bytes));
  own_ = Mapping::file(fd, bytes, writable_, path);
  local_ = {own_.data() + header_bytes_, count * layout.element.size};
}

void SharedStorage::open_range(const Runtime& rt, const ArrayLayout& layout) {
  auto m = metadata_of_same_array(layout);
  const auto r = static_cast<std::size_t>(rt.rank());
  const std::uint64_t lo = layout.offsets[r], hi = layout.offsets[r + 1], size = layout.element.size;
  if (hi == lo) return;  // nothing here: no mapping
  const SegmentRecord* holder = nullptr;
  for (const auto& s : m.segments)
    if (s.begin <= lo && hi <= s.begin + s.count) holder = &s;
  if (!holder)
    refuse_in_place("elements [" + std::to_string(lo) + ", " + std::to_string(hi) + ") of rank " +
                    std::to_string(rt.rank()) + " span two of its segments");
  const std::string path = dir_ + "/" + holder->file;
  if (!is_safe_file_name(holder->file))
    refuse_in_place("its segment file name '" + holder->file + "' is not a plain file name");
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
  if (fd < 0) throw SystemError("cannot open shared segment " + path, errno);
  FileDescriptor guard(fd);
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) throw FormatError("shared segment " + path + " is not a regular file");
  SegmentHeader h = read_segment_header(fd, path);
  if (h.count != holder->count || h.element_size != size || h.global_begin != holder->begin)
    throw MismatchError("segment " + path + " does not match its metadata: header says " + std::to_string(h.count) +
                        " elements from " + std::to_string(h.global_begin) + ", metadata " +
                        std::to_string(holder->count) + " from " + std::to_string(holder->begin));
  const std::uint64_t first = h.header_bytes + (lo - holder->begin) * size, bytes = (hi - lo) * size;
  if (static_cast<std::uint64_t>(st.st_size) < first + bytes)
    throw FormatError("segment " + path + " is " + std::to_string(st.st_size) + " bytes, too short for its " +
                      std::to_string(h.count) + " elements");
  // The file offset of a mapping is a page multiple: map from the page
  // holding the first element.
  const auto page = static_cast<std::uint64_t>(::sysconf(_SC_PAGESIZE));
  const std::uint64_t start = first / page * page, span = first + bytes - start;
  own_ = Mapping::reserved(static_cast<std::size_t>(span));
  own_.map_file_at(0, fd, static_cast<std::size_t>(start), static_cast<std::size_t>(span), false, path);
  local_ = {own_.data() + (first - start), static_cast<std::size_t>(bytes)};
}

void SharedStorage::write_metadata(const Runtime& rt, const ArrayLayout& layout,
                                   const std::vector<CreatorRecord>& creators) {
  SharedArrayMetadata m;
  m.name = name_;
  m.element = layout.element;
  m.length = layout.length;
  m.distribution = layout.distribution;
  m.offsets = layout.offsets;
  m.header_bytes = header_bytes_;
  for (int r = 0; r < rt.size(); ++r) {
    auto ur = static_cast<std::size_t>(r);
    SegmentRecord s;
    s.rank = r;
    s.file = name_ + ".r" + std::to_string(r) + ".seg";
    s.begin = layout.offsets[ur];
    s.count = layout.offsets[ur + 1] - layout.offsets[ur];
    s.bytes = header_bytes_ + s.count * layout.element.size;
    s.creator.host = std::string(creators[ur].host, strnlen(creators[ur].host, sizeof(creators[ur].host)));
    s.creator.pid = creators[ur].pid;
    s.creator.start_time = creators[ur].start_time;
    s.creator.pid_namespace = creators[ur].pid_namespace;
    s.creator.boot_id = std::string(creators[ur].boot_id, strnlen(creators[ur].boot_id, sizeof(creators[ur].boot_id)));
    m.segments.push_back(std::move(s));
  }
  m.job_id = rt.job_id();
  m.creator = ProcessIdentity::self();
  m.persist = persist_;
  m.created = utc_now_iso8601();
  if (!persist_) metadata_slot_ = exit_cleanup::add(metadata_path_);
  m.write(metadata_path_, mode_, group_);
  metadata_created_ = true;
}

void SharedStorage::map_colocal_peers(const Runtime& rt, const ArrayLayout& layout) {
  peers_.resize(static_cast<std::size_t>(rt.size()));
  for (int peer : rt.node().world_ranks) {
    if (peer == rt.rank()) continue;
    auto up = static_cast<std::size_t>(peer);
    std::uint64_t bytes = header_bytes_ + (layout.offsets[up + 1] - layout.offsets[up]) * layout.element.size;
    std::string path = segment_path(peer);
    int fd = ::open(path.c_str(), (writable_ ? O_RDWR : O_RDONLY) | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
    // A directory private to each rank's node view (not shared between
    // co-locales) simply disables the same-node path for that peer.
    if (fd < 0) continue;
    FileDescriptor guard(fd);
    struct stat st {};
    if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || static_cast<std::uint64_t>(st.st_size) < bytes) continue;
    peers_[up] = Mapping::file(fd, bytes, writable_, path);
  }
}

void SharedStorage::shrink(Runtime& rt, const ArrayLayout& smaller) {
  agree(rt.comm(), [&] {
    if (!own_created_)
      throw MismatchError("shared array " + metadata_path_ +
                          " was opened in place from another job: it cannot shrink here");
  });
  const std::size_t bytes = part_bytes(rt, smaller, local_.size());
  const std::size_t count = smaller.element.size ? bytes / smaller.element.size : 0;
  agree(rt.comm(), [&] {
    const std::string path = segment_path(rt.rank());
    int fd = ::open(path.c_str(), O_RDWR | O_CLOEXEC | O_NOFOLLOW);
    if (fd < 0) throw SystemError("cannot reopen shared segment " + path + " to shrink it", errno);
    FileDescriptor guard(fd);
    // The header first: a reader racing the truncation sees a count that
    // fits the smaller file, never one past its end.
    SegmentHeader h = read_segment_header(fd, path);
    h.count = count;
    h.global_begin = smaller.offsets[static_cast<std::size_t>(rt.rank())];
    if (::pwrite(fd, &h, sizeof(h), 0) != static_cast<ssize_t>(sizeof(h)))
      throw SystemError("cannot rewrite the header of shared segment " + path, errno);
    own_.shrink(header_bytes_ + bytes);
    if (::ftruncate(fd, static_cast<off_t>(header_bytes_ + bytes)) != 0)
      throw SystemError("cannot truncate shared segment " + path, errno);
  });
  local_ = {own_.data() + header_bytes_, bytes};
  for (std::size_t r = 0; r < peers_.size(); ++r)
    if (peers_[r].size())
      peers_[r].shrink(header_bytes_ + (smaller.offsets[r + 1] - smaller.offsets[r]) * smaller.element.size);
  agree(rt.comm(), [&] {
    if (rt.rank() != 0 || !metadata_created_) return;
    SharedArrayMetadata m = SharedArrayMetadata::read(metadata_path_);
    m.length = smaller.length;
    m.distribution = smaller.distribution;
    m.offsets = smaller.offsets;
    for (auto& seg : m.segments) {
      auto r = static_cast<std::size_t>(seg.rank);
      seg.begin = smaller.offsets[r];
      seg.count = smaller.offsets[r + 1] - smaller.offsets[r];
      seg.bytes = header_bytes_ + seg.count * smaller.element.size;
    }
    m.write(metadata_path_, mode_, group_);
  });
}

SharedStorage::~SharedStorage() {
  if (!persist_) {
    if (own_created_) ::unlink(segment_path(rank_).c_str());
    if (metadata_created_) ::unlink(metadata_path_.c_str());
  }
  exit_cleanup::remove(segment_slot_);
  exit_cleanup::remove(metadata_slot_);
}

// Co-locale storage: this rank's part in a NodeSegment, which co-located
// ranks map. Why not Shared storage's named files: nothing can outlive the
// job (so there is nothing for `tessera shm gc` to find), there is no
// metadata file to write per array, and the array stays private to the job
// (explicit Shared storage remains the way to publish it to outside tools).
// Pages are placed lazily by the first touch, as for Heap, except that a rank
// bound within one NUMA domain asks for its pages there whoever touches them
// (prefer_home_numa_node); tmpfs gives 4 KiB pages, as for Shared.
class ColocaleStorage final : public Storage {
 public:
  ColocaleStorage(Runtime& rt, const ArrayLayout& layout);
  StorageKind kind() const noexcept override { return StorageKind::colocale; }
  std::byte* colocal_data(int world_rank) const noexcept override {
    std::span<std::byte> p = segment_.peer(world_rank);
    return p.empty() ? nullptr : p.data();
  }
  // The memfd keeps its size (co-locales map all of it); the tail's pages
  // are given back to the system.
  void shrink(Runtime& rt, const ArrayLayout& smaller) override {
    const std::size_t bytes = part_bytes(rt, smaller, local_.size());
    const auto page = static_cast<std::size_t>(::sysconf(_SC_PAGESIZE));
    const std::size_t keep = (bytes + page - 1) / page * page;
    if (keep < local_.size()) ::madvise(local_.data() + keep, local_.size() - keep, MADV_REMOVE);
    local_ = local_.first(bytes);
    barrier(rt.comm());  // co-locales stop reading the tail before it goes
  }

 private:
  void prefer_home_numa_node(const Runtime& rt) noexcept;

  NodeSegment segment_;
};

ColocaleStorage::ColocaleStorage(Runtime& rt, const ArrayLayout& layout) {
  auto r = static_cast<std::size_t>(rt.rank());
  const std::uint64_t bytes = (layout.offsets[r + 1] - layout.offsets[r]) * layout.element.size;
  segment_ = NodeSegment(rt, bytes, "c",
                         "a co-locale segment; set TESSERA_COLOCALE_SEGMENTS=0 to keep default arrays on the Heap");
  prefer_home_numa_node(rt);
  local_ = segment_.own();
}

// Heap pages land where the owner first touches them, and only the owner can.
// Here a co-locale may touch first (a scatter into a fresh array), so a rank
// bound within one NUMA domain (--colocales numa|socket on a multi-domain
// node) asks for its pages there before anyone touches them. Best effort.
void ColocaleStorage::prefer_home_numa_node(const Runtime& rt) noexcept {
  if (segment_.own().empty()) return;
  try {
    if (int node = home_numa_node(rt.topology()); node >= 0)
      prefer_numa_node(segment_.own().data(), segment_.own().size(), node);
  } catch (const std::exception&) {
    // No hwloc view of the node: first touch decides, as for Heap.
  }
}

}  // namespace

StorageKind resolved_storage_kind(const Runtime& rt, const StorageOptions& options) noexcept {
  if (options.kind) return *options.kind;
  if (rt.shared_by_default()) return StorageKind::shared;
  return rt.colocale_segments() ? StorageKind::colocale : StorageKind::heap;
}

std::unique_ptr<Storage> make_storage(Runtime& rt, const ArrayLayout& layout, const StorageOptions& options) {
  if (layout.offsets.size() != static_cast<std::size_t>(rt.size()) + 1)
    throw MismatchError("array layout has " + std::to_string(layout.offsets.size()) + " offsets for " +
                        std::to_string(rt.size()) + " ranks");
  // count x size must not wrap around: a huge length would otherwise map a
  // tiny buffer that the array then indexes past.
  for (std::size_t r = 0; r + 1 < layout.offsets.size(); ++r) {
    std::uint64_t count = layout.offsets[r + 1] - layout.offsets[r];
    if (layout.offsets[r + 1] < layout.offsets[r] ||
        (layout.element.size && count > (std::uint64_t{1} << 48) / layout.element.size))  // 256 TiB per rank
      throw RangeError("an array of " + std::to_string(layout.length) + " elements of " +
                       std::to_string(layout.element.size) + " bytes cannot be allocated (rank " + std::to_string(r) +
                       " would hold " + std::to_string(count) + ")");
  }
  const StorageKind kind = resolved_storage_kind(rt, options);
  if (trace::recording()) {
    const auto r = static_cast<std::size_t>(rt.rank());
    trace::instant(trace::Category::storage, "allocate",
                   {{"bytes", static_cast<std::int64_t>((layout.offsets[r + 1] - layout.offsets[r]) * layout.element.size)},
                    {"elements", static_cast<std::int64_t>(layout.length)}},
                   "storage", storage_kind_name(kind));
  }
  switch (kind) {
    case StorageKind::heap: {
      auto r = static_cast<std::size_t>(rt.rank());
      return std::make_unique<HeapStorage>((layout.offsets[r + 1] - layout.offsets[r]) * layout.element.size);
    }
    case StorageKind::colocale:
      return std::make_unique<ColocaleStorage>(rt, layout);
    case StorageKind::shared:
      break;
  }
  return std::make_unique<SharedStorage>(rt, layout, options);
}

}  // namespace tessera
