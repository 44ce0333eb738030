// The node level: this rank's file in the node's memory (/dev/shm or
// node_dir), written through a mapping of the level's spare (level.hpp).
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>

#include "level.hpp"
#include "tessera/comm/bulk_exchange.hpp"
#include "tessera/runtime/collective.hpp"
#include "tessera/runtime/error.hpp"
#include "tessera/runtime/fault_injection.hpp"

namespace tessera::resilience::levels {

using namespace store;

// This rank's file `file` of the checkpoint directory `dir`, filled under a
// temporary name and renamed into place by commit(): the level's spare of
// the same name when there is one no larger than needed (its pages exist
// already), else a new file; either way `bytes` are reserved, so a full file
// system is an error here, never a SIGBUS later.
std::unique_ptr<DurableFile> file_to_fill(const std::string& level_dir, const std::string& dir, const std::string& file,
                                          std::uint64_t bytes) {
  return std::make_unique<DurableFile>(dir + "/" + file, bytes, false, level_dir + "/" + kSpare + "/" + file);
}

// A writable mapping of `file`: this process's mapping of it when it still
// has one (a spare it wrote or received before: no page to fault in), else
// a new one with every page placed in one call instead of a fault per page
// (received bytes fault 3x slower, measured, than a populated mapping).
MappedFile map_for_writing(std::vector<MappedFile>& all, const DurableFile& file, std::uint64_t bytes) {
  struct stat st {};
  if (::fstat(file.fd(), &st) != 0) throw SystemError("cannot stat " + file.temporary_path(), errno);
  auto it = std::find_if(all.begin(), all.end(), [&](const MappedFile& s) {
    return s.dev == st.st_dev && s.ino == st.st_ino && s.map.size() == bytes;
  });
  MappedFile slot;
  if (it != all.end()) {
    slot = std::move(*it);
    all.erase(it);
    return slot;
  }
  slot.dev = st.st_dev;
  slot.ino = st.st_ino;
  slot.map = Mapping::file(file.fd(), static_cast<std::size_t>(bytes), true, file.temporary_path());
  ::madvise(slot.map.data(), slot.map.size(), MADV_POPULATE_WRITE);
  return slot;
}

// This rank's node-level data file: the header and the pieces copied into a
// mapping of the file, each piece's CRC32C computed on the way (`mine`).
// The file is the spare left by the last pruned checkpoint when there is
// one (its pages exist, and are still mapped when this process wrote it).
// A kill leaves no partial file under the real name. Returns the file's
// bytes, mapped until `mapped_files` newer files were written.
std::span<const std::byte> write_node_file(std::vector<MappedFile>& all, std::size_t mapped_files,
                                           const std::string& level_dir, const std::string& dir,
                                           const std::string& file, const DataHeader& h,
                                           const std::vector<detail::PieceData>& pieces,
                                           std::vector<PieceRecord>& mine, std::uint64_t bytes) {
  auto out = file_to_fill(level_dir, dir, file, bytes);
  const std::uint64_t had = out->adopted_bytes();
  MappedFile slot = map_for_writing(all, *out, bytes);
  std::byte* base = slot.map.data();
  std::memcpy(base, &h, sizeof h);
  // Into a reused spare, the copy pauses once halfway for an injected kill
  // (FaultPoint::spare): a kill there leaves the file half new, half old.
  const std::uint64_t half = kHeaderBytes + (bytes - kHeaderBytes) / 2;
  bool paused = had == 0;
  auto pause = [&] {
    paused = true;
    FaultInjection::at_point(static_cast<int>(h.rank), FaultPoint::spare, h.step);
  };
  for (std::size_t k = 0; k < pieces.size(); ++k) {
    const std::uint64_t at = mine[k].offset;
    if (pieces[k].fill) {  // serialized in place, then checksummed where it lies
      pieces[k].fill(base + at);
      mine[k].crc = crc32c(std::span<const std::byte>(base + at, pieces[k].fill_bytes));
      if (!paused && half < at + pieces[k].fill_bytes) pause();
      continue;
    }
    std::span<const std::byte> from = pieces[k].bytes;
    std::size_t n = from.size();
    if (!paused && half < at + n) n = static_cast<std::size_t>(half - std::min(half, at));
    std::uint32_t crc = crc32c_copy(base + at, from.first(n));
    if (n < from.size()) {
      pause();
      crc = crc32c_copy(base + at + n, from.subspan(n), crc);
    }
    mine[k].crc = crc;
  }
  if (!paused) pause();
  out->commit();
  // The files of the `mapped_files` newest checkpoints stay mapped: with
  // keep K, the spare a commit takes over is the file written K + 1 commits
  // before. Older mappings go, so a deleted file's memory is not held.
  const std::span<const std::byte> written(slot.map.data(), slot.map.size());
  all.push_back(std::move(slot));
  while (all.size() > mapped_files) all.erase(all.begin());
  return written;
}


namespace {

class NodeLevel final : public CheckpointLevel {
 public:
  // `commit_level`: buddy on one node (where the buddy's copy would land
  // in this same directory), else node; `copies_follow`: buddy copies to
  // other nodes come after the commit, which then prunes nothing yet.
  NodeLevel(std::string root, int keep, Level commit_level, bool copies_follow)
      : CheckpointLevel(Level::node, std::move(root), keep), commit_level_(commit_level), copies_follow_(copies_follow) {}
  std::span<const std::byte> write(const NewCheckpoint& c) override {
    return write_node_file(written_, mapped_files(), root_, dir_of(c), c.file, *c.header, *c.pieces, *c.records,
                           c.bytes);
  }
  Level commit_level() const override { return commit_level_; }
  bool prune_at_commit() const override { return !copies_follow_; }
  bool keeps_spare() const override { return true; }
  void release() override { written_.clear(); }

 private:
  Level commit_level_;
  bool copies_follow_;
  // The node-level files this rank wrote lately, still mapped, least
  // recently written first: the file of a pruned checkpoint becomes the
  // next one's (its pages exist and are mapped), so a commit is one copy
  // into memory, checksummed on the way.
  std::vector<MappedFile> written_;
};

}  // namespace

std::unique_ptr<CheckpointLevel> make_node_level(std::string root, int keep, Level commit_level, bool copies_follow) {
  return std::make_unique<NodeLevel>(std::move(root), keep, commit_level, copies_follow);
}

// A node-level checkpoint across nodes: each node holds its own ranks' files
// and (level 1) those of the ranks whose buddies it holds. But a restore may
// read any rank's file on any rank (spans and chunks are not placed as they
// were written; a node lost or another rank count moves every block), so
// every file a node lacks is first copied there over MPI from a node that
// holds it: after a lost node on 3 or more nodes its files live on one
// survivor only. The cost, once per restore: every node then holds the whole
// checkpoint. On one node it only names a file that is missing. Collective;
// "" when the checkpoint is complete on every node, otherwise which file no
// node holds.
std::string complete_on_every_node(Runtime& rt, const Manifest& m, const std::string& dir) {
  const NodeGroup& node = rt.node();
  const auto files = static_cast<std::size_t>(m.ranks), nodes = static_cast<std::size_t>(node.count);
  // have[n * files + r]: node n holds a file of rank r of the size the
  // manifest gives (its contents are checked after, as on one node).
  std::vector<int> have(nodes * files, 0);
  if (node.rank == 0)
    for (std::size_t r = 0; r < files; ++r) {
      struct stat st {};
      const std::string path = dir + "/" + m.files[r].file;
      have[static_cast<std::size_t>(node.index) * files + r] =
          ::lstat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode) && static_cast<std::uint64_t>(st.st_size) == m.files[r].bytes;
    }
  all_reduce(rt.comm(), have.data(), static_cast<int>(have.size()), MPI_MAX);

  std::vector<std::vector<int>> ranks_on(nodes);
  for (std::size_t k = 0; k < node.node_of_rank.size(); ++k)
    ranks_on[static_cast<std::size_t>(node.node_of_rank[k])].push_back(static_cast<int>(k));
  struct Copy {
    std::size_t file;
    int from, to;
  };
  std::vector<Copy> copies;  // the same plan on every rank
  for (std::size_t r = 0; r < files; ++r) {
    std::vector<std::size_t> holders;
    for (std::size_t n = 0; n < nodes; ++n)
      if (have[n * files + r]) holders.push_back(n);
    if (holders.empty())  // lost with its node (and its buddy's), or deleted
      return "data file " + m.files[r].file + " of rank " + std::to_string(r) + " is missing" +
             (nodes > 1 ? " on all " + std::to_string(nodes) + " nodes of the job" : std::string()) +
             (m.level == Level::node && (nodes > 1 || m.ranks != rt.size())
                  ? " (level 2 keeps no copy on another node; level 1, buddy, does)"
                  : std::string());
    for (std::size_t n = 0; n < nodes; ++n) {
      if (have[n * files + r]) continue;  // spread the senders over the holders and their ranks
      const auto& from = ranks_on[holders[n % holders.size()]];
      copies.push_back({r, from[r % from.size()], ranks_on[n][r % ranks_on[n].size()]});
    }
  }
  if (copies.empty()) return "";
  const int me = rt.rank();
  std::vector<Copy> sent, received;
  for (const auto& c : copies) {
    if (c.from == me) sent.push_back(c);
    if (c.to == me) received.push_back(c);
  }
  std::stable_sort(sent.begin(), sent.end(), [](const Copy& a, const Copy& b) { return a.to < b.to; });
  std::stable_sort(received.begin(), received.end(), [](const Copy& a, const Copy& b) { return a.from < b.from; });
  std::vector<std::uint64_t> counts(static_cast<std::size_t>(rt.size()), 0), got;
  std::vector<std::byte> send;
  agree(rt.comm(), [&] {
    std::uint64_t total = 0;
    for (const auto& c : sent) total += m.files[c.file].bytes;
    send.resize(total);
    std::uint64_t at = 0;
    for (const auto& c : sent) {
      const std::string path = dir + "/" + m.files[c.file].file;
      FileDescriptor fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW));
      if (!fd) throw SystemError("cannot open checkpoint data " + path + " to copy it to another node", errno);
      read_exactly(fd.get(), 0, std::span<std::byte>(send).subspan(at, m.files[c.file].bytes), path);
      at += m.files[c.file].bytes;
      counts[static_cast<std::size_t>(c.to)] += m.files[c.file].bytes;
    }
  });
  auto arrived = comm::exchange_bytes(rt.comm(), send, counts, 1, got);
  send = {};
  agree(rt.comm(), [&] {
    std::uint64_t at = 0;
    for (const auto& c : received) {
      const std::uint64_t bytes = m.files[c.file].bytes;
      if (at + bytes > arrived.size()) throw FormatError("checkpoint " + dir + ": a copied data file came short");
      write_file_atomically(dir + "/" + m.files[c.file].file, std::span<const std::byte>(arrived).subspan(at, bytes), false);
      at += bytes;
    }
  });
  return "";
}


}  // namespace tessera::resilience::levels
