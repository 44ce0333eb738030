// tessera pagerank | bfs: the GAPBS kernels on a graph file, option parsing
// only. The workflows are the pipeline/ layer's (pipeline::run_pagerank,
// run_bfs), which Python runs too: the graph read as the other graph
// commands read it, the kernel on its arrays, and with --json one document
// with the time of every step (read, build: a directed graph's transpose
// and PageRank's index, the kernel, verify, write). Ids printed and accepted
// are the file's.
//
// --packed runs the kernel on the graph packed (graph::PackedGraph: rows in
// byte codes after numbering the vertices by degree, about 3 bytes an
// undirected edge against the EdgeList's 8). The pipeline layer's workflows
// take an EdgeList, so this file holds the packed one: read and packed by
// pipeline::load_packed (the "pack" step; the pipeline's --packed loads the
// same way), the EdgeList given up, the kernel and its verifier on the
// packed rows, and the outputs put back in the file's vertex order, so they
// are the same files the plain run writes. Their memory estimate is
// pipeline::estimate_command's (Options::packed).
#include "commands.hpp"

#include <algorithm>
#include <chrono>
#include <cinttypes>
#include <cstdio>
#include <nlohmann/json.hpp>

#include "tessera/comm/aggregators.hpp"
#include "tessera/graph/packed_graph.hpp"
#include "tessera/graph/write.hpp"
#include "tessera/pipeline/report.hpp"
#include "tessera/runtime/collective.hpp"
#include "tessera/runtime/error.hpp"

namespace tessera::cli {

namespace {

using nlohmann::json;
using pipeline::count_of;
using pipeline::shown;

// ---- --packed ------------------------------------------------------------

std::string shortest(double x) {
  char b[32];
  std::snprintf(b, sizeof b, "%g", x);
  return b;
}

// What a packed run works on once the file's EdgeList is given up
// (pipeline::load_packed, which the pipeline's --packed uses too).
struct PackedInput : pipeline::PackedInput {
  graph::IdMap packed_ids;  // the file's ids of the packed vertices
  std::vector<std::uint64_t> vertices;  // the packed ids of the file ids the command named
};

// Reads the graph as the plain run does, checks `file_ids` (the source, the
// personalization) against it, packs it (timed as "pack") and gives the
// EdgeList up. `doc` receives "stats" and "packed".
PackedInput read_packed(Runtime& rt, const pipeline::Options& a, pipeline::Progress& p, pipeline::Report& report,
                        const std::vector<std::uint64_t>& file_ids, const std::string& role, json& doc) {
  pipeline::PackedLoadOptions o;
  o.vertices = file_ids;
  o.role = role;
  auto in = pipeline::load_packed(rt, a.input, p, report, o);
  doc["stats"] = in.stats;
  doc["packed"] = in.packed;
  auto packed_ids = in.graph.original_ids() ? in.ids.compose(*in.graph.original_ids())
                                            : in.ids.redistributed(in.graph.vertex_ranges());
  auto vertices = packed_ids.find(file_ids);
  return {std::move(in), std::move(packed_ids), std::move(vertices)};
}

// `values` (on the packed vertex ranges) in the file's vertex order: on the
// EdgeList's ranges, where `in.ids` gives each line its file id. So the
// outputs are the lines the plain run writes, in its order.
template <class T>
DistArray<T> in_file_order(const PackedInput& in, std::span<const T> values) {
  return pipeline::in_file_order(in.graph, in.ids, values);
}

// An output checked before any work, as the plain run checks it.
void check_output(Runtime& rt, const pipeline::Options& a) {
  if (a.output.empty()) return;
  if (graph::check_output_path(rt, a.output, graph::OutputKind::text_lines).standard_output() &&
      a.document_on_stdout)
    throw ConfigError("-o " + a.output + " writes to standard output, where --json prints its document; write the "
                      "output to a file, or drop --json");
}

// The answer checked (timed as "verify"); a wrong one recorded in `object`.
template <class Check>
void verified(pipeline::Report& report, pipeline::Progress& p, pipeline::Result& r, json& object, const char* what,
              Check check) {
  const std::string problem = report.timed("verify", check);
  object["verified"] = problem.empty();
  if (problem.empty()) return;
  object["verification_problem"] = problem;
  p.step(std::string("the ") + what + " failed verification: " + problem);
  r.verification_failed = true;
}

// The outputs committed together (timed as "write" when there are some) and
// the report: the document's "output", "step_seconds" and "memory".
void finish(pipeline::Result& r, graph::PendingOutputs& outputs, pipeline::Report& report, const PackedInput& in,
            const pipeline::Options& a) {
  if (a.output.empty()) outputs.commit();
  else report.timed("write", [&] { outputs.commit(); });
  if (!a.output.empty()) r.json["output"] = a.output;
  report.finish(r.json, in.arrays);
}

pipeline::Result packed_pagerank(Runtime& rt, const pipeline::Options& a, pipeline::Progress& p) {
  graph::PageRankOptions o = pipeline::pagerank_options(a);
  pipeline::Report report(rt, p);
  check_output(rt, a);
  pipeline::Result r;
  r.json = {{"command", "pagerank"}, {"input", pipeline::input_name(a.input)}};
  auto in = read_packed(rt, a, p, report, a.pagerank.personalize, "personalization vertex", r.json);
  o.personalization = in.vertices;
  graph::PendingOutputs outputs(rt);
  p.step(std::string(o.personalization.empty() ? "PageRank" : "personalized PageRank") + " on the packed rows (" +
         graph::pagerank_method_name(o.method) + ", damping " + shortest(o.damping) + ", until the L1 change < " +
         shortest(o.tolerance) + " or " + std::to_string(o.max_iterations) + " iterations)");
  o.on_iteration = [&p, &o](int it, double change, double) {
    p.tick(change < o.tolerance || it >= o.max_iterations, "iteration %d: L1 change %.3g", it, change);
  };
  auto pr = report.timed("pagerank", [&] { return graph::pagerank(in.graph, o); });
  if (!pr.converged)
    p.step("not converged: the last change " + shortest(pr.change) + " is not below the tolerance (raise the "
           "iteration cap)");
  json& j = r.json["pagerank"];
  j = pipeline::pagerank_json(pr, o, a, in.graph.local_vertex_begin(), in.packed_ids);
  p.step(std::to_string(pr.iterations) + " iterations (" + std::to_string(pr.seconds) + " s), last L1 change " +
         shortest(pr.change));
  if (a.verify) {
    p.step("verifying the scores on the packed rows (one more iteration, pushed along out-arcs, must change them by "
           "less than the tolerance)");
    verified(report, p, r, j, "PageRank", [&] { return graph::check_pagerank(in.graph, pr.scores, o, o.tolerance); });
    if (j.value("verified", false))
      p.tick(true, "proved: the scores are a fixed point of PageRank to within the L1 tolerance %s",
             shortest(o.tolerance).c_str());
  }
  if (!a.output.empty())
    report.timed("write", [&] {
      p.step("writing " + shown(a.output));
      auto scores = in_file_order(in, std::span<const double>(pr.scores.local()));
      graph::write_vertex_values(in.ids, std::span<const double>(scores.local()), a.output,
                                 {"vertex", "score", "nan", &outputs, ""});
    });
  finish(r, outputs, report, in, a);
  return r;
}

graph::BfsOptions bfs_options(const pipeline::Options& a) {
  graph::BfsOptions o;
  o.direction = graph::parse_bfs_direction(a.bfs.direction);
  o.max_depth = a.bfs.hops;
  if (a.bfs.hops >= 0 && a.verify)
    throw ConfigError("verification checks a whole search, not one stopped at " + std::to_string(a.bfs.hops) +
                      " hops");
  // The neighbourhood's subgraph is cut from an EdgeList, which --packed gives up.
  if (!a.bfs.subgraph.empty() || !a.bfs.subgraph_ids.empty())
    throw ConfigError("--subgraph and --ids write the neighbourhood from the EdgeList, which --packed does not keep: "
                      "drop --packed to write them");
  return o;
}

// "vertex parent depth" lines in the file's vertex order (file ids; -1 -1
// when not reached), as the plain run writes them.
void write_bfs_tree(const PackedInput& in, const graph::Bfs& b, const std::string& output,
                    graph::PendingOutputs& outputs) {
  auto par = b.parents.local();
  std::vector<std::uint64_t> parents(par.size());
  for (std::size_t i = 0; i < par.size(); ++i) parents[i] = par[i] < 0 ? kNoIndex : static_cast<std::uint64_t>(par[i]);
  in.packed_ids.translate(parents);  // packed ids -> file ids
  const auto file_parents = in_file_order(in, std::span<const std::uint64_t>(parents));
  const auto depths = in_file_order(in, std::span<const std::int64_t>(b.depths.local()));
  const auto vertices = in.ids.local_file_ids();
  auto parent = file_parents.local();
  auto depth = depths.local();
  std::string body;
  char line[80];
  for (std::size_t i = 0; i < vertices.size(); ++i) {
    int n = parent[i] == kNoIndex
                ? std::snprintf(line, sizeof line, "%" PRIu64 " -1 -1\n", vertices[i])
                : std::snprintf(line, sizeof line, "%" PRIu64 " %" PRIu64 " %" PRId64 "\n", vertices[i], parent[i],
                                depth[i]);
    body.append(line, static_cast<std::size_t>(n));
  }
  graph::write_text_file(in.ids.runtime(), output, "# vertex parent depth\n", body, &outputs);
}

pipeline::Result packed_bfs(Runtime& rt, const pipeline::Options& a, pipeline::Progress& p) {
  graph::BfsOptions o = bfs_options(a);
  pipeline::Report report(rt, p);
  check_output(rt, a);
  pipeline::Result r;
  r.json = {{"command", "bfs"}, {"input", pipeline::input_name(a.input)}};
  auto in = read_packed(rt, a, p, report, {a.bfs.source}, "source vertex", r.json);
  const std::uint64_t source = in.vertices.front();
  graph::PendingOutputs outputs(rt);
  p.step("breadth-first search from " + std::to_string(a.bfs.source) + " on the packed rows (" +
         graph::bfs_direction_name(o.direction) +
         (a.bfs.hops >= 0 ? ", " + std::to_string(a.bfs.hops) + " hops" : std::string()) + ")");
  o.on_level = [&p](int level, std::uint64_t found, bool bottom_up, double) {
    p.tick(found == 0, "depth %d: %" PRIu64 " vertices (%s)", level, found, bottom_up ? "bottom-up" : "top-down");
  };
  auto b = report.timed("bfs", [&] { return graph::bfs(in.graph, source, o); });
  json& j = r.json["bfs"];
  j = pipeline::bfs_json(b, o, a);
  p.step(count_of(b.reached, "vertex", "vertices") + " reached, " + std::to_string(b.levels) + " levels deep (" +
         std::to_string(b.seconds) + " s)");
  if (a.verify) {
    p.step("verifying the search on the packed rows (every parent arc exists, every chain reaches the source, depths "
           "differ by at most one along every arc)");
    verified(report, p, r, j, "BFS", [&] { return graph::check_bfs(in.graph, source, b.parents); });
    if (j.value("verified", false))
      p.tick(true, "proved: a breadth-first tree of the %s reached, their depths shortest",
             count_of(b.reached, "vertex", "vertices").c_str());
  }
  if (!a.output.empty())
    report.timed("write", [&] {
      p.step("writing " + shown(a.output));
      write_bfs_tree(in, b, a.output, outputs);
    });
  finish(r, outputs, report, in, a);
  return r;
}

}  // namespace

void add_analyses(CLI::App& app, Action& selected) {
  auto a = std::make_shared<GraphArgs>();
  auto set = [&selected, a](Workflow plain, Workflow packed) {
    return [&selected, a, plain, packed] {
      selected = [a, plain, packed] {
        // A session's resident graph is an EdgeList; packing it is not a session command.
        if (a->o.packed && !a->session.empty())
          throw ConfigError("--packed packs the graph this command reads; a session's resident graph stays an "
                            "EdgeList: drop --packed or --session");
        return run_workflow(*a, a->o.packed ? packed : plain, false);
      };
    };
  };
  auto common = [&](CLI::App* c, const std::string& output_help) {
    add_graph_input(c, a->o.input, "Input graph");
    add_input_options(c, a->o.input);
    add_symmetric_option(c, a->o.input);
    c->add_option("-o,--output", a->o.output, output_help + kOutputNote);
    c->add_flag("--verify", a->o.verify,
                "Check the answer (GAPBS's verifier, distributed) and print what it proved; exit status 3 if wrong");
    c->add_flag("--packed", a->o.packed,
                "Run on the graph packed (rows in byte codes, vertices numbered by degree: about 3 bytes an "
                "undirected edge against 8); the same outputs in the file's ids; undirected unweighted graphs only");
    add_common(c, *a);
  };

  auto* pr = app.add_subcommand("pagerank", "PageRank scores (GAPBS's rules: damping 0.85, until the L1 change < 1e-4)");
  common(pr, "Write 'vertex score' lines (file ids)");
  pr->add_option("--damping", a->o.pagerank.damping, "Damping factor")->check(CLI::Range(0.0, 0.999999))->capture_default_str();
  pr->add_option("--tolerance", a->o.pagerank.tolerance, "Stop when an iteration changes the scores by less than this (L1)")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  pr->add_option("--max-iterations", a->o.pagerank.max_iterations, "Iteration cap (GAPBS's -i)")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  pr->add_option("--method", a->o.pagerank.method,
                 "gauss-seidel (GAPBS's pull: fewest iterations) or jacobi (the same bits at every rank count)")
      ->check(CLI::IsMember({"gauss-seidel", "jacobi"}))
      ->capture_default_str();
  pr->add_option("--personalization", a->o.pagerank.personalize,
                 "Personalized PageRank: teleport to these vertices (file ids), comma separated (default: every "
                 "vertex; Python: personalization=)")
      ->delimiter(',')
      ->check(kVertexId);
  add_old_spelling(pr, "--personalize", "--personalization", a->o.pagerank.personalize)
      ->delimiter(',')
      ->check(kVertexId);
  pr->callback(set(pipeline::run_pagerank, packed_pagerank));

  auto* bfs = app.add_subcommand("bfs", "Breadth-first search parents and depths (direction-optimizing, as GAPBS)");
  common(bfs, "Write 'vertex parent depth' lines (file ids; -1 -1 when not reached)");
  bfs->add_option("--source", a->o.bfs.source, "The source vertex (a file id)")->required()->check(kVertexId);
  bfs->add_option("--direction", a->o.bfs.direction,
                  "optimizing (Beamer's top-down/bottom-up switch), top-down or bottom-up")
      ->check(CLI::IsMember({"optimizing", "top-down", "bottom-up"}))
      ->capture_default_str();
  bfs->add_option("--hops", a->o.bfs.hops, "Stop at this depth: the k-hop neighbourhood of the source (Python: max_depth=)")
      ->check(CLI::NonNegativeNumber)
      ->default_str("none");
  bfs->add_option("--subgraph", a->o.bfs.subgraph,
                  "With --hops: write the subgraph the neighbourhood induces, renumbered from 0 (.el, .wel, .mtx, .gr, "
                  ".graph, .sg, .wsg or a .tsg directory; its header says so)" + kOutputNote);
  bfs->add_option("--ids", a->o.bfs.subgraph_ids,
                  "Where the subgraph's id map goes: 'subgraph_id file_id' lines (ids in the subgraph -> ids in "
                  "GRAPH); default OUT.ids beside the --subgraph OUT (none for a stream)" + kOutputNote);
  add_old_spelling(bfs, "--subgraph-ids", "--ids", a->o.bfs.subgraph_ids);
  bfs->callback(set(pipeline::run_bfs, packed_bfs));
}

}  // namespace tessera::cli
