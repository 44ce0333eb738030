#include "tessera/storage/node_segment.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>

#include "tessera/runtime/collective.hpp"

namespace tessera {

namespace {
std::string mebibytes(double bytes) {
  char text[64];
  std::snprintf(text, sizeof(text), "%.1f MiB", bytes / (1024.0 * 1024.0));
  return text;
}

// How a co-locale finds a rank's segment: the descriptor to open through
// /proc, and the identity and size the opened file must have.
struct SegmentAddress {
  std::int32_t pid;
  std::int32_t fd;
  std::uint64_t device;
  std::uint64_t inode;
  std::uint64_t bytes;
};
}  // namespace

NodeSegment::NodeSegment(Runtime& rt, std::uint64_t bytes, const std::string& tag, const std::string& what_for,
                         const std::function<void(std::span<std::byte>)>& initialize) {
  static std::atomic<int> counter{0};
  const std::string name =
      "tessera-" + rt.job_id() + "-" + tag + std::to_string(counter++) + ".r" + std::to_string(rt.rank());
  FileDescriptor fd;
  agree(rt.comm(), [&] {
    int f = ::memfd_create(name.c_str(), MFD_CLOEXEC);
    if (f < 0) throw SystemError("cannot create " + mebibytes(static_cast<double>(bytes)) + " of node-shared memory (memfd_create) for " + what_for, errno);
    fd = FileDescriptor(f);
    if (::ftruncate(f, static_cast<off_t>(bytes)) != 0)
      throw SystemError("cannot size node-shared memory to " + mebibytes(static_cast<double>(bytes)) + " for " + what_for, errno);
    own_ = Mapping::file(f, bytes, true, what_for + " (" + name + ")");
  });
  if (initialize) initialize(own());

  struct stat st {};
  SegmentAddress mine{static_cast<std::int32_t>(::getpid()), fd.get(), 0, 0, bytes};
  if (::fstat(fd.get(), &st) == 0) {
    mine.device = static_cast<std::uint64_t>(st.st_dev);
    mine.inode = static_cast<std::uint64_t>(st.st_ino);
  }
  const NodeGroup& node = rt.node();
  auto addresses = all_gather(node.comm, mine);
  peers_.resize(static_cast<std::size_t>(rt.size()));
  for (int k = 0; k < node.size; ++k) {
    const int peer = node.world_ranks[static_cast<std::size_t>(k)];
    const SegmentAddress& a = addresses[static_cast<std::size_t>(k)];
    if (peer == rt.rank() || a.bytes == 0) continue;
    const std::string path = "/proc/" + std::to_string(a.pid) + "/fd/" + std::to_string(a.fd);
    FileDescriptor peer_fd(::open(path.c_str(), O_RDWR | O_CLOEXEC));
    if (!peer_fd) continue;
    struct stat ps {};
    // The same file the owner created (not a recycled pid or descriptor), whole.
    if (::fstat(peer_fd.get(), &ps) != 0 || static_cast<std::uint64_t>(ps.st_dev) != a.device ||
        static_cast<std::uint64_t>(ps.st_ino) != a.inode || static_cast<std::uint64_t>(ps.st_size) != a.bytes)
      continue;
    try {
      peers_[static_cast<std::size_t>(peer)] = Mapping::file(peer_fd.get(), a.bytes, true, path);
    } catch (const SystemError&) {
      // Out of address space or mappings: this peer stays unmapped.
    }
  }
  // Every co-locale has opened what it could: owners may close their descriptors.
  barrier(node.comm);
}

}  // namespace tessera
