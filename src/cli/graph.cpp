// tessera gen | convert | cc | lcc | hitting | pipeline: the graph workflow
// as a sequence of library calls. Options are checked before anything is
// read, outputs before anything is computed, and a command's outputs are
// committed together at the end. Ids printed and accepted are the file's.
// Long steps print progress on rank 0 (stderr); --json prints one JSON
// document on stdout at the end.
#include "commands.hpp"

#include <chrono>
#include <cinttypes>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <optional>

#include "tessera/graph/components.hpp"
#include "tessera/graph/generators.hpp"
#include "tessera/graph/strong_components.hpp"
#include "tessera/graph/id_map.hpp"
#include "tessera/graph/io.hpp"
#include "tessera/linalg/crs_matrix.hpp"
#include "tessera/linalg/edge_list_matrix.hpp"
#include "tessera/linalg/hitting_summary.hpp"
#include "tessera/linalg/hitting_times.hpp"
#include "tessera/linalg/laplacian.hpp"
#include "tessera/runtime/collective.hpp"
#include "tessera/runtime/memory.hpp"
#include "tessera/trilinos/hitting.hpp"
#include "tessera/analyze/client.hpp"

namespace tessera::cli {

namespace {

using Clock = std::chrono::steady_clock;
using nlohmann::json;

struct GraphArgs {
  // input
  std::string input;
  int base = -1;
  bool relabel = false, undirected = false, pattern = false;
  bool symmetric = false;  // cc, lcc, pipeline: the file lists both directions
  // generator
  std::string kind = "kron";
  int scale = 16, edge_factor = 16;
  std::string dims = "100x100";
  std::uint64_t seed = 1;
  double delete_fraction = 0;
  bool permute = false;
  // outputs and algorithms
  std::string output;
  std::string ids_output;  // lcc: "lcc_id file_id" lines
  std::string algorithm = "afforest";
  bool strong = false;        // cc: strongly connected components
  bool group_access = false;  // binary outputs readable and writable by the group
  std::string matrix = "edgelist";
  std::string preconditioner = "diagonal";  // --solver belos: Ifpack2's Jacobi as diagonal or relaxation
  std::string solver;  // hitting/pipeline: tessera (own CG) or belos (trilinos/ layer); "" = the command's default
  // pipeline (issue 9): where the analysis runs: inprocess, process (tessera-analyze) or container (bwrap)
  std::string analysis = "inprocess";
  std::string analysis_launcher, analysis_control;
  double analysis_attach_timeout = 60, analysis_timeout = 3600;
  std::vector<std::uint64_t> targets;
  double tolerance = 1e-10;
  int max_iterations = 20000;
  bool json = false, quiet = false;
};

// Rank 0 prints progress to stderr at most a few times a second.
class Progress {
 public:
  Progress(Runtime& rt, const GraphArgs& a) : on_(rt.rank() == 0 && !a.quiet) {}
  void step(const std::string& what) {
    if (on_) std::fprintf(stderr, "[%7.2f s] %s\n", elapsed(), what.c_str());
  }
  template <class... Args>
  void tick(bool last, const char* fmt, Args... args) {
    if (!on_) return;
    double now = elapsed();
    if (!last && now - last_tick_ < 0.25) return;
    last_tick_ = now;
    std::fprintf(stderr, "[%7.2f s]   ", now);
    std::fprintf(stderr, fmt, args...);
    std::fputc('\n', stderr);
  }
  double elapsed() const { return std::chrono::duration<double>(Clock::now() - t0_).count(); }

 private:
  bool on_;
  Clock::time_point t0_ = Clock::now();
  double last_tick_ = -1;
};

// "1 component", "2 components".
std::string count_of(std::uint64_t n, const std::string& one, const std::string& many) {
  return std::to_string(n) + " " + (n == 1 ? one : many);
}
std::string count_of(std::uint64_t n, const std::string& one) { return count_of(n, one, one + "s"); }

std::string algorithm_name(const std::string& algorithm) {
  if (algorithm == "scc") return "trimming and colouring";
  if (algorithm == "afforest") return "Afforest (local union-find, sampling, hooking across ranks)";
  return algorithm == "lp" ? "label propagation" : "FastSV";
}

graph::GraphSpec spec_of(const GraphArgs& a) {
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

std::string input_name(const GraphArgs& a) { return a.input.empty() ? spec_of(a).describe() : a.input; }

// Reads GRAPH, or generates one when no file was named.
graph::LoadedGraph load(Runtime& rt, const GraphArgs& a, Progress& progress, const StorageOptions& storage = {}) {
  if (a.input.empty()) {
    auto spec = spec_of(a);
    progress.step("generating " + spec.describe());
    auto g = graph::generate(rt, spec, storage);
    auto ids = graph::IdMap::identity(rt, g.vertex_ranges());
    return {std::move(g), std::move(ids)};
  }
  progress.step("reading " + (a.input == "-" ? std::string("standard input") : a.input) +
                (a.input == "-" ? "" : " (" + graph::format_name(graph::format_of(a.input)) + ")"));
  graph::ReadOptions o;
  if (a.base >= 0) o.base = a.base;
  o.relabel = a.relabel;
  o.undirected = a.undirected;
  o.symmetric = a.symmetric;
  o.pattern = a.pattern;
  o.storage = storage;
  return graph::read_graph(rt, a.input, o);
}

// A directed graph made undirected for a random walk and weak components;
// the id map moves with its vertex ranges.
void make_undirected(graph::LoadedGraph& g, Progress& p, const std::string& why, const StorageOptions& storage = {}) {
  if (!g.graph.directed()) return;
  p.step("symmetrizing (" + why + ")");
  g.graph = g.graph.symmetrized(storage);
  g.ids = g.ids.redistributed(g.graph.vertex_ranges());
}

// The random walk needs finite positive weights: checked right after
// reading, before any components or matrix work, and named in file ids.
// `--pattern` graphs are unweighted and need no look.
void check_walk_weights(const graph::LoadedGraph& g) {
  if (!g.graph.weighted()) return;
  auto bad = linalg::find_invalid_weight(g.graph);  // the same on every rank
  if (!bad) return;
  bad->row = g.ids.file_id(bad->row);
  bad->column = g.ids.file_id(bad->column);
  throw RangeError(bad->describe() + " (--pattern)");
}

// The internal ids of the file ids the user named; RangeError naming the first
// that `ids` does not hold (`where`: "the graph file", "the largest component").
std::vector<std::uint64_t> find_targets(const graph::IdMap& ids, const std::vector<std::uint64_t>& file_ids,
                                        const std::string& where) {
  auto found = ids.find(file_ids);
  for (std::size_t k = 0; k < found.size(); ++k) {
    if (found[k] != kNoIndex) continue;
    std::string id = std::to_string(file_ids[k]);
    if (ids.is_identity())
      throw RangeError("target vertex " + id + " is outside " + where + "'s vertex ids " + std::to_string(ids.base()) +
                       ".." + std::to_string(ids.base() + ids.vertices() - 1));
    throw RangeError("target vertex " + id + " does not occur in " + where);
  }
  return found;
}

json graph_json(const graph::EdgeList& g) {
  return {{"vertices", g.vertices()}, {"edges", g.edges()}, {"directed", g.directed()},
          {"weighted", g.weighted()}, {"edge_imbalance", g.edge_imbalance()}};
}

void describe(Progress& p, const graph::EdgeList& g) {
  p.step(count_of(g.vertices(), "vertex", "vertices") + ", " + count_of(g.edges(), "edge") + " (" +
         (g.directed() ? "directed" : "undirected") + (g.weighted() ? ", weighted" : "") + ")");
}

// Checks an output before any work (graph::check_output_path). `-` (or
// /dev/stdout) and --json would both write to standard output: refused.
OutputPath check_output(Runtime& rt, const GraphArgs& a, const std::string& path, graph::OutputKind kind,
                        const char* option) {
  auto out = graph::check_output_path(rt, path, kind);
  if (out.standard_output() && a.json)
    throw ConfigError(std::string(option) + " " + path + " writes to standard output, where --json prints its "
                      "document; write the output to a file, or drop --json");
  return out;
}

// How progress lines name an output.
std::string shown(const std::string& path) { return path == "-" ? "standard output" : path; }

void finish(Runtime& rt, const GraphArgs& a, const json& j) {
  if (rt.rank() == 0 && a.json) std::printf("%s\n", j.dump().c_str());
}

graph::Components run_components(const graph::EdgeList& g, const std::string& algorithm, Progress& p) {
  p.step(std::string(algorithm == "scc" ? "strongly" : "connected") + " components by " + algorithm_name(algorithm));
  graph::ComponentsOptions o;
  o.on_round = [&p](int round, std::uint64_t changed, double) {
    p.tick(changed == 0, "round %d: %" PRIu64 " labels changed", round, changed);
  };
  if (algorithm == "scc") {
    o.on_round = [&p](int pass, std::uint64_t found, double) {
      p.tick(false, "round %d: %" PRIu64 " vertices placed by colouring", pass, found);
    };
    return graph::strong_components(g, o);
  }
  if (algorithm == "afforest")
    o.on_round = [&p](int round, std::uint64_t pairs, double) {
      p.tick(pairs == 0, "round %d: %" PRIu64 " cut-edge pairs still join two trees", round, pairs);
    };
  return graph::components_by(algorithm, g, o);
}

// `largest_label` is a file id.
json components_json(const graph::Components& c, const graph::ComponentSummary& s, const std::string& algorithm,
                     std::uint64_t largest_label) {
  return {{"algorithm", algorithm},
          {"rounds", c.rounds},
          {"local_rounds", c.local_rounds},
          {"seconds", c.seconds},
          {"extra_bytes", c.extra_bytes},
          {"components", s.count},
          {"largest_size", s.largest_size},
          {"largest_label", largest_label},
          {"isolated_vertices", s.isolated}};
}

// gen and convert: a graph (generated or read), written to OUT.
int run_write(const GraphArgs& a) {
  if (a.output.empty())
    throw ConfigError("name the output with -o OUT (.el, .wel, .mtx, a .tsg directory, or - for standard output)");
  if (a.input.empty()) spec_of(a);  // a bad generator option fails before anything runs
  Runtime rt;
  Progress p(rt, a);
  check_output(rt, a, a.output, graph::OutputKind::graph, "-o");
  auto g = load(rt, a, p).graph;
  describe(p, g);
  p.step("writing " + shown(a.output));
  graph::WriteOptions w;
  w.group_access = a.group_access;
  graph::write_graph(g, a.output, w);
  finish(rt, a, {{"command", a.input.empty() ? "gen" : "convert"},
                 {"input", input_name(a)},
                 {"output", a.output},
                 {"stats", graph_json(g)}});
  return 0;
}

// cc: components by one or both algorithms; -o writes "vertex component"
// lines (file ids on both sides).
int run_cc(const GraphArgs& a) {
  Runtime rt;
  Progress p(rt, a);
  // Wall time of every step the user waits for, slowest rank (all ranks take
  // the same steps, so the closing all-reduce is entered by all).
  std::vector<std::pair<std::string, double>> steps;
  auto timed = [&](const std::string& step, auto&& run) {
    const double t0 = p.elapsed();
    run();
    const double took = p.elapsed() - t0;
    for (auto& [name, seconds] : steps)
      if (name == step) return void(seconds += took);
    steps.emplace_back(step, took);
  };
  // What the runtime and MPI hold before any graph: the part of the peak no graph size changes.
  const std::uint64_t start_peak = peak_rss_bytes();
  if (!a.output.empty()) check_output(rt, a, a.output, graph::OutputKind::text_lines, "-o");
  std::optional<graph::LoadedGraph> loaded_slot;
  timed(a.input.empty() ? "generate" : "read", [&] { loaded_slot.emplace(load(rt, a, p)); });
  auto& loaded = *loaded_slot;
  describe(p, loaded.graph);
  graph::PendingOutputs outputs(rt);
  json j = {{"command", "cc"}, {"stats", graph_json(loaded.graph)}, {"results", json::array()}};
  const bool all = a.algorithm == "all" || a.algorithm == "both";
  std::vector<std::string> algorithms = a.strong ? std::vector<std::string>{"scc"}
                                        : all    ? std::vector<std::string>{"afforest", "lp", "fastsv"}
                                                 : std::vector<std::string>{a.algorithm};
  // Afforest reads a directed graph's arcs both ways; label propagation and
  // FastSV need an undirected copy, made once for all of them (on the same
  // vertex ranges, so the labels fit the graph's ids).
  std::optional<graph::EdgeList> undirected;
  for (const auto& alg : algorithms)
    if (!a.strong && alg != "afforest" && loaded.graph.directed() && !undirected) {
      p.step("symmetrizing once (label propagation and FastSV need both directions of every arc)");
      timed("symmetrize", [&] { undirected.emplace(loaded.graph.symmetrized({}, true)); });
    }
  for (const auto& alg : algorithms) {
    std::optional<graph::Components> found;
    timed("components",
          [&] { found.emplace(run_components(undirected && alg != "afforest" ? *undirected : loaded.graph, alg, p)); });
    auto& c = *found;
    graph::ComponentSummary s;
    timed("summary", [&] { s = graph::summarize(loaded.graph, c.labels); });
    std::uint64_t largest = loaded.ids.file_id(s.largest_label);
    p.step(count_of(s.count, "component") + " in " + count_of(static_cast<std::uint64_t>(c.rounds), "round") + " (" +
           std::to_string(c.seconds) + " s); the largest has " + count_of(s.largest_size, "vertex", "vertices") +
           ", smallest vertex " + std::to_string(largest));
    j["results"].push_back(components_json(c, s, alg, largest));
    if (!a.output.empty() && &alg == &algorithms.front()) {  // both algorithms give the same labels
      timed("write", [&] {
        auto labels = c.labels.local();
        std::vector<std::uint64_t> file_labels(labels.begin(), labels.end());
        loaded.ids.translate(file_labels);
        p.step("writing " + shown(a.output));
        graph::write_vertex_values(loaded.ids, std::span<const std::uint64_t>(file_labels), a.output,
                                   {"vertex", "component", "nan", &outputs});
      });
    }
  }
  if (a.output.empty()) outputs.commit();
  else timed("write", [&] { outputs.commit(); });
  if (!a.output.empty()) j["output"] = a.output;

  // Steps, slowest rank; peak resident memory (VmHWM) summed over the ranks
  // (the job's footprint) and of the largest rank, and the sum's growth over
  // the start (runtime and MPI) as a multiple of the edge arrays.
  std::vector<double> seconds;
  for (auto& step : steps) seconds.push_back(step.second);
  seconds.push_back(p.elapsed());
  all_reduce(rt.comm(), seconds.data(), seconds.size(), MPI_MAX);
  json step_seconds = json::object();
  std::string line = "time:";
  char text[256];
  for (std::size_t k = 0; k < steps.size(); ++k) {
    step_seconds[steps[k].first] = seconds[k];
    std::snprintf(text, sizeof(text), " %s %.3f s,", steps[k].first.c_str(), seconds[k]);
    line += text;
  }
  step_seconds["total"] = seconds.back();
  std::snprintf(text, sizeof(text), " total %.3f s", seconds.back());
  p.step(line + text);
  const std::uint64_t peak = peak_rss_bytes();
  const std::uint64_t peak_sum = all_reduce<std::uint64_t>(rt.comm(), peak, MPI_SUM);
  const std::uint64_t peak_max = all_reduce<std::uint64_t>(rt.comm(), peak, MPI_MAX);
  const std::uint64_t start_sum = all_reduce<std::uint64_t>(rt.comm(), start_peak, MPI_SUM);
  const std::uint64_t growth = peak_sum > start_sum ? peak_sum - start_sum : 0;
  const std::uint64_t edge_bytes = loaded.graph.edges() * (16 + (loaded.graph.weighted() ? 8 : 0));
  const std::uint64_t vertex_bytes = loaded.graph.vertices() * graph::kVertexArrayBytes;
  const double ratio = edge_bytes ? static_cast<double>(growth) / static_cast<double>(edge_bytes) : 0;
  j["step_seconds"] = step_seconds;
  j["memory"] = {{"peak_rss_bytes_sum", peak_sum},
                 {"peak_rss_bytes_max_rank", peak_max},
                 {"start_rss_bytes_sum", start_sum},
                 {"peak_growth_bytes", growth},
                 {"edge_array_bytes", edge_bytes},
                 {"vertex_array_bytes", vertex_bytes},
                 {"peak_to_edge_arrays", ratio},
                 {"ranks", rt.size()}};
  std::snprintf(text, sizeof(text),
                "peak memory: %.1f MiB resident summed over %d rank%s (largest rank %.1f MiB), %.1f MiB above the "
                "%.1f MiB at start = %.2fx the edge arrays (%.1f MiB; vertex arrays %.1f MiB); target <= 2x plus "
                "O(vertices)",
                static_cast<double>(peak_sum) / 1048576.0, rt.size(), rt.size() == 1 ? "" : "s",
                static_cast<double>(peak_max) / 1048576.0, static_cast<double>(growth) / 1048576.0,
                static_cast<double>(start_sum) / 1048576.0, ratio, static_cast<double>(edge_bytes) / 1048576.0,
                static_cast<double>(vertex_bytes) / 1048576.0);
  p.step(text);
  finish(rt, a, j);
  return 0;
}

int run_lcc(const GraphArgs& a) {
  Runtime rt;
  Progress p(rt, a);
  auto out = check_output(rt, a, a.output, graph::OutputKind::graph, "-o");
  if (!a.ids_output.empty() &&
      check_output(rt, a, a.ids_output, graph::OutputKind::text_lines, "--ids").standard_output() &&
      out.standard_output())
    throw ConfigError("-o " + a.output + " and --ids " + a.ids_output +
                      " both write to standard output; send one of them to a file");
  auto loaded = load(rt, a, p);
  describe(p, loaded.graph);
  graph::check_graph_format(a.output, loaded.graph.weighted());
  auto c = run_components(loaded.graph, a.algorithm, p);
  p.step("extracting the largest component");
  auto lcc = graph::largest_component(loaded.graph, c.labels);
  describe(p, lcc.graph);
  graph::PendingOutputs outputs(rt);
  p.step("writing " + shown(a.output));
  graph::WriteOptions w;
  w.pending = &outputs;
  w.group_access = a.group_access;
  graph::write_graph(lcc.graph, a.output, w);
  if (!a.ids_output.empty()) {
    // "lcc_id file_id": the id in OUT (1-based in a .mtx) -> the id in GRAPH.
    auto lcc_ids = loaded.ids.compose(lcc.original_ids);
    const std::uint64_t out_base = graph::format_of(a.output) == graph::FileFormat::matrix_market ? 1 : 0;
    auto out_ids = graph::IdMap::identity(rt, lcc.graph.vertex_ranges(), out_base);
    auto file_ids = lcc_ids.local_file_ids();
    p.step("writing " + shown(a.ids_output));
    graph::write_vertex_values(out_ids, std::span<const std::uint64_t>(file_ids), a.ids_output,
                               {"lcc_id", "file_id", "nan", &outputs});
  }
  outputs.commit();
  finish(rt, a, {{"command", "lcc"}, {"output", a.output}, {"input", graph_json(loaded.graph)},
                 {"components", components_json(c, lcc.summary, a.algorithm, loaded.ids.file_id(lcc.summary.largest_label))},
                 {"lcc", graph_json(lcc.graph)}});
  return 0;
}

// "converged", "limited by rounding", "NOT converged" and the figures of the answer written.
std::string verdict(const linalg::CgResult& r) {
  char text[160];
  std::snprintf(text, sizeof(text), "%d iterations%s: true relative residual %.3e, backward error %.1e (%s)",
                r.iterations, r.rounds > 1 ? (", " + std::to_string(r.rounds) + " rounds").c_str() : "",
                r.relative_residual, r.backward_error,
                r.status == linalg::SolveStatus::converged          ? "converged"
                : r.status == linalg::SolveStatus::rounding_limited ? "limited by rounding"
                                                                    : "NOT converged");
  return text;
}

// --solver belos: the same grounded system solved by Trilinos (Belos CG,
// Ifpack2 Jacobi) on a Tpetra RowMatrix over the edge arrays, or on its
// CrsMatrix copy with --matrix crs. Kokkos/Tpetra live for this call only.
linalg::HittingTimes solve_hitting_belos(Runtime& rt, const GraphArgs& a, Progress& p, const graph::EdgeList& g,
                                         const std::vector<std::uint64_t>& targets, bool connected,
                                         std::uint64_t& matrix_extra_bytes) {
  trilinos::Session session(rt);
  trilinos::BelosHittingOptions o;
  o.hitting.cg.tolerance = a.tolerance;
  o.hitting.cg.max_iterations = a.max_iterations;
  o.hitting.connected = connected;
  o.matrix = a.matrix == "crs" ? trilinos::MatrixKind::crs : trilinos::MatrixKind::edge_list;
  o.preconditioner = a.preconditioner == "relaxation" ? trilinos::Preconditioner::relaxation
                                                      : trilinos::Preconditioner::diagonal;
  p.step(std::string("hitting times: Belos CG with Ifpack2 Jacobi (") + a.preconditioner + ") on the grounded Laplacian, " +
         (a.matrix == "crs" ? "a Tpetra::CrsMatrix copy of the edges" : "a Tpetra::RowMatrix over the edge arrays (no copy)") +
         " (" + trilinos::description() + ")");
  auto r = trilinos::belos_hitting_times(g, targets, o);
  p.tick(true, "Belos stopped after %s", verdict(r.result.solve).c_str());
  matrix_extra_bytes = r.matrix_extra_bytes;
  return std::move(r.result);
}

// --analysis process|container (issue 9): tessera-analyze solves on the
// graph's Shared arrays in a separate process (or bwrap sandbox) and writes
// the times into a Shared vector; see include/tessera/analyze/client.hpp.
linalg::HittingTimes solve_hitting_out_of_process(const GraphArgs& a, Progress& p, const graph::EdgeList& g,
                                                  const std::vector<std::uint64_t>& targets, bool connected,
                                                  std::uint64_t& matrix_extra_bytes, json& handshake) {
  analyze::ProcessOptions o;
  o.isolation = a.analysis == "container" ? analyze::Isolation::container : analyze::Isolation::process;
  o.solver = a.solver;
  o.preconditioner = a.preconditioner;
  o.launcher = a.analysis_launcher;
  o.control = a.analysis_control;
  o.attach_timeout = a.analysis_attach_timeout;
  o.timeout = a.analysis_timeout;
  o.quiet = a.quiet;
  o.group_access = a.group_access;
  linalg::HittingOptions h;
  h.cg.tolerance = a.tolerance;
  h.cg.max_iterations = a.max_iterations;
  h.connected = connected;
  p.step("hitting times in a separate " + std::string(a.analysis == "container" ? "sandboxed (bwrap) " : "") +
         "process (tessera-analyze, " + a.solver + " solver) on the Shared edge arrays (no copy)");
  auto r = analyze::hitting_times_out_of_process(g, targets, h, o);
  const auto& hs = r.handshake;
  p.tick(true, "analysis %s: launch %.3f s, request -> start %.1f us, result -> resume %.1f us; %s",
         hs.analysis.c_str(), hs.launch_seconds, hs.request_to_start_seconds * 1e6, hs.result_to_resume_seconds * 1e6,
         verdict(r.result.solve).c_str());
  matrix_extra_bytes = r.matrix_extra_bytes;
  handshake = {{"control", hs.control_path},
               {"result", hs.result_path},
               {"command", hs.command},
               {"launch_seconds", hs.launch_seconds},
               {"request_to_start_seconds", hs.request_to_start_seconds},
               {"result_to_resume_seconds", hs.result_to_resume_seconds},
               {"shutdown_seconds", hs.shutdown_seconds},
               {"liveness_period_seconds", hs.period_seconds},
               {"belos_solves", r.belos_solves},
               {"analysis_anonymous_memory_growth_bytes", r.analysis_anonymous_growth_bytes}};
  return std::move(r.result);
}

// Fails before anything is read when --solver belos cannot run here.
void check_solver(const GraphArgs& a) {
  if (a.analysis == "container") {
    analyze::ProcessOptions o;
    o.launcher = a.analysis_launcher;
    std::string program;
    if (!analyze::launcher_available(o, &program))
      throw ConfigError("--analysis container: the launcher '" + program +
                        "' is not installed (Debian: apt-get install bubblewrap), or name another with "
                        "--analysis-launcher / TESSERA_ANALYZE_LAUNCHER");
  }
  if (a.analysis != "inprocess") return;  // tessera-analyze says whether it has Trilinos
  if (a.solver == "belos" && !trilinos::available())
    throw ConfigError("--solver belos: this tessera was built without Trilinos (" + trilinos::description() +
                      "); use --solver tessera, or install Trilinos (scripts/setup.sh) and rebuild with "
                      "-DTESSERA_WITH_TRILINOS=ON");
}

// Hitting times to `targets` (internal ids) on an undirected graph, its
// summary in file ids, and optionally "vertex time" lines.
json solve_hitting(Runtime& rt, const GraphArgs& a, Progress& p, const graph::EdgeList& g, const graph::IdMap& ids,
                   const std::vector<std::uint64_t>& targets, bool connected, graph::PendingOutputs& outputs) {
  std::uint64_t matrix_extra_bytes = 0;
  json handshake;
  auto solve = [&]() -> linalg::HittingTimes {
    if (a.analysis != "inprocess") return solve_hitting_out_of_process(a, p, g, targets, connected, matrix_extra_bytes, handshake);
    if (a.solver == "belos") return solve_hitting_belos(rt, a, p, g, targets, connected, matrix_extra_bytes);
    p.step(a.matrix == "crs" ? "building the CRS copy of the matrix" : "matrix: EdgeListMatrix on the edge arrays (no copy)");
    linalg::EdgeListMatrix el(g);
    std::optional<linalg::CrsMatrix> crs;
    if (a.matrix == "crs") crs.emplace(el);
    const linalg::RowMatrix& matrix =
        crs ? static_cast<const linalg::RowMatrix&>(*crs) : static_cast<const linalg::RowMatrix&>(el);

    linalg::HittingOptions o;
    o.cg.tolerance = a.tolerance;
    o.cg.max_iterations = a.max_iterations;
    o.cg.on_iteration = [&p](int it, double res, double) { p.tick(false, "CG iteration %d: relative residual %.3e", it, res); };
    o.connected = connected;
    p.step("hitting times: CG with Jacobi on the grounded Laplacian");
    auto h = linalg::hitting_times(g, matrix, targets, o);
    p.tick(true, "CG stopped after %s", verdict(h.solve).c_str());

    matrix_extra_bytes = all_reduce<std::uint64_t>(rt.comm(), matrix.extra_memory_bytes(), MPI_SUM);
    return h;
  };
  auto h = solve();
  if (!h.solve.succeeded() && rt.rank() == 0)
    std::fprintf(stderr, "tessera: the hitting-time solve did not converge: %s\n", h.solve.reason.c_str());

  auto s = linalg::summarize(h.times);
  const std::uint64_t farthest = ids.file_id(s.farthest);
  if (!a.output.empty()) {
    p.step("writing " + shown(a.output));
    graph::write_vertex_values(ids, h.times.local(), a.output, {"vertex", "hitting_time", "unreachable", &outputs});
  }
  p.step(count_of(s.reachable, "reachable vertex", "reachable vertices") + ", " +
         count_of(s.unreachable, "unreachable", "unreachable") + "; mean hitting time " + std::to_string(s.mean) + ", max " +
         std::to_string(s.max) + " (vertex " + std::to_string(farthest) + ")");
  std::vector<std::uint64_t> target_ids(targets);
  ids.translate(target_ids);
  return {{"matrix", a.matrix},
          {"solver", a.solver},
          {"preconditioner", a.solver == "belos" ? json(a.preconditioner) : json(nullptr)},
          {"targets", h.targets},
          {"target_file_ids", target_ids},
          {"iterations", h.solve.iterations},
          {"converged", h.solve.converged},
          {"status", linalg::to_string(h.solve.status)},
          {"relative_residual", h.solve.relative_residual},
          {"backward_error", h.solve.backward_error},
          {"rounds", h.solve.rounds},
          {"reason", h.solve.reason},
          {"solve_seconds", h.solve.seconds},
          {"seconds_per_iteration", h.solve.seconds_per_iteration()},
          {"setup_seconds", h.setup_seconds},
          {"reachable", s.reachable},
          {"unreachable", s.unreachable},
          {"min", s.min},
          {"mean", s.mean},
          {"max", s.max},
          {"farthest_vertex", farthest == kNoIndex ? json(nullptr) : json(farthest)},
          {"matrix_extra_bytes", matrix_extra_bytes},
          {"analysis", a.analysis},
          {"handshake", handshake}};
}

int run_hitting(const GraphArgs& args) {
  GraphArgs a = args;
  if (a.solver.empty()) a.solver = trilinos::available() ? "belos" : "tessera";
  if (a.targets.empty()) throw ConfigError("name at least one --target vertex");
  check_solver(a);
  Runtime rt;
  Progress p(rt, a);
  if (!a.output.empty()) check_output(rt, a, a.output, graph::OutputKind::text_lines, "-o");
  auto loaded = load(rt, a, p);
  describe(p, loaded.graph);
  auto targets = find_targets(loaded.ids, a.targets, a.input == "-" ? "standard input" : a.input);
  make_undirected(loaded, p, "a random walk needs an undirected graph");
  check_walk_weights(loaded);
  graph::PendingOutputs outputs(rt);
  auto r = solve_hitting(rt, a, p, loaded.graph, loaded.ids, targets, false, outputs);
  outputs.commit();
  finish(rt, a, {{"command", "hitting"}, {"stats", graph_json(loaded.graph)}, {"hitting", r}});
  return r["status"].get<std::string>() == linalg::to_string(linalg::SolveStatus::not_converged) ? 3 : 0;
}

int run_pipeline(const GraphArgs& args) {
  GraphArgs a = args;
  // Default: Trilinos in process when built, Tessera's own CG otherwise.
  if (a.solver.empty()) a.solver = trilinos::available() ? "belos" : "tessera";
  if (a.input.empty()) spec_of(a);  // a bad generator option fails before anything runs
  check_solver(a);
  Runtime rt;
  Progress p(rt, a);
  if (!a.output.empty()) check_output(rt, a, a.output, graph::OutputKind::text_lines, "-o");
  const std::string name = "tessera-pipeline-" + rt.job_id();
  json j = {{"command", "pipeline"}, {"ranks", rt.size()}, {"input", input_name(a)}};
  auto loaded = load(rt, a, p, StorageOptions::shared(name));
  describe(p, loaded.graph);
  p.step("loaded into Shared storage: " + loaded.graph.src().metadata_path());
  find_targets(loaded.ids, a.targets, a.input.empty() ? "the generated graph" : a.input == "-" ? "standard input" : a.input);
  make_undirected(loaded, p, "weak components, undirected walk; into Shared storage", StorageOptions::shared(name + "-sym"));
  check_walk_weights(loaded);
  j["graph"] = graph_json(loaded.graph);
  AnonymousMemoryMeter heap(rt.comm());

  auto c = run_components(loaded.graph, a.algorithm, p);
  p.step("extracting the largest component into Shared storage");
  auto lcc = graph::largest_component(loaded.graph, c.labels, StorageOptions::shared(name + "-lcc"));
  j["components"] = components_json(c, lcc.summary, a.algorithm, loaded.ids.file_id(lcc.summary.largest_label));
  j["lcc"] = graph_json(lcc.graph);
  p.step("largest component: " + std::to_string(lcc.graph.vertices()) + " of " +
         count_of(loaded.graph.vertices(), "vertex", "vertices") + ", " + count_of(lcc.graph.edges(), "edge") + ", in " +
         lcc.graph.src().metadata_path());
  auto lcc_ids = loaded.ids.compose(lcc.original_ids);
  std::vector<std::uint64_t> targets = a.targets.empty()
                                           ? std::vector<std::uint64_t>{linalg::highest_degree_vertex(lcc.graph)}
                                           : find_targets(lcc_ids, a.targets, "the largest component");
  graph::PendingOutputs outputs(rt);
  auto r = solve_hitting(rt, a, p, lcc.graph, lcc_ids, targets, true, outputs);
  const std::uint64_t growth = heap.growth_bytes();
  const std::uint64_t edge_bytes = lcc.graph.edges() * (16 + (lcc.graph.weighted() ? 8 : 0));
  j["hitting"] = r;
  j["edge_array_bytes"] = edge_bytes;
  j["anonymous_memory_growth_bytes"] = growth;
  auto mib = [](double bytes) {
    char buf[32];
    std::snprintf(buf, sizeof(buf), "%.1f MiB", bytes / 1048576.0);
    return std::string(buf);
  };
  p.step("done in " + std::to_string(p.elapsed()) + " s. Edge arrays of the largest component: " +
         mib(static_cast<double>(edge_bytes)) + ", shared, never copied; the matrix added " +
         mib(r["matrix_extra_bytes"].get<double>()) + "; anonymous (heap) memory grew " +
         mib(static_cast<double>(growth)) + " over all ranks (vertex arrays, aggregation buffers)");
  outputs.commit();
  finish(rt, a, j);
  return r["status"].get<std::string>() == linalg::to_string(linalg::SolveStatus::not_converged) ? 3 : 0;
}

// A graph path: an existing file or directory, or "-" for standard input.
const CLI::Validator kGraphPath(
    [](std::string& path) { return path == "-" ? std::string() : CLI::ExistingPath(path); }, "PATH|-");

// A vertex id: digits only (CLI11 would read "-1" as 2^64-1).
const CLI::Validator kVertexId(
    [](std::string& id) {
      if (id.empty() || id.size() > 20 || id.find_first_not_of("0123456789") != std::string::npos)
        return "vertex ids are non-negative integers, not '" + id + "'";
      try {
        (void)std::stoull(id);
      } catch (const std::exception&) {
        return "vertex id " + id + " does not fit in 64 bits";
      }
      return std::string();
    },
    "ID");

const CLI::Validator kGridDims(
    [](std::string& dims) {
      try {
        graph::parse_grid_dims(dims);
      } catch (const std::exception& e) {
        return std::string(e.what());
      }
      return std::string();
    },
    "ROWSxCOLS|XxYxZ");

// Appended to the help of every output option.
const std::string kOutputNote =
    "; - is standard output, devices and FIFOs are written in place, files replaced whole";
const std::string kGraphOutputNote =
    kOutputNote + " (- and a device or FIFO named without .el/.wel/.mtx take edge-list text: \"u v\" or \"u v w\")";

void add_graph_input(CLI::App* c, GraphArgs& a, const std::string& help, bool required = true) {
  auto* o = c->add_option("graph", a.input, help + " (- reads standard input)")->check(kGraphPath);
  if (required) o->required();
}
void add_input_options(CLI::App* c, GraphArgs& a) {
  c->add_option("--base", a.base, "First vertex id of a text file: 0 or 1 (default 1 for .mtx, else 0)")
      ->check(CLI::IsMember({0, 1}));
  c->add_flag("--relabel", a.relabel, "Number the ids that occur 0..n-1 (sparse SNAP ids)");
  c->add_flag("--undirected", a.undirected, "Add the reverse of every edge");
  c->add_flag("--pattern", a.pattern, "Ignore the weights (values of a structural matrix)");
}
// Edge lists that already list both directions (GAPBS, SNAP): no reverses added.
void add_symmetric_option(CLI::App* c, GraphArgs& a) {
  c->add_flag("--symmetric", a.symmetric,
              "The text file lists both directions of every edge: read it as undirected without adding reverses "
              "(verified; duplicates dropped)");
}
void add_generator_options(CLI::App* c, GraphArgs& a) {
  c->add_option("--scale", a.scale, "kron/urand: 2^scale vertices")->check(CLI::Range(1, 40));
  c->add_option("--edge-factor", a.edge_factor, "kron/urand: candidate edges per vertex")->check(CLI::Range(1, 1024));
  c->add_option("--dims", a.dims, "grid: ROWSxCOLS or XxYxZ")->check(kGridDims);
  c->add_option("--seed", a.seed, "Random seed (the graph does not depend on the rank count)");
  c->add_option("--delete", a.delete_fraction, "Drop each candidate edge with this probability")->check(CLI::Range(0.0, 0.999999));
  c->add_flag("--permute", a.permute, "Scramble vertex ids (always on for kron)");
}
void add_hitting_options(CLI::App* c, GraphArgs& a) {
  c->add_option("--tolerance", a.tolerance, "CG relative residual to stop at")->check(CLI::PositiveNumber);
  c->add_option("--max-iterations", a.max_iterations, "CG iteration cap")->check(CLI::PositiveNumber);
  c->add_option("--matrix", a.matrix, "edgelist (no copy) or crs (the conventional copy)")
      ->check(CLI::IsMember({"edgelist", "crs"}));
  c->add_option("--solver", a.solver,
                "tessera (its own Jacobi-preconditioned CG) or belos (Trilinos: Belos CG with an Ifpack2 Jacobi "
                "preconditioner on a Tpetra RowMatrix over the edge arrays; with --matrix crs on a CrsMatrix copy)")
      ->check(CLI::IsMember({"tessera", "belos"}));
  c->add_option("--preconditioner", a.preconditioner,
                "--solver belos: Ifpack2's Jacobi as diagonal (Ifpack2::Diagonal: the RowMatrix builds no Tpetra column "
                "Map or Import) or relaxation (Ifpack2::Relaxation, which asks for them at 2+ ranks); same iterates")
      ->check(CLI::IsMember({"diagonal", "relaxation"}));
}
void add_components_algorithm(CLI::App* c, GraphArgs& a, bool both) {
  c->add_option("--algorithm", a.algorithm,
                both ? "afforest (default), fastsv, lp (label propagation), or all three (same labels; 'both' is all)"
                     : "afforest (default), fastsv or lp (label propagation)")
      ->check(both ? CLI::IsMember({"afforest", "lp", "fastsv", "all", "both"})
                   : CLI::IsMember({"afforest", "lp", "fastsv"}));
}
void add_common(CLI::App* c, GraphArgs& a) {
  c->add_flag("--json", a.json,
              "Print the results as one JSON document on stdout (nothing else there; so not with -o -)");
  c->add_flag("-q,--quiet", a.quiet, "No progress lines on stderr");
  c->fallthrough();
}

}  // namespace

void add_graph(CLI::App& app, Action& selected) {
  auto a = std::make_shared<GraphArgs>();
  auto set = [&selected, a](int (*run)(const GraphArgs&)) {
    return [&selected, a, run] { selected = [a, run] { return run(*a); }; };
  };

  auto* gen = app.add_subcommand("gen", "Generate a graph (kron, urand, grid) and write it");
  gen->add_option("kind", a->kind, "kron | urand | grid")->required()->check(CLI::IsMember({"kron", "urand", "grid"}));
  gen->add_option("-o,--output", a->output, "Output: .el, .mtx or a binary directory (.tsg)" + kGraphOutputNote);
  gen->add_flag("--group", a->group_access, "A binary (.tsg) output is group-readable and -writable (0770/0660), "
                                             "for a directory shared by a team");
  gen->add_option("output", a->output, "Output (older positional form of -o)");
  add_generator_options(gen, *a);
  add_common(gen, *a);
  gen->callback(set(run_write));

  auto* conv = app.add_subcommand("convert", "Convert between .el/.wel, .mtx and the binary format");
  add_graph_input(conv, *a, "Input graph");
  conv->add_option("-o,--output", a->output,
                   "Output graph: .el, .wel, .mtx or a binary directory (.tsg)" + kGraphOutputNote);
  conv->add_flag("--group", a->group_access, "A binary (.tsg) output is group-readable and -writable (0770/0660), "
                                             "for a directory shared by a team");
  conv->add_option("output", a->output, "Output graph (older positional form of -o)");
  add_input_options(conv, *a);
  add_common(conv, *a);
  conv->callback(set(run_write));

  auto* cc = app.add_subcommand("cc", "Connected components (weak for directed graphs; --strong: strong)");
  add_graph_input(cc, *a, "Input graph");
  add_components_algorithm(cc, *a, true);
  cc->add_flag("--strong", a->strong, "Strongly connected components of a directed graph (trimming and colouring; "
                                       "an undirected graph's are its connected components)");
  cc->add_option("-o,--output", a->output, "Write 'vertex component' lines (file ids; a component is named by its "
                                            "smallest vertex)" + kOutputNote);
  add_input_options(cc, *a);
  add_symmetric_option(cc, *a);
  add_common(cc, *a);
  cc->callback(set(run_cc));

  auto* lcc = app.add_subcommand("lcc", "Extract the largest connected component");
  add_graph_input(lcc, *a, "Input graph");
  lcc->add_option("-o,--output", a->output,
                  "Output graph: .el, .wel, .mtx or a binary directory (.tsg)" + kGraphOutputNote)
      ->required();
  lcc->add_flag("--group", a->group_access, "A binary (.tsg) output is group-readable and -writable (0770/0660), "
                                             "for a directory shared by a team");
  lcc->add_option("--ids", a->ids_output,
                  "Also write 'lcc_id file_id' lines (ids in OUT -> ids in GRAPH)" + kOutputNote);
  add_components_algorithm(lcc, *a, false);
  add_input_options(lcc, *a);
  add_symmetric_option(lcc, *a);
  add_common(lcc, *a);
  lcc->callback(set(run_lcc));

  auto* hit = app.add_subcommand("hitting", "Random-walk hitting times to a set of target vertices");
  add_graph_input(hit, *a, "Input graph");
  hit->add_option("--target", a->targets, "Target vertex ids (file ids), comma separated")
      ->delimiter(',')
      ->required()
      ->check(kVertexId);
  hit->add_option("-o,--output", a->output, "Write 'vertex time' lines (file ids; 'unreachable')" + kOutputNote);
  add_input_options(hit, *a);
  add_hitting_options(hit, *a);
  add_common(hit, *a);
  hit->callback(set(run_hitting));

  auto* pipe = app.add_subcommand("pipeline",
                                  "Load into Shared storage, extract the largest component, hitting times on it "
                                  "(zero-copy); without GRAPH, on a generated graph");
  add_graph_input(pipe, *a, "Input graph (default: generate --kind, kron scale 16)", false);
  pipe->add_option("--kind", a->kind, "Generator when no GRAPH: kron | urand | grid")
      ->check(CLI::IsMember({"kron", "urand", "grid"}));
  pipe->add_option("--target", a->targets, "Target vertex ids, file ids (default: the highest-degree vertex)")
      ->delimiter(',')
      ->check(kVertexId);
  pipe->add_option("-o,--output", a->output, "Write 'vertex time' lines for the largest component" + kOutputNote);
  add_components_algorithm(pipe, *a, false);
  add_input_options(pipe, *a);
  add_symmetric_option(pipe, *a);
  add_generator_options(pipe, *a);
  add_hitting_options(pipe, *a);
  pipe->add_option("--analysis", a->analysis,
                   "Where the hitting-time analysis runs: inprocess (default), process (a separate tessera-analyze "
                   "job on the Shared arrays) or container (the same inside bwrap namespaces)")
      ->check(CLI::IsMember({"inprocess", "process", "container"}));
  pipe->add_option("--analysis-launcher", a->analysis_launcher,
                   std::string("container: the command put before the analysis (SHMDIR = the Shared directory; "
                               "default $TESSERA_ANALYZE_LAUNCHER, else '") + analyze::kDefaultLauncher + "')");
  pipe->add_option("--analysis-control", a->analysis_control,
                   "process: start nothing; wait for a user-started 'tessera-analyze --control PATH' on this path");
  pipe->add_option("--analysis-attach-timeout", a->analysis_attach_timeout,
                   "Seconds for the analysis to start and attach (default 60)")->check(CLI::PositiveNumber);
  pipe->add_option("--analysis-timeout", a->analysis_timeout, "Seconds for the whole analysis (default 3600)")
      ->check(CLI::PositiveNumber);
  add_common(pipe, *a);
  pipe->callback(set(run_pipeline));
}

}  // namespace tessera::cli
