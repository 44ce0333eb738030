// tessera gen | convert | cc | lcc | hitting | pipeline: the graph workflow.
// Long steps print progress on rank 0 (stderr); --json prints one JSON
// document on stdout at the end.
#include "commands.hpp"

#include <unistd.h>

#include <chrono>
#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "tessera/comm/aggregators.hpp"
#include "tessera/graph/components.hpp"
#include "tessera/graph/generators.hpp"
#include "tessera/graph/io.hpp"
#include "tessera/linalg/crs_matrix.hpp"
#include "tessera/linalg/edge_list_matrix.hpp"
#include "tessera/linalg/hitting_times.hpp"
#include "tessera/runtime/collective.hpp"
#include "tessera/runtime/memory.hpp"
#include "tessera/runtime/wait.hpp"

namespace tessera::cli {

namespace {

using Clock = std::chrono::steady_clock;
using nlohmann::json;

struct GraphArgs {
  // input
  std::string input;
  int base = -1;
  bool relabel = false, undirected = false;
  // generator
  std::string kind = "kron";
  int scale = 16, edge_factor = 16;
  std::string dims = "100x100";
  std::uint64_t seed = 1;
  double delete_fraction = 0;
  bool permute = false;
  // outputs and algorithms
  std::string output;
  std::string ids_output;  // lcc: "new_id file_id" lines
  std::string algorithm = "fastsv";
  std::string matrix = "edgelist";
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

graph::GraphSpec spec_of(const GraphArgs& a) {
  graph::GraphSpec s;
  auto kind = graph::parse_graph_kind(a.kind);
  if (kind == graph::GraphSpec::Kind::grid) {
    std::vector<std::uint64_t> dims;
    std::stringstream ss(a.dims);
    std::string part;
    while (std::getline(ss, part, 'x')) {
      try {
        dims.push_back(std::stoull(part));
      } catch (const std::exception&) {
        throw ConfigError("--dims '" + a.dims + "' is not ROWSxCOLS or XxYxZ");
      }
    }
    s = graph::GraphSpec::grid(dims, a.seed);
  } else if (kind == graph::GraphSpec::Kind::kron) {
    s = graph::GraphSpec::kronecker(a.scale, a.edge_factor, a.seed);
  } else {
    s = graph::GraphSpec::uniform(a.scale, a.edge_factor, a.seed);
  }
  s.delete_fraction = a.delete_fraction;
  s.permute = s.permute || a.permute;
  return s;
}

// Reads GRAPH, or generates one when no file was named.
graph::LoadedGraph load(Runtime& rt, const GraphArgs& a, Progress& progress, const StorageOptions& storage = {}) {
  if (a.input.empty()) {
    auto spec = spec_of(a);
    progress.step("generating " + spec.describe());
    return {graph::generate(rt, spec, storage), std::nullopt};
  }
  progress.step("reading " + a.input + " (" + graph::format_name(graph::format_of(a.input)) + ")");
  graph::ReadOptions o;
  if (a.base >= 0) o.base = a.base;
  o.relabel = a.relabel;
  o.undirected = a.undirected;
  o.storage = storage;
  return graph::read_graph(rt, a.input, o);
}

json graph_json(const graph::EdgeList& g) {
  return {{"vertices", g.vertices()}, {"edges", g.edges()}, {"directed", g.directed()},
          {"weighted", g.weighted()}, {"edge_imbalance", g.edge_imbalance()}};
}

void describe(Progress& p, const graph::EdgeList& g) {
  p.step(std::to_string(g.vertices()) + " vertices, " + std::to_string(g.edges()) + " edges (" +
         (g.directed() ? "directed" : "undirected") + (g.weighted() ? ", weighted" : "") + ")");
}

void finish(Runtime& rt, const GraphArgs& a, const json& j) {
  if (rt.rank() == 0 && a.json) std::printf("%s\n", j.dump().c_str());
}

// File ids (as the user sees them) of local vertices, or the ids themselves.
// The global index holding `id` in an id map that increases with the index
// (relabelling and the largest component keep vertex order), or ~0.
std::uint64_t index_of(Runtime& rt, const DistArray<std::uint64_t>& ascending_ids, std::uint64_t id) {
  std::uint64_t found = ~0ull;
  auto ids = ascending_ids.local();
  auto it = std::lower_bound(ids.begin(), ids.end(), id);
  if (it != ids.end() && *it == id) found = ascending_ids.local_begin() + static_cast<std::uint64_t>(it - ids.begin());
  return all_reduce<std::uint64_t>(rt.comm(), found, MPI_MIN);
}

std::uint64_t to_internal(Runtime& rt, const graph::LoadedGraph& g, std::uint64_t file_id) {
  if (!g.original_ids) return file_id;
  std::uint64_t found = index_of(rt, *g.original_ids, file_id);
  if (found == ~0ull) throw RangeError("vertex " + std::to_string(file_id) + " does not occur in the graph file");
  return found;
}

graph::Components run_components(const graph::EdgeList& g, const std::string& algorithm, Progress& p) {
  graph::ComponentsOptions o;
  o.on_round = [&p](int round, std::uint64_t changed, double) {
    p.tick(changed == 0, "round %d: %" PRIu64 " labels changed", round, changed);
  };
  if (algorithm == "lp") return graph::label_propagation(g, o);
  if (algorithm == "fastsv") return graph::fastsv(g, o);
  throw ConfigError("unknown components algorithm '" + algorithm + "' (lp or fastsv)");
}

json components_json(const graph::Components& c, const graph::ComponentSummary& s, const std::string& algorithm) {
  return {{"algorithm", algorithm}, {"rounds", c.rounds},           {"seconds", c.seconds},
          {"components", s.count},  {"largest_size", s.largest_size}, {"largest_label", s.largest_label},
          {"isolated_vertices", s.isolated}};
}

// gen and convert: a graph (generated or read), written to OUT.
int run_write(const GraphArgs& a) {
  if (a.output.empty()) throw ConfigError("name the output with -o OUT (.el, .wel, .mtx or a .tsg directory)");
  Runtime rt;
  Progress p(rt, a);
  auto g = load(rt, a, p).graph;
  describe(p, g);
  p.step("writing " + a.output);
  graph::write_graph(g, a.output);
  finish(rt, a, {{"command", a.input.empty() ? "gen" : "convert"},
                 {"input", a.input.empty() ? spec_of(a).describe() : a.input},
                 {"output", a.output},
                 {"stats", graph_json(g)}});
  return 0;
}

int run_cc(const GraphArgs& a) {
  Runtime rt;
  Progress p(rt, a);
  auto loaded = load(rt, a, p);
  describe(p, loaded.graph);
  json j = {{"command", "cc"}, {"stats", graph_json(loaded.graph)}, {"results", json::array()}};
  std::vector<std::string> algorithms = a.algorithm == "both" ? std::vector<std::string>{"lp", "fastsv"}
                                                              : std::vector<std::string>{a.algorithm};
  for (auto& alg : algorithms) {
    p.step("connected components by " + std::string(alg == "lp" ? "label propagation" : "FastSV"));
    auto c = run_components(loaded.graph, alg, p);
    auto s = graph::summarize(loaded.graph, c.labels);
    std::uint64_t largest = s.largest_label;
    if (loaded.original_ids) {
      SrcAggregator<std::uint64_t> read(*loaded.original_ids);
      read.get(largest, largest);
    }
    p.step(std::to_string(s.count) + " components in " + std::to_string(c.rounds) + " rounds (" +
           std::to_string(c.seconds) + " s); the largest has " + std::to_string(s.largest_size) +
           " vertices, smallest vertex " + std::to_string(largest));
    auto r = components_json(c, s, alg);
    r["largest_label"] = largest;
    j["results"].push_back(r);
  }
  finish(rt, a, j);
  return 0;
}

int run_lcc(const GraphArgs& a) {
  Runtime rt;
  Progress p(rt, a);
  auto loaded = load(rt, a, p);
  describe(p, loaded.graph);
  p.step("connected components (FastSV)");
  auto c = run_components(loaded.graph, "fastsv", p);
  p.step("extracting the largest component");
  auto lcc = graph::largest_component(loaded.graph, c.labels);
  describe(p, lcc.graph);
  p.step("writing " + a.output);
  graph::write_graph(lcc.graph, a.output);
  if (!a.ids_output.empty()) {  // new id -> id in the file (through --relabel's map too)
    auto ids = lcc.original_ids.local();
    std::vector<std::uint64_t> file_ids(ids.begin(), ids.end());
    if (loaded.original_ids) {
      SrcAggregator<std::uint64_t> read(*loaded.original_ids);
      for (auto& v : file_ids) read.get(v, v);
    }
    std::string body;
    char buf[48];
    for (std::size_t i = 0; i < file_ids.size(); ++i) {
      int n = std::snprintf(buf, sizeof(buf), "%" PRIu64 " %" PRIu64 "\n", lcc.original_ids.local_begin() + i,
                            file_ids[i]);
      body.append(buf, static_cast<std::size_t>(n));
    }
    p.step("writing " + a.ids_output);
    graph::write_text_file(rt, a.ids_output, "# lcc_id file_id\n", body);
  }
  finish(rt, a, {{"command", "lcc"}, {"output", a.output}, {"input", graph_json(loaded.graph)},
                 {"components", components_json(c, lcc.summary, "fastsv")}, {"lcc", graph_json(lcc.graph)}});
  return 0;
}

// Hitting times: summary, and optionally "vertex time" lines (file ids).
json solve_hitting(Runtime& rt, const GraphArgs& a, Progress& p, const graph::EdgeList& g,
                   const DistArray<std::uint64_t>* ids, std::vector<std::uint64_t> targets) {
  std::unique_ptr<linalg::EdgeListMatrix> el;
  std::unique_ptr<linalg::CrsMatrix> crs;
  const linalg::RowMatrix* a_matrix = nullptr;
  p.step(a.matrix == "crs" ? "building the CRS copy of the matrix" : "matrix: EdgeListMatrix on the edge arrays (no copy)");
  el = std::make_unique<linalg::EdgeListMatrix>(g);
  a_matrix = el.get();
  if (a.matrix == "crs") {
    crs = std::make_unique<linalg::CrsMatrix>(*el);
    a_matrix = crs.get();
  } else if (a.matrix != "edgelist") {
    throw ConfigError("--matrix must be edgelist or crs, not '" + a.matrix + "'");
  }
  linalg::HittingOptions o;
  o.cg.tolerance = a.tolerance;
  o.cg.max_iterations = a.max_iterations;
  o.cg.on_iteration = [&p](int it, double res, double) { p.tick(false, "CG iteration %d: relative residual %.3e", it, res); };
  p.step("hitting times: CG with Jacobi on the grounded Laplacian");
  auto h = linalg::hitting_times(g, *a_matrix, targets, o);
  p.tick(true, "CG stopped after %d iterations: relative residual %.3e (%s)", h.solve.iterations,
         h.solve.relative_residual, h.solve.converged ? "converged" : "NOT converged");

  auto t = h.times.local();
  double lo = INFINITY, hi = 0, sum = 0;
  std::uint64_t count = 0, far = 0;
  for (std::size_t i = 0; i < t.size(); ++i)
    if (!std::isnan(t[i])) {
      lo = std::min(lo, t[i]);
      if (t[i] > hi) hi = t[i], far = g.local_vertex_begin() + i;
      sum += t[i];
      ++count;
    }
  double global_hi = all_reduce(rt.comm(), hi, MPI_MAX);
  std::uint64_t farthest = all_reduce<std::uint64_t>(rt.comm(), hi == global_hi && count ? far : ~0ull, MPI_MIN);
  lo = all_reduce(rt.comm(), lo, MPI_MIN);
  sum = all_reduce(rt.comm(), sum, MPI_SUM);
  count = all_reduce(rt.comm(), count, MPI_SUM);
  std::vector<std::uint64_t> file_ids(t.size());
  for (std::size_t i = 0; i < t.size(); ++i) file_ids[i] = g.local_vertex_begin() + i;
  if (ids) std::copy(ids->local().begin(), ids->local().end(), file_ids.begin());
  if (ids && farthest != ~0ull) {
    SrcAggregator<std::uint64_t> read(*ids);
    read.get(farthest, farthest);
  }
  if (!a.output.empty()) {
    p.step("writing " + a.output);
    std::string body;
    char buf[64];
    for (std::size_t i = 0; i < t.size(); ++i) {
      int n = std::isnan(t[i]) ? std::snprintf(buf, sizeof(buf), "%" PRIu64 " unreachable\n", file_ids[i])
                               : std::snprintf(buf, sizeof(buf), "%" PRIu64 " %.17g\n", file_ids[i], t[i]);
      body.append(buf, static_cast<std::size_t>(n));
    }
    graph::write_text_file(rt, a.output, "# vertex hitting_time\n", body);
  }
  p.step("reachable vertices " + std::to_string(count) + ", unreachable " + std::to_string(h.unreachable) +
         "; mean hitting time " + std::to_string(count ? sum / static_cast<double>(count) : 0.0) + ", max " +
         std::to_string(global_hi) + " (vertex " + std::to_string(farthest) + ")");
  return {{"matrix", a.matrix},
          {"targets", h.targets},
          {"iterations", h.solve.iterations},
          {"converged", h.solve.converged},
          {"relative_residual", h.solve.relative_residual},
          {"solve_seconds", h.solve.seconds},
          {"seconds_per_iteration", h.solve.seconds_per_iteration()},
          {"setup_seconds", h.setup_seconds},
          {"reachable", count},
          {"unreachable", h.unreachable},
          {"min", count ? lo : 0.0},
          {"mean", count ? sum / static_cast<double>(count) : 0.0},
          {"max", global_hi},
          {"farthest_vertex", farthest},
          {"matrix_extra_bytes", all_reduce<std::uint64_t>(rt.comm(), a_matrix->extra_memory_bytes(), MPI_SUM)}};
}

int run_hitting(const GraphArgs& a) {
  Runtime rt;
  Progress p(rt, a);
  if (a.targets.empty()) throw ConfigError("name at least one --target vertex");
  auto loaded = load(rt, a, p);
  describe(p, loaded.graph);
  if (loaded.graph.directed()) {
    p.step("symmetrizing (a random walk needs an undirected graph)");
    loaded.graph = loaded.graph.symmetrized();
  }
  std::vector<std::uint64_t> targets;
  for (auto t : a.targets) targets.push_back(to_internal(rt, loaded, t));
  auto r = solve_hitting(rt, a, p, loaded.graph, loaded.original_ids ? &*loaded.original_ids : nullptr, targets);
  finish(rt, a, {{"command", "hitting"}, {"stats", graph_json(loaded.graph)}, {"hitting", r}});
  return r["converged"].get<bool>() ? 0 : 3;
}

int run_pipeline(const GraphArgs& a) {
  Runtime rt;
  Progress p(rt, a);
  const std::string name = "tessera-pipeline-" + rt.job_id();
  json j = {{"command", "pipeline"}, {"ranks", rt.size()}};
  auto loaded = load(rt, a, p, StorageOptions::shared(name));
  j["input"] = a.input.empty() ? json(spec_of(a).describe()) : json(a.input);
  describe(p, loaded.graph);
  p.step("loaded into Shared storage: " + loaded.graph.src().metadata_path());
  if (loaded.graph.directed()) {
    p.step("symmetrizing into Shared storage (weak components, undirected walk)");
    loaded.graph = loaded.graph.symmetrized(StorageOptions::shared(name + "-sym"));
  }
  j["graph"] = graph_json(loaded.graph);
  std::uint64_t before = all_reduce<std::uint64_t>(rt.comm(), (anonymous_memory_bytes() / 1024), MPI_SUM);

  p.step("connected components (FastSV)");
  auto c = run_components(loaded.graph, a.algorithm, p);
  p.step("extracting the largest component into Shared storage");
  auto lcc = graph::largest_component(loaded.graph, c.labels, StorageOptions::shared(name + "-lcc"));
  j["components"] = components_json(c, lcc.summary, a.algorithm);
  j["lcc"] = graph_json(lcc.graph);
  p.step("largest component: " + std::to_string(lcc.graph.vertices()) + " of " +
         std::to_string(loaded.graph.vertices()) + " vertices, " + std::to_string(lcc.graph.edges()) + " edges, in " +
         lcc.graph.src().metadata_path());

  // The new-to-file id map: LCC id -> loaded id -> file id.
  DistArray<std::uint64_t> file_ids(rt, lcc.graph.vertex_ranges());
  {
    auto src = loaded.original_ids ? &*loaded.original_ids : nullptr;
    std::copy(lcc.original_ids.local().begin(), lcc.original_ids.local().end(), file_ids.local().begin());
    if (src) {
      SrcAggregator<std::uint64_t> read(*src);
      for (auto& v : file_ids.local()) read.get(v, v);
    }
  }
  // Default target: the vertex of highest degree (ties: smallest id).
  std::vector<std::uint64_t> targets;
  if (!a.targets.empty()) {
    for (auto t : a.targets) {
      std::uint64_t found = index_of(rt, file_ids, t);
      if (found == ~0ull) throw RangeError("target vertex " + std::to_string(t) + " is not in the largest component");
      targets.push_back(found);
    }
  } else {
    auto deg = lcc.graph.out_degrees();
    std::uint64_t best = 0, at = ~0ull;
    for (std::size_t i = 0; i < deg.local().size(); ++i)
      if (deg.local()[i] > best) best = deg.local()[i], at = deg.local_begin() + i;
    std::uint64_t top = all_reduce(rt.comm(), best, MPI_MAX);
    targets.push_back(all_reduce<std::uint64_t>(rt.comm(), best == top ? at : ~0ull, MPI_MIN));
  }
  auto r = solve_hitting(rt, a, p, lcc.graph, &file_ids, targets);
  std::uint64_t after = all_reduce<std::uint64_t>(rt.comm(), (anonymous_memory_bytes() / 1024), MPI_SUM);
  r["target_file_ids"] = a.targets.empty() ? json::array() : json(a.targets);
  j["hitting"] = r;
  j["edge_array_bytes"] = lcc.graph.edges() * (16 + (lcc.graph.weighted() ? 8 : 0));
  j["anonymous_memory_growth_bytes"] = (after > before ? after - before : 0) * 1024;
  auto mib = [](double bytes) {
    char buf[32];
    std::snprintf(buf, sizeof(buf), "%.1f MiB", bytes / 1048576.0);
    return std::string(buf);
  };
  p.step("done in " + std::to_string(p.elapsed()) + " s. Edge arrays of the largest component: " +
         mib(static_cast<double>(lcc.graph.edges()) * 16) + ", shared, never copied; the matrix added " +
         mib(r["matrix_extra_bytes"].get<double>()) + "; anonymous (heap) memory grew " +
         mib(static_cast<double>(after > before ? after - before : 0) * 1024) +
         " over all ranks (vertex arrays, aggregation buffers)");
  barrier(rt.comm());
  finish(rt, a, j);
  return r["converged"].get<bool>() ? 0 : 3;
}

void add_input_options(CLI::App* c, GraphArgs& a) {
  c->add_option("--base", a.base, "First vertex id of a text file: 0 or 1 (default 1 for .mtx, else 0)");
  c->add_flag("--relabel", a.relabel, "Number the ids that occur 0..n-1 (sparse SNAP ids)");
  c->add_flag("--undirected", a.undirected, "Add the reverse of every edge");
}
void add_generator_options(CLI::App* c, GraphArgs& a) {
  c->add_option("--scale", a.scale, "kron/urand: 2^scale vertices")->check(CLI::Range(1, 40));
  c->add_option("--edge-factor", a.edge_factor, "kron/urand: candidate edges per vertex")->check(CLI::Range(1, 1024));
  c->add_option("--dims", a.dims, "grid: ROWSxCOLS or XxYxZ");
  c->add_option("--seed", a.seed, "Random seed (the graph does not depend on the rank count)");
  c->add_option("--delete", a.delete_fraction, "Drop each candidate edge with this probability")->check(CLI::Range(0.0, 0.999999));
  c->add_flag("--permute", a.permute, "Scramble vertex ids (always on for kron)");
}
void add_hitting_options(CLI::App* c, GraphArgs& a) {
  c->add_option("--tolerance", a.tolerance, "CG relative residual to stop at")->check(CLI::PositiveNumber);
  c->add_option("--max-iterations", a.max_iterations, "CG iteration cap")->check(CLI::PositiveNumber);
  c->add_option("--matrix", a.matrix, "edgelist (no copy) or crs (the conventional copy)");
}
void add_common(CLI::App* c, GraphArgs& a) {
  c->add_flag("--json", a.json, "Print the results as one JSON document on stdout");
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
  gen->add_option("kind", a->kind, "kron | urand | grid")->required();
  gen->add_option("-o,--output", a->output, "Output: .el, .mtx or a binary directory (.tsg)");
  gen->add_option("output", a->output, "Output (older positional form of -o)");
  add_generator_options(gen, *a);
  add_common(gen, *a);
  gen->callback(set(run_write));

  auto* conv = app.add_subcommand("convert", "Convert between .el/.wel, .mtx and the binary format");
  conv->add_option("input", a->input, "Input graph")->required()->check(CLI::ExistingPath);
  conv->add_option("-o,--output", a->output, "Output graph");
  conv->add_option("output", a->output, "Output graph (older positional form of -o)");
  add_input_options(conv, *a);
  add_common(conv, *a);
  conv->callback(set(run_write));

  auto* cc = app.add_subcommand("cc", "Connected components (weak for directed graphs)");
  cc->add_option("graph", a->input, "Input graph")->required()->check(CLI::ExistingPath);
  cc->add_option("--algorithm", a->algorithm, "lp (label propagation), fastsv, or both")
      ->check(CLI::IsMember({"lp", "fastsv", "both"}));
  add_input_options(cc, *a);
  add_common(cc, *a);
  cc->callback(set(run_cc));

  auto* lcc = app.add_subcommand("lcc", "Extract the largest connected component");
  lcc->add_option("graph", a->input, "Input graph")->required()->check(CLI::ExistingPath);
  lcc->add_option("-o,--output", a->output, "Output graph")->required();
  lcc->add_option("--ids", a->ids_output, "Also write 'lcc_id file_id' lines (the map from new to old ids)");
  add_input_options(lcc, *a);
  add_common(lcc, *a);
  lcc->callback(set(run_lcc));

  auto* hit = app.add_subcommand("hitting", "Random-walk hitting times to a set of target vertices");
  hit->add_option("graph", a->input, "Input graph")->required()->check(CLI::ExistingPath);
  hit->add_option("--target", a->targets, "Target vertex ids (file ids), comma separated")->delimiter(',')->required();
  hit->add_option("-o,--output", a->output, "Write 'vertex time' lines (file ids; 'unreachable')");
  add_input_options(hit, *a);
  add_hitting_options(hit, *a);
  add_common(hit, *a);
  hit->callback(set(run_hitting));

  auto* pipe = app.add_subcommand("pipeline",
                                  "Load into Shared storage, extract the largest component, hitting times on it "
                                  "(zero-copy); without GRAPH, on a generated graph");
  pipe->add_option("graph", a->input, "Input graph (default: generate --kind, kron scale 16)")->check(CLI::ExistingPath);
  pipe->add_option("--kind", a->kind, "Generator when no GRAPH: kron | urand | grid");
  pipe->add_option("--target", a->targets, "Target vertex ids (default: the highest-degree vertex)")->delimiter(',');
  pipe->add_option("-o,--output", a->output, "Write 'vertex time' lines for the largest component");
  pipe->add_option("--algorithm", a->algorithm, "Components: fastsv or lp")->check(CLI::IsMember({"lp", "fastsv"}));
  add_input_options(pipe, *a);
  add_generator_options(pipe, *a);
  add_hitting_options(pipe, *a);
  add_common(pipe, *a);
  pipe->callback(set(run_pipeline));
}

}  // namespace tessera::cli
