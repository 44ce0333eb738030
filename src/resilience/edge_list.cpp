#include "tessera/resilience/edge_list.hpp"

#include <memory>

#include "tessera/runtime/collective.hpp"
#include "tessera/runtime/error.hpp"

namespace tessera::resilience {

using namespace graph;

namespace {
// "TESSGRF2": a graph record, version 2: out-degrees (a vertex array) and
// destinations at the graph's id width, so a restart on any rank count
// finds each vertex's row without a source array.
constexpr std::uint64_t kRecordMagic = 0x5445535347524632ull;
constexpr std::size_t kRecordLength = 6;
}  // namespace

void add_edge_list(CheckpointWriter& w, const std::string& name, const EdgeList& g) {
  std::vector<std::uint64_t> record;
  if (g.runtime().rank() == 0)
    record = {kRecordMagic, g.vertices(), g.directed() ? 1u : 0u, g.weighted() ? 1u : 0u, g.arcs(), g.id_bytes()};
  w.add(name + ".graph", std::move(record));
  std::vector<std::uint64_t> degrees(g.local_vertices());
  auto rows = g.row_offsets();
  for (std::size_t i = 0; i < degrees.size(); ++i) degrees[i] = rows[i + 1] - rows[i];
  w.add(name + ".degrees", std::move(degrees));
  std::visit([&](const auto& dst) { w.add(name + ".dst", dst); }, g.dst());
  if (g.weighted()) w.add(name + ".weight", *g.weight());
}

EdgeList read_edge_list(const CheckpointReader& r, const std::string& name, const StorageOptions& storage) {
  // Collective below: a problem on any rank fails every rank here.
  Runtime& rt = r.runtime();
  std::uint64_t vertices = 0, id_bytes = 0;
  bool directed = false;
  LocalEdges local;
  std::vector<std::uint64_t> degrees;
  std::uint64_t arcs = 0, mine = 0;
  bool weighted = false;
  const std::string where = "checkpoint " + r.info().path + ": graph '" + name + "'";
  agree(rt.comm(), [&] {
    if (r.length(name + ".graph") != kRecordLength) throw FormatError(where + ": its record has the wrong length");
    auto rec = r.read<std::uint64_t>(name + ".graph", 0, kRecordLength);
    if (rec[0] != kRecordMagic || rec[2] > 1 || rec[3] > 1 || (rec[5] != 4 && rec[5] != 8))
      throw FormatError(where + ": its record is not a graph record of this version");
    vertices = rec[1];
    directed = rec[2] == 1;
    weighted = rec[3] == 1;
    arcs = rec[4];
    id_bytes = rec[5];
    if (r.length(name + ".degrees") != vertices || r.length(name + ".dst") != arcs ||
        (weighted && r.length(name + ".weight") != arcs))
      throw FormatError(where + ": its arrays do not all hold the " + std::to_string(vertices) + " vertices and " +
                        std::to_string(arcs) + " arcs it records");
    degrees = r.read_block<std::uint64_t>(name + ".degrees");
    for (auto d : degrees) mine += d;
  });
  // This rank's rows are its block of vertices; their arcs follow the
  // earlier ranks' arcs in the global destination array.
  const std::uint64_t first = exclusive_prefix_sum(rt.comm(), mine);
  const std::uint64_t total = all_reduce<std::uint64_t>(rt.comm(), mine, MPI_SUM);
  agree(rt.comm(), [&] {
    if (total != arcs)
      throw FormatError(where + ": its degrees sum to " + std::to_string(total) + ", not its " + std::to_string(arcs) +
                        " arcs");
    const std::uint64_t u0 = Distribution::block(vertices, rt.size()).begin(rt.rank());
    local.src.reserve(mine);
    for (std::size_t i = 0; i < degrees.size(); ++i) local.src.insert(local.src.end(), degrees[i], u0 + i);
    if (id_bytes == 4) {
      auto d = r.read<std::uint32_t>(name + ".dst", first, mine);
      local.dst.assign(d.begin(), d.end());
    } else {
      local.dst = r.read<std::uint64_t>(name + ".dst", first, mine);
    }
    if (weighted) local.weight = r.read<double>(name + ".weight", first, mine);
  });
  BuildOptions options;
  options.storage = storage;
  options.id_width = id_bytes == 4 ? IdWidth::narrow : IdWidth::wide;
  return EdgeList::build(rt, vertices, directed, std::move(local), options);
}

}  // namespace tessera::resilience
