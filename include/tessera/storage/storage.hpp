// Where a distributed array's local part lives. Heap: private memory of the
// rank. Shared: one file-backed segment per rank (POSIX shm under /dev/shm by
// default, or any directory) plus a JSON metadata file, so other processes and
// co-located ranks map the same bytes with no copy. Co-locale: one anonymous
// node-shared segment per rank (a memfd), mapped by the rank's co-locales only;
// what default storage becomes when the runtime's co-locale segments are on.
#pragma once
#include <sys/types.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "tessera/runtime/runtime.hpp"
#include "tessera/storage/element_type.hpp"
#include "tessera/storage/mapping.hpp"
#include "tessera/storage/metadata.hpp"

namespace tessera {

enum class StorageKind { heap, shared, colocale };
// "heap", "shared", "colocale".
const char* storage_kind_name(StorageKind kind) noexcept;

struct StorageOptions {
  // Unset: the runtime's default, Heap, or Co-locale when its co-locale
  // segments are on (Runtime::colocale_segments, TESSERA_COLOCALE_SEGMENTS,
  // --colocales). Set: exactly that kind, whatever the mode.
  std::optional<StorageKind> kind;
  std::string dir;            // shared: default $TESSERA_SHM_DIR, else /dev/shm
  std::string name;           // shared: file base name; default tessera-<job>-<n>
  bool persist = false;       // shared: keep segments and metadata after destruction
  bool group_access = false;  // shared: mode 0660 instead of 0600
  // shared: files 0660 owned by this group (name or number), for an analysis
  // under another uid (a rootless container) in that group. Empty: the
  // environment's TESSERA_SHM_GROUP, else none (the creator's group).
  std::string group;
  // shared: map the segments of an existing array `name` in `dir` (written
  // with persist by a job of the same rank count and layout) instead of
  // creating them. Nothing is copied and nothing is removed afterwards.
  bool open_existing = false;
  // open_existing: map the segments writable too (default: read-only, so a
  // read-only copy opens and the input cannot be changed by accident).
  bool open_writable = false;
  // open_existing, read-only: the job may split the array over its ranks
  // differently from the writer (another rank count). Each rank maps its
  // elements in place from the one segment holding them all; MismatchError,
  // on every rank, when some rank's elements span two segments (copy them
  // then). The mapping is this job's alone: it has no metadata file another
  // process could attach with, and co-located ranks' parts are not mapped.
  bool open_by_range = false;

  // Explicit Heap: stays private to the rank even with co-locale segments on.
  static StorageOptions heap() {
    StorageOptions o;
    o.kind = StorageKind::heap;
    return o;
  }
  // Explicit co-locale segment, whatever the runtime's mode.
  static StorageOptions colocale() {
    StorageOptions o;
    o.kind = StorageKind::colocale;
    return o;
  }
  static StorageOptions shared(std::string name = {}, std::string dir = {}) {
    StorageOptions o;
    o.kind = StorageKind::shared;
    o.name = std::move(name);
    o.dir = std::move(dir);
    return o;
  }
  static StorageOptions existing(std::string name, std::string dir) {
    StorageOptions o = shared(std::move(name), std::move(dir));
    o.open_existing = true;
    return o;
  }
  static StorageOptions existing_by_range(std::string name, std::string dir) {
    StorageOptions o = existing(std::move(name), std::move(dir));
    o.open_by_range = true;
    return o;
  }
};

// What the array layer tells storage about the whole array.
struct ArrayLayout {
  ElementType element;
  std::uint64_t length = 0;
  std::string distribution = "block";
  std::vector<std::uint64_t> offsets;  // ranks + 1
};

class Storage {
 public:
  virtual ~Storage() = default;
  std::span<std::byte> local() const noexcept { return local_; }
  virtual StorageKind kind() const noexcept = 0;
  // Elements of a co-located rank's part, mapped into this process, or null
  // (Heap storage, another node, or this rank itself — use local()).
  virtual std::byte* colocal_data(int /*world_rank*/) const noexcept { return nullptr; }
  // Shared storage: the metadata file another process attaches with.
  virtual std::string metadata_path() const { return {}; }
  // Collective: the array is now `smaller` (same element type and ranks,
  // every rank's part no longer than before). Each rank keeps the prefix of
  // its part and gives the rest back: Heap and Co-locale pages are freed, a
  // Shared segment is truncated and the metadata rewritten, so attaching
  // processes see the new layout. MismatchError for a Shared array opened in
  // place from another job, or a part that would grow.
  virtual void shrink(Runtime& rt, const ArrayLayout& smaller) = 0;
  // Whether shrink can work: false for a Shared array mapped in place from
  // another job.
  virtual bool shrinkable() const noexcept { return true; }

 protected:
  std::span<std::byte> local_;
};

// The kind an array created with `options` gets on `rt`.
StorageKind resolved_storage_kind(const Runtime& rt, const StorageOptions& options) noexcept;

// Collective over rt.comm(): every rank passes the same layout and options.
std::unique_ptr<Storage> make_storage(Runtime& rt, const ArrayLayout& layout, const StorageOptions& options);

// Allocates the first `bytes` of the open file `fd` (posix_fallocate), so
// later writes through a mapping cannot fail; throws SystemError "PATH needs
// N MiB in DIR, M MiB free" when the file system is full.
void reserve_space(int fd, std::uint64_t bytes, const std::string& path, const std::string& dir);

// Throws the SystemError for a failed attempt to `what` (e.g. "size") `path`,
// a file of `bytes` in `dir`: the "needs N MiB" message above when the file
// system is full.
[[noreturn]] void throw_write_failure(const std::string& what, const std::string& path, std::uint64_t bytes,
                                      const std::string& dir, int err);

// The group shared files are given: `name` (a group name or number), else
// $TESSERA_SHM_GROUP; (gid_t)-1 when neither is set. Throws ConfigError for
// an unknown group.
gid_t shared_group_id(const std::string& name = {});

// The directory shared storage uses when none is given.
std::string default_shared_dir();

}  // namespace tessera
