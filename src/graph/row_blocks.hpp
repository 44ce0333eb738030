// Rows taken a block at a time, so that a block's arcs stay in cache (or
// fit a scratch array) between two passes over them.
#pragma once
#include <cstddef>
#include <cstdint>
#include <span>

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

}  // namespace tessera::graph
