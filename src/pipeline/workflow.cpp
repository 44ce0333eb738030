// The graph workflows (include/tessera/pipeline/workflow.hpp).
#include "tessera/pipeline/workflow.hpp"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <filesystem>
#include <cinttypes>
#include <cstdio>
#include <limits>

#include "tessera/graph/components.hpp"
#include "tessera/graph/strong_components.hpp"
#include "tessera/linalg/hitting_summary.hpp"
#include "tessera/runtime/collective.hpp"
#include "tessera/runtime/error.hpp"
#include "tessera/runtime/memory.hpp"
#include "tessera/pipeline/report.hpp"
#include "tessera/resilience/edge_list.hpp"
#include "tessera/runtime/fault_injection.hpp"
#include "stages.hpp"
#include "workflow_parts.hpp"

namespace tessera::pipeline {

using nlohmann::json;

int Result::exit_code() const {
  if (verification_failed) return 3;
  if (hitting) return hitting->solve.status == linalg::SolveStatus::not_converged ? 3 : 0;
  return spectrum && !spectrum->converged ? 3 : 0;
}

Result document_only(nlohmann::json document) {
  Result r;
  r.json = std::move(document);
  return r;
}

OutputPath check_output(Runtime& rt, const Options& a, const std::string& path, graph::OutputKind kind,
                        const char* option) {
  auto out = graph::check_output_path(rt, path, kind);
  if (out.standard_output() && a.document_on_stdout)
    throw ConfigError(std::string(option) + " " + path + " writes to standard output, where --json prints its "
                      "document; write the output to a file, or drop --json");
  return out;
}

void check_options(const Options& o, bool analysis) {
  if (o.input.path.empty()) spec_of(o.input);
  if (analysis) make_backend(resolved(o.analysis))->check();
}

namespace {

std::string algorithm_name(const std::string& algorithm, const Runtime& rt) {
  if (algorithm == "scc") return "trimming and colouring";
  if (algorithm == "afforest")
    return graph::afforest_on_one_node(rt) ? "Afforest (the ranks link in one node-shared parent array, sampling)"
                                           : "Afforest (local union-find, sampling, hooking across ranks)";
  return algorithm == "lp" ? "label propagation" : "FastSV";
}

// The progress each round of `algorithm` reports.
graph::ComponentsOptions reporting(const std::string& algorithm, Progress& p) {
  graph::ComponentsOptions o;
  o.on_round = [&p](int round, std::uint64_t changed, double) {
    p.tick(changed == 0, "round %d: %" PRIu64 " labels changed", round, changed);
  };
  if (algorithm == "scc")
    o.on_round = [&p](int pass, std::uint64_t found, double) {
      p.tick(false, "round %d: %" PRIu64 " vertices placed by colouring", pass, found);
    };
  if (algorithm == "afforest")
    o.on_round = [&p](int round, std::uint64_t pairs, double) {
      p.tick(pairs == 0, "round %d: %" PRIu64 " cut-edge pairs still join two trees", round, pairs);
    };
  return o;
}

graph::Components components_of(const graph::EdgeList& g, const std::string& algorithm, Progress& p) {
  p.step(std::string(algorithm == "scc" ? "strongly" : "connected") + " components by " +
         algorithm_name(algorithm, g.runtime()));
  const auto o = reporting(algorithm, p);
  if (algorithm == "scc") return graph::strong_components(g, o);
  return graph::components_by(algorithm, g, o);
}

// Afforest, the one algorithm that reads a packed graph.
graph::Components components_of(const graph::PackedGraph& g, Progress& p) {
  p.step("connected components by " + algorithm_name("afforest", g.runtime()) + ", on the packed rows");
  return graph::afforest(g, reporting("afforest", p));
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

// --verify on components: check_labels' proof (every label a root at most
// its vertex, one label across every edge, each label's vertices connected)
// and the component sizes summed to the vertex count. Records "verified"
// (and the problem) in `object`; true when right.
template <class Graph>
bool verify_components(const Graph& g, const DistArray<std::uint64_t>& labels, const graph::ComponentSummary& s,
                       json& object, Progress& p, Report& report) {
  p.step("verifying the components (every edge inside one label, each label connected, sizes summed)");
  const bool right = record_verification(report, p, object, "components", [&]() -> std::string {
    if (s.vertices != g.vertices())
      return "the component sizes sum to " + std::to_string(s.vertices) + ", not the graph's " +
             std::to_string(g.vertices()) + " vertices";
    return graph::check_labels(g, labels);
  });
  if (right) p.tick(true, "proved: %s", count_of(s.count, "component").c_str());
  return right;
}

void check_algorithm(const std::string& algorithm, bool all) {
  if (algorithm == "afforest" || algorithm == "lp" || algorithm == "fastsv") return;
  if (all && (algorithm == "all" || algorithm == "both")) return;
  throw ConfigError("the components algorithm must be afforest, lp or fastsv" + std::string(all ? " (or all)" : "") +
                    ", not '" + algorithm + "'");
}

// What the pipeline refuses with --packed, before any work: the options
// whose stages read or keep an EdgeList.
void check_packed_pipeline(const Options& a) {
  if (a.algorithm != "afforest")
    throw ConfigError("--packed finds the components by Afforest, the only algorithm that reads the packed form, "
                      "not " + a.algorithm + ": drop --algorithm " + a.algorithm + " (algorithm=) or --packed");
  if (!a.checkpoint.dir.empty())
    throw ConfigError("--checkpoint keeps each stage's graph as an EdgeList, which --packed gives up: drop "
                      "--checkpoint or --packed");
  check_packed(resolved(a.analysis));
}

// Names of a pipeline's Shared arrays: one set per call in this process.
std::string shared_base(Runtime& rt) {
  static std::atomic<int> calls{0};
  const int n = calls++;
  return "tessera-pipeline-" + rt.job_id() + (n ? "-" + std::to_string(n) : "");
}

// The name of the analysis step in the report.
std::string step_name(const std::string& kind) { return kind == "hitting" ? "hitting times" : kind; }

// A spectral kind takes no targets; hitting times on a whole graph (run_hitting) no other kind.
void check_kind(const Options& a, bool pipeline) {
  const std::string& kind = a.analysis.kind;
  if (!pipeline && kind != "hitting")
    throw ConfigError("the hitting workflow computes hitting times, not the " + kind +
                      " analysis: run the pipeline with that analysis kind, or `tessera spectral --what " + kind + "`");
  if (spectral_kind(kind) && !a.targets.empty())
    throw ConfigError("targets (--target) are hitting-time targets: the " + kind + " analysis takes none");
}

// The components' own fields of the document ("components"), before the
// summary of the largest component is added.
json components_fields(const graph::Components& c, const std::string& algorithm) {
  return {{"algorithm", algorithm}, {"rounds", c.rounds}, {"local_rounds", c.local_rounds},
          {"seconds", c.seconds},   {"extra_bytes", c.extra_bytes}};
}

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// The supervisor's step (pipeline/checkpoint.hpp): a heartbeat, and where an
// injected failure strikes.
void stage_done(Runtime& rt, std::uint64_t stage) { FaultInjection::at_step(rt.rank(), stage); }

struct LargestStage {
  graph::EdgeList graph;  // in Shared storage
  graph::IdMap ids;       // file ids of its vertices
};

// The packed pipeline's: `file_ids` maps the graph that graph.original_ids()
// leads to (the EdgeList packed), where the output's lines go.
struct PackedLargestStage {
  graph::PackedGraph graph;  // in Shared storage; original_ids(): ids in the EdgeList packed
  graph::IdMap ids;          // file ids of its vertices
  graph::IdMap file_ids;
};

// The default hitting-time target: the highest-degree vertex, the smallest
// id among equals (ids in the file's order).
std::uint64_t default_target(const LargestStage& s) { return linalg::highest_degree_vertex(s.graph); }
// The same vertex in the packed numbering: degrees are the EdgeList's, and
// ties go to the smallest id in the EdgeList packed (whose ids keep the
// file's order).
std::uint64_t default_target(const PackedLargestStage& s) {
  const auto& g = s.graph;
  MPI_Comm comm = g.runtime().comm();
  const auto rows = g.rows();
  const auto* original = g.original_ids();
  const std::uint64_t begin = g.local_vertex_begin(), none = std::numeric_limits<std::uint64_t>::max();
  std::uint64_t best = 0, order = none, at = none;
  for (std::size_t i = 0; i < rows.size(); ++i) {
    const std::uint64_t d = rows.degree(i), o = original ? original->local()[i] : begin + i;
    if (d > 0 && (d > best || (d == best && o < order))) best = d, order = o, at = begin + i;
  }
  const std::uint64_t most = all_reduce(comm, best, MPI_MAX);
  const std::uint64_t first = all_reduce(comm, best == most ? order : none, MPI_MIN);
  return all_reduce(comm, best == most && order == first ? at : none, MPI_MIN);
}

void write_answer(const LargestStage& s, const Analyzed& h, const std::string& output, Progress& p,
                  graph::PendingOutputs& outputs) {
  write_result(s.ids, h, output, p, outputs);
}
void write_answer(const PackedLargestStage& s, const Analyzed& h, const std::string& output, Progress& p,
                  graph::PendingOutputs& outputs) {
  write_result(s.graph, s.file_ids, h, output, p, outputs);
}
const char* rows_name(const LargestStage&) { return "edge arrays"; }
const char* rows_name(const PackedLargestStage&) { return "packed rows"; }

// From the undirected graph on: components (unless `restored` holds the
// labels), verified with --verify (nullopt when wrong: j says why), the
// largest component; a checkpoint after each when `store` is given.
// `consumable` (g itself, or null when the caller keeps g): the component is
// then compacted in g's own arrays, never a second copy of the edges;
// otherwise it is copied into Shared storage.
std::optional<LargestStage> largest_of(const graph::EdgeList& g, graph::EdgeList* consumable,
                                       const graph::IdMap& ids, const std::string& name, json& j, const Options& a,
                                       Progress& p, Report& report, StageStore* store,
                                       std::optional<DistArray<std::uint64_t>> restored) {
  Runtime& rt = g.runtime();
  check_walk_weights(g, ids);
  j["graph"] = graph_json(g);
  json cj;
  std::optional<DistArray<std::uint64_t>> labels = std::move(restored);
  if (labels) {
    cj = store->saved().at("components");
  } else {
    const auto t0 = std::chrono::steady_clock::now();
    auto c = report.timed("components", [&] { return components_of(g, a.algorithm, p); });
    const double seconds = seconds_since(t0);
    cj = components_fields(c, a.algorithm);
    labels.emplace(std::move(c.labels));
    if (a.verify && !verify_components(g, *labels, graph::summarize(g, *labels), cj, p, report)) {
      j["components"] = std::move(cj);
      return std::nullopt;  // a wrong labelling is neither kept nor extracted from
    }
    if (store)
      report.timed("checkpoint", [&] {
        store->commit(kLabelled, {{"components", cj}, {"seconds", {{"components", seconds}}}},
                      [&](resilience::CheckpointWriter& w) {
                        resilience::add_edge_list(w, "graph", g);
                        add_id_map(w, "graph", ids);
                        w.add("labels", *labels);
                      });
      });
    stage_done(rt, kLabelled);
  }
  const bool in_place = consumable && consumable->offsets().shrinkable();
  p.step(in_place ? "extracting the largest component in place (the graph's own arrays, compacted)"
                  : "extracting the largest component into Shared storage");
  const auto t0 = std::chrono::steady_clock::now();
  auto lcc = report.timed("largest component", [&] {
    return in_place ? graph::largest_component(std::move(*consumable), *labels)
                    : graph::largest_component(g, *labels, StorageOptions::shared(name + "-lcc"));
  });
  const double seconds = seconds_since(t0);
  labels.reset();
  const auto& s = lcc.summary;
  cj.update(json{{"components", s.count},
                 {"largest_size", s.largest_size},
                 {"largest_label", ids.file_id(s.largest_label)},
                 {"isolated_vertices", s.isolated}});
  j["components"] = cj;
  auto lcc_ids = ids.compose(lcc.original_ids);
  if (store)
    report.timed("checkpoint", [&] {
      store->commit(kLargest, {{"components", cj}, {"graph", j["graph"]}, {"seconds", {{"largest component", seconds}}}},
                    [&](resilience::CheckpointWriter& w) {
                      resilience::add_edge_list(w, "lcc", lcc.graph);
                      add_id_map(w, "lcc", lcc_ids);
                    });
    });
  stage_done(rt, kLargest);
  return LargestStage{std::move(lcc.graph), std::move(lcc_ids)};
}

// The pipeline stopped at components that failed verification (exit status 3).
Result unverified(json j, Report& report, const ArrayBytes& arrays, StageStore* store, const Options& a) {
  if (store) {
    store->finish(a.checkpoint.keep);
    j["checkpoint"] = store->report();
  }
  report.finish(j, arrays);
  Result r = document_only(std::move(j));
  r.verification_failed = true;
  return r;
}

// The analysis of the largest component, its output, the report; the
// checkpoints removed at the end unless kept (or the solve did not converge:
// a rerun with other solver options then starts from them).
template <class Stage>
Result analyse_largest(const Stage& lcc, json j, const Options& a, Progress& p, Report& report,
                       const ArrayBytes& arrays, const AnonymousMemoryMeter& heap, StageStore* store) {
  Runtime& rt = lcc.graph.runtime();
  const auto& lcc_ids = lcc.ids;
  j["lcc"] = graph_json(lcc.graph);
  p.step("largest component: " + std::to_string(lcc.graph.vertices()) + " of " +
         count_of(j["graph"]["vertices"].get<std::uint64_t>(), "vertex", "vertices") + ", " +
         count_of(lcc.graph.edges(), "edge"));
  const bool hitting = a.analysis.kind == "hitting";
  std::vector<std::uint64_t> targets;
  if (hitting) {
    targets = a.targets.empty() ? std::vector<std::uint64_t>{default_target(lcc)}
                                : find_targets(lcc_ids, a.targets, "the largest component");
    std::vector<std::uint64_t> shown_ids(targets);
    lcc_ids.translate(shown_ids);
    std::string list;
    for (auto t : shown_ids) list += (list.empty() ? "" : ", ") + std::to_string(t);
    p.step((shown_ids.size() == 1 ? "target: vertex " : "targets: vertices ") + list +
           (a.targets.empty() ? " (the largest component's highest-degree vertex, the smallest id among equals; "
                                "--targets chooses)"
                              : " (--targets)"));
  }
  AnalysisOptions analysis = a.analysis;
  analysis.steps_before = kLargest;
  auto h = report.timed(step_name(a.analysis.kind),
                        [&] { return analysis_step(lcc.graph, lcc_ids, targets, true, analysis, p); });
  const int iterations = h.hitting ? h.hitting->solve.iterations : h.spectrum ? h.spectrum->iterations : 0;
  FaultInjection::at_step(rt.rank(), kLargest + static_cast<std::uint64_t>(std::max(1, iterations)));
  const std::uint64_t growth = heap.growth_bytes();
  const std::uint64_t edge_bytes = lcc.graph.edge_array_bytes();
  auto mib = [](double bytes) {
    char buf[32];
    std::snprintf(buf, sizeof(buf), "%.1f MiB", bytes / 1048576.0);
    return std::string(buf);
  };
  p.step(std::string(rows_name(lcc)) + " of the largest component: " + mib(static_cast<double>(edge_bytes)) +
         ", shared, never copied; the matrix added " + mib(h.json["matrix_extra_bytes"].template get<double>()) +
         "; anonymous (heap) memory grew " + mib(static_cast<double>(growth)) +
         " over all ranks (vertex arrays, aggregation buffers)");
  j["analysis_kind"] = h.kind;
  j[h.kind] = std::move(h.json);
  j["edge_array_bytes"] = edge_bytes;
  j["anonymous_memory_growth_bytes"] = growth;
  if (!a.output.empty())
    report.timed("write", [&] {
      graph::PendingOutputs outputs(rt);
      write_answer(lcc, h, a.output, p, outputs);
      outputs.commit();
    });
  Result result;
  result.hitting = std::move(h.hitting);
  result.file_ids = lcc_ids.local_file_ids();
  result.spectrum = std::move(h.spectrum);
  if (store) {
    const bool unconverged = result.exit_code() != 0;
    store->finish(a.checkpoint.keep || unconverged);
    if (a.checkpoint.keep || unconverged)
      p.step(std::string("checkpoints kept") +
             (unconverged ? " (the solve did not converge: a rerun with other solver options resumes from them)" : "") +
             "; remove them with `tessera checkpoint rm " + kCheckpointName + " --dir " + a.checkpoint.dir + "`");
    j["checkpoint"] = store->report();
  }
  report.finish(j, arrays);
  result.json = std::move(j);
  return result;
}

// From the undirected graph on, without checkpoints (a graph the caller holds).
Result pipeline_on(const graph::EdgeList& g, graph::EdgeList* consumable, const graph::IdMap& ids,
                   const std::string& name, json j, const Options& a, Progress& p, Report& report,
                   const ArrayBytes& arrays) {
  AnonymousMemoryMeter heap(g.runtime().comm());
  auto lcc = largest_of(g, consumable, ids, name, j, a, p, report, nullptr, std::nullopt);
  if (!lcc) return unverified(std::move(j), report, arrays, nullptr, a);
  return analyse_largest(*lcc, std::move(j), a, p, report, arrays, heap, nullptr);
}

// The packed pipeline from the packed graph on: components (Afforest on the
// packed rows), verified with --verify (nullopt when wrong: j says why), the
// largest component compacted in the packed graph's own arrays.
std::optional<PackedLargestStage> packed_largest_of(PackedInput in, json& j, const Options& a, Progress& p,
                                                    Report& report) {
  Runtime& rt = in.graph.runtime();
  j["graph"] = graph_json(in.graph, in.stats);
  j["packed"] = std::move(in.packed);
  std::optional<DistArray<std::uint64_t>> labels;
  json cj;
  {
    auto c = report.timed("components", [&] { return components_of(in.graph, p); });
    cj = components_fields(c, "afforest");
    labels.emplace(std::move(c.labels));
  }
  if (a.verify && !verify_components(in.graph, *labels, graph::summarize(in.graph, *labels), cj, p, report)) {
    j["components"] = std::move(cj);
    return std::nullopt;  // a wrong labelling is not extracted from
  }
  stage_done(rt, kLabelled);
  p.step("extracting the largest component in place (the packed rows re-coded in their own arrays)");
  auto lcc = report.timed("largest component", [&] { return graph::largest_component(std::move(in.graph), *labels); });
  labels.reset();
  const DistArray<std::uint64_t>* original = lcc.graph.original_ids();
  if (!original) throw Error("the packed largest component lost the ids of the graph packed");
  // Its label in the EdgeList's run: the smallest id, which keeps the file's order.
  std::uint64_t smallest = std::numeric_limits<std::uint64_t>::max();
  for (auto v : original->local()) smallest = std::min(smallest, v);
  smallest = all_reduce(rt.comm(), smallest, MPI_MIN);
  const auto& s = lcc.summary;
  cj.update(json{{"components", s.count},
                 {"largest_size", s.largest_size},
                 {"largest_label", in.ids.file_id(smallest)},
                 {"isolated_vertices", s.isolated}});
  j["components"] = std::move(cj);
  auto lcc_ids = in.ids.compose(*original);
  stage_done(rt, kLargest);
  return PackedLargestStage{std::move(lcc.graph), std::move(lcc_ids), std::move(in.ids)};
}

// The packed pipeline from the packed graph to its report.
Result packed_pipeline_on(PackedInput in, json j, const Options& a, Progress& p, Report& report,
                          const AnonymousMemoryMeter& heap) {
  const ArrayBytes arrays = in.arrays;
  auto lcc = packed_largest_of(std::move(in), j, a, p, report);
  if (!lcc) return unverified(std::move(j), report, arrays, nullptr, a);
  return analyse_largest(*lcc, std::move(j), a, p, report, arrays, heap, nullptr);
}

// Hitting times on an undirected graph, written, reported.
Result hitting_on(const graph::EdgeList& g, const graph::IdMap& ids, const std::vector<std::uint64_t>& targets,
                  bool connected, const Options& a, Progress& p, Report& report, const ArrayBytes& arrays) {
  auto h = report.timed("hitting times", [&] { return analysis_step(g, ids, targets, connected, a.analysis, p); });
  if (!a.output.empty())
    report.timed("write", [&] {
      graph::PendingOutputs outputs(g.runtime());
      write_result(ids, h, a.output, p, outputs);
      outputs.commit();
    });
  json j = {{"command", "hitting"}, {"stats", graph_json(g)}, {"hitting", std::move(h.json)}};
  report.finish(j, arrays);
  Result r = document_only(std::move(j));
  r.hitting = std::move(h.hitting);
  r.file_ids = ids.local_file_ids();
  return r;
}

// lcc: the component and its ids, committed together.
void write_lcc(Runtime& rt, const Options& a, const graph::LoadedGraph& loaded, const graph::LargestComponent& lcc,
               Progress& p) {
  graph::PendingOutputs outputs(rt);
  p.step("writing " + shown(a.output));
  graph::WriteOptions w;
  w.pending = &outputs;
  w.group_access = a.group_access;
  const std::string ids_output = id_map_path(a.output, a.ids_output);
  w.comment = renumbered_note("the largest component of " + where(a.input));
  graph::write_graph(lcc.graph, a.output, w);
  if (!ids_output.empty()) {
    // "lcc_id file_id": the id in OUT (1-based in a .mtx, .gr, .graph) -> the id in GRAPH.
    auto lcc_ids = loaded.ids.compose(lcc.original_ids);
    const std::uint64_t out_base = graph::first_id_of(graph::format_of(a.output));
    auto out_ids = graph::IdMap::identity(rt, lcc.graph.vertex_ranges(), out_base);
    auto file_ids = lcc_ids.local_file_ids();
    p.step("writing " + shown(ids_output) + " (the id map: lcc_id file_id)");
    graph::write_vertex_values(out_ids, std::span<const std::uint64_t>(file_ids), ids_output,
                               {"lcc_id", "file_id", "nan", &outputs, ""});
  }
  outputs.commit();
}

}  // namespace

std::string id_map_path(const std::string& output, const std::string& given) {
  if (!given.empty() || output.empty()) return given;
  // Beside a file or directory; a stream has no "beside".
  if (output == "-" || graph::format_of(output) == graph::FileFormat::binary) {
    if (output == "-") return {};
    std::string dir = output;
    while (dir.size() > 1 && dir.back() == '/') dir.pop_back();
    return dir + ".ids";
  }
  try {
    if (resolve_output_path(output).stream()) return {};
  } catch (const Error&) {
    return {};  // the output's own check names the problem
  }
  return output + ".ids";
}

std::string renumbered_note(const std::string& what) {
  // The same words wherever the file goes (a stream gets what a file gets).
  return "renumbered: " + what + ", its vertices numbered from 0 (1 in a .mtx); its id map (\"new_id file_id\" "
         "lines) is written beside this file as FILE.ids, or where --ids says";
}

std::string load_step(const Input& input) { return input.path.empty() ? "generate" : "read"; }

std::optional<graph::LoadedGraph> undirected_copy(const graph::EdgeList& given, const graph::IdMap& ids,
                                                  Report& report, Progress& p, const std::string& why) {
  if (!given.directed()) return std::nullopt;
  return report.timed("symmetrize", [&] {
    p.step("symmetrizing (" + why + ")");
    auto s = given.symmetrized();
    auto moved = ids.redistributed(s.vertex_ranges());
    return std::optional<graph::LoadedGraph>(graph::LoadedGraph{std::move(s), std::move(moved)});
  });
}

Result run_write(Runtime& rt, const Options& a, Progress& p) {
  if (a.output.empty())
    throw ConfigError("name the output graph (.el, .wel, .mtx, a .tsg directory, or - for standard output)");
  check_options(a, false);
  Report report(rt, p);
  check_output(rt, a, a.output, graph::OutputKind::graph, "-o");
  auto g = report.timed(load_step(a.input), [&] { return load(rt, a.input, p).graph; });
  describe(p, g);
  report.timed("write", [&] {
    p.step("writing " + shown(a.output));
    graph::WriteOptions w;
    w.group_access = a.group_access;
    graph::write_graph(g, a.output, w);
  });
  json j = {{"command", a.input.path.empty() ? "gen" : "convert"},
            {"input", input_name(a.input)},
            {"output", a.output},
            {"stats", graph_json(g)}};
  report.finish(j, array_bytes(g));
  return document_only(std::move(j));
}

namespace {
// What both forms of run_components check before any work.
void components_checks(Runtime& rt, const Options& a) {
  check_options(a, false);
  if (!a.strong) check_algorithm(a.algorithm, true);
  else if (a.verify)
    throw ConfigError("--verify proves connected components' labels; strongly connected components (--strong) have "
                      "no verifier: drop one of the two");
  if (!a.output.empty()) check_output(rt, a, a.output, graph::OutputKind::text_lines, "-o");
}

// cc on a graph in memory: each algorithm asked, its summary, the labels
// written (file ids), the document.
Result components_of_graph(const graph::EdgeList& g, const graph::IdMap& ids, const Options& a, Progress& p,
                           Report& report) {
  auto timed = [&](const std::string& step, auto&& run) { return report.timed(step, run); };
  describe(p, g);
  graph::PendingOutputs outputs(g.runtime());
  json j = {{"command", "cc"}, {"stats", graph_json(g)}, {"results", json::array()}};
  const bool all = a.algorithm == "all" || a.algorithm == "both";
  std::vector<std::string> algorithms = a.strong ? std::vector<std::string>{"scc"}
                                        : all    ? std::vector<std::string>{"afforest", "lp", "fastsv"}
                                                 : std::vector<std::string>{a.algorithm};
  // Afforest reads a directed graph's arcs both ways; label propagation and
  // FastSV need an undirected copy, made once for all of them (on the same
  // vertex ranges, so the labels fit the graph's ids).
  std::optional<graph::EdgeList> undirected;
  bool failed = false;  // --verify rejected a labelling
  for (const auto& alg : algorithms)
    if (!a.strong && alg != "afforest" && g.directed() && !undirected) {
      p.step("symmetrizing once (label propagation and FastSV need both directions of every arc)");
      timed("symmetrize", [&] { undirected.emplace(g.symmetrized({}, true)); });
    }
  for (const auto& alg : algorithms) {
    auto c = timed("components",
                   [&] { return components_of(undirected && alg != "afforest" ? *undirected : g, alg, p); });
    auto s = timed("summary", [&] { return graph::summarize(g, c.labels); });
    std::uint64_t largest = ids.file_id(s.largest_label);
    // Rounds only where there were some (one rank's Afforest needs none).
    p.step(count_of(s.count, "component") +
           (c.rounds > 0 ? " in " + count_of(static_cast<std::uint64_t>(c.rounds), "round") : std::string()) + " (" +
           std::to_string(c.seconds) + " s); the largest has " + count_of(s.largest_size, "vertex", "vertices") +
           ", smallest vertex " + std::to_string(largest));
    auto cj = components_json(c, s, alg, largest);
    if (a.verify && !a.strong && !verify_components(g, c.labels, s, cj, p, report)) failed = true;
    j["results"].push_back(std::move(cj));
    if (!a.output.empty() && &alg == &algorithms.front()) {  // both algorithms give the same labels
      timed("write", [&] {
        auto labels = c.labels.local();
        std::vector<std::uint64_t> file_labels(labels.begin(), labels.end());
        ids.translate(file_labels);
        p.step("writing " + shown(a.output));
        graph::write_vertex_values(ids, std::span<const std::uint64_t>(file_labels), a.output,
                                   {"vertex", "component", "nan", &outputs, ""});
      });
    }
  }
  if (a.output.empty()) outputs.commit();
  else timed("write", [&] { outputs.commit(); });
  if (!a.output.empty()) j["output"] = a.output;

  report.finish(j, array_bytes(g));
  Result r = document_only(std::move(j));
  r.verification_failed = failed;
  return r;
}
}  // namespace

Result run_components(Runtime& rt, const Options& a, Progress& p) {
  components_checks(rt, a);
  Report report(rt, p);
  auto loaded = report.timed(load_step(a.input), [&] { return load(rt, a.input, p); });
  return components_of_graph(loaded.graph, loaded.ids, a, p, report);
}

Result run_components(const graph::EdgeList& g, const graph::IdMap& ids, const Options& a, Progress& p) {
  components_checks(g.runtime(), a);
  Report report(g.runtime(), p);
  return components_of_graph(g, ids, a, p, report);
}

Result run_lcc(Runtime& rt, const Options& a, Progress& p) {
  if (a.output.empty()) throw ConfigError("name the output graph of the largest component");
  check_options(a, false);
  check_algorithm(a.algorithm, false);
  Report report(rt, p);
  auto out = check_output(rt, a, a.output, graph::OutputKind::graph, "-o");
  if (!a.ids_output.empty() &&
      check_output(rt, a, a.ids_output, graph::OutputKind::text_lines, "--ids").standard_output() &&
      out.standard_output())
    throw ConfigError("-o " + a.output + " and --ids " + a.ids_output +
                      " both write to standard output; send one of them to a file");
  if (a.ids_output.empty() && !id_map_path(a.output, "").empty())
    check_output(rt, a, id_map_path(a.output, ""), graph::OutputKind::text_lines, "the id map beside -o");
  auto loaded = report.timed(load_step(a.input), [&] { return load(rt, a.input, p); });
  describe(p, loaded.graph);
  graph::check_graph_format(a.output, loaded.graph.weighted());
  auto c = report.timed("components", [&] { return components_of(loaded.graph, a.algorithm, p); });
  json input = graph_json(loaded.graph);
  const ArrayBytes arrays = array_bytes(loaded.graph);
  // The loaded graph is not needed afterwards: its arrays are compacted in
  // place unless another job's files are mapped in place.
  const bool in_place = loaded.graph.offsets().shrinkable();
  p.step(in_place ? "extracting the largest component in place" : "extracting the largest component");
  auto lcc = report.timed("largest component", [&] {
    return in_place ? graph::largest_component(std::move(loaded.graph), c.labels)
                    : graph::largest_component(loaded.graph, c.labels);
  });
  describe(p, lcc.graph);
  report.timed("write", [&] { write_lcc(rt, a, loaded, lcc, p); });
  json j = {{"command", "lcc"},
            {"output", a.output},
            {"input", std::move(input)},
            {"components", components_json(c, lcc.summary, a.algorithm, loaded.ids.file_id(lcc.summary.largest_label))},
            {"lcc", graph_json(lcc.graph)}};
  report.finish(j, arrays);
  return document_only(std::move(j));
}


Result run_hitting(Runtime& rt, const Options& a, Progress& p) {
  check_options(a, true);
  check_kind(a, false);
  if (a.targets.empty()) throw ConfigError("name at least one target vertex");
  Report report(rt, p);
  if (!a.output.empty()) check_output(rt, a, a.output, graph::OutputKind::text_lines, "-o");
  auto loaded = report.timed(load_step(a.input), [&] { return load(rt, a.input, p); });
  describe(p, loaded.graph);
  const ArrayBytes arrays = array_bytes(loaded.graph);
  auto targets = find_targets(loaded.ids, a.targets, where(a.input));
  if (loaded.graph.directed())
    report.timed("symmetrize", [&] { make_undirected(loaded, p, "a random walk needs an undirected graph"); });
  check_walk_weights(loaded.graph, loaded.ids);
  return hitting_on(loaded.graph, loaded.ids, targets, false, a, p, report, arrays);
}

Result run_hitting(const graph::EdgeList& given, const graph::IdMap& given_ids, bool connected, const Options& a,
                   Progress& p) {
  check_options(a, true);
  check_kind(a, false);
  if (a.targets.empty()) throw ConfigError("name at least one target vertex");
  Runtime& rt = given.runtime();
  Report report(rt, p);
  if (!a.output.empty()) check_output(rt, a, a.output, graph::OutputKind::text_lines, "-o");
  auto targets = find_targets(given_ids, a.targets, "the graph");
  auto undirected = undirected_copy(given, given_ids, report, p, "a random walk needs an undirected graph");
  const graph::EdgeList& g = undirected ? undirected->graph : given;
  const graph::IdMap& ids = undirected ? undirected->ids : given_ids;
  check_walk_weights(g, ids);
  return hitting_on(g, ids, targets, connected, a, p, report, array_bytes(given));
}

namespace {

// The pipeline's first stage from its input: the graph loaded into Shared
// storage (symmetrized there when directed), checkpointed when a store is
// kept. `arrays`: the loaded graph's array bytes.
graph::LoadedGraph load_stage(Runtime& rt, const Options& a, Progress& p, Report& report, const std::string& name,
                              StageStore* store, ArrayBytes& arrays) {
  const auto t0 = std::chrono::steady_clock::now();
  auto loaded = report.timed(load_step(a.input), [&] { return load(rt, a.input, p, StorageOptions::shared(name)); });
  const double read_seconds = seconds_since(t0);
  describe(p, loaded.graph);
  arrays = array_bytes(loaded.graph);
  p.step("loaded into Shared storage (" + std::filesystem::path(loaded.graph.dst_metadata_path()).parent_path().string() +
         ", one segment per rank; removed when the command ends)");
  find_targets(loaded.ids, a.targets, where(a.input));
  double symmetrize_seconds = 0;
  if (loaded.graph.directed()) {
    const auto t1 = std::chrono::steady_clock::now();
    report.timed("symmetrize", [&] {
      make_undirected(loaded, p, "weak components, undirected walk; into Shared storage",
                      StorageOptions::shared(name + "-sym"));
    });
    symmetrize_seconds = seconds_since(t1);
  }
  if (store) {
    json seconds = {{load_step(a.input), read_seconds}};
    if (symmetrize_seconds > 0) seconds["symmetrize"] = symmetrize_seconds;
    report.timed("checkpoint", [&] {
      store->commit(kLoaded, {{"arrays", arrays}, {"seconds", seconds}}, [&](resilience::CheckpointWriter& w) {
        resilience::add_edge_list(w, "graph", loaded.graph);
        add_id_map(w, "graph", loaded.ids);
      });
    });
  }
  stage_done(rt, kLoaded);
  return loaded;
}

// The graph of a checkpoint taken after the first stage or the labelling
// (`from`), with the labels when they were saved.
graph::LoadedGraph restore_loaded(Runtime& rt, StageStore& store, std::uint64_t from, Progress& p, Report& report,
                                  const std::string& name, std::optional<DistArray<std::uint64_t>>& labels,
                                  ArrayBytes& arrays) {
  auto loaded = report.timed("restore", [&] {
    auto g = resilience::read_edge_list(store.reader(), "graph", StorageOptions::shared(name));
    auto ids = read_id_map(store.reader(), "graph", g);
    if (from == kLabelled) {
      labels.emplace(rt, g.vertex_ranges());
      agree(rt.comm(), [&] { store.reader().read("labels", *labels); });
    }
    return graph::LoadedGraph{std::move(g), std::move(ids)};
  });
  store.release();
  arrays = store.saved().at("arrays").get<ArrayBytes>();
  p.step("restored into Shared storage (" + std::filesystem::path(loaded.graph.dst_metadata_path()).parent_path().string() +
         ")");
  describe(p, loaded.graph);
  stage_done(rt, from);
  return loaded;
}

}  // namespace

// Stages: load (or restore), label the components, extract the largest,
// analyse it; with a checkpoint directory each stage's result is kept and a
// rerun resumes after the last one kept.
Result run_pipeline(Runtime& rt, const Options& a, Progress& p) {
  check_options(a, true);
  check_kind(a, true);
  check_algorithm(a.algorithm, false);
  if (a.packed) check_packed_pipeline(a);
  if (!a.output.empty()) check_output(rt, a, a.output, graph::OutputKind::text_lines, "-o");
  Report report(rt, p);
  const std::string name = shared_base(rt);
  json j = {{"command", "pipeline"}, {"ranks", rt.size()}, {"input", input_name(a.input)}};
  std::optional<StageStore> store;
  if (!a.checkpoint.dir.empty())
    report.timed("checkpoint", [&] { store.emplace(rt, a.checkpoint, job_identity(a.input, a.algorithm), p); });
  const std::uint64_t from = store ? store->resumed() : kNoStage;
  if (from == kNoStage && !a.input.path.empty() && a.input.path != "-" && !std::filesystem::exists(a.input.path))
    throw ConfigError("the input graph " + a.input.path + " does not exist" +
                      (store ? " (and " + a.checkpoint.dir + " holds no checkpoint to resume from)" : ""));
  AnonymousMemoryMeter heap(rt.comm());
  if (a.packed) {
    PackedLoadOptions o;
    o.storage = StorageOptions::shared(name);
    o.symmetrize = true;
    o.vertices = a.targets;
    o.role = "target vertex";
    auto in = load_packed(rt, a.input, p, report, o);
    p.step("packed into Shared storage (" +
           std::filesystem::path(in.graph.offsets().metadata_path()).parent_path().string() +
           ", one segment per rank; removed when the command ends)" +
           (packs_from_source(a.input) ? "" : "; the EdgeList given up"));
    stage_done(rt, kLoaded);
    return packed_pipeline_on(std::move(in), std::move(j), a, p, report, heap);
  }
  if (from == kLargest) {
    auto lcc = report.timed("restore", [&] {
      auto g = resilience::read_edge_list(store->reader(), "lcc", StorageOptions::shared(name + "-lcc"));
      auto ids = read_id_map(store->reader(), "lcc", g);
      return LargestStage{std::move(g), std::move(ids)};
    });
    store->release();
    j["graph"] = store->saved().at("graph");
    j["components"] = store->saved().at("components");
    stage_done(rt, kLargest);
    return analyse_largest(lcc, std::move(j), a, p, report, store->saved().at("arrays").get<ArrayBytes>(), heap,
                           &*store);
  }
  std::optional<DistArray<std::uint64_t>> labels;
  ArrayBytes arrays;
  std::optional<graph::LoadedGraph> loaded;
  if (from == kNoStage)
    loaded.emplace(load_stage(rt, a, p, report, name, store ? &*store : nullptr, arrays));
  else
    loaded.emplace(restore_loaded(rt, *store, from, p, report, name, labels, arrays));
  auto lcc = largest_of(loaded->graph, &loaded->graph, loaded->ids, name, j, a, p, report,
                        store ? &*store : nullptr, std::move(labels));
  loaded.reset();  // the input graph's arrays are not needed for the analysis
  if (!lcc) return unverified(std::move(j), report, arrays, store ? &*store : nullptr, a);
  return analyse_largest(*lcc, std::move(j), a, p, report, arrays, heap, store ? &*store : nullptr);
}

Result run_pipeline(const graph::EdgeList& given, const graph::IdMap& given_ids, const Options& a, Progress& p) {
  check_options(a, true);
  check_kind(a, true);
  check_algorithm(a.algorithm, false);
  if (a.packed) check_packed_pipeline(a);
  Runtime& rt = given.runtime();
  Report report(rt, p);
  if (!a.output.empty()) check_output(rt, a, a.output, graph::OutputKind::text_lines, "-o");
  const std::string name = shared_base(rt);
  json j = {{"command", "pipeline"}, {"ranks", rt.size()}, {"input", "a graph in memory"}};
  find_targets(given_ids, a.targets, "the graph");
  if (a.packed) {  // the caller's graph stays: it is copied into the packed form
    AnonymousMemoryMeter heap(rt.comm());
    PackedLoadOptions o;
    o.storage = StorageOptions::shared(name);
    o.symmetrize = true;
    return packed_pipeline_on(pack_graph(given, given_ids, p, report, o), std::move(j), a, p, report, heap);
  }
  if (!given.directed())  // the caller's graph: the component is copied out of it
    return pipeline_on(given, nullptr, given_ids, name, std::move(j), a, p, report, array_bytes(given));
  auto g = report.timed("symmetrize", [&] {
    p.step("symmetrizing (weak components, undirected walk; into Shared storage)");
    return given.symmetrized(StorageOptions::shared(name + "-sym"));
  });
  auto ids = given_ids.redistributed(g.vertex_ranges());
  return pipeline_on(g, &g, ids, name, std::move(j), a, p, report, array_bytes(given));
}

}  // namespace tessera::pipeline
