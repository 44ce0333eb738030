// Rows taken a block at a time, so that a block's arcs stay in cache (or
// fit a scratch array) between two passes over them; and the helpers that
// let one kernel read either graph form through its rows view (PlainRows or
// PackedRows, packed_graph.hpp).
#pragma once
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <span>

#include "tessera/graph/packed_graph.hpp"
#include "tessera/runtime/vector_clones.hpp"

namespace tessera::graph {

// The end j of the block of local rows that starts at row i: rows [i, j)
// whose arcs number at most max_arcs together, or the one row i when it
// alone has more. `rows`: row offsets, one more than the rows.
TESSERA_INLINE std::size_t row_block_end(std::span<const std::uint64_t> rows, std::size_t i, std::uint64_t max_arcs) {
  const std::size_t n = rows.size() - 1;
  std::size_t j = i + 1;
  while (j < n && rows[j + 1] - rows[i] <= max_arcs) ++j;
  return j;
}

// Calls f(rows, Id{}) with g's rows view and the unsigned type a kernel
// holds vertex ids (or local indices) in: an EdgeList's id width, or for a
// packed graph (no id array) the width an EdgeList of as many vertices
// would have (TESSERA_ID_BITS=64 makes it wide too). A kernel written once
// as a generic lambda is compiled per form and width.
template <class F>
decltype(auto) with_rows_and_id(const EdgeList& g, F&& f) {
  return with_rows(g, [&]<class Id>(PlainRows<Id> rows) { return std::forward<F>(f)(rows, Id{}); });
}
template <class F>
decltype(auto) with_rows_and_id(const PackedGraph& g, F&& f) {
  return with_id_type(id_width_for(g.vertices()), [&](auto id) { return std::forward<F>(f)(g.rows(), id); });
}

// Like rows.find(i, f), from position `first` of row i on. The positions
// before are read and passed over (a packed row is decoded from its start
// anyway): for the one row a caller stopped inside.
template <class Rows, class F>
bool find_from(const Rows& rows, std::size_t i, std::uint64_t first, F&& f) {
  std::uint64_t k = 0;
  return rows.find(i, [&](std::uint64_t v) { return k++ >= first && f(v); });
}

// A place in a rank's arcs, in row order: position `pos` of local row `row`.
struct ArcCursor {
  std::size_t row = 0;
  std::uint64_t pos = 0;
};
// Calls f(i, v) for the next `count` arcs from `at` (fewer when the rows
// end), a row cut where the count runs out, and moves `at` past them.
// Blocks of arcs of a fixed size, whatever the rows' degrees, through the
// rows view: an EdgeList's arc index k is (row, position) here.
template <class Rows, class F>
void for_next_arcs(const Rows& rows, ArcCursor& at, std::uint64_t count, F&& f) {
  while (count > 0 && at.row < rows.size()) {
    const std::uint64_t d = rows.degree(at.row), take = std::min(count, d - at.pos);
    const std::size_t i = at.row;
    rows.for_range(i, at.pos, at.pos + take, [&](std::uint64_t v) { f(i, v); });
    count -= take;
    at.pos += take;
    if (at.pos == d) ++at.row, at.pos = 0;
  }
}

}  // namespace tessera::graph
