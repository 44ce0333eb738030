// Mapping chunks to ranks and measuring how well a mapping fits the network
// (Agarwal, Sharma, Kale, "Topology-aware task mapping for reducing
// communication contention on large parallel machines", IPDPS 2006; Bhatele,
// Kale, 2008): random (RND), round-robin and block (RR), topology-aware (TO:
// recursive coordinate bisection of the chunk grid and the rank set
// together), and the hop-bytes metric (sum of bytes x hops over every
// message) with a maximum link load under dimension-ordered routing.
#pragma once
#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "tessera/chunks/placement.hpp"
#include "tessera/chunks/topology.hpp"

namespace tessera::chunks {

// A 3-D grid of chunks: id = i + di * (j + dj * k).
struct ChunkGrid {
  int di = 1, dj = 1, dk = 1;

  std::int64_t count() const noexcept { return std::int64_t{di} * dj * dk; }
  int id(int i, int j, int k) const noexcept { return i + di * (j + dj * k); }
  std::array<int, 3> index(int id) const noexcept { return {id % di, (id / di) % dj, id / (di * dj)}; }
  // "64x64x64", "16x16" (k = 1) or "8" (j = k = 1). Throws ConfigError naming
  // what does not parse, or RangeError when there are more than 2^31-1 chunks.
  static ChunkGrid parse(const std::string& spec);
  std::string describe() const;  // "64x64x64"
};

// Bytes sent from chunk `from` to chunk `to` (one direction; a pair that
// talks both ways is two edges).
struct CommEdge {
  int from = 0;
  int to = 0;
  std::uint64_t bytes = 0;
};

struct CommGraph {
  int chunks = 0;
  std::vector<CommEdge> edges;
  std::uint64_t total_bytes() const noexcept;
};

// The 7-point stencil's ghost exchange: every chunk sends one face to each
// neighbour along i, j and k; face_bytes[a] is the size of a face
// perpendicular to axis a. Without `periodic` the chunk grid is a box (edge
// chunks have fewer neighbours); with it, every axis wraps.
CommGraph stencil7_graph(const ChunkGrid& grid, std::array<std::uint64_t, 3> face_bytes, bool periodic = false);
CommGraph stencil7_graph(const ChunkGrid& grid, std::uint64_t face_bytes, bool periodic = false);

enum class MappingKind { random, round_robin, block, topology_aware };
// "rnd", "rr", "block", "to" (ConfigError otherwise, listing them).
MappingKind parse_mapping(const std::string& name);
std::string mapping_name(MappingKind kind);

// Every mapping places every chunk exactly once and gives each rank
// floor(chunks/ranks) or that + 1 chunks (ConfigError for ranks < 1).
// RND: a seeded shuffle of the balanced counts (same result everywhere).
Placement map_random(std::int64_t chunks, int ranks, std::uint64_t seed);
// RR: chunk c on rank c mod ranks.
Placement map_round_robin(std::int64_t chunks, int ranks);
// Block: consecutive ids together (rank r holds a contiguous id range).
Placement map_block(std::int64_t chunks, int ranks);
// TO: the chunk grid and the topology's ranks are bisected together, the
// chunks along their widest axis, the ranks along their widest network
// dimension (node-local dimensions last), each half of the chunks going to
// a half of the ranks in proportion.
Placement map_topology_aware(const ChunkGrid& grid, const NetworkTopology& topology);
Placement map_chunks(MappingKind kind, const ChunkGrid& grid, const NetworkTopology& topology,
                     std::uint64_t seed = 1);

// A placement from a file: "chunk rank" lines (what tessera map -o writes;
// '#' comments), or a SCOTCH mapping file (a count line, then "vertex
// terminal" lines; with a 3-D mesh graph from gmk_m3 and a torus3D/mesh3D
// target both number x fastest, as chunk ids and GridTopology do). Every
// chunk in [0, chunks) exactly once, ranks in [0, ranks): FormatError naming
// the file and line otherwise.
Placement read_placement(const std::string& path, std::int64_t chunks, int ranks);
// "chunk rank" lines, through a temporary file renamed into place; a device
// or FIFO (storage/output_path.hpp) is written in place, never replaced.
void write_placement(const Placement& placement, const std::string& path);

// Throws RangeError unless placement has `chunks` entries, each a rank in
// [0, ranks), naming the first bad chunk.
void check_placement(const Placement& placement, std::int64_t chunks, int ranks);

// Sum over edges of bytes x hops(placement[from], placement[to]).
std::uint64_t hop_bytes(const CommGraph& graph, const Placement& placement, const NetworkTopology& topology);
// The most bytes any one directed link carries when every edge is routed by
// topology.route (dimension-ordered on a torus or mesh).
std::uint64_t max_link_load(const CommGraph& graph, const Placement& placement, const NetworkTopology& topology);

struct MappingQuality {
  std::uint64_t hop_bytes = 0;
  std::uint64_t total_bytes = 0;
  std::uint64_t max_link_load = 0;
  double hops_per_byte() const noexcept {
    return total_bytes == 0 ? 0.0 : static_cast<double>(hop_bytes) / static_cast<double>(total_bytes);
  }
};
// hop_bytes, total_bytes and max_link_load in one pass over the graph.
MappingQuality evaluate(const CommGraph& graph, const Placement& placement, const NetworkTopology& topology);

}  // namespace tessera::chunks
