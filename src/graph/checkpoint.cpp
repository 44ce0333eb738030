#include "tessera/graph/checkpoint.hpp"

#include <memory>

#include "tessera/runtime/collective.hpp"
#include "tessera/runtime/error.hpp"

namespace tessera::graph {

namespace {
constexpr std::uint64_t kRecordMagic = 0x5445535347524631ull;  // "TESSGRF1": a graph record, version 1
}

void add_edge_list(chunks::CheckpointWriter& w, const std::string& name, const EdgeList& g) {
  std::vector<std::uint64_t> record;
  if (g.runtime().rank() == 0)
    record = {kRecordMagic, g.vertices(), g.directed() ? 1u : 0u, g.weighted() ? 1u : 0u, g.edges()};
  w.add(name + ".graph", std::move(record));
  w.add(name + ".src", g.src());
  w.add(name + ".dst", g.dst());
  if (g.weighted()) w.add(name + ".weight", *g.weight());
}

EdgeList read_edge_list(const chunks::CheckpointReader& r, const std::string& name, const StorageOptions& storage) {
  // Collective below: a problem on any rank fails every rank here.
  std::uint64_t vertices = 0;
  bool directed = false;
  LocalEdges local;
  agree(r.runtime().comm(), [&] {
    const std::string where = "checkpoint " + r.info().path + ": graph '" + name + "'";
    if (r.length(name + ".graph") != 5) throw FormatError(where + ": its record has the wrong length");
    auto rec = r.read<std::uint64_t>(name + ".graph", 0, 5);
    if (rec[0] != kRecordMagic || rec[2] > 1 || rec[3] > 1)
      throw FormatError(where + ": its record is not a graph record of this version");
    vertices = rec[1];
    directed = rec[2] == 1;
    const std::uint64_t edges = rec[4];
    const bool weighted = rec[3] == 1;
    if (r.length(name + ".src") != edges || r.length(name + ".dst") != edges ||
        (weighted && r.length(name + ".weight") != edges))
      throw FormatError(where + ": its arrays do not all hold the " + std::to_string(edges) + " edges it records");
    local.src = r.read_block<std::uint64_t>(name + ".src");
    local.dst = r.read_block<std::uint64_t>(name + ".dst");
    if (weighted) local.weight = r.read_block<double>(name + ".weight");
  });
  BuildOptions options;
  options.storage = storage;
  return EdgeList::build(r.runtime(), vertices, directed, std::move(local), options);
}

}  // namespace tessera::graph
