// Writing graphs, in parallel: text formats through one temporary file that
// every rank writes at its offset, the binary format (see read.hpp) as
// persisted Shared-storage arrays.
#pragma once
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "tessera/graph/edge_list.hpp"
#include "tessera/graph/format.hpp"
#include "tessera/graph/id_map.hpp"

namespace tessera::graph {

// The outputs of one command, all or none: a command that fails on its
// second output (or in a step after the first) must not have replaced the
// first. A writer handed a PendingOutputs leaves its complete temporary
// beside the destination; commit() renames every one into place. Destroyed
// uncommitted (an error on the way), it removes them; SIGTERM/SIGINT too.
class PendingOutputs {
 public:
  explicit PendingOutputs(Runtime& rt) : rt_(&rt) {}
  ~PendingOutputs();
  PendingOutputs(const PendingOutputs&) = delete;
  PendingOutputs& operator=(const PendingOutputs&) = delete;

  // Collective: renames every temporary into place, in the order written.
  void commit();
  // For writers, on every rank: `temporary` (a file, or a directory when
  // `directory`) becomes `destination` at commit. `cleanup_slots`: this
  // rank's exit_cleanup slots for it, released once it is renamed or removed.
  void add(std::string temporary, std::string destination, bool directory, std::vector<int> cleanup_slots);

 private:
  struct Entry {
    std::string temporary, destination;
    bool directory = false;
    std::vector<int> cleanup_slots;
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
};

// Collective (rank 0 looks): throws ConfigError, before anything is read or
// computed, when `path` cannot be written: its directory does not exist or
// is no directory, it is an existing directory (text outputs), or it is a
// directory that already holds a graph or other files (binary outputs).
// OutputKind::text_lines: per-vertex values or id maps, which are text
// only; a binary-looking path (.tsg, trailing /) is refused.
enum class OutputKind { graph, text_lines };
void check_output_path(Runtime& rt, const std::string& path, OutputKind kind = OutputKind::graph);
// Throws ConfigError when `path`'s format cannot hold the graph: .el would
// drop the weights of a weighted graph, .wel has none to write.
void check_graph_format(const std::string& path, bool weighted);

// Collective. Writes through a temporary file (binary: a temporary sibling
// directory) created exclusively and renamed at the end, so a failed, killed
// or concurrent write leaves nothing half-written. Refuses to overwrite an
// existing binary directory.
// Text ids are written 0-based (.el/.wel) or 1-based (.mtx); an undirected
// graph is written to .mtx as "symmetric" (lower triangle).
void write_graph(const EdgeList& graph, const std::string& path, const WriteOptions& options = {});

// Collective: rank 0's `header`, then every rank's `body` in rank order, into
// one file written through a temporary renamed at the end.
void write_text_file(Runtime& rt, const std::string& path, const std::string& header, const std::string& body,
                     PendingOutputs* pending = nullptr);

// A value per vertex, as text: "# <id_column> <value_column>", then one
// "FILE_ID VALUE" line per vertex in vertex order, the file ids from `ids`
// (so a .mtx input gets 1-based ids back, a relabelled one its own ids).
struct VertexValuesOptions {
  std::string id_column = "vertex";
  std::string value_column = "value";
  std::string nan_text = "nan";  // written for a NaN value ("unreachable" for hitting times)
  PendingOutputs* pending = nullptr;
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
