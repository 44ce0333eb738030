// The levels of a checkpoint (internal), one class each behind one
// interface, chained as VeloC chains its modules: a commit walks them in
// order. The first writes this rank's file from memory and commits the
// manifest the ranks agreed on; each one after copies that committed file
// (the buddy level to another node, the disk level to `dir`), at once or
// in the background until finish(). Checkpoint holds the chain its options
// give (make_levels); the commit protocol around it is checkpoint.cpp's.
#pragma once
#include <sys/types.h>

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "../store/manifest.hpp"
#include "tessera/resilience/checkpoint.hpp"
#include "tessera/storage/durable_file.hpp"
#include "tessera/storage/mapping.hpp"

namespace tessera::resilience::levels {

// A node-level data file this process wrote or received, still mapped: the
// next commit that takes it over as a spare finds its pages in place.
struct MappedFile {
  dev_t dev = 0;
  ino_t ino = 0;
  Mapping map;
};

// One commit as the levels see it.
struct NewCheckpoint {
  std::string sub;          // its directory's name in every level's directory (sSTEP-eEPOCH)
  std::string file;         // this rank's data file's name
  std::uint64_t bytes = 0;  // its size
  const store::DataHeader* header = nullptr;
  const std::vector<detail::PieceData>* pieces = nullptr;
  std::vector<store::PieceRecord>* records = nullptr;  // offsets given; write() fills in the CRCs
};

class CheckpointLevel {
 public:
  CheckpointLevel(Level level, std::string root, int keep) : level_(level), root_(std::move(root)), keep_(keep) {}
  virtual ~CheckpointLevel() = default;
  CheckpointLevel(const CheckpointLevel&) = delete;
  CheckpointLevel& operator=(const CheckpointLevel&) = delete;

  Level level() const noexcept { return level_; }
  // The program's directory at this level (Checkpoint::level_dir).
  const std::string& root() const noexcept { return root_; }
  std::string dir_of(const NewCheckpoint& c) const { return root_ + "/" + c.sub; }

  // First in the chain: this rank's file written from memory into
  // dir_of(c). Returns its bytes while they stay mapped (else empty).
  virtual std::span<const std::byte> write(const NewCheckpoint& c);
  // First in the chain: the level its manifest names at commit (node while
  // buddy copies are still to come), and whether its older checkpoints are
  // pruned then (not while those copies travel).
  virtual Level commit_level() const { return level_; }
  virtual bool prune_at_commit() const { return true; }
  // Whether a pruned checkpoint's files become the spare the next commit takes over.
  virtual bool keeps_spare() const { return false; }

  // Later in the chain, collective, before the commit counts (a failure
  // here fails the commit on every rank): what must be ready on every node.
  virtual void prepare(Runtime&, const NewCheckpoint&, const std::string& /*body*/) {}
  // Drops what prepare() set up, when the commit fails after it.
  virtual void abandon() {}
  // Later in the chain, once the first level is committed: copies this
  // rank's committed file (`file`, mapped, or the file `from`), at once or
  // in the background until finish().
  virtual void copy(Runtime& rt, const NewCheckpoint& c, const std::string& body, std::span<const std::byte> file,
                    const std::string& from);
  // Collective: waits for the copies in flight (if any) and commits this level.
  virtual void finish(Runtime&) {}
  // Local: advances the copies in flight; true when this rank's are done.
  virtual bool poll() { return true; }
  // Whether copies are in flight (the same on every rank).
  virtual bool pending() const noexcept { return false; }
  // Local: whether this rank's background copy to disk is done.
  virtual bool drained() const noexcept { return true; }
  // Unmaps the files it keeps mapped (before they are removed).
  virtual void release() {}

  // Prunes this level's directory on every node (its leader).
  void prune_on_every_node(Runtime& rt) const;

 protected:
  Level level_;
  std::string root_;
  int keep_;
  // Files of one origin kept mapped: the newest `keep` and the spare.
  std::size_t mapped_files() const noexcept { return static_cast<std::size_t>(keep_) + 1; }
};

std::unique_ptr<CheckpointLevel> make_node_level(std::string root, int keep, Level commit_level, bool copies_follow);
std::unique_ptr<CheckpointLevel> make_buddy_level(Runtime& rt, std::string root, int keep, bool async);
std::unique_ptr<CheckpointLevel> make_disk_level(std::string root, int keep, bool async);

// This rank's file `file` of the checkpoint directory `dir` under the
// level's directory `level_dir`, to be filled (node.cpp says how).
std::unique_ptr<DurableFile> file_to_fill(const std::string& level_dir, const std::string& dir, const std::string& file,
                                          std::uint64_t bytes);
// A writable mapping of `file` (node.cpp says how).
MappedFile map_for_writing(std::vector<MappedFile>& all, const DurableFile& file, std::uint64_t bytes);

// The chain `options` give, in commit order: node (with buddy copies on
// several nodes), then disk. Collective (the buddy level makes its
// communicator).
std::vector<std::unique_ptr<CheckpointLevel>> make_levels(Runtime& rt, const CheckpointOptions& options,
                                                          const std::string& node_root, const std::string& disk_root);

// Collective, for latest(): a node-level checkpoint `m` in `dir` made
// complete on every node (each lacking file copied from a node that holds
// it); "" when it is, else which file no node holds.
std::string complete_on_every_node(Runtime& rt, const store::Manifest& m, const std::string& dir);

}  // namespace tessera::resilience::levels
