// The workflows of `tessera pagerank | bfs | spectral` and of Python's
// pagerank(), bfs() and spectral() (include/tessera/pipeline/workflow.hpp):
// one function per command, in phases — outputs checked, the graph read (or
// the caller's), what the kernel needs built, the kernel, its verification,
// the outputs written, the report. The kernels are graph/'s (GAPBS's rules)
// and Anasazi's through the analysis step (pipeline/analysis.hpp).
#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <optional>

#include "tessera/graph/subgraph.hpp"
#include "tessera/pipeline/report.hpp"
#include "tessera/runtime/collective.hpp"
#include "tessera/runtime/error.hpp"
#include "tessera/trilinos/spectral.hpp"
#include "workflow_parts.hpp"

namespace tessera::pipeline {

using nlohmann::json;

namespace {

// What a kernel's phase works with: the report, progress, the document and
// the result being built, the outputs committed together at the end.
struct KernelRun {
  Report& report;
  Progress& p;
  Result& result;
  graph::PendingOutputs& outputs;
  json& doc() { return result.json; }
};

struct OutputSpec {
  const std::string& path;
  const char* option;
  graph::OutputKind kind;
};

// Every output checked before any work; at most one on standard output.
void check_outputs(Runtime& rt, const Options& a, std::initializer_list<OutputSpec> outputs) {
  int on_stdout = 0;
  for (const auto& o : outputs)
    if (!o.path.empty()) on_stdout += check_output(rt, a, o.path, o.kind, o.option).standard_output();
  if (on_stdout > 1) throw ConfigError("two outputs go to standard output; send all but one to files");
}

// The kernel's phases on `g` (undirected, or directed for PageRank and
// BFS), and the report. `needs_in_arcs`: a directed graph's transpose is
// built first (timed as "build"). `arrays`: what the memory is measured against.
template <class Kernel>
Result kernel_on(const graph::EdgeList& g, const graph::IdMap& ids, const std::string& input, const char* command,
                 bool needs_in_arcs, const Options& a, Progress& p, Report& report, const ArrayBytes& arrays,
                 bool writes, Kernel kernel) {
  std::optional<graph::EdgeList> in_arcs;
  if (needs_in_arcs && g.directed())
    report.timed("build", [&] {
      p.step("transposing (the kernel pulls along in-arcs)");
      in_arcs.emplace(g.transposed({}, true));
    });
  Result r;
  r.json = {{"command", command}, {"input", input}, {"stats", graph_json(g)}};
  graph::PendingOutputs outputs(g.runtime());
  KernelRun s{report, p, r, outputs};
  kernel(g, ids, in_arcs ? &*in_arcs : nullptr, s);
  if (writes) report.timed("write", [&] { outputs.commit(); });
  else outputs.commit();
  if (!a.output.empty()) r.json["output"] = a.output;
  report.finish(r.json, arrays);
  return r;
}

// The answer checked; a wrong one recorded in `object` and the result.
template <class Check>
void verified(KernelRun& s, json& object, const char* what, Check check) {
  if (!record_verification(s.report, s.p, object, what, check)) s.result.verification_failed = true;
}

std::string shortest(double x) {
  char b[32];
  std::snprintf(b, sizeof b, "%g", x);
  return b;
}

}  // namespace

graph::PageRankOptions pagerank_options(const Options& a) {
  graph::PageRankOptions o;
  o.damping = a.pagerank.damping;
  o.tolerance = a.pagerank.tolerance;
  o.max_iterations = a.pagerank.max_iterations;
  o.method = graph::parse_pagerank_method(a.pagerank.method);
  if (!(o.damping >= 0 && o.damping < 1)) throw ConfigError("the damping must lie in [0, 1), not " + shortest(o.damping));
  if (!(o.tolerance >= 0)) throw ConfigError("the PageRank tolerance must not be negative");
  if (o.max_iterations <= 0)
    throw ConfigError("max_iterations must be positive, not " + std::to_string(o.max_iterations));
  return o;
}

json pagerank_json(const graph::PageRank& pr, const graph::PageRankOptions& o, const Options& a,
                   std::uint64_t local_begin, const graph::IdMap& ids) {
  // The top vertex and the mass kept (dangling vertices pass theirs to nobody).
  Runtime& rt = ids.runtime();
  auto x = pr.scores.local();
  double best = -1, sum = 0;
  std::uint64_t best_v = kNoIndex;
  for (std::size_t i = 0; i < x.size(); ++i) {
    sum += x[i];
    if (x[i] > best) best = x[i], best_v = local_begin + i;
  }
  const auto top = all_argmax<double>(rt.comm(), best, best_v);
  sum = all_reduce(rt.comm(), sum, MPI_SUM);
  return {{"method", graph::pagerank_method_name(o.method)},
          {"damping", o.damping},
          {"tolerance", o.tolerance},
          {"max_iterations", o.max_iterations},
          {"personalization", a.pagerank.personalize},
          {"iterations", pr.iterations},
          {"change", pr.change},
          {"converged", pr.converged},
          {"seconds", pr.seconds},
          {"extra_bytes", pr.extra_bytes},
          {"single_precision", pr.single_precision},
          {"score_sum", sum},
          {"top_vertex", top.index == kNoIndex ? json(nullptr) : json(ids.file_id(top.index))},
          {"top_score", top.value}};
}

json bfs_json(const graph::Bfs& b, const graph::BfsOptions& o, const Options& a) {
  return {{"source", a.bfs.source},
          {"direction", graph::bfs_direction_name(o.direction)},
          {"reached", b.reached},
          {"levels", b.levels},
          {"top_down_steps", b.top_down_steps},
          {"bottom_up_steps", b.bottom_up_steps},
          {"seconds", b.seconds},
          {"extra_bytes", b.extra_bytes},
          {"hops", a.bfs.hops >= 0 ? json(a.bfs.hops) : json(nullptr)}};
}

namespace {

// The PageRank phases: index, kernel, summary, verification, output.
void pagerank_phases(const graph::EdgeList& g, const graph::IdMap& ids, const graph::EdgeList* in_arcs,
                     const Options& a, const std::string& where, KernelRun& s) {
  graph::PageRankOptions o = pagerank_options(a);
  o.personalization = find_vertices(ids, a.pagerank.personalize, "personalization vertex", where);
  s.p.step(std::string(o.personalization.empty() ? "PageRank" : "personalized PageRank") + " (" +
           graph::pagerank_method_name(o.method) + ", damping " + shortest(o.damping) + ", until the L1 change < " +
           shortest(o.tolerance) + " or " + std::to_string(o.max_iterations) + " iterations)");
  o.on_iteration = [&s, &o](int it, double change, double) {
    s.p.tick(change < o.tolerance || it >= o.max_iterations, "iteration %d: L1 change %.3g", it, change);
  };
  // The kernel's index is made beforehand, as GAPBS builds its CSR before timing its kernel.
  auto index = s.report.timed("build", [&] { return graph::PageRankIndex(g, in_arcs); });
  auto pr = s.report.timed("pagerank", [&] { return graph::pagerank(g, o, nullptr, &index); });
  if (!pr.converged)
    s.p.step("not converged: the last change " + shortest(pr.change) + " is not below the tolerance (raise the "
             "iteration cap)");
  json& j = s.doc()["pagerank"];
  j = pagerank_json(pr, o, a, g.local_vertex_begin(), ids);
  s.p.step(std::to_string(pr.iterations) + " iterations (" + std::to_string(pr.seconds) + " s), last L1 change " +
           shortest(pr.change));
  if (a.verify) {
    s.p.step("verifying the scores (one more iteration, pushed along out-arcs, must change them by less than the "
             "tolerance)");
    verified(s, j, "PageRank", [&] { return graph::check_pagerank(g, pr.scores, o, o.tolerance); });
    if (j.value("verified", false))
      s.p.tick(true, "proved: the scores are a fixed point of PageRank to within the L1 tolerance %s",
               shortest(o.tolerance).c_str());
  }
  if (!a.output.empty())
    s.report.timed("write", [&] {
      s.p.step("writing " + shown(a.output));
      graph::write_vertex_values(ids, std::span<const double>(pr.scores.local()), a.output,
                                 {"vertex", "score", "nan", &s.outputs, ""});
    });
  s.result.pagerank.emplace(std::move(pr));
}

graph::BfsOptions bfs_options(const Options& a) {
  graph::BfsOptions o;
  o.direction = graph::parse_bfs_direction(a.bfs.direction);
  o.max_depth = a.bfs.hops;
  if (a.bfs.hops >= 0 && a.verify)
    throw ConfigError("verification checks a whole search, not one stopped at " + std::to_string(a.bfs.hops) +
                      " hops");
  if ((!a.bfs.subgraph.empty() || !a.bfs.subgraph_ids.empty()) && a.bfs.hops < 0)
    throw ConfigError("the subgraph and its ids are the k-hop neighbourhood's: give the hops (--hops K)");
  if (!a.bfs.subgraph_ids.empty() && a.bfs.subgraph.empty())
    throw ConfigError("the subgraph's id map (--ids) needs the subgraph written (--subgraph OUT)");
  return o;
}

// "vertex parent depth" lines, file ids; -1 -1 for a vertex not reached.
void write_bfs_tree(const graph::IdMap& ids, const graph::Bfs& b, const std::string& output, KernelRun& s) {
  auto par = b.parents.local();
  std::vector<std::uint64_t> parents(par.size());
  for (std::size_t i = 0; i < par.size(); ++i) parents[i] = par[i] < 0 ? kNoIndex : static_cast<std::uint64_t>(par[i]);
  ids.translate(parents);
  auto vertices = ids.local_file_ids();
  auto depth = b.depths.local();
  std::string body;
  char line[80];
  for (std::size_t i = 0; i < parents.size(); ++i) {
    int n = parents[i] == kNoIndex
                ? std::snprintf(line, sizeof line, "%" PRIu64 " -1 -1\n", vertices[i])
                : std::snprintf(line, sizeof line, "%" PRIu64 " %" PRIu64 " %" PRId64 "\n", vertices[i], parents[i],
                                depth[i]);
    body.append(line, static_cast<std::size_t>(n));
  }
  s.p.step("writing " + shown(output));
  graph::write_text_file(ids.runtime(), output, "# vertex parent depth\n", body, &s.outputs);
}

// The k-hop neighbourhood's induced subgraph, and "subgraph_id file_id" lines.
void write_neighbourhood(const graph::EdgeList& g, const graph::IdMap& ids, const graph::Bfs& b, const Options& a,
                         KernelRun& s) {
  DistArray<std::uint8_t> keep(g.vertex_map());
  for (std::size_t i = 0; i < keep.local().size(); ++i) keep.local()[i] = b.depths.local()[i] >= 0;
  auto sub = s.report.timed("subgraph", [&] { return graph::induced_subgraph(g, keep); });
  s.doc()["subgraph"] = graph_json(sub.graph);
  s.doc()["subgraph"]["output"] = a.bfs.subgraph;
  const std::string ids_output = id_map_path(a.bfs.subgraph, a.bfs.subgraph_ids);
  if (!ids_output.empty()) s.doc()["subgraph"]["ids"] = ids_output;
  s.report.timed("write", [&] {
    s.p.step("writing the " + std::to_string(a.bfs.hops) + "-hop neighbourhood (" +
             count_of(sub.graph.vertices(), "vertex", "vertices") + ", " +
             (sub.graph.directed() ? count_of(sub.graph.arcs(), "arc")
                                   : count_of(sub.graph.edges(), "edge") + " (" + count_of(sub.graph.arcs(), "arc") + ")") +
             ", renumbered from 0) to " + shown(a.bfs.subgraph) +
             (ids_output.empty() ? std::string() : ", its id map to " + shown(ids_output)));
    graph::WriteOptions w;
    w.pending = &s.outputs;
    w.group_access = a.group_access;
    w.comment = renumbered_note("the " + std::to_string(a.bfs.hops) + "-hop neighbourhood of vertex " +
                                std::to_string(a.bfs.source));
    graph::write_graph(sub.graph, a.bfs.subgraph, w);
    if (ids_output.empty()) return;
    // The id in the subgraph's file (1-based in a .mtx, .gr, .graph) -> the id in the graph.
    auto file_ids = ids.compose(sub.original_ids).local_file_ids();
    const std::uint64_t out_base = graph::first_id_of(graph::format_of(a.bfs.subgraph));
    auto out_ids = graph::IdMap::identity(g.runtime(), sub.graph.vertex_ranges(), out_base);
    graph::write_vertex_values(out_ids, std::span<const std::uint64_t>(file_ids), ids_output,
                               {"subgraph_id", "file_id", "nan", &s.outputs, ""});
  });
}

// The BFS phases: the search, its summary, verification, outputs.
void bfs_phases(const graph::EdgeList& g, const graph::IdMap& ids, const graph::EdgeList* in_arcs, const Options& a,
                const std::string& where, KernelRun& s) {
  graph::BfsOptions o = bfs_options(a);
  const std::uint64_t source = find_vertices(ids, {a.bfs.source}, "source vertex", where).front();
  if (!a.bfs.subgraph.empty()) graph::check_graph_format(a.bfs.subgraph, g.weighted());
  s.p.step("breadth-first search from " + std::to_string(a.bfs.source) + " (" + graph::bfs_direction_name(o.direction) +
           (a.bfs.hops >= 0 ? ", " + std::to_string(a.bfs.hops) + " hops" : std::string()) + ")");
  o.on_level = [&s](int level, std::uint64_t found, bool bottom_up, double) {
    s.p.tick(found == 0, "depth %d: %" PRIu64 " vertices (%s)", level, found, bottom_up ? "bottom-up" : "top-down");
  };
  auto b = s.report.timed("bfs", [&] { return graph::bfs(g, source, o, in_arcs); });
  json& j = s.doc()["bfs"];
  j = bfs_json(b, o, a);
  s.p.step(count_of(b.reached, "vertex", "vertices") + " reached, " + std::to_string(b.levels) + " levels deep (" +
           std::to_string(b.seconds) + " s)");
  if (a.verify) {
    s.p.step("verifying the search (every parent arc exists, every chain reaches the source, depths differ by at "
             "most one along every arc)");
    verified(s, j, "BFS", [&] { return graph::check_bfs(g, source, b.parents); });
    if (j.value("verified", false))
      s.p.tick(true, "proved: a breadth-first tree of the %s reached, their depths shortest",
               count_of(b.reached, "vertex", "vertices").c_str());
  }
  if (!a.output.empty()) s.report.timed("write", [&] { write_bfs_tree(ids, b, a.output, s); });
  if (!a.bfs.subgraph.empty()) write_neighbourhood(g, ids, b, a, s);
  s.result.bfs.emplace(std::move(b));
}

void check_spectral(const Options& a) {
  if (!spectral_kind(a.analysis.kind))
    throw ConfigError("the spectral analysis must be fiedler or centrality, not '" + a.analysis.kind + "'");
  if (a.analysis.analysis != "inprocess")
    throw ConfigError("the spectral command runs Anasazi in this process: use `tessera pipeline --analysis " +
                      a.analysis.analysis + " --analysis-kind " + a.analysis.kind + "` for a separate analysis");
  if (a.spectral.count != 0 && a.spectral.count != 2)
    throw ConfigError("spectral bisection makes 2 parts, not " + std::to_string(a.spectral.count) +
                      " (--parts 2; recursive bisection is not offered)");
  if ((!a.spectral.parts.empty() || a.spectral.count) && a.analysis.kind != "fiedler")
    throw ConfigError("the bisection (--parts) is by the Fiedler vector: use the fiedler analysis");
  if (a.spectral.split != "median" && a.spectral.split != "sign")
    throw ConfigError("the split must be median or sign, not '" + a.spectral.split + "'");
  if (!trilinos::available())
    throw ConfigError("the spectral analyses run Anasazi: this tessera was built without Trilinos (" +
                      trilinos::description() + "); install Trilinos (scripts/setup.sh) and rebuild");
  resolved(a.analysis);
}

// The spectral phases on an undirected graph: the eigenpair, the document's
// fields (at its top level), the bisection, outputs.
void spectral_phases(const graph::EdgeList& g, const graph::IdMap& ids, const Options& a, KernelRun& s) {
  const std::string& kind = a.analysis.kind;
  std::vector<std::uint8_t> part;  // this rank's vertices' sides of the bisection
  auto h = s.report.timed(kind, [&] { return analysis_step(g, ids, {}, true, a.analysis, s.p); });
  h.json.erase("analysis");
  h.json.erase("handshake");
  s.doc().update(h.json);
  s.doc()["edge_array_bytes"] = array_bytes(g).edges;
  if (kind == "fiedler") {
    const auto rule = a.spectral.split == "sign" ? trilinos::SplitRule::sign : trilinos::SplitRule::median;
    auto b = s.report.timed("bisection", [&] { return trilinos::bisect(g, h.spectrum->vector.local(), rule); });
    part = b.part;
    s.p.step("bisection at the " + std::string(trilinos::to_string(rule)) + ": " + std::to_string(b.sizes[0]) +
             " + " + std::to_string(b.sizes[1]) + " vertices, " + std::to_string(b.cut_edges) + " edges cut");
    s.doc()["bisection"] = {{"split", trilinos::to_string(rule)},
                            {"threshold", b.threshold},
                            {"sizes", {b.sizes[0], b.sizes[1]}},
                            {"cut_edges", b.cut_edges}};
    if (!a.spectral.parts.empty())
      s.report.timed("write", [&] {
        std::vector<std::uint64_t> parts(b.part.begin(), b.part.end());
        s.p.step("writing " + shown(a.spectral.parts));
        graph::write_vertex_values(ids, std::span<const std::uint64_t>(parts), a.spectral.parts,
                                   {"vertex", "part", "nan", &s.outputs, ""});
      });
  }
  if (!a.output.empty() && kind == "fiedler" && a.spectral.count == 2) {
    // The vector and the part of each vertex in one file: "vertex fiedler part".
    s.report.timed("write", [&] {
      auto file_ids = ids.local_file_ids();
      auto x = h.spectrum->vector.local();
      std::string body;
      char line[96];
      for (std::size_t i = 0; i < file_ids.size(); ++i) {
        int n = std::snprintf(line, sizeof line, "%" PRIu64 " %.17g %d\n", file_ids[i], x[i], static_cast<int>(part[i]));
        body.append(line, static_cast<std::size_t>(n));
      }
      s.p.step("writing " + shown(a.output) + " (vertex fiedler part)");
      graph::write_text_file(ids.runtime(), a.output, "# vertex fiedler part\n", body, &s.outputs);
    });
  } else if (!a.output.empty()) {
    s.report.timed("write", [&] { write_result(ids, h, a.output, s.p, s.outputs); });
  }
  s.result.file_ids = ids.local_file_ids();
  s.result.spectrum = std::move(h.spectrum);
}

// The graph a command reads, described.
graph::LoadedGraph read_input(Runtime& rt, const Options& a, Progress& p, Report& report) {
  if (a.input.path.empty()) throw ConfigError("name the graph to read");
  auto loaded = report.timed(load_step(a.input), [&] { return load(rt, a.input, p); });
  describe(p, loaded.graph);
  return loaded;
}

const std::string kInMemory = "a graph in memory";
const std::string kTheGraph = "the graph";

}  // namespace

Result run_pagerank(Runtime& rt, const Options& a, Progress& p) {
  pagerank_options(a);
  Report report(rt, p);
  check_outputs(rt, a, {{a.output, "-o", graph::OutputKind::text_lines}});
  auto loaded = read_input(rt, a, p, report);
  const std::string where_ = where(a.input);
  return kernel_on(loaded.graph, loaded.ids, input_name(a.input), "pagerank", true, a, p, report,
                   array_bytes(loaded.graph), !a.output.empty(),
                   [&](const graph::EdgeList& g, const graph::IdMap& ids, const graph::EdgeList* in, KernelRun& s) {
                     pagerank_phases(g, ids, in, a, where_, s);
                   });
}

Result run_pagerank(const graph::EdgeList& g, const graph::IdMap& ids, const Options& a, Progress& p) {
  pagerank_options(a);
  Report report(g.runtime(), p);
  check_outputs(g.runtime(), a, {{a.output, "-o", graph::OutputKind::text_lines}});
  return kernel_on(g, ids, kInMemory, "pagerank", true, a, p, report, array_bytes(g), !a.output.empty(),
                   [&](const graph::EdgeList& gg, const graph::IdMap& ii, const graph::EdgeList* in, KernelRun& s) {
                     pagerank_phases(gg, ii, in, a, kTheGraph, s);
                   });
}

Result run_bfs(Runtime& rt, const Options& a, Progress& p) {
  const auto o = bfs_options(a);
  Report report(rt, p);
  check_outputs(rt, a, {{a.output, "-o", graph::OutputKind::text_lines},
                        {a.bfs.subgraph, "--subgraph", graph::OutputKind::graph},
                        {id_map_path(a.bfs.subgraph, a.bfs.subgraph_ids), "--ids", graph::OutputKind::text_lines}});
  auto loaded = read_input(rt, a, p, report);
  const std::string where_ = where(a.input);
  return kernel_on(loaded.graph, loaded.ids, input_name(a.input), "bfs", o.direction != graph::BfsDirection::top_down,
                   a, p, report, array_bytes(loaded.graph), !a.output.empty() || !a.bfs.subgraph.empty(),
                   [&](const graph::EdgeList& g, const graph::IdMap& ids, const graph::EdgeList* in, KernelRun& s) {
                     bfs_phases(g, ids, in, a, where_, s);
                   });
}

Result run_bfs(const graph::EdgeList& g, const graph::IdMap& ids, const Options& a, Progress& p) {
  const auto o = bfs_options(a);
  Report report(g.runtime(), p);
  check_outputs(g.runtime(), a, {{a.output, "-o", graph::OutputKind::text_lines},
                                 {a.bfs.subgraph, "--subgraph", graph::OutputKind::graph},
                                 {id_map_path(a.bfs.subgraph, a.bfs.subgraph_ids), "--ids", graph::OutputKind::text_lines}});
  return kernel_on(g, ids, kInMemory, "bfs", o.direction != graph::BfsDirection::top_down, a, p, report,
                   array_bytes(g), !a.output.empty() || !a.bfs.subgraph.empty(),
                   [&](const graph::EdgeList& gg, const graph::IdMap& ii, const graph::EdgeList* in, KernelRun& s) {
                     bfs_phases(gg, ii, in, a, kTheGraph, s);
                   });
}

Result run_spectral(Runtime& rt, const Options& a, Progress& p) {
  check_spectral(a);
  Report report(rt, p);
  check_outputs(rt, a, {{a.output, "-o", graph::OutputKind::text_lines},
                        {a.spectral.parts, "--parts", graph::OutputKind::text_lines}});
  auto loaded = read_input(rt, a, p, report);
  const ArrayBytes arrays = array_bytes(loaded.graph);
  if (loaded.graph.directed())
    report.timed("symmetrize", [&] { make_undirected(loaded, p, "the Laplacian and adjacency of an undirected graph"); });
  auto r = kernel_on(loaded.graph, loaded.ids, input_name(a.input), "spectral", false, a, p, report, arrays,
                     !a.output.empty() || !a.spectral.parts.empty(),
                     [&](const graph::EdgeList& g, const graph::IdMap& ids, const graph::EdgeList*, KernelRun& s) {
                       spectral_phases(g, ids, a, s);
                     });
  return r;
}

Result run_spectral(const graph::EdgeList& given, const graph::IdMap& given_ids, const Options& a, Progress& p) {
  check_spectral(a);
  Runtime& rt = given.runtime();
  Report report(rt, p);
  check_outputs(rt, a, {{a.output, "-o", graph::OutputKind::text_lines},
                        {a.spectral.parts, "--parts", graph::OutputKind::text_lines}});
  auto undirected =
      undirected_copy(given, given_ids, report, p, "the Laplacian and adjacency of an undirected graph");
  const graph::EdgeList& g = undirected ? undirected->graph : given;
  const graph::IdMap& ids = undirected ? undirected->ids : given_ids;
  return kernel_on(g, ids, kInMemory, "spectral", false, a, p, report, array_bytes(given),
                   !a.output.empty() || !a.spectral.parts.empty(),
                   [&](const graph::EdgeList& gg, const graph::IdMap& ii, const graph::EdgeList*, KernelRun& s) {
                     spectral_phases(gg, ii, a, s);
                   });
}

}  // namespace tessera::pipeline
