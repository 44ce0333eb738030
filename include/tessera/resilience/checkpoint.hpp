// Coordinated checkpoints at user sync points, restorable on any rank count.
//
//   CheckpointOptions o;
//   o.dir = "/scratch/run", o.levels = Level::node | Level::disk, o.name = "jacobi";
//   Checkpoint ck(rt, o);
//   auto w = ck.begin(step);
//   w.add("u", u);             // a DistArray, a ChunkArray, or this rank's span of values
//   w.commit();                // collective: complete everywhere, or not at all
//   ...
//   auto found = ck.latest();  // collective: the newest complete, valid checkpoint
//   if (found) { auto r = ck.restore(*found.info); r.read("u", u); }
//
// Levels (docs/checkpoint.md): node (Level::node, 2) = files in the node's
// /dev/shm (or `node_dir`), which outlive the processes (a relaunch on the
// node recovers from memory); buddy (1) = the node level plus a copy of each
// rank's file written by its buddy on the next node, so the survivors of a
// lost node still hold every file; disk (3) = `dir`, fsync'd. Recovery is a
// relaunch: nothing here needs the old processes.
//
// With node and disk levels, the disk copy is made from the committed node
// files: in commit(), or by a thread while the application goes on
// (async_drain; committed by finish_drain()).
//
// Layout: LEVELDIR/NAME.ckpt/sSTEP-eEPOCH/ holds one data file per rank
// (rRANK.data: a checksummed header, then the rank's pieces back to back)
// and manifest.json, renamed into place only once every rank's file is
// complete. Every piece carries a CRC32C; latest() checks every byte.
#pragma once
#include <cstdint>
#include <cstring>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <type_traits>
#include <typeinfo>
#include <vector>

#include "tessera/array/dist_array.hpp"
#include "tessera/chunks/archive.hpp"
#include "tessera/chunks/chunk_array.hpp"
#include "tessera/resilience/level.hpp"
#include "tessera/runtime/collective.hpp"
#include "tessera/runtime/runtime.hpp"
#include "tessera/storage/element_type.hpp"

namespace tessera::resilience {

using chunks::ChunkArray;
using chunks::Serializable;

struct CheckpointOptions {
  std::string dir;             // the disk level's directory (Level::disk)
  Levels levels = Level::node;  // any combination (buddy includes node)
  std::string name;            // the program: [A-Za-z0-9_.-], names the checkpoints
  std::string node_dir;        // the node level's directory; "" = $TESSERA_SHM_DIR or /dev/shm
  // Complete checkpoints kept per level; an older one is deleted only after
  // a newer one is committed. 2 leaves a fallback when the newest turns out
  // damaged when it is read back.
  int keep = 1;
  // commit() returns once the node level is committed; what goes beyond
  // this node's memory proceeds meanwhile: with the disk level, a thread
  // copies this rank's file to disk; with the buddy level on several nodes,
  // the copies to the buddies travel (progressed by any MPI call of the
  // application, or by poll()). finish_drain() waits for both and commits
  // their levels; the next commit(), latest() and remove() call it first.
  // Until then the older checkpoints are kept, so a failure meanwhile
  // recovers from the newest one whose copies were complete.
  bool async_drain = false;
};

// One committed checkpoint, as latest() found it.
struct CheckpointInfo {
  Level level = Level::node;  // buddy = node + buddy copies
  std::string path;         // its directory
  std::uint64_t step = 0;
  std::uint64_t epoch = 0;  // commits in this directory's history: orders checkpoints
  int ranks = 0;            // ranks that wrote it
};

struct LatestCheckpoint {
  std::optional<CheckpointInfo> info;  // empty when no valid checkpoint exists
  std::vector<std::string> skipped;    // newer candidates refused, newest first, each saying why
  explicit operator bool() const noexcept { return info.has_value(); }
  // One line per refused candidate (empty when none was refused).
  std::string message() const;
};

// The name recorded for a chunk type, which a restore must match: C's
// `static constexpr const char* checkpoint_name` when it has one, else the
// compiler's type name (stable for one build).
template <class C>
std::string chunk_type_name() {
  if constexpr (requires { C::checkpoint_name; })
    return std::string(C::checkpoint_name);
  else
    return std::string(typeid(C).name());
}

namespace detail {
// What a rank contributes under one name.
struct PieceData {
  std::string name;
  std::string kind;  // "array" or "chunks"
  std::string type;  // element type name, or chunk type name
  std::uint64_t element_size = 0;
  std::uint64_t begin = 0;   // array: first global index (kUnplaced: after the ranks before)
  std::uint64_t count = 0;   // array: elements; chunks: chunks on this rank
  std::uint64_t length = 0;  // array: global length (kUnplaced: the sum); chunks: all chunks
  std::span<const std::byte> bytes;  // points into `owned` or into the caller's memory
  std::vector<std::byte> owned;
  // Instead of `bytes`: `fill_bytes` bytes that `fill` writes at the place
  // given (chunks, serialized straight into the checkpoint's file).
  std::uint64_t fill_bytes = 0;
  std::function<void(std::byte*)> fill;
  std::uint64_t size() const noexcept { return fill ? fill_bytes : bytes.size(); }
  std::shared_ptr<const void> keep_alive;  // a temporary handed to add()
};
inline constexpr std::uint64_t kUnplaced = ~std::uint64_t{0};
}  // namespace detail

class Checkpoint;
namespace levels {
class CheckpointLevel;
}

// Level 1's partner of every rank: on several nodes, the rank of the next
// node (cyclically) at the same position among its node's ranks (modulo
// that node's size); on one node, the next rank of the node.
std::vector<int> buddy_ranks(const NodeGroup& node);

// The pieces of one checkpoint, collected on each rank, then committed
// together. What is added (a span, a DistArray, a ChunkArray) is not copied
// before commit(): it must stay valid and unchanged until commit() returns.
class CheckpointWriter {
 public:
  // Move-only: pieces may point into buffers the writer owns.
  CheckpointWriter(CheckpointWriter&&) noexcept = default;
  CheckpointWriter& operator=(CheckpointWriter&&) noexcept = default;
  CheckpointWriter(const CheckpointWriter&) = delete;
  CheckpointWriter& operator=(const CheckpointWriter&) = delete;

  // The bytes of the pieces added so far on this rank (its data file less
  // its header).
  std::uint64_t bytes() const noexcept {
    std::uint64_t n = 0;
    for (const auto& p : pieces_) n += p.size();
    return n;
  }
  // This rank's `values` of array `name`; the ranks' spans, in rank order,
  // make the global array (a rank with none passes an empty span).
  template <class T>
  void add(const std::string& name, std::span<const T> values) {
    static_assert(std::is_trivially_copyable_v<T>);
    add_array(name, element_type_of<T>(), detail::kUnplaced, values.size(), detail::kUnplaced,
              std::as_bytes(values));
  }
  template <class T>
  void add(const std::string& name, const std::vector<T>& values) {
    add(name, std::span<const T>(values));
  }
  // A temporary vector is kept by the writer until commit.
  template <class T>
  void add(const std::string& name, std::vector<T>&& values) {
    static_assert(std::is_trivially_copyable_v<T>);
    auto keep = std::make_shared<std::vector<T>>(std::move(values));
    add_array(name, element_type_of<T>(), detail::kUnplaced, keep->size(), detail::kUnplaced,
              std::as_bytes(std::span<const T>(*keep)));
    pieces_.back().keep_alive = std::move(keep);
  }
  template <class T>
  void add(const std::string& name, const DistArray<T>& a) {
    add_array(name, element_type_of<T>(), a.local_begin(), a.local().size(), a.size(), std::as_bytes(a.local()));
  }
  // The chunks of this rank: sized now, serialized by commit() straight
  // into the checkpoint's file.
  template <Serializable C>
  void add(const std::string& name, ChunkArray<C>& a) {
    detail::PieceData p;
    p.name = name;
    p.kind = "chunks";
    p.type = chunk_type_name<C>();
    p.element_size = sizeof(C);
    p.count = a.local_ids().size();
    p.length = a.size();
    // An index (id, offset, bytes) per chunk, then the chunks' bytes.
    std::vector<std::uint64_t> index;
    std::uint64_t at = p.count * 3 * sizeof(std::uint64_t);
    for (std::uint64_t id : a.local_ids()) {
      const std::uint64_t bytes = chunks::packed_bytes(a.local(id));
      index.insert(index.end(), {id, at, bytes});
      at += bytes;
    }
    p.fill_bytes = at;
    p.fill = [&a, name, index = std::move(index)](std::byte* to) {
      if (!index.empty()) std::memcpy(to, index.data(), index.size() * sizeof(std::uint64_t));
      for (std::size_t k = 0; k < index.size(); k += 3) {
        C& chunk = a.local(index[k]);
        if (chunks::packed_bytes(chunk) != index[k + 2])  // never write past the bytes reserved for it
          throw MismatchError("checkpoint piece '" + name + "': chunk " + std::to_string(index[k]) +
                              " changed between add() and commit()");
        chunks::pack_chunk_into(chunk, to + index[k + 1]);
      }
    };
    add_piece(std::move(p));
  }

  // Collective: writes every rank's pieces at each level, then the manifest;
  // on any failure (a full file system, a bad piece) every rank throws, the
  // new checkpoint is removed and the previous ones stay as they were.
  void commit();

  std::uint64_t step() const noexcept { return step_; }

 private:
  friend class Checkpoint;
  CheckpointWriter(Checkpoint& ck, std::uint64_t step) : ck_(&ck), step_(step) {}
  void add_array(const std::string& name, const ElementType& type, std::uint64_t begin, std::uint64_t count,
                 std::uint64_t length, std::span<const std::byte> bytes);
  void add_piece(detail::PieceData p);

  Checkpoint* ck_;
  std::uint64_t step_;
  std::vector<detail::PieceData> pieces_;
  bool committed_ = false;
};

// Reads a committed checkpoint back, on any rank count. Every read checks
// the piece's kind, type and element size and throws MismatchError naming
// the piece when they differ from what is asked. read, read_block and
// length are local (an error is thrown on the calling rank only);
// read_array and read_chunks are collective and fail on every rank together.
class CheckpointReader {
 public:
  const CheckpointInfo& info() const noexcept { return info_; }
  Runtime& runtime() const noexcept { return *rt_; }
  // Names in the checkpoint, sorted.
  std::vector<std::string> names() const;
  // Global elements of array `name`, or chunks of chunk array `name`.
  std::uint64_t length(const std::string& name) const;

  // Global elements [begin, begin + count) of array `name`.
  template <class T>
  std::vector<T> read(const std::string& name, std::uint64_t begin, std::uint64_t count) const {
    static_assert(std::is_trivially_copyable_v<T>);
    std::vector<T> out(count);
    read_range(name, element_type_of<T>(), begin, count, std::as_writable_bytes(std::span<T>(out)));
    return out;
  }
  // This rank's block (Distribution::block over the current ranks).
  template <class T>
  std::vector<T> read_block(const std::string& name) const {
    auto d = Distribution::block(length(name), rt_->size());
    return read<T>(name, d.begin(rt_->rank()), d.count(rt_->rank()));
  }
  // Fills this rank's part of `a` (any distribution; its length must match).
  template <class T>
  void read(const std::string& name, DistArray<T>& a) const {
    check_length(name, a.size());
    read_range(name, element_type_of<T>(), a.local_begin(), a.local().size(), std::as_writable_bytes(a.local()));
  }
  // A DistArray with block distribution over the current ranks.
  template <class T>
  DistArray<T> read_array(const std::string& name, const StorageOptions& storage = {}) const {
    std::uint64_t n = 0;
    agree(rt_->comm(), [&] { n = length(name); });
    DistArray<T> a(*rt_, n, storage);
    agree(rt_->comm(), [&] { read(name, a); });
    return a;
  }
  // Collective: chunk array `name` rebuilt over the runtime's ranks with
  // block placement (balance it afterwards as usual).
  template <Serializable C>
  ChunkArray<C> read_chunks(const std::string& name) const {
    static_assert(std::is_default_constructible_v<C>);
    std::vector<std::pair<std::uint64_t, std::vector<std::byte>>> mine;
    std::uint64_t n = 0;
    agree(rt_->comm(), [&] {
      mine = chunk_bytes(name, chunk_type_name<C>(), sizeof(C));
      n = length(name);
    });
    std::size_t next = 0;
    auto placement = chunks::block_placement(static_cast<std::size_t>(n), rt_->size());
    return ChunkArray<C>(rt_->comm(), placement.size(), [&](std::uint64_t id) {
      const auto& [cid, bytes] = mine.at(next++);
      if (cid != id) throw FormatError("checkpoint " + info_.path + ": chunk " + std::to_string(id) + " is missing");
      C c{};
      chunks::unpack_chunk(c, bytes.data(), bytes.size());
      return c;
    }, placement);
  }

 private:
  friend class Checkpoint;
  struct Piece {
    std::string name, kind, type;
    std::uint64_t element_size = 0, begin = 0, count = 0, length = 0, offset = 0, bytes = 0;
    int rank = 0;
  };
  CheckpointReader(Runtime& rt, CheckpointInfo info, std::vector<Piece> pieces)
      : rt_(&rt), info_(std::move(info)), pieces_(std::move(pieces)) {}
  std::vector<const Piece*> pieces_of(const std::string& name) const;
  void check_length(const std::string& name, std::uint64_t length) const;
  void read_range(const std::string& name, const ElementType& type, std::uint64_t begin, std::uint64_t count,
                  std::span<std::byte> out) const;
  // This rank's chunks under block placement, ascending ids.
  std::vector<std::pair<std::uint64_t, std::vector<std::byte>>> chunk_bytes(const std::string& name,
                                                                            const std::string& type,
                                                                            std::uint64_t size) const;
  std::string data_path(int rank) const;

  Runtime* rt_;
  CheckpointInfo info_;
  std::vector<Piece> pieces_;
};

// What a directory holds for one program, checked without MPI (for a
// supervisor, a command line, a test): every checkpoint newest first, with
// `problem` empty when it is complete and every byte checks.
struct CheckpointStatus {
  CheckpointInfo info;
  std::string problem;
};

class Checkpoint {
 public:
  // Collective. Throws ConfigError for a bad name, an unknown level or a
  // missing directory; the directories are created when absent.
  Checkpoint(Runtime& rt, CheckpointOptions options);
  // Waits for a drain still copying, but cannot commit it (that is
  // collective): call finish_drain() first, or that disk checkpoint stays
  // incomplete (latest() skips it; the next commit removes it).
  ~Checkpoint();
  Checkpoint(const Checkpoint&) = delete;
  Checkpoint& operator=(const Checkpoint&) = delete;

  const CheckpointOptions& options() const noexcept { return options_; }
  Runtime& runtime() const noexcept { return *rt_; }
  // The directory holding this program's checkpoints at `level` (buddy and
  // node share the node directory).
  std::string level_dir(Level level) const;

  CheckpointWriter begin(std::uint64_t step) { return CheckpointWriter(*this, step); }

  // Collective: the newest complete checkpoint whose every byte checks, at
  // any level (the node level first at equal epochs), with why each newer
  // one was refused (incomplete, damaged, another program's, ...).
  LatestCheckpoint latest();
  // Reads the manifest of `info` (collective: rank 0 reads, all receive).
  CheckpointReader restore(const CheckpointInfo& info);

  // Collective: removes every checkpoint of this program at every level.
  void remove();

  // Collective: waits for the asynchronous copies of the last commit (if
  // any) on every rank and commits their levels: the buddy copies (level 1),
  // then the disk (3). On failure (a full disk) every rank throws, the
  // incomplete copies are removed, and the node level stays committed.
  void finish_drain();
  // Local: advances the buddy copies of the last commit (one MPI test) and
  // tells whether this rank's copies, disk drain included, are done. Any MPI
  // call of the application advances them too; this is for a rank that
  // computes for long without one.
  bool poll();
  // Whether copies are pending (the same on every rank).
  bool draining() const noexcept;
  // Local: whether this rank's copy of the pending drain is done (true when
  // none is pending), so the next finish_drain() will not wait for it.
  bool drain_copied() const noexcept;

  // Without MPI: every checkpoint of `name` under `dir` (a level's
  // directory as given in CheckpointOptions: `dir` or `node_dir`), newest
  // first, each fully checked.
  static std::vector<CheckpointStatus> inspect(const std::string& dir, const std::string& name);
  // Without MPI: removes `name`'s checkpoints under `dir`; returns how many.
  static std::size_t remove_all(const std::string& dir, const std::string& name);

 private:
  friend class CheckpointWriter;
  // Whether `level`'s directory (directory_level) is in use.
  bool uses(Level level) const;
  Runtime* rt_;
  CheckpointOptions options_;
  std::uint64_t epoch_ = 0;  // the last epoch committed or found
  // The levels a commit walks, in order (src/resilience/levels/level.hpp).
  std::vector<std::unique_ptr<levels::CheckpointLevel>> levels_;
};

}  // namespace tessera::resilience
