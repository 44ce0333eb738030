// tessera pagerank | bfs: the GAPBS kernels on a graph file. The graph is
// read as the other graph commands read it (pipeline::load, the same input
// options), the kernel runs on its arrays, and --json prints one document
// with the time of every step (read, build: a directed graph's transpose
// and PageRank's index, the kernel, write) as `cc` does. Ids printed and accepted are the file's.
#include <cinttypes>
#include <cstdio>
#include <tuple>
#include <nlohmann/json.hpp>

#include "commands.hpp"
#include "tessera/graph/bfs.hpp"
#include "tessera/graph/pagerank.hpp"
#include "tessera/pipeline/input.hpp"
#include "tessera/pipeline/report.hpp"
#include "tessera/runtime/collective.hpp"

namespace tessera::cli {

namespace {

using nlohmann::json;

struct AnalysisArgs {
  pipeline::Input input;
  std::string output;
  bool json = false, quiet = false, verify = false;
  // pagerank
  graph::PageRankOptions pr;
  std::string method = "gauss-seidel";
  std::vector<std::uint64_t> personalize;  // file ids
  // bfs
  std::uint64_t source = 0;
  std::string direction = "optimizing";
  int hops = -1;                       // the k-hop neighbourhood only
  std::string subgraph, subgraph_ids;  // the graph it induces, and its ids
};

// The internal id of each file id; RangeError naming the first missing one
// and the graph's id range (`role`: "source vertex", "personalization vertex").
std::vector<std::uint64_t> internal_ids(const graph::IdMap& ids, const std::vector<std::uint64_t>& file_ids,
                                        const std::string& role, const pipeline::Input& input) {
  auto found = ids.find(file_ids);
  for (std::size_t k = 0; k < found.size(); ++k) {
    if (found[k] != kNoIndex) continue;
    const std::string id = std::to_string(file_ids[k]);
    if (ids.vertices() == 0) throw RangeError(role + " " + id + " is not in " + pipeline::where(input) + ": it has no vertices");
    if (ids.is_identity())
      throw RangeError(role + " " + id + " is outside the vertex ids of " + pipeline::where(input) + ", " +
                       std::to_string(ids.base()) + ".." + std::to_string(ids.base() + ids.vertices() - 1));
    throw RangeError(role + " " + id + " does not occur in " + pipeline::where(input));
  }
  return found;
}

// Everything the two commands share: the runtime, progress on rank 0's
// stderr unless -q, the output checked before reading, the graph read and
// its transpose built when the kernel needs one, the report at the end.
template <class Kernel>
int run_analysis(const AnalysisArgs& a, const char* command, bool needs_in_arcs, Kernel kernel) {
  const bool any_output = !a.output.empty() || !a.subgraph.empty();
  if (a.input.path.empty()) throw ConfigError(std::string("name the graph: tessera ") + command + " GRAPH");
  Runtime rt;
  pipeline::ProgressSink sink = stderr_progress(rt, a.quiet);
  pipeline::Progress p(sink);
  pipeline::Report report(rt, p);
  int on_stdout = 0;
  for (auto [path, option, kind] : {std::tuple{a.output, "-o", graph::OutputKind::text_lines},
                                    std::tuple{a.subgraph, "--subgraph", graph::OutputKind::graph},
                                    std::tuple{a.subgraph_ids, "--subgraph-ids", graph::OutputKind::text_lines}}) {
    if (path.empty()) continue;
    auto out = graph::check_output_path(rt, path, kind);
    if (out.standard_output() && a.json)
      throw ConfigError(std::string(option) + " " + path + " writes to standard output, where --json prints its "
                        "document; write the output to a file, or drop --json");
    on_stdout += out.standard_output();
  }
  if (on_stdout > 1) throw ConfigError("two outputs go to standard output; send all but one to files");
  auto loaded = report.timed("read", [&] { return pipeline::load(rt, a.input, p); });
  pipeline::describe(p, loaded.graph);
  std::optional<graph::EdgeList> in_arcs;
  if (needs_in_arcs && loaded.graph.directed())
    report.timed("build", [&] {
      p.step("transposing (the kernel pulls along in-arcs)");
      in_arcs.emplace(loaded.graph.transposed({}, true));
    });
  json j = {{"command", command}, {"input", pipeline::input_name(a.input)}, {"stats", pipeline::graph_json(loaded.graph)}};
  graph::PendingOutputs outputs(rt);
  const int code = kernel(loaded, in_arcs ? &*in_arcs : nullptr, report, p, j, outputs);
  if (any_output) report.timed("write", [&] { outputs.commit(); });
  if (!a.output.empty()) j["output"] = a.output;
  report.finish(j, pipeline::array_bytes(loaded.graph));
  if (rt.rank() == 0 && a.json) std::printf("%s\n", j.dump().c_str());
  return code;
}

// A failed verification: said on stderr, exit status 3 (the answer is not to be trusted).
int verdict(Runtime& rt, const std::string& problem, const char* what, json& doc) {
  doc["verified"] = problem.empty();
  if (problem.empty()) return 0;
  doc["verification_problem"] = problem;
  if (rt.rank() == 0) std::fprintf(stderr, "tessera: the %s failed verification: %s\n", what, problem.c_str());
  return 3;
}

int run_pagerank(const AnalysisArgs& a) {
  graph::PageRankOptions o = a.pr;
  o.method = graph::parse_pagerank_method(a.method);
  return run_analysis(a, "pagerank", true, [&](graph::LoadedGraph& loaded, const graph::EdgeList* in, pipeline::Report& report,
                                               pipeline::Progress& p, json& j, graph::PendingOutputs& outputs) {
    const graph::EdgeList& g = loaded.graph;
    Runtime& rt = g.runtime();
    o.personalization = internal_ids(loaded.ids, a.personalize, "personalization vertex", a.input);
    p.step(std::string(o.personalization.empty() ? "PageRank" : "personalized PageRank") + " (" +
           graph::pagerank_method_name(o.method) + ", damping " + std::to_string(o.damping).substr(0, 4) +
           ", until the L1 change < " + [&] {
             char b[32];
             std::snprintf(b, sizeof b, "%g", o.tolerance);
             return std::string(b);
           }() + " or " + std::to_string(o.max_iterations) + " iterations)");
    o.on_iteration = [&p, &o](int it, double change, double) {
      p.tick(change < o.tolerance || it >= o.max_iterations, "iteration %d: L1 change %.3g", it, change);
    };
    // The kernel's index is made beforehand, as GAPBS builds its CSR before timing its kernel.
    auto index = report.timed("build", [&] { return graph::PageRankIndex(g, in); });
    auto pr = report.timed("pagerank", [&] { return graph::pagerank(g, o, nullptr, &index); });
    if (!pr.converged)
      p.step("not converged: the last change " + std::to_string(pr.change) + " is not below the tolerance "
             "(--max-iterations)");
    // The top vertex and the mass kept (dangling vertices pass theirs to nobody).
    auto x = pr.scores.local();
    double best = -1, sum = 0;
    std::uint64_t best_v = kNoIndex;
    for (std::size_t i = 0; i < x.size(); ++i) {
      sum += x[i];
      if (x[i] > best) best = x[i], best_v = g.local_vertex_begin() + i;
    }
    auto top = all_argmax<double>(rt.comm(), best, best_v);
    sum = all_reduce(rt.comm(), sum, MPI_SUM);
    std::vector<std::uint64_t> personal_file_ids = a.personalize;
    j["pagerank"] = {{"method", graph::pagerank_method_name(o.method)},
                     {"damping", o.damping},
                     {"tolerance", o.tolerance},
                     {"max_iterations", o.max_iterations},
                     {"personalization", personal_file_ids},
                     {"iterations", pr.iterations},
                     {"change", pr.change},
                     {"converged", pr.converged},
                     {"seconds", pr.seconds},
                     {"extra_bytes", pr.extra_bytes},
                     {"single_precision", pr.single_precision},
                     {"score_sum", sum},
                     {"top_vertex", top.index == kNoIndex ? json(nullptr) : json(loaded.ids.file_id(top.index))},
                     {"top_score", top.value}};
    p.step(std::to_string(pr.iterations) + " iterations (" + std::to_string(pr.seconds) + " s), last L1 change " +
           std::to_string(pr.change));
    int code = 0;
    if (a.verify)
      code = verdict(rt, report.timed("verify", [&] { return graph::check_pagerank(g, pr.scores, o, o.tolerance); }),
                     "PageRank", j["pagerank"]);
    if (!a.output.empty())
      report.timed("write", [&] {
        p.step("writing " + pipeline::shown(a.output));
        graph::write_vertex_values(loaded.ids, std::span<const double>(pr.scores.local()), a.output,
                                   {"vertex", "score", "nan", &outputs});
      });
    return code;
  });
}

int run_bfs(const AnalysisArgs& a) {
  graph::BfsOptions o;
  o.direction = graph::parse_bfs_direction(a.direction);
  o.max_depth = a.hops;
  if (a.hops >= 0 && a.verify)
    throw ConfigError("--verify checks a whole search, not one stopped at --hops " + std::to_string(a.hops));
  if ((!a.subgraph.empty() || !a.subgraph_ids.empty()) && a.hops < 0)
    throw ConfigError("--subgraph and --subgraph-ids write the k-hop neighbourhood: give --hops K");
  if (!a.subgraph_ids.empty() && a.subgraph.empty()) throw ConfigError("--subgraph-ids needs --subgraph OUT");
  return run_analysis(a, "bfs", o.direction != graph::BfsDirection::top_down,
                      [&](graph::LoadedGraph& loaded, const graph::EdgeList* in, pipeline::Report& report,
                          pipeline::Progress& p, json& j, graph::PendingOutputs& outputs) {
    const graph::EdgeList& g = loaded.graph;
    Runtime& rt = g.runtime();
    const std::uint64_t source = internal_ids(loaded.ids, {a.source}, "source vertex", a.input).front();
    if (!a.subgraph.empty()) graph::check_graph_format(a.subgraph, g.weighted());
    p.step("breadth-first search from " + std::to_string(a.source) + " (" + graph::bfs_direction_name(o.direction) +
           (a.hops >= 0 ? ", " + std::to_string(a.hops) + " hops" : std::string()) + ")");
    o.on_level = [&p](int level, std::uint64_t found, bool bottom_up, double) {
      p.tick(found == 0, "depth %d: %" PRIu64 " vertices (%s)", level, found, bottom_up ? "bottom-up" : "top-down");
    };
    auto b = report.timed("bfs", [&] { return graph::bfs(g, source, o, in); });
    j["bfs"] = {{"source", a.source},
                {"direction", graph::bfs_direction_name(o.direction)},
                {"reached", b.reached},
                {"levels", b.levels},
                {"top_down_steps", b.top_down_steps},
                {"bottom_up_steps", b.bottom_up_steps},
                {"seconds", b.seconds},
                {"extra_bytes", b.extra_bytes},
                {"hops", a.hops >= 0 ? json(a.hops) : json(nullptr)}};
    p.step(pipeline::count_of(b.reached, "vertex", "vertices") + " reached, " + std::to_string(b.levels) +
           " levels deep (" + std::to_string(b.seconds) + " s)");
    int code = 0;
    if (a.verify)
      code = verdict(rt, report.timed("verify", [&] { return graph::check_bfs(g, source, b.parents); }), "BFS",
                     j["bfs"]);
    if (!a.output.empty())
      report.timed("write", [&] {
        // "vertex parent depth", file ids; -1 for a vertex not reached.
        auto par = b.parents.local();
        std::vector<std::uint64_t> parents(par.size());
        for (std::size_t i = 0; i < par.size(); ++i) parents[i] = par[i] < 0 ? kNoIndex : static_cast<std::uint64_t>(par[i]);
        loaded.ids.translate(parents);
        auto vertices = loaded.ids.local_file_ids();
        auto depth = b.depths.local();
        std::string body;
        char line[80];
        for (std::size_t i = 0; i < parents.size(); ++i) {
          int n = parents[i] == kNoIndex
                      ? std::snprintf(line, sizeof line, "%" PRIu64 " -1 -1\n", vertices[i])
                      : std::snprintf(line, sizeof line, "%" PRIu64 " %" PRIu64 " %" PRId64 "\n", vertices[i],
                                      parents[i], depth[i]);
          body.append(line, static_cast<std::size_t>(n));
        }
        p.step("writing " + pipeline::shown(a.output));
        graph::write_text_file(rt, a.output, "# vertex parent depth\n", body, &outputs);
      });
    if (!a.subgraph.empty()) {
      DistArray<std::uint8_t> keep(g.vertex_map());
      for (std::size_t i = 0; i < keep.local().size(); ++i) keep.local()[i] = b.depths.local()[i] >= 0;
      auto sub = report.timed("subgraph", [&] { return graph::induced_subgraph(g, keep); });
      j["subgraph"] = pipeline::graph_json(sub.graph);
      j["subgraph"]["output"] = a.subgraph;
      report.timed("write", [&] {
        p.step("writing the " + std::to_string(a.hops) + "-hop neighbourhood (" +
               pipeline::count_of(sub.graph.vertices(), "vertex", "vertices") + ", " +
               pipeline::count_of(sub.graph.arcs(), "arc") + ") to " + pipeline::shown(a.subgraph));
        graph::WriteOptions w;
        w.pending = &outputs;
        graph::write_graph(sub.graph, a.subgraph, w);
        if (a.subgraph_ids.empty()) return;
        // "subgraph_id file_id": the id in the subgraph's file (1-based in a .mtx) -> the id in GRAPH.
        auto file_ids = loaded.ids.compose(sub.original_ids).local_file_ids();
        const std::uint64_t out_base = graph::format_of(a.subgraph) == graph::FileFormat::matrix_market ? 1 : 0;
        auto out_ids = graph::IdMap::identity(rt, sub.graph.vertex_ranges(), out_base);
        graph::write_vertex_values(out_ids, std::span<const std::uint64_t>(file_ids), a.subgraph_ids,
                                   {"subgraph_id", "file_id", "nan", &outputs});
      });
    }
    return code;
  });
}

}  // namespace

void add_analyses(CLI::App& app, Action& selected) {
  auto a = std::make_shared<AnalysisArgs>();
  auto set = [&selected, a](int (*run)(const AnalysisArgs&)) {
    return [&selected, a, run] { selected = [a, run] { return run(*a); }; };
  };
  auto common = [&](CLI::App* c, const std::string& output_help) {
    add_graph_input(c, a->input, "Input graph");
    add_input_options(c, a->input);
    add_symmetric_option(c, a->input);
    c->add_option("-o,--output", a->output, output_help + kOutputNote);
    c->add_flag("--verify", a->verify, "Check the answer (GAPBS's verifier, distributed); exit status 3 if wrong");
    c->add_flag("--json", a->json,
                "Print the results as one JSON document on stdout (nothing else there; so not with -o -)");
    c->add_flag("-q,--quiet", a->quiet, "No progress lines on stderr");
    c->fallthrough();
  };

  auto* pr = app.add_subcommand("pagerank", "PageRank scores (GAPBS's rules: damping 0.85, until the L1 change < 1e-4)");
  common(pr, "Write 'vertex score' lines (file ids)");
  pr->add_option("--damping", a->pr.damping, "Damping factor")->check(CLI::Range(0.0, 0.999999))->capture_default_str();
  pr->add_option("--tolerance", a->pr.tolerance, "Stop when an iteration changes the scores by less than this (L1)")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  pr->add_option("--max-iterations", a->pr.max_iterations, "Iteration cap (GAPBS's -i)")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  pr->add_option("--method", a->method,
                 "gauss-seidel (GAPBS's pull: fewest iterations) or jacobi (the same bits at every rank count)")
      ->check(CLI::IsMember({"gauss-seidel", "jacobi"}))
      ->capture_default_str();
  pr->add_option("--personalize", a->personalize, "Personalized PageRank: teleport to these vertices (file ids), comma separated")
      ->delimiter(',')
      ->check(kVertexId);
  pr->callback(set(run_pagerank));

  auto* bfs = app.add_subcommand("bfs", "Breadth-first search parents and depths (direction-optimizing, as GAPBS)");
  common(bfs, "Write 'vertex parent depth' lines (file ids; -1 -1 when not reached)");
  bfs->add_option("--source", a->source, "The source vertex (a file id)")->required()->check(kVertexId);
  bfs->add_option("--direction", a->direction,
                  "optimizing (Beamer's top-down/bottom-up switch), top-down or bottom-up")
      ->check(CLI::IsMember({"optimizing", "top-down", "bottom-up"}))
      ->capture_default_str();
  bfs->add_option("--hops", a->hops, "Stop at this depth: the k-hop neighbourhood of the source")
      ->check(CLI::NonNegativeNumber);
  bfs->add_option("--subgraph", a->subgraph,
                  "With --hops: write the subgraph the neighbourhood induces (.el, .wel, .mtx or a .tsg directory)" +
                      kOutputNote);
  bfs->add_option("--subgraph-ids", a->subgraph_ids,
                  "Also write 'subgraph_id file_id' lines (ids in the subgraph -> ids in GRAPH)" + kOutputNote);
  bfs->callback(set(run_bfs));
}

}  // namespace tessera::cli
