// The buddy level: each rank's file also on its buddy's node (level.hpp).
#include <algorithm>

#include "level.hpp"
#include "tessera/runtime/collective.hpp"
#include "tessera/runtime/error.hpp"
#include "tessera/runtime/progress.hpp"
#include "tessera/runtime/wait.hpp"

namespace tessera::resilience {

std::vector<int> buddy_ranks(const NodeGroup& node) {
  const std::size_t ranks = node.node_of_rank.size();
  std::vector<std::vector<int>> on(static_cast<std::size_t>(node.count));
  for (std::size_t r = 0; r < ranks; ++r) on.at(static_cast<std::size_t>(node.node_of_rank[r])).push_back(static_cast<int>(r));
  std::vector<int> buddy(ranks);
  for (std::size_t n = 0; n < on.size(); ++n)
    for (std::size_t i = 0; i < on[n].size(); ++i) {
      if (on.size() < 2) {
        buddy[static_cast<std::size_t>(on[n][i])] = on[n][(i + 1) % on[n].size()];
        continue;
      }
      const auto& next = on[(n + 1) % on.size()];
      buddy[static_cast<std::size_t>(on[n][i])] = next[i % next.size()];
    }
  return buddy;
}


namespace levels {

using namespace store;

namespace {

// Level 1's transfers are cut into requests of this many bytes: each
// completed one is progress, so a long transfer keeps polling instead of
// backing off into sleeps, which would throttle a TCP link to what one
// fragment per sleep carries (0.2 GB/s here before).
constexpr std::uint64_t kCopyChunk = std::uint64_t{4} << 20;
constexpr int kCopyTag = 1;


// Level 1: each rank's file also goes to its buddy, which receives it
// straight into a file of its own node's checkpoint directory (the spare's
// pages when there is one): no copy but the transfer's own. So every node
// holds its ranks' files and their buddies', and the ranks of one node
// surviving the loss of any other node find a complete checkpoint. On one
// node the copy would land in the same directory: there level 1 is level 2.
// In flight from commit() to finish_drain() (at once without async_drain).
struct BuddyCopies {
  struct Incoming {
    std::unique_ptr<DurableFile> file;
    MappedFile map;  // of file, kept mapped after for the next commits that take it over as a spare
  };
  std::string dir;   // the checkpoint's directory on this node
  std::string body;  // its manifest, committed at level 1 once every copy is in
  std::vector<Incoming> incoming;
  std::vector<int> senders;  // incoming[i] comes from rank senders[i]
  std::vector<MPI_Request> requests;
  std::vector<int> index;  // MPI_Testsome's output, reused by every test()

  BuddyCopies() = default;
  BuddyCopies(const BuddyCopies&) = delete;
  BuddyCopies& operator=(const BuddyCopies&) = delete;
  // The buffers must outlive their requests: an abandoned copy (an error
  // elsewhere on this rank) is still completed, as the peer completes its
  // side; its temporary files are then unlinked.
  ~BuddyCopies() {
    try {
      Backoff backoff;
      while (!test()) backoff.idle();
    } catch (...) {  // an MPI error now: the job is failing anyway
    }
  }

  // The files this rank receives at level 1: from every rank whose buddy it
  // is, each reserved now (a full /dev/shm fails the commit here, not the copy).
  static std::unique_ptr<BuddyCopies> reserve(Runtime& rt, std::vector<MappedFile>& mapped,
                                                const std::string& level_dir, const std::string& dir,
                                                const std::string& body) {
    auto c = std::make_unique<BuddyCopies>();
    c->dir = dir;
    c->body = body;
    const auto partner = buddy_ranks(rt.node());
    const json files = json::parse(body).at("files");
    for (std::size_t r = 0; r < partner.size(); ++r) {
      if (partner[r] != rt.rank() || static_cast<int>(r) == rt.rank()) continue;
      const std::uint64_t bytes = files.at(r).at("bytes").get<std::uint64_t>();
      Incoming in;
      in.file = file_to_fill(level_dir, dir, data_file_name(static_cast<int>(r)), bytes);
      in.map = map_for_writing(mapped, *in.file, bytes);
      c->incoming.push_back(std::move(in));
      c->senders.push_back(static_cast<int>(r));
    }
    return c;
  }
  // Posts the receives of the files of the ranks whose buddy this rank is
  // (reserved already) and the send of this rank's file to its buddy.
  void post(MPI_Comm comm, std::span<const std::byte> mine, int buddy) {
    auto chunks = [&](std::uint64_t bytes, auto&& each) {
      for (std::uint64_t at = 0; at < bytes; at += kCopyChunk) {
        requests.push_back(MPI_REQUEST_NULL);
        each(at, static_cast<int>(std::min(kCopyChunk, bytes - at)), requests.back());
      }
    };
    for (std::size_t i = 0; i < senders.size(); ++i)
      chunks(incoming[i].map.map.size(), [&](std::uint64_t at, int n, MPI_Request& r) {
        TESSERA_MPI(MPI_Irecv(incoming[i].map.map.data() + at, n, MPI_BYTE, senders[i], kCopyTag, comm, &r));
      });
    if (buddy >= 0)
      chunks(mine.size(), [&](std::uint64_t at, int n, MPI_Request& r) {
        TESSERA_MPI(MPI_Isend(mine.data() + at, n, MPI_BYTE, buddy, kCopyTag, comm, &r));
      });
  }
  // One test of every request: true when all are complete.
  bool test(bool* progressed = nullptr) {
    if (requests.empty()) return true;
    index.resize(requests.size());  // kept: a waiting rank polls this often
    int count = 0;
    {
      MpiPollScope quiet;
      TESSERA_MPI(MPI_Testsome(static_cast<int>(requests.size()), requests.data(), &count, index.data(),
                               MPI_STATUSES_IGNORE));
    }
    if (progressed) *progressed = count > 0;
    if (count == MPI_UNDEFINED || std::all_of(requests.begin(), requests.end(),
                                              [](MPI_Request r) { return r == MPI_REQUEST_NULL; })) {
      requests.clear();
      return true;
    }
    return false;
  }
  // Waits for every request, serving the Runtime's exchanges meanwhile.
  void complete(ProgressEngine& engine) {
    Backoff backoff;
    unsigned idle = 0;
    bool progressed = false;
    while (!test(&progressed)) {
      if (progressed)
        backoff.reset();
      else
        engine.serve_once(backoff, idle);
    }
  }
  // Renames the received files into place; their mappings join `mapped`,
  // which keeps the newest `limit`.
  void commit_files(std::vector<MappedFile>& mapped, std::size_t limit) {
    for (auto& in : incoming) {
      in.file->commit();
      mapped.push_back(std::move(in.map));
    }
    while (mapped.size() > limit) mapped.erase(mapped.begin());
  }
};


// The communicator of level 1's copies: theirs alone, so no other receive
// (an aggregation's, any source) can match them.
struct CopyComm {
  MPI_Comm comm = MPI_COMM_NULL;
  explicit CopyComm(MPI_Comm from) { TESSERA_MPI(MPI_Comm_dup(from, &comm)); }
  CopyComm(const CopyComm&) = delete;
  CopyComm& operator=(const CopyComm&) = delete;
  ~CopyComm() { MPI_Comm_free(&comm); }
};

// Level 1 on several nodes (on one node the node level commits level 1
// itself): the manifest is committed at level 2 first, and at level 1 once
// every buddy copy is in.
class BuddyLevel final : public CheckpointLevel {
 public:
  BuddyLevel(Runtime& rt, std::string root, int keep, bool async)
      : CheckpointLevel(Level::buddy, std::move(root), keep), async_(async), comm_(rt.comm()) {}
  // The files this rank receives, reserved before the commit counts.
  void prepare(Runtime& rt, const NewCheckpoint& c, const std::string& body) override {
    agree(rt.comm(), [&] { reserved_ = BuddyCopies::reserve(rt, received_, root_, dir_of(c), body); });
  }
  void abandon() override { reserved_.reset(); }
  void copy(Runtime& rt, const NewCheckpoint&, const std::string&, std::span<const std::byte> file,
            const std::string&) override {
    reserved_->post(comm_.comm, file, buddy_ranks(rt.node())[static_cast<std::size_t>(rt.rank())]);
    copies_ = std::move(reserved_);
    if (!async_) finish(rt);
  }
  void finish(Runtime& rt) override {
    if (!copies_) return;
    std::unique_ptr<BuddyCopies> c = std::move(copies_);
    // On failure the level-2 manifest stays (every node's own files are in)
    // and so do the older checkpoints: the next commit prunes them.
    agree(rt.comm(), [&] {
      c->complete(rt.progress());
      c->commit_files(received_, mapped_files() * c->incoming.size());
    });
    agree(rt.comm(), [&] { write_manifest_file(rt, c->body, Level::buddy, c->dir); });
    agree(rt.comm(), [&] {
      if (node_leader(rt)) prune(root_, keep_, true);
    });
  }
  bool poll() override { return !copies_ || copies_->test(); }
  bool pending() const noexcept override { return copies_ != nullptr; }
  void release() override { received_.clear(); }

 private:
  bool async_;
  CopyComm comm_;
  std::vector<MappedFile> received_;  // the buddy copies this rank received, still mapped
  // Declared after comm_: they end first, completing their transfers.
  std::unique_ptr<BuddyCopies> reserved_;  // between prepare() and copy()
  std::unique_ptr<BuddyCopies> copies_;    // in flight until finish()
};

}  // namespace

std::unique_ptr<CheckpointLevel> make_buddy_level(Runtime& rt, std::string root, int keep, bool async) {
  return std::make_unique<BuddyLevel>(rt, std::move(root), keep, async);
}

}  // namespace levels
}  // namespace tessera::resilience
