// Interop benchmark: the three ways of handing one copy of a graph
// to an analysis, side by side in one run, on a Kronecker graph and on a 3D
// grid (a mesh), as in the sources' table:
//   label propagation per global round, on Heap memory and on Shared
//     (mmap) memory (the source measured a slowdown on mmap memory);
//   the hitting-time solve per iteration, in process on Heap memory, in a
//     separate process (tessera-analyze) on the Shared arrays, and in a bwrap
//     sandbox sharing only the Shared directory;
//   the handshake: launch, request -> analysis starts, result -> caller resumes.
// Every answer is checked against the in-process one (and by its true
// residual); the labels by check_labels.
#include <cmath>
#include <cstdio>
#include <optional>

#include "tessera/analyze/client.hpp"
#include "tessera/bench/benchmarks.hpp"
#include "tessera/bench/report.hpp"
#include "tessera/bench/verifiers.hpp"
#include "tessera/graph/components.hpp"
#include "tessera/graph/generators.hpp"
#include "tessera/linalg/edge_list_matrix.hpp"
#include "tessera/linalg/hitting_times.hpp"
#include "tessera/runtime/collective.hpp"
#include "tessera/trilinos/hitting.hpp"

namespace tessera::bench {

namespace {

struct Solved {
  std::optional<linalg::HittingTimes> last;
  std::optional<analyze::Handshake> handshake;
  std::vector<double> times;
};

}  // namespace

bool run_interop_bench(Runtime& rt, const InteropBenchOptions& o) {
  const bool belos = o.solver == "belos";
  if (belos && !trilinos::available())
    throw ConfigError("bench interop --solver belos: this Tessera was built without Trilinos (" +
                      trilinos::description() + "); use --solver tessera");
  analyze::ProcessOptions container_options;
  container_options.isolation = analyze::Isolation::container;
  std::string launcher;
  const bool have_container = analyze::launcher_available(container_options, &launcher);
  std::optional<trilinos::Session> session;
  if (belos && !trilinos::Session::active()) session.emplace(rt);

  Report report(rt, "interop",
                {{"kron_scale", o.kron_scale}, {"grid_side", o.grid_side}, {"solver", o.solver},
                 {"tolerance", o.tolerance}, {"reps", o.reps}},
                o.format);
  report.set_baselines({"heap", "in-process"});
  bool ok = true;
  const std::vector<std::uint64_t> target{0};

  for (const auto& [group, spec] :
       std::vector<std::pair<std::string, graph::GraphSpec>>{
           {"kron", graph::GraphSpec::kronecker(o.kron_scale)},
           {"mesh", graph::GraphSpec::grid({o.grid_side, o.grid_side, o.grid_side})}}) {
    const std::string name = "tessera-bench-interop-" + group + "-" + rt.job_id();
    progress(rt, o.format, "interop: " + spec.describe() + ", largest component, solver " + o.solver);
    // The same graph twice: in this process's heap and in Shared storage.
    auto heap_graph = graph::generate(rt, spec);
    auto shared_graph = graph::generate(rt, spec, StorageOptions::shared(name));
    auto heap_lcc = graph::largest_component(heap_graph, graph::afforest(heap_graph).labels);
    auto shared_lcc = graph::largest_component(shared_graph, graph::afforest(shared_graph).labels,
                                               StorageOptions::shared(name + "-lcc"));

    // Label propagation, time per global round.
    std::optional<graph::Components> lp_heap, lp_shared;
    auto lp_variant = [&](const std::string& storage, const graph::EdgeList& g, std::optional<graph::Components>& c) {
      return Variant{.group = group + " label propagation",
                     .variant = storage,
                     .storage = storage,
                     .reps = o.reps,
                     .work = 1.0,
                     // Untimed, one run first on the same graph: each timed
                     // run then starts from its own data, as the rounds of
                     // an analysis do (and not from whatever ran before it).
                     .prepare = [&] { graph::label_propagation(g); },
                     .run = [&] { c.emplace(graph::label_propagation(g)); },
                     .verify = [&](bool& good) {
                       const std::string wrong = graph::check_labels(g, c->labels);
                       good = wrong.empty();
                       return std::to_string(c->rounds) + " global rounds; " + (good ? "labels proven" : wrong);
                     },
                     .measured_seconds = [&] { return c->seconds / std::max(1, c->rounds); },
                     .details = [&] { return nlohmann::json{{"rounds", c->rounds}, {"local_rounds", c->local_rounds}}; }};
    };

    // Hitting times, time per solver iteration.
    linalg::HittingOptions ho;
    ho.cg.tolerance = o.tolerance;
    ho.connected = true;
    Solved in_process, process, container;
    auto solve_in_process = [&] {
      if (belos) {
        trilinos::BelosHittingOptions bo;
        bo.hitting = ho;
        in_process.last.emplace(std::move(trilinos::belos_hitting_times(heap_lcc.graph, target, bo).result));
      } else {
        linalg::EdgeListMatrix a(heap_lcc.graph);
        in_process.last.emplace(linalg::hitting_times(heap_lcc.graph, a, target, ho));
      }
    };
    auto solve_out_of_process = [&](Solved& s, analyze::Isolation isolation) {
      analyze::ProcessOptions po;
      po.isolation = isolation;
      po.solver = o.solver;
      po.quiet = true;
      auto r = analyze::hitting_times_out_of_process(shared_lcc.graph, target, ho, po);
      s.handshake = r.handshake;
      s.last.emplace(std::move(r.result));
    };
    auto hitting_variant = [&](const std::string& variant, const std::string& storage, Solved& s,
                               std::function<void()> run) {
      return Variant{
          .group = group + " hitting",
          .variant = variant,
          .storage = storage,
          .reps = o.reps,
          .work = 1.0,
          .run = std::move(run),
          .verify = [&](bool& good) {
            s.times.assign(s.last->times.local().begin(), s.last->times.local().end());
            // The in-process answer runs first and is the reference.
            Verdict v = check_hitting_times(heap_lcc.graph, s.times, in_process.times, o.tolerance);
            good = v.ok && s.last->solve.converged;
            return std::to_string(s.last->solve.iterations) + " iterations; " + v.found;
          },
          .measured_seconds = [&] { return s.last->solve.seconds_per_iteration(); },
          .details = [&] {
            nlohmann::json j{{"iterations", s.last->solve.iterations}, {"solver", o.solver}};
            if (s.handshake) {
              j["launch_seconds"] = s.handshake->launch_seconds;
              j["request_to_start_seconds"] = s.handshake->request_to_start_seconds;
              j["result_to_resume_seconds"] = s.handshake->result_to_resume_seconds;
              j["liveness_period_seconds"] = s.handshake->period_seconds;
            }
            return j;
          }};
    };

    std::vector<Variant> variants{lp_variant("heap", heap_graph, lp_heap), lp_variant("shared", shared_graph, lp_shared),
                                  hitting_variant("in-process", "heap", in_process, solve_in_process),
                                  hitting_variant("process", "shared", process,
                                                  [&] { solve_out_of_process(process, analyze::Isolation::process); })};
    if (have_container)
      variants.push_back(hitting_variant("container", "shared", container,
                                         [&] { solve_out_of_process(container, analyze::Isolation::container); }));
    else if (rt.rank() == 0)
      std::fprintf(stderr, "bench interop: no container row: the launcher (%s) is not on PATH (apt install bubblewrap)\n",
                   launcher.c_str());
    // In rounds: the comparisons are of runs a few seconds apart, not of one
    // variant's block against another's on a machine whose speed drifts.
    auto rows = run_variants(rt, report, variants, 1.0, "it/s", RunOrder::interleaved);
    for (const auto& row : rows) ok = ok && row.verified;

    // Each comparison: the median of the rounds' paired ratios, and best
    // against best.
    auto paired = [&](std::size_t a, std::size_t b) { return median_paired_ratio(rows[a].timing, rows[b].timing); };
    auto best = [&](std::size_t a, std::size_t b) { return rows[a].timing.best / rows[b].timing.best; };
    const double lp_ratio = paired(1, 0), process_ratio = paired(3, 2);
    const double container_ratio = have_container ? paired(4, 2) : NAN;
    const analyze::Handshake& hs = *process.handshake;
    char text[480];
    std::snprintf(text, sizeof(text),
                  "%s (median of %d paired rounds; best/best): label propagation per round, Shared / Heap %.2fx (%.2fx); "
                  "hitting per iteration, process / in-process %.2fx (%.2fx), container / in-process %.2fx (%.2fx); "
                  "handshake (process): launch %.3f s, request -> start %.1f us, result -> resume %.1f us",
                  group.c_str(), rows[0].timing.reps, lp_ratio, best(1, 0), process_ratio, best(3, 2), container_ratio,
                  have_container ? best(4, 2) : NAN, hs.launch_seconds, hs.request_to_start_seconds * 1e6,
                  hs.result_to_resume_seconds * 1e6);
    nlohmann::json values{{"graph", group},
                          {"lp_shared_vs_heap", lp_ratio},
                          {"lp_shared_vs_heap_best", best(1, 0)},
                          {"process_vs_inprocess", process_ratio},
                          {"process_vs_inprocess_best", best(3, 2)},
                          {"launch_seconds", hs.launch_seconds},
                          {"request_to_start_seconds", hs.request_to_start_seconds},
                          {"result_to_resume_seconds", hs.result_to_resume_seconds}};
    if (have_container) {
      values["container_vs_inprocess"] = container_ratio;
      values["container_vs_inprocess_best"] = best(4, 2);
    }
    report.add_summary(text, values);
  }
  return report.print() && ok;
}

}  // namespace tessera::bench
