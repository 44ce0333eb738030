// Writing graphs, in parallel: text formats through one temporary file that
// every rank writes at its offset, the binary format (see read.hpp) as
// persisted Shared-storage arrays.
#pragma once
#include <string>

#include "tessera/graph/edge_list.hpp"
#include "tessera/graph/format.hpp"

namespace tessera::graph {

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

// The binary format on its own (write_graph dispatches here; load_binary in
// read.hpp reads it).
void save_binary(const EdgeList& graph, const std::string& dir, const WriteOptions& options = {});

}  // namespace tessera::graph
