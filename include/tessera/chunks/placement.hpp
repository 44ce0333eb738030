// Where each chunk lives: Placement[chunk id] = rank. The one type the
// mappings (mapping.hpp), the load balancers (balance.hpp) and ChunkArray
// share; every rank holds the same copy (the location table).
#pragma once
#include <cstddef>
#include <string>
#include <vector>

namespace tessera::chunks {

using Placement = std::vector<int>;

// Contiguous runs of ids, as even as possible: the first `chunks % ranks`
// ranks get one chunk more. The default placement of a ChunkArray.
Placement block_placement(std::size_t chunks, int ranks);

// Throws RangeError naming `what` and the first bad entry when the placement
// does not have `chunks` entries or sends a chunk to a rank outside [0, ranks).
void check_placement(const Placement& placement, std::size_t chunks, int ranks, const std::string& what);

// Chunks per rank under `placement`.
std::vector<std::size_t> chunks_per_rank(const Placement& placement, int ranks);

}  // namespace tessera::chunks
