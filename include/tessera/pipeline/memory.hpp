// Memory guardrails: what a graph command will need on each node, estimated
// before it allocates anything, against what the node has. The estimate
// lives here only: the `tessera` graph commands (gen, cc, lcc, hitting,
// pipeline, pagerank, bfs) call check_memory after their options are parsed,
// and an analyst's session calls it (through the Python extension) before
// each command that makes a graph or runs an analysis. docs/memory.md says
// what is counted, per kernel.
//
// The model is a list of arrays per phase of a command (the build's passes,
// components, the largest component, the solve, ...), each one's bytes from
// the graph's sizes: vertices n, stored arcs m, id width, ranks P. A phase's
// arrays are summed; a command needs its largest phase. Arrays are either
// spread over the ranks (edge and vertex arrays: the node holds its ranks'
// share), held by every rank (buffers, per-rank runtime), or once per node
// (node-shared memory). Each is Shared storage (a file in the Shared
// directory, TESSERA_SHM_DIR) or private memory (heap, node-shared memfd).
//
// A graph not made yet is sized from what makes it: a generator's
// parameters (Kronecker graphs by the R-MAT expectation of their distinct
// arcs and non-isolated vertices, uniform graphs likewise, grids exactly)
// or a file's size and header (a .tsg's own counts, a Matrix Market size
// line, a Tessera header; else the bytes per line of a sample).
#pragma once
#include <nlohmann/json_fwd.hpp>

#include <cstdint>
#include <string>
#include <vector>

#include "tessera/graph/edge_list.hpp"
#include "tessera/pipeline/input.hpp"
#include "tessera/pipeline/workflow.hpp"

namespace tessera::pipeline {

// A graph's sizes as the estimate sees them.
struct GraphSize {
  std::uint64_t vertices = 0;
  std::uint64_t arcs = 0;           // stored arcs (an undirected edge twice, a loop once)
  std::uint64_t build_arcs = 0;     // arcs a build holds before dropping loops and duplicates
  std::uint64_t active = 0;         // vertices with an arc (bounds the largest component)
  std::uint64_t largest = 0;        // the largest component's vertices (best guess)
  std::uint64_t largest_arcs = 0;   // and its arcs
  unsigned id_bytes = 4;            // 4 while every id fits in 32 bits
  bool weighted = false;
  bool directed = false;
  bool exact = false;               // the sizes of a graph that exists
  bool connected = false;           // known to be connected (a largest component): no reachability pass
  bool largest_known = false;       // `largest` is the component's size (its labels already made)
  bool mapped = false;              // a .tsg: loaded by mapping its files (no build) with its own rank count
  int file_ranks = 0;               // the .tsg's rank count
  bool relabel = false;             // read with --relabel (id maps)
  std::string basis;                // how the sizes were found, in words
  // Ghost vertices of one rank at P ranks (remote heads of its arcs):
  // the R-MAT expectation for a Kronecker graph, else as if every vertex
  // had the mean degree (the most a degree sequence of that mean gives).
  double ghosts_per_rank(int ranks, bool largest_only) const;
  // For Kronecker graphs: the spec (for ghosts_per_rank).
  int kron_scale = 0, kron_edge_factor = 0;
};

// Sizes of the graph `input` names (a generator or a file), before it exists.
GraphSize size_of_input(const Input& input);
// Sizes of a graph that exists; `largest` (when known, e.g. from components)
// the largest component's vertex count; `connected`: the graph is one
// component (a largest component extracted).
GraphSize size_of_graph(const graph::EdgeList& g, std::uint64_t largest = 0, bool connected = false);
// The same from a document {"vertices", "arcs", "directed", "weighted",
// "id_bytes", "largest", "connected"} (what a session knows of its graphs).
GraphSize size_of_graph(const nlohmann::json& sizes);
// Sizes of a graph from_edges will build from `edges` edges (summed over the
// ranks) among `vertices` (0: unknown, as many as edges).
GraphSize size_of_edges(std::uint64_t edges, std::uint64_t vertices, bool undirected, bool weighted, bool relabel);

// One array (or group of arrays) of a phase.
struct MemoryItem {
  enum class Place { shared, memory };  // a file in the Shared directory, or private / node-shared memory
  std::string name;
  double spread = 0;    // bytes over the whole job, each rank holding its share
  double per_rank = 0;  // bytes every rank holds
  double per_node = 0;  // bytes every node holds once (node-shared)
  Place place = Place::memory;
  std::uint64_t on_node(int ranks, int ranks_on_node) const;
};

struct MemoryPhase {
  std::string name;
  std::vector<MemoryItem> items;
};

// Where a command runs, for the estimate.
struct MemoryContext {
  int ranks = 1;           // P
  int ranks_on_node = 1;   // this node's ranks
  // An analyst's session: every array is Shared storage, and the ranks'
  // own memory (interpreter, libraries, resident objects) is measured, not
  // estimated (the estimate is what the command adds).
  bool session = false;
  // The CLI's graph is in Shared storage (the pipeline; the session always).
  bool graph_shared = false;
  bool trilinos = false;   // Belos/Anasazi in process (their runtime per rank)
};

// What a command needs on one node, at its largest phase.
struct MemoryEstimate {
  std::string what;        // "kron scale 20 ef 16 seed 1 (pipeline)"
  std::string command;
  std::vector<MemoryPhase> phases;
  GraphSize graph;
  int ranks = 1, ranks_on_node = 1;
  // On this node: the largest phase (`peak_phase`) and its bytes, the most
  // Shared storage any phase holds (files in the Shared directory) and the
  // most private memory (heap, node-shared memfd, per-rank runtimes).
  std::string peak_phase, shared_phase;
  std::uint64_t bytes = 0;
  std::uint64_t shared_bytes = 0;
  std::uint64_t private_bytes = 0;
  std::uint64_t total() const noexcept { return bytes; }
  // Memory the node must find for it: everything, or without the Shared
  // files when the Shared directory is on disk (their pages are page cache).
  std::uint64_t memory_bytes(bool shared_in_memory) const noexcept {
    return shared_in_memory ? bytes : private_bytes;
  }
  nlohmann::json to_json() const;
};

// The estimate of `command` (gen, convert, cc, lcc, hitting, pipeline,
// pagerank, bfs, spectral) on the graph `options.input` names.
MemoryEstimate estimate_command(const std::string& command, const Options& options, const MemoryContext& where);
// The same on a graph that exists (`size`: size_of_graph), for the
// session's commands: generate, read_graph and from_edges make a graph
// (their size from size_of_input / size_of_edges), components,
// largest_component, hitting_times, pagerank, bfs, spectral run on one
// (and the CLI's cc, hitting, pagerank, bfs, spectral with --session).
MemoryEstimate estimate_on(const std::string& command, const GraphSize& size, const Options& options,
                           const MemoryContext& where);

// A save read back by a session's restore: the graphs' arrays as loaded
// (no build: a save holds them as built; `graphs`: their sizes summed, as
// one graph of that many vertices and arcs), and `other_bytes` of other
// arrays (labels, scores) spread over the ranks, all in Shared storage.
MemoryEstimate estimate_restore(const GraphSize& graphs, double other_bytes, const MemoryContext& where);

// What a node has.
struct NodeResources {
  std::string host;
  std::string shm_dir;
  std::uint64_t total = 0;          // MemTotal
  std::uint64_t available = 0;      // MemAvailable
  std::uint64_t cgroup_limit = 0;   // the smallest memory limit of this process's cgroups (0: none)
  std::uint64_t cgroup_usage = 0;   // that cgroup's usage
  std::uint64_t shm_free = 0;       // free bytes in the Shared directory (statvfs, f_bavail)
  bool shm_in_memory = true;        // the Shared directory is tmpfs, ramfs or hugetlbfs
  // Memory the node may give: MemAvailable, and the cgroup's headroom when it has a limit.
  std::uint64_t usable() const noexcept;
  // The node's memory: MemTotal, or the cgroup limit when lower.
  std::uint64_t capacity() const noexcept;
};
// This node's resources (no MPI): /proc/meminfo, the cgroup (v1 or v2) of
// this process, statvfs and statfs of `shm_dir` (default: the Shared directory).
NodeResources node_resources(const std::string& shm_dir = {});

// A memory limit: a fraction of the node's memory (0 < f <= 1; "90%" or
// "0.9"), bytes ("20G", "21474836480"), or none. Default: 90% (Arkouda's).
struct MemoryLimit {
  double fraction = 0.9;
  std::uint64_t bytes = 0;  // when set, instead of the fraction
  bool none = false;        // no limit of the job's own (the node's availability still holds)
  std::uint64_t of(const NodeResources& node) const;
  std::string describe(const NodeResources& node) const;
};
// ConfigError naming the text unless it is a limit ("" is the default).
MemoryLimit parse_memory_limit(const std::string& text);

// Collective. Refuses (RangeError on every rank, naming the node, the bytes
// needed and available and the ways out) when some node's share of
// `estimate` does not fit: its Shared bytes in the free space of the Shared
// directory, its memory in what the node has available, or (with the
// memory the job's ranks hold already, `in_use`, for a session) over
// `limit`. Returns this node's estimate as JSON with the resources checked.
nlohmann::json check_memory(Runtime& rt, const MemoryEstimate& estimate, const MemoryLimit& limit,
                            bool count_in_use);
// The same from the text of a limit (Options::memory_limit).
nlohmann::json check_memory(Runtime& rt, const MemoryEstimate& estimate, const std::string& limit, bool count_in_use);

// The memory this job's ranks on this node hold now (anonymous memory and
// their share of shared memory, each page once): collective over the node.
std::uint64_t node_memory_in_use(Runtime& rt);

// A byte count as the messages show it: "34.1 GiB", "512.0 MiB".
std::string human_bytes(double bytes);

}  // namespace tessera::pipeline
