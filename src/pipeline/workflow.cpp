// The graph workflows (include/tessera/pipeline/workflow.hpp).
#include "tessera/pipeline/workflow.hpp"

#include <atomic>
#include <cinttypes>
#include <cstdio>

#include "tessera/graph/components.hpp"
#include "tessera/graph/strong_components.hpp"
#include "tessera/linalg/hitting_summary.hpp"
#include "tessera/runtime/collective.hpp"
#include "tessera/runtime/error.hpp"
#include "tessera/runtime/memory.hpp"

namespace tessera::pipeline {

using nlohmann::json;

int Result::exit_code() const {
  return hitting && hitting->solve.status == linalg::SolveStatus::not_converged ? 3 : 0;
}

void check_options(const Options& o, bool analysis) {
  if (o.input.path.empty()) spec_of(o.input);
  if (analysis) make_backend(resolved(o.analysis))->check();
}

namespace {

std::string algorithm_name(const std::string& algorithm) {
  if (algorithm == "scc") return "trimming and colouring";
  if (algorithm == "afforest") return "Afforest (local union-find, sampling, hooking across ranks)";
  return algorithm == "lp" ? "label propagation" : "FastSV";
}

graph::Components components_of(const graph::EdgeList& g, const std::string& algorithm, Progress& p) {
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

void check_algorithm(const std::string& algorithm, bool all) {
  if (algorithm == "afforest" || algorithm == "lp" || algorithm == "fastsv") return;
  if (all && (algorithm == "all" || algorithm == "both")) return;
  throw ConfigError("the components algorithm must be afforest, lp or fastsv" + std::string(all ? " (or all)" : "") +
                    ", not '" + algorithm + "'");
}

// Names of a pipeline's Shared arrays: one set per call in this process.
std::string shared_base(Runtime& rt) {
  static std::atomic<int> calls{0};
  const int n = calls++;
  return "tessera-pipeline-" + rt.job_id() + (n ? "-" + std::to_string(n) : "");
}

// From the undirected graph on: components, the largest component into
// Shared storage, hitting times on it.
Result pipeline_on(const graph::EdgeList& g, const graph::IdMap& ids, const std::string& name, json j,
                   const Options& a, Progress& p) {
  Runtime& rt = g.runtime();
  check_walk_weights(g, ids);
  j["graph"] = graph_json(g);
  AnonymousMemoryMeter heap(rt.comm());
  auto c = components_of(g, a.algorithm, p);
  p.step("extracting the largest component into Shared storage");
  auto lcc = graph::largest_component(g, c.labels, StorageOptions::shared(name + "-lcc"));
  j["components"] = components_json(c, lcc.summary, a.algorithm, ids.file_id(lcc.summary.largest_label));
  j["lcc"] = graph_json(lcc.graph);
  p.step("largest component: " + std::to_string(lcc.graph.vertices()) + " of " +
         count_of(g.vertices(), "vertex", "vertices") + ", " + count_of(lcc.graph.edges(), "edge") + ", in " +
         lcc.graph.src().metadata_path());
  auto lcc_ids = ids.compose(lcc.original_ids);
  std::vector<std::uint64_t> targets = a.targets.empty()
                                           ? std::vector<std::uint64_t>{linalg::highest_degree_vertex(lcc.graph)}
                                           : find_targets(lcc_ids, a.targets, "the largest component");
  graph::PendingOutputs outputs(rt);
  auto h = hitting_step(lcc.graph, lcc_ids, targets, true, a.analysis, p, a.output, &outputs);
  const std::uint64_t growth = heap.growth_bytes();
  const std::uint64_t edge_bytes = lcc.graph.edges() * (16 + (lcc.graph.weighted() ? 8 : 0));
  auto mib = [](double bytes) {
    char buf[32];
    std::snprintf(buf, sizeof(buf), "%.1f MiB", bytes / 1048576.0);
    return std::string(buf);
  };
  p.step("done in " + std::to_string(p.elapsed()) + " s. Edge arrays of the largest component: " +
         mib(static_cast<double>(edge_bytes)) + ", shared, never copied; the matrix added " +
         mib(h.json["matrix_extra_bytes"].get<double>()) + "; anonymous (heap) memory grew " +
         mib(static_cast<double>(growth)) + " over all ranks (vertex arrays, aggregation buffers)");
  j["hitting"] = std::move(h.json);
  j["edge_array_bytes"] = edge_bytes;
  j["anonymous_memory_growth_bytes"] = growth;
  outputs.commit();
  return {std::move(j), std::move(h.result), lcc_ids.local_file_ids()};
}

}  // namespace

Result run_write(Runtime& rt, const Options& a, Progress& p) {
  if (a.output.empty()) throw ConfigError("name the output graph (.el, .wel, .mtx or a .tsg directory)");
  check_options(a, false);
  graph::check_output_path(rt, a.output);
  auto g = load(rt, a.input, p).graph;
  describe(p, g);
  p.step("writing " + a.output);
  graph::WriteOptions w;
  w.group_access = a.group_access;
  graph::write_graph(g, a.output, w);
  return {json{{"command", a.input.path.empty() ? "gen" : "convert"},
               {"input", input_name(a.input)},
               {"output", a.output},
               {"stats", graph_json(g)}},
          std::nullopt, {}};
}

Result run_components(Runtime& rt, const Options& a, Progress& p) {
  check_options(a, false);
  if (!a.strong) check_algorithm(a.algorithm, true);
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
  if (!a.output.empty()) graph::check_output_path(rt, a.output, graph::OutputKind::text_lines);
  std::optional<graph::LoadedGraph> loaded_slot;
  timed(a.input.path.empty() ? "generate" : "read", [&] { loaded_slot.emplace(load(rt, a.input, p)); });
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
          [&] { found.emplace(components_of(undirected && alg != "afforest" ? *undirected : loaded.graph, alg, p)); });
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
        p.step("writing " + a.output);
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
  return {std::move(j), std::nullopt, {}};
}

Result run_lcc(Runtime& rt, const Options& a, Progress& p) {
  if (a.output.empty()) throw ConfigError("name the output graph of the largest component");
  check_options(a, false);
  check_algorithm(a.algorithm, false);
  graph::check_output_path(rt, a.output);
  if (!a.ids_output.empty()) graph::check_output_path(rt, a.ids_output, graph::OutputKind::text_lines);
  auto loaded = load(rt, a.input, p);
  describe(p, loaded.graph);
  graph::check_graph_format(a.output, loaded.graph.weighted());
  auto c = components_of(loaded.graph, a.algorithm, p);
  p.step("extracting the largest component");
  auto lcc = graph::largest_component(loaded.graph, c.labels);
  describe(p, lcc.graph);
  graph::PendingOutputs outputs(rt);
  p.step("writing " + a.output);
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
    p.step("writing " + a.ids_output);
    graph::write_vertex_values(out_ids, std::span<const std::uint64_t>(file_ids), a.ids_output,
                               {"lcc_id", "file_id", "nan", &outputs});
  }
  outputs.commit();
  return {json{{"command", "lcc"},
               {"output", a.output},
               {"input", graph_json(loaded.graph)},
               {"components",
                components_json(c, lcc.summary, a.algorithm, loaded.ids.file_id(lcc.summary.largest_label))},
               {"lcc", graph_json(lcc.graph)}},
          std::nullopt, {}};
}

Result run_hitting(Runtime& rt, const Options& a, Progress& p) {
  if (a.targets.empty()) throw ConfigError("name at least one target vertex");
  check_options(a, true);
  if (!a.output.empty()) graph::check_output_path(rt, a.output, graph::OutputKind::text_lines);
  auto loaded = load(rt, a.input, p);
  describe(p, loaded.graph);
  auto targets = find_targets(loaded.ids, a.targets, where(a.input));
  make_undirected(loaded, p, "a random walk needs an undirected graph");
  check_walk_weights(loaded.graph, loaded.ids);
  graph::PendingOutputs outputs(rt);
  auto h = hitting_step(loaded.graph, loaded.ids, targets, false, a.analysis, p, a.output, &outputs);
  outputs.commit();
  return {json{{"command", "hitting"}, {"stats", graph_json(loaded.graph)}, {"hitting", std::move(h.json)}},
          std::move(h.result), loaded.ids.local_file_ids()};
}

Result run_hitting(const graph::EdgeList& given, const graph::IdMap& given_ids, bool connected, const Options& a,
                   Progress& p) {
  if (a.targets.empty()) throw ConfigError("name at least one target vertex");
  check_options(a, true);
  Runtime& rt = given.runtime();
  if (!a.output.empty()) graph::check_output_path(rt, a.output, graph::OutputKind::text_lines);
  auto targets = find_targets(given_ids, a.targets, "the graph");
  // A random walk needs an undirected graph: a directed one is symmetrized
  // (a copy), its id map following the new vertex ranges.
  std::optional<graph::LoadedGraph> undirected;
  if (given.directed()) {
    p.step("symmetrizing (a random walk needs an undirected graph)");
    auto s = given.symmetrized();
    auto ids = given_ids.redistributed(s.vertex_ranges());
    undirected.emplace(graph::LoadedGraph{std::move(s), std::move(ids)});
  }
  const graph::EdgeList& g = undirected ? undirected->graph : given;
  const graph::IdMap& ids = undirected ? undirected->ids : given_ids;
  check_walk_weights(g, ids);
  graph::PendingOutputs outputs(rt);
  auto h = hitting_step(g, ids, targets, connected, a.analysis, p, a.output, &outputs);
  outputs.commit();
  return {json{{"command", "hitting"}, {"stats", graph_json(g)}, {"hitting", std::move(h.json)}}, std::move(h.result),
          ids.local_file_ids()};
}

Result run_pipeline(Runtime& rt, const Options& a, Progress& p) {
  check_options(a, true);
  check_algorithm(a.algorithm, false);
  if (!a.output.empty()) graph::check_output_path(rt, a.output, graph::OutputKind::text_lines);
  const std::string name = shared_base(rt);
  json j = {{"command", "pipeline"}, {"ranks", rt.size()}, {"input", input_name(a.input)}};
  auto loaded = load(rt, a.input, p, StorageOptions::shared(name));
  describe(p, loaded.graph);
  p.step("loaded into Shared storage: " + loaded.graph.src().metadata_path());
  find_targets(loaded.ids, a.targets, where(a.input));
  make_undirected(loaded, p, "weak components, undirected walk; into Shared storage", StorageOptions::shared(name + "-sym"));
  return pipeline_on(loaded.graph, loaded.ids, name, std::move(j), a, p);
}

Result run_pipeline(const graph::EdgeList& given, const graph::IdMap& given_ids, const Options& a, Progress& p) {
  check_options(a, true);
  check_algorithm(a.algorithm, false);
  Runtime& rt = given.runtime();
  if (!a.output.empty()) graph::check_output_path(rt, a.output, graph::OutputKind::text_lines);
  const std::string name = shared_base(rt);
  json j = {{"command", "pipeline"}, {"ranks", rt.size()}, {"input", "a graph in memory"}};
  find_targets(given_ids, a.targets, "the graph");
  if (!given.directed()) return pipeline_on(given, given_ids, name, std::move(j), a, p);
  p.step("symmetrizing (weak components, undirected walk; into Shared storage)");
  auto g = given.symmetrized(StorageOptions::shared(name + "-sym"));
  auto ids = given_ids.redistributed(g.vertex_ranges());
  return pipeline_on(g, ids, name, std::move(j), a, p);
}

}  // namespace tessera::pipeline
