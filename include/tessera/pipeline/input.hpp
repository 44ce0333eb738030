// The graph a workflow starts from: a file (or standard input) read as the
// `tessera` commands read it, or a generated graph when no file is named;
// and the checks every workflow makes on it before long work starts.
#pragma once
#include <nlohmann/json.hpp>

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "tessera/graph/generators.hpp"
#include "tessera/graph/io.hpp"
#include "tessera/graph/packed_graph.hpp"
#include "tessera/pipeline/progress.hpp"
#include "tessera/pipeline/report.hpp"

namespace tessera::pipeline {

struct Input {
  std::string path;  // a graph file or .tsg directory, "-" for standard input; "" = generate
  // Reading a file.
  int base = -1;  // first vertex id of a text file; -1: 1 for .mtx, else 0
  bool relabel = false, undirected = false, pattern = false;
  bool symmetric = false;  // the file lists both directions of every edge
  bool multigraph = false;  // keep the file's duplicate edges and self loops (graph::ReadOptions::multigraph)
  // Generating (when `path` is empty).
  std::string kind = "kron";  // kron | urand | grid
  int scale = 16, edge_factor = 16;
  std::string dims = "100x100";
  std::uint64_t seed = 1;
  double delete_fraction = 0;
  bool permute = false;
};

// The generator's spec (ConfigError naming a bad option).
graph::GraphSpec spec_of(const Input& input);
// The path, or the generated graph's description.
std::string input_name(const Input& input);
// How messages name the graph: its path, "standard input", "the generated graph".
std::string where(const Input& input);

// Collective: reads the file, or generates the graph, into `storage`.
graph::LoadedGraph load(Runtime& rt, const Input& input, Progress& progress, const StorageOptions& storage = {});

// A directed graph made undirected (a random walk, weak components), into
// `storage`; the id map follows its vertex ranges. Nothing for an undirected one.
void make_undirected(graph::LoadedGraph& g, Progress& progress, const std::string& why,
                     const StorageOptions& storage = {});

// A random walk needs finite positive weights: RangeError naming the first
// bad edge in file ids (unweighted graphs pass).
void check_walk_weights(const graph::EdgeList& g, const graph::IdMap& ids);

// The internal ids of `file_ids`; RangeError naming the first that `ids`
// lacks, in the words of its `role` ("source vertex") and of `where` the
// ids were looked for ("the graph file", "the largest component"), with the
// id range when the ids are a range.
std::vector<std::uint64_t> find_vertices(const graph::IdMap& ids, const std::vector<std::uint64_t>& file_ids,
                                         const std::string& role, const std::string& where);
// Hitting-time targets: find_vertices(..., "target vertex", where).
std::vector<std::uint64_t> find_targets(const graph::IdMap& ids, const std::vector<std::uint64_t>& file_ids,
                                        const std::string& where);

// {"vertices", "edges", "directed", "weighted", "edge_imbalance", "dropped": {"duplicates", "self_loops"}, ...}.
nlohmann::json graph_json(const graph::EdgeList& g);
// "N vertices, M edges (undirected, weighted)" as a step.
void describe(Progress& progress, const graph::EdgeList& g);

// -- the packed form (graph::PackedGraph): pipeline, bfs, pagerank --packed --

// A graph packed for a workflow, its EdgeList given up.
struct PackedInput {
  // original_ids(): each vertex's id in the graph packed (the EdgeList
  // `ids` describes; a generated graph: the generator's ids), kept so that
  // answers go back to the file's order.
  graph::PackedGraph graph;
  graph::IdMap ids;        // the file's ids of the graph packed, on its vertex ranges (not the packed ones)
  ArrayBytes arrays;       // the EdgeList's (packed, or that generate() makes): what the memory report measures against
  nlohmann::json stats;    // graph_json of the EdgeList packed (generated: its fields the packed graph knows)
  nlohmann::json packed;   // packed_json: the packed arrays and the pack's seconds
};

struct PackedLoadOptions {
  // The packed arrays (Shared: <name>-offsets, -bytes, -ids). The EdgeList
  // read first lives there too until it is packed (<name>-edges; symmetrized:
  // <name>-sym).
  StorageOptions storage;
  // A directed graph made undirected first (timed "symmetrize"): the
  // pipeline's weak components and walk. Off: refused (BFS and PageRank
  // would need its in-arcs packed too).
  bool symmetrize = false;
  // File ids the command names (a source, targets): refused in the words of
  // find_vertices(..., role, where) before anything is packed.
  std::vector<std::uint64_t> vertices;
  std::string role = "vertex";
};

// Collective: `input`'s graph packed (vertices numbered by degree), each
// step timed in `report`. A generated graph is packed as it is generated
// (graph::generate_packed, the "generate" step: never an EdgeList; its
// document's "arc_hash" is null); a file is read into an EdgeList (the
// "read" step), symmetrized ("symmetrize") and packed ("pack",
// PackedGraph::pack), the EdgeList given up as soon as the rows are packed.
// packs_from_source() says which inputs take the first way (the memory
// estimate follows it). Undirected (or symmetrized) unweighted graphs only:
// ConfigError naming the way out otherwise.
PackedInput load_packed(Runtime& rt, const Input& input, Progress& progress, Report& report,
                        const PackedLoadOptions& options = {});
// The same from a graph the caller holds (g stays; a directed one is
// symmetrized into a copy first when options.symmetrize).
PackedInput pack_graph(const graph::EdgeList& g, const graph::IdMap& ids, Progress& progress, Report& report,
                       const PackedLoadOptions& options = {});
// Whether load_packed builds `input`'s packed graph straight from its source,
// never holding an EdgeList (the memory estimate follows it): a generated
// graph (a file is read into an EdgeList first).
bool packs_from_source(const Input& input);

// The "graph" object of a packed graph: graph_json's keys (a fact the
// packed rows do not keep, such as "dropped", "arc_hash" or "id_type",
// taken from `packed_from`, graph_json of the EdgeList packed, when given:
// else zero, null, or the id width an EdgeList of as many vertices holds),
// with the packed rows' sizes ("bytes_per_edge": the rows' bytes per edge,
// "gapbs_bytes_per_edge" beside it), "form": "packed", and the EdgeList's
// "edge_list_bytes_per_edge" when known. Collective (the edge imbalance).
nlohmann::json graph_json(const graph::PackedGraph& g, const nlohmann::json& packed_from = nullptr);
// The document's "packed" object: the packed arrays' bytes and `seconds` of packing.
nlohmann::json packed_json(const graph::PackedGraph& g, double seconds);

// Collective: `values` of g's local vertices put on `ids`' vertex ranges (the
// graph g was packed from, or whose subgraph g is: g.original_ids() leads
// there), so that they are written in the file's vertex order. Vertices
// that g does not hold keep T{}.
template <class T>
DistArray<T> in_file_order(const graph::PackedGraph& g, const graph::IdMap& ids, std::span<const T> values);

}  // namespace tessera::pipeline
