// Writing graphs, in parallel: text formats through one temporary file that
// every rank writes at its offset, the binary format (see read.hpp) as
// persisted Shared-storage arrays.
//
// Where an output goes (storage/output_path.hpp): a regular file or a new
// path is replaced whole (temporary beside it, renamed over it; a symbolic
// link keeps pointing where it did and its target gets the bytes). A
// character device, FIFO, socket or descriptor ("-" is standard output,
// /dev/stdout, /proc/self/fd/N) is a stream: rank 0 opens it when the
// output is written and writes every rank's text in rank order; it is never
// renamed over, unlinked or truncated. "-" and a stream whose name gives no
// format (.el, .wel, .mtx) take edge-list text: "u v", or "u v w" for a
// weighted graph. A binary (.tsg) graph is a directory and never a stream.
#pragma once
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "tessera/graph/edge_list.hpp"
#include "tessera/graph/format.hpp"
#include "tessera/graph/id_map.hpp"
#include "tessera/storage/output_path.hpp"

namespace tessera::graph {

// The outputs of one command, all or none: a command that fails on its
// second output (or in a step after the first) must not have replaced the
// first. A writer handed a PendingOutputs leaves its complete temporary
// beside the destination; commit() renames every one into place. Destroyed
// uncommitted (an error on the way), it removes them; SIGTERM/SIGINT too.
// A stream output (a device, FIFO, standard output) cannot be taken back: its
// text waits in memory and commit() writes it before any rename, so a
// reader that went away leaves every file as it was.
class PendingOutputs {
 public:
  explicit PendingOutputs(Runtime& rt) : rt_(&rt) {}
  ~PendingOutputs();
  PendingOutputs(const PendingOutputs&) = delete;
  PendingOutputs& operator=(const PendingOutputs&) = delete;

  // Collective: writes the streams, then renames every temporary into
  // place, in the order written.
  void commit();
  // For writers, on every rank: `temporary` (a file, or a directory when
  // `directory`) becomes `destination` at commit. `cleanup_slots`: this
  // rank's exit_cleanup slots for it, released once it is renamed or removed.
  void add(std::string temporary, std::string destination, bool directory, std::vector<int> cleanup_slots);
  // For writers, on every rank: this rank's part of a stream output, written
  // at commit (rank 0's part first, then rank 1's, ...).
  void add_stream(OutputPath target, std::string data);

 private:
  struct Entry {
    std::string temporary, destination;
    bool directory = false;
    std::vector<int> cleanup_slots;
    bool stream = false;
    OutputPath target;
    std::string data;
  };
  void discard() noexcept;
  Runtime* rt_;
  std::vector<Entry> entries_;
};

struct WriteOptions {
  // Binary format: the directory, segments and metadata are group-readable
  // and -writable (0770/0660 instead of 0700/0600).
  bool group_access = false;
  // When set, the output is committed with the command's other outputs.
  PendingOutputs* pending = nullptr;
  // Text formats: one more comment line after the header saying what the
  // file is (a renumbered subgraph says so and names its id map).
  std::string comment;
};

// Collective (rank 0 looks): throws ConfigError naming the path and the
// reason, before anything is read or computed, when `path` cannot be
// written: its directory does not exist, is no directory or is not
// writable, it is an existing directory (text outputs), a block device, a
// descriptor not open for writing, or a directory that already holds a graph
// or other files (binary outputs; a missing directory is created, so its
// nearest existing ancestor must be writable), or a binary graph would go
// to a stream. Returns where the output goes (every rank the same).
// OutputKind::text_lines: per-vertex values or id maps, which are text
// only; a binary-looking path (.tsg, trailing /) is refused.
enum class OutputKind { graph, text_lines };
OutputPath check_output_path(Runtime& rt, const std::string& path, OutputKind kind = OutputKind::graph);
// Throws ConfigError when `path`'s format cannot hold the graph: .el would
// drop the weights of a weighted graph, .wel has none to write. "-" and a
// stream named without a format take either.
void check_graph_format(const std::string& path, bool weighted);

// Collective. Writes through a temporary file (binary: a temporary sibling
// directory) created exclusively and renamed at the end, so a failed, killed
// or concurrent write leaves nothing half-written; a stream in place (see
// the top). Refuses to overwrite an existing binary directory.
// Text ids are written 0-based (.el/.wel) or 1-based (.mtx, .gr, .graph); an
// undirected graph is written to .mtx as "symmetric" (lower triangle), to
// .graph with its edges at both ends (a directed one: its arcs once, as
// GAPBS's test graphs; ConfigError for an undirected graph with self loops),
// to .gr as its arcs. .sg/.wsg: GAPBS's serialized graph (read.hpp), in
// place at each rank's offsets, never to a stream; ConfigError past 2^31
// vertices or (.wsg) for a weight that is no int32. An edge list
// starts with its kind, which read_graph honours:
//   # tessera graph: undirected, unweighted, ids from 0; 4096 vertices, 48380 edges (96760 arcs)
//   # tessera graph: directed, weighted, ids from 0; 28 vertices, 43 arcs
void write_graph(const EdgeList& graph, const std::string& path, const WriteOptions& options = {});
// That first line of an edge list, with its newline.
std::string edge_list_header(const EdgeList& graph);

// Collective: rank 0's `header`, then every rank's `body` in rank order, into
// one file written through a temporary renamed at the end, or into a stream.
void write_text_file(Runtime& rt, const std::string& path, const std::string& header, const std::string& body,
                     PendingOutputs* pending = nullptr);

// A value per vertex, as text: "# <id_column> <value_column>", then one
// "FILE_ID VALUE" line per vertex in vertex order, the file ids from `ids`
// (so a .mtx input gets 1-based ids back, a relabelled one its own ids).
struct VertexValuesOptions {
  std::string id_column = "vertex";
  std::string value_column = "value";
  std::string nan_text = "nan";  // written for a NaN value (a number NumPy reads: nan, inf)
  PendingOutputs* pending = nullptr;
  // A second comment line saying what a special value means ("nan: ...").
  std::string note;
};
// Collective. `local_values`: this rank's vertices of `ids`, in order.
void write_vertex_values(const IdMap& ids, std::span<const double> local_values, const std::string& path,
                         const VertexValuesOptions& options = {});
void write_vertex_values(const IdMap& ids, std::span<const std::uint64_t> local_values, const std::string& path,
                         const VertexValuesOptions& options = {});

// The binary format on its own (write_graph dispatches here; load_binary in
// read.hpp reads it).
void save_binary(const EdgeList& graph, const std::string& dir, const WriteOptions& options = {});

}  // namespace tessera::graph
