// The graph a workflow starts from (include/tessera/pipeline/input.hpp).
#include "tessera/pipeline/input.hpp"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>

#include "tessera/comm/aggregators.hpp"
#include "tessera/graph/arc_hash.hpp"
#include "tessera/linalg/laplacian.hpp"
#include "tessera/runtime/collective.hpp"
#include "tessera/runtime/error.hpp"
#include "workflow_parts.hpp"

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

// -- the packed form -------------------------------------------------------

namespace {

// GAPBS's CSR of the same graph: a 4-byte id per stored arc (both arcs of an
// undirected edge), per edge as the field counts edges.
double gapbs_bytes_per_edge(std::uint64_t arcs, std::uint64_t edges) {
  return edges ? 4.0 * static_cast<double>(arcs) / static_cast<double>(edges) : 0.0;
}

std::string mib(std::uint64_t bytes) {
  char b[32];
  std::snprintf(b, sizeof b, "%.2f MiB", static_cast<double>(bytes) / 1048576.0);
  return b;
}

// The packed vertices' ids in the graph packed (8 B a vertex).
std::uint64_t id_array_bytes(const graph::PackedGraph& packed) {
  return packed.original_ids() ? 8 * packed.original_ids()->size() : 0;
}

// Storage beside `s`: the same kind and place, the name followed by `suffix`.
StorageOptions beside(const StorageOptions& s, const std::string& suffix) {
  StorageOptions o = s;
  if (!o.name.empty()) o.name += suffix;
  return o;
}

// Only an unweighted graph is packed (the rows hold no weights), and, unless
// symmetrized first, an undirected one: BFS's bottom-up steps and
// PageRank's pull would need a directed graph's transpose packed too.
void refuse_unpackable(const graph::EdgeList& g, const std::string& where, bool symmetrize) {
  if (g.directed() && !symmetrize)
    throw ConfigError("--packed packs undirected graphs only: " + where +
                      " is directed, and its in-arcs (which BFS's bottom-up steps and PageRank's pull read) would need "
                      "its transpose packed too; read it as undirected (--undirected) or drop --packed");
  if (g.weighted())
    throw ConfigError("--packed holds no weights: " + where +
                      " is weighted; ignore the weights (--pattern; in Python: pattern=True) or drop --packed");
}

// The pack step's line: the three forms' bytes per edge and the packed arrays.
void describe_packed(Progress& p, const graph::PackedGraph& packed, const graph::EdgeList& g, double seconds) {
  char line[240];
  std::snprintf(line, sizeof line,
                "packed in %.3f s: %.2f bytes per undirected edge (EdgeList %.2f, GAPBS %.2f); rows %s, offsets %s, "
                "original ids %s",
                seconds, packed.bytes_per_edge(), g.bytes_per_edge(), gapbs_bytes_per_edge(g.arcs(), g.edges()),
                mib(packed.edge_array_bytes()).c_str(), mib(packed.offset_array_bytes()).c_str(),
                mib(id_array_bytes(packed)).c_str());
  p.step(line);
}

// An undirected unweighted EdgeList packed into `storage` (timed "pack").
PackedInput pack_edge_list(const graph::EdgeList& g, graph::IdMap ids, const ArrayBytes& arrays, Progress& p,
                           Report& report, const StorageOptions& storage) {
  p.step("packing the graph (vertices numbered by degree, rows as byte codes of the differences)");
  double seconds = 0;
  auto packed = report.timed("pack", [&] {
    const auto t0 = std::chrono::steady_clock::now();
    graph::PackOptions o;
    o.storage = storage;
    auto made = graph::PackedGraph::pack(g, o);
    seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    return made;
  });
  describe_packed(p, packed, g, seconds);
  auto stats = graph_json(g);
  auto about = packed_json(packed, seconds);
  return {std::move(packed), std::move(ids), arrays, std::move(stats), std::move(about)};
}

// A generated graph packed as it is generated (graph::generate_packed):
// never an EdgeList. What the document says of the graph as read (its
// "dropped", "id_type", the EdgeList's bytes per edge) is the EdgeList's
// that generate() would have made; its arc hash is not computed (null).
PackedInput generate_packed_input(Runtime& rt, const Input& input, Progress& p, Report& report,
                                  const PackedLoadOptions& o) {
  const auto spec = spec_of(input);
  double seconds = 0;
  auto packed = report.timed(load_step(input), [&] {
    p.step("generating " + spec.describe() + " packed (vertices numbered by degree, rows as byte codes; no EdgeList)");
    const auto t0 = std::chrono::steady_clock::now();
    graph::PackOptions po;
    po.storage = o.storage;
    auto made = graph::generate_packed(rt, spec, po, [&p](const std::string& phase) { p.tick(true, "%s", phase.c_str()); });
    seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    return made;
  });
  const std::uint64_t n = packed.vertices(), arcs = packed.arcs(), edges = packed.edges();
  const graph::IdWidth width = graph::id_width_for(n);
  const double id_bytes = width == graph::IdWidth::narrow ? 4 : 8;
  auto ids = graph::IdMap::identity(rt, Distribution::block(n, rt.size()));
  find_vertices(ids, o.vertices, o.role, where(input));
  // The EdgeList generate() would have made: what the memory report measures against.
  const ArrayBytes arrays{static_cast<std::uint64_t>(id_bytes) * arcs,
                          n * graph::kVertexArrayBytes + 8 * (n + static_cast<std::uint64_t>(rt.size())), n};
  const double edge_list_bytes = edges ? id_bytes * static_cast<double>(arcs) / static_cast<double>(edges) : 0.0;
  char line[320];
  std::snprintf(line, sizeof line,
                "%s, %s (undirected, %s stored); packed in %.3f s: %.2f bytes per undirected edge (an EdgeList "
                "%.2f, GAPBS %.2f); rows %s, offsets %s, original ids %s",
                count_of(n, "vertex", "vertices").c_str(), count_of(edges, "edge").c_str(),
                count_of(arcs, "arc").c_str(), seconds, packed.bytes_per_edge(), edge_list_bytes,
                gapbs_bytes_per_edge(arcs, edges), mib(packed.edge_array_bytes()).c_str(),
                mib(packed.offset_array_bytes()).c_str(), mib(id_array_bytes(packed)).c_str());
  p.step(line);
  // graph_json's fields of that EdgeList (its balance is the packed graph's).
  const nlohmann::json packed_fields = graph_json(packed);
  nlohmann::json stats = {{"vertices", n},
                          {"edges", edges},
                          {"arcs", arcs},
                          {"self_loops", packed.self_loops()},
                          {"dropped", {{"duplicates", 0}, {"self_loops", 0}}},
                          {"directed", false},
                          {"weighted", false},
                          {"id_type", graph::id_width_name(width)},
                          {"edge_array_bytes", arrays.edges},
                          {"offset_array_bytes", 8 * (n + static_cast<std::uint64_t>(rt.size()))},
                          {"bytes_per_edge", edge_list_bytes},
                          {"gapbs_bytes_per_edge", gapbs_bytes_per_edge(arcs, edges)},
                          {"edge_imbalance", packed_fields["edge_imbalance"]},
                          {"arc_hash", nullptr}};
  auto about = packed_json(packed, seconds);
  return {std::move(packed), std::move(ids), arrays, std::move(stats), std::move(about)};
}

}  // namespace

bool packs_from_source(const Input& input) { return input.path.empty(); }

PackedInput load_packed(Runtime& rt, const Input& input, Progress& p, Report& report, const PackedLoadOptions& o) {
  if (packs_from_source(input)) return generate_packed_input(rt, input, p, report, o);
  const std::string at = where(input);
  auto loaded = report.timed(load_step(input), [&] { return load(rt, input, p, beside(o.storage, "-edges")); });
  describe(p, loaded.graph);
  refuse_unpackable(loaded.graph, at, o.symmetrize);
  find_vertices(loaded.ids, o.vertices, o.role, at);  // refused in the plain run's words, before packing
  const ArrayBytes arrays = array_bytes(loaded.graph);
  if (loaded.graph.directed())
    report.timed("symmetrize", [&] {
      make_undirected(loaded, p, "weak components, undirected walk; before packing", beside(o.storage, "-sym"));
    });
  return pack_edge_list(loaded.graph, std::move(loaded.ids), arrays, p, report, o.storage);
}  // the EdgeList is freed here: the workflow reads the packed rows only

PackedInput pack_graph(const graph::EdgeList& g, const graph::IdMap& ids, Progress& p, Report& report,
                       const PackedLoadOptions& o) {
  refuse_unpackable(g, "the graph", o.symmetrize);
  find_vertices(ids, o.vertices, o.role, "the graph");
  if (!g.directed()) return pack_edge_list(g, ids.redistributed(g.vertex_ranges()), array_bytes(g), p, report, o.storage);
  auto s = report.timed("symmetrize", [&] {
    p.step("symmetrizing (weak components, undirected walk; before packing)");
    return g.symmetrized(beside(o.storage, "-sym"));
  });
  return pack_edge_list(s, ids.redistributed(s.vertex_ranges()), array_bytes(g), p, report, o.storage);
}

nlohmann::json graph_json(const graph::PackedGraph& g, const nlohmann::json& from) {
  nlohmann::json j = from.is_object() ? from
                                      : nlohmann::json{{"dropped", {{"duplicates", 0}, {"self_loops", 0}}},
                                                       {"id_type", graph::id_width_name(graph::id_width_for(g.vertices()))},
                                                       {"arc_hash", nullptr}};
  if (from.is_object() && from.contains("bytes_per_edge")) j["edge_list_bytes_per_edge"] = from["bytes_per_edge"];
  const std::uint64_t most = all_reduce<std::uint64_t>(g.runtime().comm(), g.local_arcs(), MPI_MAX);
  const double mean = static_cast<double>(g.arcs()) / g.runtime().size();
  j.update(nlohmann::json{{"form", "packed"},
                          {"vertices", g.vertices()},
                          {"edges", g.edges()},
                          {"arcs", g.arcs()},
                          {"self_loops", g.self_loops()},
                          {"directed", g.directed()},
                          {"weighted", false},
                          {"edge_array_bytes", g.edge_array_bytes()},
                          {"offset_array_bytes", g.offset_array_bytes()},
                          {"id_array_bytes", id_array_bytes(g)},
                          {"bytes_per_edge", g.bytes_per_edge()},
                          {"gapbs_bytes_per_edge", gapbs_bytes_per_edge(g.arcs(), g.edges())},
                          {"edge_imbalance", mean > 0 ? static_cast<double>(most) / mean : 1.0}});
  return j;
}

nlohmann::json packed_json(const graph::PackedGraph& g, double seconds) {
  const std::uint64_t ids = id_array_bytes(g);
  return {{"bytes_per_edge", g.bytes_per_edge()},
          {"edge_array_bytes", g.edge_array_bytes()},
          {"offset_array_bytes", g.offset_array_bytes()},
          {"id_array_bytes", ids},
          {"array_bytes", g.edge_array_bytes() + g.offset_array_bytes() + ids},
          {"seconds", seconds}};
}

template <class T>
DistArray<T> in_file_order(const graph::PackedGraph& g, const graph::IdMap& ids, std::span<const T> values) {
  DistArray<T> out(Map(ids.runtime(), ids.vertex_ranges()));
  std::fill(out.local().begin(), out.local().end(), T{});
  MPI_Barrier(ids.runtime().comm());  // every rank's slots cleared before any value arrives
  DstAggregator<T> put(out);
  const std::uint64_t begin = g.local_vertex_begin();
  const auto* original = g.original_ids();
  for (std::size_t i = 0; i < values.size(); ++i) put.put(original ? original->local()[i] : begin + i, values[i]);
  put.flush();
  return out;
}
template DistArray<double> in_file_order(const graph::PackedGraph&, const graph::IdMap&, std::span<const double>);
template DistArray<std::uint64_t> in_file_order(const graph::PackedGraph&, const graph::IdMap&,
                                                std::span<const std::uint64_t>);
template DistArray<std::int64_t> in_file_order(const graph::PackedGraph&, const graph::IdMap&,
                                               std::span<const std::int64_t>);
template DistArray<std::uint8_t> in_file_order(const graph::PackedGraph&, const graph::IdMap&,
                                               std::span<const std::uint8_t>);

}  // namespace tessera::pipeline
