// The graph a workflow starts from (include/tessera/pipeline/input.hpp).
#include "tessera/pipeline/input.hpp"

#include <nlohmann/json.hpp>

#include <cstdio>

#include "tessera/graph/arc_hash.hpp"
#include "tessera/linalg/laplacian.hpp"
#include "tessera/runtime/error.hpp"

namespace tessera::pipeline {

graph::GraphSpec spec_of(const Input& a) {
  graph::GraphSpec s;
  auto kind = graph::parse_graph_kind(a.kind);
  if (kind == graph::GraphSpec::Kind::grid) s = graph::GraphSpec::grid(graph::parse_grid_dims(a.dims), a.seed);
  else if (kind == graph::GraphSpec::Kind::kron) s = graph::GraphSpec::kronecker(a.scale, a.edge_factor, a.seed);
  else s = graph::GraphSpec::uniform(a.scale, a.edge_factor, a.seed);
  s.delete_fraction = a.delete_fraction;
  s.permute = s.permute || a.permute;
  s.validate();
  return s;
}

std::string input_name(const Input& a) { return a.path.empty() ? spec_of(a).describe() : a.path; }

std::string where(const Input& a) {
  return a.path.empty() ? "the generated graph" : a.path == "-" ? "standard input" : a.path;
}

graph::LoadedGraph load(Runtime& rt, const Input& a, Progress& progress, const StorageOptions& storage) {
  if (a.path.empty()) {
    auto spec = spec_of(a);
    progress.step("generating " + spec.describe());
    auto g = graph::generate(rt, spec, storage,
                             [&progress](const std::string& phase) { progress.tick(true, "%s", phase.c_str()); });
    auto ids = graph::IdMap::identity(rt, g.vertex_ranges());
    return {std::move(g), std::move(ids)};
  }
  progress.step("reading " + (a.path == "-" ? std::string("standard input") : a.path) +
                (a.path == "-" ? "" : " (" + graph::format_name(graph::format_of(a.path)) + ")"));
  graph::ReadOptions o;
  if (a.base >= 0) o.base = a.base;
  o.relabel = a.relabel;
  o.undirected = a.undirected;
  o.symmetric = a.symmetric;
  o.pattern = a.pattern;
  o.multigraph = a.multigraph;
  o.storage = storage;
  o.note = [&progress](const std::string& what) { progress.step(what); };
  return graph::read_graph(rt, a.path, o);
}

void make_undirected(graph::LoadedGraph& g, Progress& progress, const std::string& why, const StorageOptions& storage) {
  if (!g.graph.directed()) return;
  progress.step("symmetrizing (" + why + ")");
  const auto read = g.graph.cleaning();  // what the read dropped stays said
  g.graph = g.graph.symmetrized(storage);
  g.graph.set_cleaning(read);
  g.ids = g.ids.redistributed(g.graph.vertex_ranges());
}

void check_walk_weights(const graph::EdgeList& g, const graph::IdMap& ids) {
  if (!g.weighted()) return;
  auto bad = linalg::find_invalid_weight(g);  // the same on every rank
  if (!bad) return;
  bad->row = ids.file_id(bad->row);
  bad->column = ids.file_id(bad->column);
  throw RangeError(bad->describe() + " (--pattern; in Python: read_graph(..., pattern=True))");
}

std::vector<std::uint64_t> find_vertices(const graph::IdMap& ids, const std::vector<std::uint64_t>& file_ids,
                                         const std::string& role, const std::string& where) {
  auto found = ids.find(file_ids);
  for (std::size_t k = 0; k < found.size(); ++k) {
    if (found[k] != kNoIndex) continue;
    const std::string id = role + " " + std::to_string(file_ids[k]);
    if (ids.vertices() == 0) throw RangeError(id + " is not in " + where + ": it has no vertices");
    if (ids.is_identity())
      throw RangeError(id + " is outside the vertex ids of " + where + ", " + std::to_string(ids.base()) + ".." +
                       std::to_string(ids.base() + ids.vertices() - 1));
    throw RangeError(id + " does not occur in " + where);
  }
  return found;
}

std::vector<std::uint64_t> find_targets(const graph::IdMap& ids, const std::vector<std::uint64_t>& file_ids,
                                        const std::string& where) {
  return find_vertices(ids, file_ids, "target vertex", where);
}

nlohmann::json graph_json(const graph::EdgeList& g) {
  return {{"vertices", g.vertices()},
          {"edges", g.edges()},
          {"arcs", g.arcs()},
          {"self_loops", g.self_loops()},
          // What the read dropped to make the file's graph simple (--multigraph: kept).
          {"dropped", {{"duplicates", g.cleaning().kept ? 0 : g.cleaning().duplicates},
                       {"self_loops", g.cleaning().kept ? 0 : g.cleaning().self_loops}}},
          {"directed", g.directed()},
          {"weighted", g.weighted()},
          {"id_type", graph::id_width_name(g.id_width())},
          {"edge_array_bytes", g.edge_array_bytes()},
          {"offset_array_bytes", g.offset_array_bytes()},
          {"bytes_per_edge", g.bytes_per_edge()},
          // GAPBS's CSR of the same graph: a 4-byte id a stored arc, per edge as the field counts them.
          {"gapbs_bytes_per_edge", g.edges() ? 4.0 * static_cast<double>(g.arcs()) / static_cast<double>(g.edges()) : 0.0},
          {"edge_imbalance", g.edge_imbalance()},
          {"arc_hash", graph::arc_set_hash_hex(g)}};
}

void describe(Progress& p, const graph::EdgeList& g) {
  char bytes[160];
  std::snprintf(bytes, sizeof(bytes), "%d-bit ids, edge arrays %.1f MiB = %.2f bytes per %sedge",
                static_cast<int>(g.id_bytes() * 8), static_cast<double>(g.edge_array_bytes()) / 1048576.0,
                g.bytes_per_edge(),
                g.directed() ? "" : "undirected ");
  p.step(count_of(g.vertices(), "vertex", "vertices") + ", " + count_of(g.edges(), "edge") + " (" +
         (g.directed() ? "directed" : "undirected, " + count_of(g.arcs(), "arc") + " stored") +
         (g.weighted() ? ", weighted" : "") + "; " + bytes + ")");
}

}  // namespace tessera::pipeline
