// Synthetic graphs, generated in parallel and deterministic for a given seed
// whatever the rank count: every candidate edge is a pure function of
// (seed, global edge index), and each rank generates a block of indices.
//
//  kron   Graph500 / GAP Kronecker (R-MAT) graph: 2^scale vertices,
//         edge_factor * 2^scale candidate edges, quadrant probabilities
//         A = 0.57, B = C = 0.19; vertex ids scrambled by a bijection.
//  urand  uniform random: 2^scale vertices, degree * 2^scale candidate
//         edges with uniformly random endpoints (GAP "urand").
//  grid   2D rows x cols or 3D nx x ny x nz lattice, edges to the next
//         vertex along each axis: high diameter, one component.
// Every generated graph is undirected (both directions stored) with self
// loops and duplicate edges removed. `delete_fraction` drops each candidate
// edge with that probability, to create many components.
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "tessera/graph/edge_list.hpp"
#include "tessera/graph/packed_graph.hpp"

namespace tessera::graph {

struct Edge {
  std::uint64_t src = 0, dst = 0;
};

struct GraphSpec {
  enum class Kind { kron, urand, grid };
  Kind kind = Kind::kron;
  int scale = 16;                     // kron, urand: 2^scale vertices
  int edge_factor = 16;               // kron, urand: candidate edges per vertex
  std::vector<std::uint64_t> dims;    // grid: {rows, cols} or {nx, ny, nz}
  std::uint64_t seed = 1;
  double delete_fraction = 0.0;       // in [0, 1)
  bool permute = false;               // scramble vertex ids (always on for kron)

  static GraphSpec kronecker(int scale, int edge_factor = 16, std::uint64_t seed = 1);
  static GraphSpec uniform(int scale, int degree = 16, std::uint64_t seed = 1);
  static GraphSpec grid(std::vector<std::uint64_t> dims, std::uint64_t seed = 1);

  // Throws ConfigError naming the bad parameter.
  void validate() const;
  std::uint64_t vertices() const;
  std::uint64_t candidate_edges() const;
  // Candidate edge `index` (< candidate_edges()); false when deleted.
  bool edge(std::uint64_t index, Edge& out) const;
  // The candidates in [first, last) that are not deleted, appended to src
  // and dst: edge() for a batch, its per-graph constants computed once.
  void edges(std::uint64_t first, std::uint64_t last, std::vector<std::uint64_t>& src,
             std::vector<std::uint64_t>& dst) const;
  // "kron scale 16 ef 16 seed 1", for reports.
  std::string describe() const;
};

// A bijection on [0, n) that looks random, keyed by seed.
std::uint64_t permute_vertex(std::uint64_t v, std::uint64_t n, std::uint64_t seed);

// Collective: each rank generates a block of candidate edges, then builds.
EdgeList generate(Runtime& rt, const GraphSpec& spec, const StorageOptions& storage = {},
                  std::function<void(const std::string&)> on_phase = {});

// Collective: the same graph packed (PackedGraph::build), never an
// EdgeList: its vertices numbered as options say (by degree: the degrees
// counted before duplicates are dropped), original_ids() the generated ids.
PackedGraph generate_packed(Runtime& rt, const GraphSpec& spec, const PackOptions& options = {},
                            std::function<void(const std::string&)> on_phase = {});

// Parses "kron", "urand", "grid"; throws ConfigError otherwise.
GraphSpec::Kind parse_graph_kind(const std::string& name);
// Parses grid dimensions "ROWSxCOLS" or "XxYxZ" (positive integers, e.g.
// "100x100"); throws ConfigError naming the text otherwise.
std::vector<std::uint64_t> parse_grid_dims(const std::string& text);

}  // namespace tessera::graph
