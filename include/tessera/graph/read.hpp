// Reading graphs, in parallel: every rank reads its own byte
// range of a text file (lines belong to the rank holding their first byte),
// and the binary format is a directory of Shared-storage segments, so loading
// it with the same rank count is an mmap.
#pragma once
#include <functional>
#include <optional>
#include <string>

#include "tessera/graph/edge_list.hpp"
#include "tessera/graph/format.hpp"
#include "tessera/graph/id_map.hpp"

namespace tessera::graph {

struct ReadOptions {
  std::optional<int> base;   // first vertex id: 0 or 1; default 1 for .mtx, else 0
  bool relabel = false;      // number the ids that occur 0..n-1, keeping their order
  bool undirected = false;   // edge lists: add the reverse of every edge (drops duplicates)
  // Text files that already list both directions of every edge (GAPBS, SNAP):
  // read as undirected without adding reverses (drops duplicates), verified
  // (every arc has its reverse, with its weight) else a FormatError names the file.
  bool symmetric = false;
  bool pattern = false;      // ignore the weights, unread (a structural matrix whose values are no weights)
  // A simple graph by default, as GAPBS and networkx count edges: the
  // file's self loops and the entries that repeat an edge already given
  // are dropped (of duplicates, the smallest weight stays) and counted
  // (EdgeList::cleaning, and a note). multigraph keeps every entry as the
  // file lists it (an undirected read then keeps each line's edge too).
  // The binary .tsg format is read as it was written.
  bool multigraph = false;
  StorageOptions storage;    // where the loaded arrays live
  // Called (on every rank) with what the reader learned from a file's
  // "# tessera graph:" header, with each option that overrides it, with
  // the direction a METIS file's counts give, and with what it dropped.
  std::function<void(const std::string&)> note;
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
  // The file's id of each vertex: the file's base (1 for .mtx and --base 1)
  // and, with relabel, the id each vertex had in the file.
  IdMap ids;
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
// Duplicates and self loops: dropped and counted (ReadOptions::multigraph
// keeps them); of equal arcs (u, v) the one with the smallest weight stays.
// DIMACS (.gr) and METIS (.graph) headers are checked against the content
// (arc count, vertex lines, the entries of m edges), ids against the
// header's vertex count. GAPBS's .sg/.wsg: the file's length must be what
// its header says, the offsets must rise from 0 to the arc count, the
// neighbours lie inside the graph, and a directed file's in-arcs must be
// its out-arcs reversed; errors name the byte offset.
LoadedGraph read_graph(Runtime& rt, const std::string& path, const ReadOptions& options = {});

// The parse step of read_graph alone, for a regular text file (no build,
// relabel or symmetrization): what `tessera bench parse` times. Collective;
// the same errors as read_graph.
struct ParsedText {
  LocalEdges edges;            // this rank's lines, in file order, ids minus the base
  std::uint64_t vertices = 0;  // the largest id + 1 (.mtx: the header's rows)
  std::uint64_t bytes = 0;     // of the file, in this rank's byte range
};
ParsedText parse_text_edges(Runtime& rt, const std::string& path, const ReadOptions& options = {});

// A graph of edges held in memory: `local` is this rank's share (any
// split; sources, destinations and, when weighted, weights, as many of
// each). Collective. Ids are the caller's: 0..vertices-1 (default: the
// largest id + 1), or, with relabel, any numbers, the graph's vertices being
// the ids that occur, in their order, each remembering its id (IdMap).
// undirected adds the reverse of every edge (dropping duplicates, as
// ReadOptions::undirected); symmetric takes edges listed both ways as they
// are (verified). Throws MismatchError for arrays of unequal lengths,
// RangeError for an id past `vertices` or a weight that is not finite.
struct FromEdgesOptions {
  bool undirected = false;
  bool symmetric = false;
  bool relabel = false;
  std::optional<std::uint64_t> vertices;
  StorageOptions storage;
};
LoadedGraph from_edges(Runtime& rt, const EdgeBatch& local, const FromEdgesOptions& options = {});

// The binary format on its own (read_graph dispatches here; save_binary in
// write.hpp writes it). Maps the segments in place, read-only, when the rank count matches the
// writer's; with another rank count it attaches, copies this rank's share and
// rebalances. The metadata must be a small regular file; "directed": false
// is verified (every arc has its reverse), else a MismatchError names the file.
EdgeList load_binary(Runtime& rt, const std::string& dir, const StorageOptions& storage = {});

}  // namespace tessera::graph
