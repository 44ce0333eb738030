// NodeSegment: node-shared memory of one rank with no name in any file
// system (a memfd), mapped by the rank and by each co-located rank, which
// opens it as /proc/<owner pid>/fd/<fd> while the owner still holds the
// descriptor. Nothing can outlive the job: the kernel frees the memory with
// the last mapping, after SIGKILL too, so no segment is ever left behind.
// Co-locale storage keeps array parts in them; comm/'s same-node rings live
// in them.
#pragma once
#include <cstddef>
#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <vector>

#include "tessera/runtime/runtime.hpp"
#include "tessera/storage/mapping.hpp"

namespace tessera {

class NodeSegment {
 public:
  NodeSegment() = default;
  // Collective over the runtime: every rank creates its own segment of
  // `bytes` (0 is fine: nothing to map) named "/memfd:tessera-<job>-<tag><n>.r<rank>"
  // in /proc/<pid>/maps, then maps every co-locale's. Creating or sizing one
  // fails on every rank together (SystemError naming the size and `what_for`).
  // A co-locale that cannot open or map a peer's segment (another PID
  // namespace, a non-dumpable process) only has no mapping of it.
  // `initialize` runs on this rank's own segment before any co-locale can
  // map it (objects constructed there are complete when the constructor
  // returns on every rank of the node, without another barrier).
  NodeSegment(Runtime& rt, std::uint64_t bytes, const std::string& tag, const std::string& what_for,
              const std::function<void(std::span<std::byte>)>& initialize = {});
  NodeSegment(NodeSegment&&) noexcept = default;
  NodeSegment& operator=(NodeSegment&&) noexcept = default;

  std::span<std::byte> own() const noexcept { return {own_.data(), own_.size()}; }
  // The segment of world rank r as mapped here; empty for this rank, ranks
  // of other nodes, empty segments and peers that could not be mapped.
  std::span<std::byte> peer(int world_rank) const noexcept {
    auto r = static_cast<std::size_t>(world_rank);
    return r < peers_.size() ? std::span<std::byte>(peers_[r].data(), peers_[r].size()) : std::span<std::byte>();
  }

 private:
  Mapping own_;
  std::vector<Mapping> peers_;  // by world rank
};

}  // namespace tessera
