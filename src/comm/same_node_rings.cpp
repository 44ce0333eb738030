#include "tessera/comm/same_node_rings.hpp"

#include <new>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace tessera::comm {

#if defined(__x86_64__)
bool SameNodeRings::can_evict() noexcept {
  static const bool has = __builtin_cpu_supports("clflushopt");
  return has;
}

__attribute__((target("clflushopt"))) void SameNodeRings::evict_from_caches(const std::byte* p, std::size_t n) noexcept {
  if (!can_evict() || n == 0) return;
  // Every line [p, p + n) touches, the last one too when p is not on a line.
  const auto first = reinterpret_cast<std::uintptr_t>(p) & ~std::uintptr_t{63};
  const auto end = reinterpret_cast<std::uintptr_t>(p) + n;
  for (std::uintptr_t line = first; line < end; line += 64) _mm_clflushopt(reinterpret_cast<void*>(line));
  _mm_sfence();
}
#else
bool SameNodeRings::can_evict() noexcept { return false; }
void SameNodeRings::evict_from_caches(const std::byte*, std::size_t) noexcept {}
#endif

namespace {
std::size_t round_up(std::size_t bytes, std::size_t to) { return (bytes + to - 1) / to * to; }
std::size_t slot_bytes(std::size_t batch_bytes) {
  return batch_bytes ? round_up(SameNodeRings::kLength + batch_bytes, 64) : 0;
}
// Where the rings from the node's k-th rank sit in the segment of its r-th rank.
std::size_t pair_index(int k, int r) { return static_cast<std::size_t>(k < r ? k : k - 1); }
}  // namespace

std::size_t SameNodeRings::pair_bytes(Shape shape) {
  return 2 * sizeof(Control) + shape.slots * (slot_bytes(shape.request_bytes) + slot_bytes(shape.reply_bytes));
}

std::size_t SameNodeRings::segment_bytes(Shape shape, int peers) {
  return peers > 0 ? pair_bytes(shape) * static_cast<std::size_t>(peers) : 0;
}

SameNodeRings::Peer SameNodeRings::locate(std::byte* segment, std::size_t pair, Shape shape) {
  Peer p;
  p.base = segment + pair * pair_bytes(shape);
  std::byte* slots = p.base + 2 * sizeof(Control);
  const std::size_t sizes[2] = {slot_bytes(shape.request_bytes), slot_bytes(shape.reply_bytes)};
  for (int kind = 0; kind < 2; ++kind) {
    Ring& ring = p.rings[kind];
    ring.control = reinterpret_cast<Control*>(p.base + static_cast<std::size_t>(kind) * sizeof(Control));
    ring.base = sizes[kind] ? slots : nullptr;
    ring.slot_bytes = sizes[kind];
    slots += shape.slots * sizes[kind];
  }
  return p;
}

SameNodeRings::SameNodeRings(Runtime& rt, Shape shape) : shape_(shape) {
  const NodeGroup& node = rt.node();
  const int peers = node.size - 1;
  // The control words are constructed in this rank's segment before any
  // co-locale can map it (NodeSegment's initialize step).
  auto construct = [&](std::span<std::byte> own) {
    for (int k = 0; k < node.size; ++k) {
      if (k == node.rank) continue;
      Peer p = locate(own.data(), pair_index(k, node.rank), shape);
      for (Ring& ring : p.rings) new (ring.control) Control();
    }
  };
  segment_ = NodeSegment(rt, segment_bytes(shape, peers), "r", "the same-node aggregation rings", construct);
  out_.resize(static_cast<std::size_t>(rt.size()));
  in_.resize(static_cast<std::size_t>(rt.size()));
  for (int k = 0; k < node.size; ++k) {
    if (k == node.rank) continue;
    const int peer = node.world_ranks[static_cast<std::size_t>(k)];
    in_[static_cast<std::size_t>(peer)] = locate(segment_.own().data(), pair_index(k, node.rank), shape);
    sources_.push_back(peer);
    std::span<std::byte> theirs = segment_.peer(peer);
    if (theirs.size() != segment_.own().size()) continue;  // not mapped here: MPI reaches it
    out_[static_cast<std::size_t>(peer)] = locate(theirs.data(), pair_index(node.rank, k), shape);
  }
}

}  // namespace tessera::comm
