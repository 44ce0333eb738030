// The graph a workflow starts from: a file (or standard input) read as the
// `tessera` commands read it, or a generated graph when no file is named;
// and the checks every workflow makes on it before long work starts.
#pragma once
#include <nlohmann/json_fwd.hpp>

#include <cstdint>
#include <string>
#include <vector>

#include "tessera/graph/generators.hpp"
#include "tessera/graph/io.hpp"
#include "tessera/pipeline/progress.hpp"

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

}  // namespace tessera::pipeline
