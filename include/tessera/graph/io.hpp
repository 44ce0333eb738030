// Reading and writing graphs, in parallel: every rank reads its own byte
// range of a text file (lines belong to the rank holding their first byte),
// and the binary format is a directory of Shared-storage segments, so loading
// it with the same rank count is an mmap.
//
// Formats, chosen by the path:
//   DIR (holding edgelist.json)  Tessera binary: edgelist.json + src/dst/weight arrays
//   *.mtx                        Matrix Market coordinate: pattern | real | integer,
//                                general | symmetric, 1-based
//   *.wel                        weighted edge list: "u v w" per line
//   anything else (.el, .txt)    edge list: "u v" per line (SNAP, GAP)
// Edge lists allow '#' and '%' comment lines and blank lines.
#pragma once
#include <optional>
#include <string>

#include "tessera/graph/edge_list.hpp"

namespace tessera::graph {

enum class FileFormat { edge_list, weighted_edge_list, matrix_market, binary };

FileFormat format_of(const std::string& path);
std::string format_name(FileFormat f);

struct ReadOptions {
  std::optional<int> base;   // first vertex id: 0 or 1; default 1 for .mtx, else 0
  bool relabel = false;      // number the ids that occur 0..n-1, keeping their order
  bool undirected = false;   // edge lists: add the reverse of every edge (drops duplicates)
  StorageOptions storage;    // where the loaded arrays live
};

// Bytes of vertex arrays a graph command keeps per vertex (degree, labels,
// vectors), and the point past which ids count as sparse: more than
// kMaxVerticesPerEdge vertices per edge above kSparseVertexFloor vertices.
inline constexpr std::uint64_t kVertexArrayBytes = 32;
inline constexpr std::uint64_t kSparseVertexFloor = std::uint64_t{1} << 26;
inline constexpr std::uint64_t kMaxVerticesPerEdge = 64;
// Empty when `vertices` vertex arrays are sane for a graph of `edges` edges;
// else "N GiB of vertex arrays ... but ..." (the readers prefix the file and id).
std::string vertex_arrays_problem(std::uint64_t vertices, std::uint64_t edges);

struct LoadedGraph {
  EdgeList graph;
  // With relabel: the file's id of each vertex, on the graph's vertex ranges.
  std::optional<DistArray<std::uint64_t>> original_ids;
};

// Collective. Throws FormatError naming file and line for malformed input, a
// header that disagrees with the content, negative or out-of-range ids,
// non-finite weights (NaN, inf; negative and zero weights are read as they
// are), compressed files, or a file without edges. A UTF-8 byte-order mark is
// skipped. An edge list whose first data line "V E" matches the rest of the
// file (E edges follow, and V is the largest id + 1 or the number of distinct
// ids) has that line taken as a SNAP-style count header, not as an edge.
// Without relabel, ids so large (or so sparse) that the vertex arrays would
// not fit (see vertex_arrays_problem) are refused with a hint to relabel;
// relabel costs O(distinct ids), whatever the largest id.
// Duplicate edges: a directed graph keeps every line (each is an arc); an
// undirected one (symmetric .mtx, --undirected) keeps one arc per (u, v),
// the one with the smallest weight.
LoadedGraph read_graph(Runtime& rt, const std::string& path, const ReadOptions& options = {});

struct WriteOptions {
  // Binary format: the directory, segments and metadata are group-readable
  // and -writable (0770/0660 instead of 0700/0600).
  bool group_access = false;
};

// Collective. Writes through a temporary file (binary: a temporary sibling
// directory) created exclusively and renamed at the end, so a failed, killed
// or concurrent write leaves nothing half-written. Refuses to overwrite an
// existing binary directory.
// Text ids are written 0-based (.el/.wel) or 1-based (.mtx); an undirected
// graph is written to .mtx as "symmetric" (lower triangle).
void write_graph(const EdgeList& graph, const std::string& path, const WriteOptions& options = {});

// Collective: rank 0's `header`, then every rank's `body` in rank order, into
// one file written through a temporary renamed at the end.
void write_text_file(Runtime& rt, const std::string& path, const std::string& header, const std::string& body);

// The binary format on its own (write_graph / read_graph dispatch here).
void save_binary(const EdgeList& graph, const std::string& dir, const WriteOptions& options = {});
// Maps the segments in place, read-only, when the rank count matches the
// writer's; with another rank count it attaches, copies this rank's share and
// rebalances. The metadata must be a small regular file; "directed": false
// is verified (every arc has its reverse), else a MismatchError names the file.
EdgeList load_binary(Runtime& rt, const std::string& dir, const StorageOptions& storage = {});

}  // namespace tessera::graph
