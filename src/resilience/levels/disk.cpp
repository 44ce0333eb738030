// The disk level: fsync'd files in `dir`, written from memory when it is
// the only level, else copied from the committed node files, in commit()
// or by a thread beside the application (async_drain) (level.hpp).
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <filesystem>
#include <thread>

#include "level.hpp"
#include "tessera/runtime/collective.hpp"
#include "tessera/runtime/error.hpp"

namespace tessera::resilience::levels {

using namespace store;
namespace fs = std::filesystem;

namespace {

void copy_file_durably(const std::string& from, const std::string& to, std::uint64_t bytes) {
  FileDescriptor in(::open(from.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW));
  if (!in) throw SystemError("cannot open " + from + " to copy it to " + to, errno);
  DurableFile out(to, bytes, true);
  std::vector<std::byte> buf;
  for (std::uint64_t at = 0; at < bytes;) {
    std::size_t n = static_cast<std::size_t>(std::min<std::uint64_t>(bytes - at, 8u << 20));
    buf.resize(n);
    read_exactly(in.get(), at, buf, from);
    out.write_at(at, buf);
    at += n;
  }
  out.commit();
}


void create_directory(const std::string& dir) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (!fs::is_directory(dir)) throw SystemError("cannot create checkpoint directory " + dir, ec.value());
}

// A disk copy in progress: the thread copies this rank's committed node file.
struct Drain {
  std::thread thread;
  std::exception_ptr failure;       // set by the thread
  std::atomic<bool> copied{false};  // set by the thread when it ends
  std::string dir;                  // the disk checkpoint's directory
  std::string body;                 // the manifest body, for the disk manifest
  ~Drain() {
    if (thread.joinable()) thread.join();
  }
};

class DiskLevel final : public CheckpointLevel {
 public:
  DiskLevel(std::string root, int keep, bool async) : CheckpointLevel(Level::disk, std::move(root), keep), async_(async) {}

  // The only level: this rank's pieces straight into a durable file.
  std::span<const std::byte> write(const NewCheckpoint& c) override {
    const auto& pieces = *c.pieces;
    auto& records = *c.records;
    DurableFile f(dir_of(c) + "/" + c.file, c.bytes, true);
    f.write_at(0, std::as_bytes(std::span<const DataHeader>(c.header, 1)));
    for (std::size_t k = 0; k < pieces.size(); ++k) {
      std::vector<std::byte> filled;  // a piece written by its fill: serialized here first
      std::span<const std::byte> bytes = pieces[k].bytes;
      if (pieces[k].fill) {
        filled.resize(pieces[k].fill_bytes);
        pieces[k].fill(filled.data());
        bytes = filled;
      }
      records[k].crc = crc32c(bytes);
      f.write_at(records[k].offset, bytes);
    }
    f.commit();
    return {};
  }

  void copy(Runtime& rt, const NewCheckpoint& c, const std::string& body, std::span<const std::byte>,
            const std::string& from) override {
    const std::string dir = dir_of(c);
    const std::string source = from + "/" + c.file, target = dir + "/" + c.file;
    const std::uint64_t bytes = c.bytes;
    if (async_) {
      // The copy touches files only (no MPI, no application memory), so it
      // runs beside the application until finish_drain(), directory
      // included: the commit adds no collective to the node level's (a
      // failure to create it is the drain's, reported by finish_drain() on
      // every rank).
      auto d = std::make_unique<Drain>();
      d->dir = dir;
      d->body = body;
      Drain* raw = d.get();
      d->thread = std::thread([raw, dir, source, target, bytes] {
        try {
          create_directory(dir);
          copy_file_durably(source, target, bytes);
        } catch (...) {
          raw->failure = std::current_exception();
        }
        raw->copied = true;
      });
      drain_ = std::move(d);
      return;
    }
    try {
      agree(rt.comm(), [&] {
        create_directory(dir);
        copy_file_durably(source, target, bytes);
      });
      agree(rt.comm(), [&] { write_manifest_file(rt, body, Level::disk, dir); });
    } catch (...) {
      discard(rt, dir);
      throw;
    }
    prune_on_every_node(rt);
  }

  void finish(Runtime& rt) override {
    if (!drain_) return;
    std::unique_ptr<Drain> d = std::move(drain_);
    if (d->thread.joinable()) d->thread.join();
    try {
      agree(rt.comm(), [&] {
        if (d->failure) std::rethrow_exception(d->failure);
      });
      agree(rt.comm(), [&] { write_manifest_file(rt, d->body, Level::disk, d->dir); });
    } catch (...) {
      discard(rt, d->dir);
      throw;
    }
    prune_on_every_node(rt);
  }
  bool poll() override { return drained(); }
  bool pending() const noexcept override { return drain_ != nullptr; }
  bool drained() const noexcept override { return !drain_ || drain_->copied.load(); }

 private:
  bool async_;
  std::unique_ptr<Drain> drain_;
};

}  // namespace

std::unique_ptr<CheckpointLevel> make_disk_level(std::string root, int keep, bool async) {
  return std::make_unique<DiskLevel>(std::move(root), keep, async);
}

std::span<const std::byte> CheckpointLevel::write(const NewCheckpoint&) {
  throw Error("checkpoint level " + std::to_string(level_number(level_)) + " is never written first");
}

void CheckpointLevel::copy(Runtime&, const NewCheckpoint&, const std::string&, std::span<const std::byte>,
                           const std::string&) {
  throw Error("checkpoint level " + std::to_string(level_number(level_)) + " is never a copy");
}

void CheckpointLevel::prune_on_every_node(Runtime& rt) const {
  agree(rt.comm(), [&] {
    if (node_leader(rt)) prune(root_, keep_, keeps_spare());
  });
}

std::vector<std::unique_ptr<CheckpointLevel>> make_levels(Runtime& rt, const CheckpointOptions& o,
                                                          const std::string& node_root, const std::string& disk_root) {
  std::vector<std::unique_ptr<CheckpointLevel>> chain;
  const bool buddy = o.levels.has(Level::buddy), several_nodes = rt.node().count > 1;
  if (buddy || o.levels.has(Level::node)) {
    chain.push_back(make_node_level(node_root, o.keep, buddy && !several_nodes ? Level::buddy : Level::node,
                                    buddy && several_nodes));
    if (buddy && several_nodes) chain.push_back(make_buddy_level(rt, node_root, o.keep, o.async_drain));
  }
  if (o.levels.has(Level::disk)) chain.push_back(make_disk_level(disk_root, o.keep, o.async_drain));
  return chain;
}

}  // namespace tessera::resilience::levels
