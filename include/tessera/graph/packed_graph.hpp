// PackedGraph: a graph's rows in byte codes, the compact form kernels read
// in place (never expanded back into an id array).
//
// J. Shun, L. Dhulipala and G. Blelloch, "Smaller and Faster: Parallel
// Processing of Compressed Graphs with Ligra+", DCC 2015: a row is its
// sorted neighbours as differences, each in a variable-length byte code;
// numbering vertices by decreasing degree first puts most arcs' heads among
// the small ids, so the differences are small (GBBS does the same).
//
// Layout (per rank, beside EdgeList's): byte offsets (local_vertices() + 1,
// 8 bytes a vertex as EdgeList's arc offsets) into one byte array; a
// non-empty row u holds its degree, then zigzag(v0 - u), then v(i) - v(i-1)
// for the rest, each as LEB128 (7 bits a byte, the high bit set on all but a
// value's last byte). An empty row has no bytes. Differences may be 0, so a
// multigraph's repeated arcs pack too. No weights: a weighted graph stays an
// EdgeList. Measured (docs/graph-formats.md): kron-18 2.8, kron-20 3.0 bytes
// per undirected edge against GAPBS's 8, both directions kept, so every
// kernel (BFS's bottom-up steps, PageRank's pull, Afforest's sampling) reads
// a vertex's neighbours from its own row.
#pragma once
#include <algorithm>
#include <cstdint>
#include <optional>
#include <span>

#include "tessera/graph/edge_list.hpp"

namespace tessera::graph {

namespace byte_code {

inline std::size_t size_of(std::uint64_t x) noexcept {
  std::size_t n = 1;
  while (x >= 0x80) {
    x >>= 7;
    ++n;
  }
  return n;
}
inline std::uint8_t* put(std::uint64_t x, std::uint8_t* out) noexcept {
  while (x >= 0x80) {
    *out++ = static_cast<std::uint8_t>(x | 0x80);
    x >>= 7;
  }
  *out++ = static_cast<std::uint8_t>(x);
  return out;
}
inline std::uint64_t get(const std::uint8_t*& p) noexcept {
  std::uint64_t b = *p++;
  if (b < 0x80) return b;  // most differences: one byte, one branch
  std::uint64_t x = b & 0x7f;
  for (unsigned shift = 7;; shift += 7) {
    b = *p++;
    x |= (b & 0x7f) << shift;
    if (b < 0x80) return x;
  }
}
inline std::uint64_t zigzag(std::int64_t d) noexcept {
  return (static_cast<std::uint64_t>(d) << 1) ^ static_cast<std::uint64_t>(d >> 63);
}
inline std::int64_t unzigzag(std::uint64_t z) noexcept {
  return static_cast<std::int64_t>(z >> 1) ^ -static_cast<std::int64_t>(z & 1);
}

// Bytes of row `u` with sorted neighbours `row` (0 for an empty row).
template <class Id>
std::size_t row_size(std::uint64_t u, std::span<const Id> row) noexcept {
  if (row.empty()) return 0;
  std::size_t n = size_of(row.size()) +
                  size_of(zigzag(static_cast<std::int64_t>(row[0]) - static_cast<std::int64_t>(u)));
  for (std::size_t k = 1; k < row.size(); ++k) n += size_of(static_cast<std::uint64_t>(row[k] - row[k - 1]));
  return n;
}
// Writes row `u` at out; returns the end.
template <class Id>
std::uint8_t* put_row(std::uint64_t u, std::span<const Id> row, std::uint8_t* out) noexcept {
  if (row.empty()) return out;
  out = put(row.size(), out);
  out = put(zigzag(static_cast<std::int64_t>(row[0]) - static_cast<std::int64_t>(u)), out);
  for (std::size_t k = 1; k < row.size(); ++k) out = put(static_cast<std::uint64_t>(row[k] - row[k - 1]), out);
  return out;
}

}  // namespace byte_code

// One rank's rows of an EdgeList, with the interface kernels written once
// for both forms use (PackedRows below): local row i is vertex base + i.
template <class Id>
class PlainRows {
 public:
  PlainRows(std::span<const std::uint64_t> offsets, const Id* dst) : off_(offsets.data()), dst_(dst), n_(offsets.size() - 1) {}
  std::size_t size() const noexcept { return n_; }
  std::uint64_t degree(std::size_t i) const noexcept { return off_[i + 1] - off_[i]; }
  // f(v) for each neighbour v of row i, increasing; returns the degree.
  template <class F>
  std::uint64_t for_each(std::size_t i, F&& f) const {
    const std::uint64_t first = off_[i], last = off_[i + 1];
    for (std::uint64_t k = first; k < last; ++k) f(static_cast<std::uint64_t>(dst_[k]));
    return last - first;
  }
  // f(v) for the neighbours at positions [first, last) of row i (last
  // clipped to the degree).
  template <class F>
  void for_range(std::size_t i, std::uint64_t first, std::uint64_t last, F&& f) const {
    const std::uint64_t end = off_[i] + std::min(last, degree(i));
    for (std::uint64_t k = off_[i] + first; k < end; ++k) f(static_cast<std::uint64_t>(dst_[k]));
  }
  // f(v) for neighbours in order until f returns true; whether it did.
  template <class F>
  bool find(std::size_t i, F&& f) const {
    for (std::uint64_t k = off_[i], last = off_[i + 1]; k < last; ++k)
      if (f(static_cast<std::uint64_t>(dst_[k]))) return true;
    return false;
  }
  // Whether row i holds v (rows are sorted: a binary search).
  bool contains(std::size_t i, std::uint64_t v) const {
    return std::binary_search(dst_ + off_[i], dst_ + off_[i + 1], v,
                              [](auto a, auto b) { return static_cast<std::uint64_t>(a) < static_cast<std::uint64_t>(b); });
  }

 private:
  const std::uint64_t* off_;
  const Id* dst_;
  std::size_t n_;
};

// One rank's rows of a PackedGraph, decoded as they are read.
class PackedRows {
 public:
  PackedRows(std::span<const std::uint64_t> offsets, const std::uint8_t* bytes, std::uint64_t base)
      : off_(offsets.data()), bytes_(bytes), n_(offsets.size() - 1), base_(base) {}
  std::size_t size() const noexcept { return n_; }
  std::uint64_t degree(std::size_t i) const noexcept {
    if (off_[i] == off_[i + 1]) return 0;
    const std::uint8_t* p = bytes_ + off_[i];
    return byte_code::get(p);
  }
  template <class F>
  std::uint64_t for_each(std::size_t i, F&& f) const {
    if (off_[i] == off_[i + 1]) return 0;
    const std::uint8_t* p = bytes_ + off_[i];
    const std::uint64_t d = byte_code::get(p);
    std::uint64_t v = static_cast<std::uint64_t>(static_cast<std::int64_t>(base_ + i) + byte_code::unzigzag(byte_code::get(p)));
    f(v);
    for (std::uint64_t k = 1; k < d; ++k) {
      v += byte_code::get(p);
      f(v);
    }
    return d;
  }
  template <class F>
  void for_range(std::size_t i, std::uint64_t first, std::uint64_t last, F&& f) const {
    if (off_[i] == off_[i + 1]) return;
    const std::uint8_t* p = bytes_ + off_[i];
    const std::uint64_t d = std::min(byte_code::get(p), last);
    if (first >= d) return;
    std::uint64_t v = static_cast<std::uint64_t>(static_cast<std::int64_t>(base_ + i) + byte_code::unzigzag(byte_code::get(p)));
    for (std::uint64_t k = 0; k < first; ++k) v += byte_code::get(p);
    for (std::uint64_t k = first;;) {
      f(v);
      if (++k >= d) return;
      v += byte_code::get(p);
    }
  }
  template <class F>
  bool find(std::size_t i, F&& f) const {
    if (off_[i] == off_[i + 1]) return false;
    const std::uint8_t* p = bytes_ + off_[i];
    const std::uint64_t d = byte_code::get(p);
    std::uint64_t v = static_cast<std::uint64_t>(static_cast<std::int64_t>(base_ + i) + byte_code::unzigzag(byte_code::get(p)));
    for (std::uint64_t k = 0;;) {
      if (f(v)) return true;
      if (++k == d) return false;
      v += byte_code::get(p);
    }
  }
  // Whether row i holds v: decoded up to v (rows are sorted).
  bool contains(std::size_t i, std::uint64_t v) const {
    bool hit = false;
    find(i, [&](std::uint64_t w) { return w >= v ? (hit = w == v, true) : false; });
    return hit;
  }

 private:
  const std::uint64_t* off_;
  const std::uint8_t* bytes_;
  std::size_t n_;
  std::uint64_t base_;
};

struct PackOptions {
  // Number the vertices by decreasing degree first (ties in id order: the
  // numbering does not depend on the rank count). Off: the graph's own ids.
  bool by_degree = true;
  // ... within each of `blocks` equal blocks of the old ids, in block
  // order. One block packs smallest (kron-18: 2.81 bytes an edge; 16
  // blocks: 2.96) but puts every hub on the first ranks and every
  // low-degree vertex on the last: a Gauss-Seidel sweep then reads its
  // neighbours' scores from the other rank, a sweep late, and PageRank
  // needs 17 sweeps at 2 ranks instead of 10. With blocks, each rank of up
  // to `blocks` ranks holds hubs and their neighbours as the EdgeList's
  // does. 0: one block per 2^16 vertices, from 1 to 16 (small graphs are
  // quick either way and their bytes grow most with blocks). Only the
  // vertex count chooses it, never the rank count.
  std::uint64_t blocks = 0;
  StorageOptions storage;  // Shared: arrays named <name>-offsets, <name>-bytes, <name>-ids
};

class PackedGraph {
 public:
  // Collective. g's rows in byte codes (g unweighted: ConfigError for
  // weights); g is unchanged. With by_degree, vertex v of the result is
  // vertex original_ids()[v] of g, and its vertex ranges balance bytes.
  static PackedGraph pack(const EdgeList& g, const PackOptions& options = {});
  // Collective. The same graph built straight from an EdgeSource (a
  // generator, a parsed file) without an EdgeList first: a pass counts each
  // vertex's arcs (before cleaning: the numbering's degrees), then windows
  // of rows, each a pass over the source, are placed, sorted, cleaned as
  // `build` says and packed. Holds the rows packed so far, one window of
  // 4- or 8-byte ids (TESSERA_FILL_WINDOW_BYTES sets its size; default
  // half the node's memory available as the window starts, shared by its
  // ranks), 16 bytes a local vertex of counts and cursors, and 4 or 8 bytes
  // a vertex of numbering on every rank. No weights.
  static PackedGraph build(Runtime& rt, std::uint64_t vertices, bool directed, const EdgeSource& source,
                           const BuildOptions& build = {}, const PackOptions& options = {});
  // Collective. Wraps arrays already in the layout above (subgraphs made in
  // place): `offsets` local_vertices + 1 byte offsets a rank, `bytes` the
  // rows, `original_ids` (may be empty) new id -> id in the graph packed.
  static PackedGraph adopt(std::uint64_t vertices, bool directed, std::uint64_t self_loops,
                           DistArray<std::uint64_t> offsets, DistArray<std::uint8_t> bytes,
                           std::optional<DistArray<std::uint64_t>> original_ids = std::nullopt);

  PackedGraph(PackedGraph&&) noexcept = default;
  PackedGraph& operator=(PackedGraph&&) noexcept = default;

  Runtime& runtime() const noexcept { return vertex_map_.runtime(); }
  std::uint64_t vertices() const noexcept { return vertices_; }
  std::uint64_t arcs() const noexcept { return arcs_; }
  std::uint64_t edges() const noexcept { return directed_ ? arcs_ : (arcs_ + self_loops_) / 2; }
  std::uint64_t self_loops() const noexcept { return self_loops_; }
  bool directed() const noexcept { return directed_; }
  bool weighted() const noexcept { return false; }
  // Bytes of the rows over all ranks (degrees and neighbours: what grows
  // with the edges), and of the byte offsets.
  std::uint64_t edge_array_bytes() const noexcept { return bytes_.size(); }
  std::uint64_t offset_array_bytes() const noexcept { return offsets_.size() * sizeof(std::uint64_t); }
  double bytes_per_edge() const noexcept {
    return edges() ? static_cast<double>(edge_array_bytes()) / static_cast<double>(edges()) : 0.0;
  }

  const Distribution& vertex_ranges() const noexcept { return vertex_map_.distribution(); }
  const Map& vertex_map() const noexcept { return vertex_map_; }
  std::uint64_t local_vertex_begin() const noexcept { return vertex_map_.local_begin(); }
  std::uint64_t local_vertex_end() const noexcept { return vertex_map_.local_end(); }
  std::uint64_t local_vertices() const noexcept { return vertex_map_.local_size(); }
  std::uint64_t local_arcs() const noexcept { return local_arcs_; }
  StorageKind storage_kind() const noexcept { return offsets_.storage_kind(); }
  const DistArray<std::uint64_t>& offsets() const noexcept { return offsets_; }
  const DistArray<std::uint8_t>& bytes() const noexcept { return bytes_; }
  // new id -> id in the packed EdgeList (by_degree); none: the same ids.
  const DistArray<std::uint64_t>* original_ids() const noexcept { return original_ids_ ? &*original_ids_ : nullptr; }
  std::optional<DistArray<std::uint64_t>> release_original_ids() { return std::exchange(original_ids_, std::nullopt); }
  // The arrays themselves, the graph given up (subgraphs made in place,
  // then adopt()).
  struct Arrays {
    DistArray<std::uint64_t> offsets;
    DistArray<std::uint8_t> bytes;
    std::optional<DistArray<std::uint64_t>> original_ids;
  };
  Arrays release_arrays() && { return {std::move(offsets_), std::move(bytes_), std::move(original_ids_)}; }

  PackedRows rows() const noexcept { return PackedRows(offsets_.local(), bytes_.local().data(), local_vertex_begin()); }
  template <class F>
  decltype(auto) with_rows(F&& f) const {
    return std::forward<F>(f)(rows());
  }
  // Out-degree of each vertex; local, no messages.
  DistArray<std::uint64_t> out_degrees() const;
  // Collective: the same graph as an EdgeList (this graph's ids): tests,
  // and the operations only an EdgeList has.
  EdgeList unpacked(const StorageOptions& storage = {}) const;

 private:
  PackedGraph(std::uint64_t vertices, bool directed, std::uint64_t self_loops, DistArray<std::uint64_t> offsets,
              DistArray<std::uint8_t> bytes, std::optional<DistArray<std::uint64_t>> original_ids);

  std::uint64_t vertices_ = 0, arcs_ = 0, self_loops_ = 0, local_arcs_ = 0;
  bool directed_ = false;
  Map vertex_map_;
  DistArray<std::uint64_t> offsets_;
  DistArray<std::uint8_t> bytes_;
  std::optional<DistArray<std::uint64_t>> original_ids_;
};

// An EdgeList's rows at its width, for kernels written once for both forms.
template <class F>
decltype(auto) with_rows(const EdgeList& g, F&& f) {
  return g.with_dst([&](auto dst) {
    using Id = std::remove_const_t<typename decltype(dst)::element_type>;
    return std::forward<F>(f)(PlainRows<Id>(g.row_offsets(), dst.data()));
  });
}
template <class F>
decltype(auto) with_rows(const PackedGraph& g, F&& f) {
  return g.with_rows(std::forward<F>(f));
}

}  // namespace tessera::graph
