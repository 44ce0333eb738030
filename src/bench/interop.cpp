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
#include <algorithm>
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

// One graph's rows: the same graph twice, in this process's heap and in
// Shared storage, each with its largest component, and what each variant found.
struct InteropGroup {
  InteropGroup(Runtime& rt, const InteropBenchOptions& options, std::string group_name, const graph::GraphSpec& spec,
               const std::string& name)
      : o(options),
        group(std::move(group_name)),
        heap_graph(graph::generate(rt, spec)),
        shared_graph(graph::generate(rt, spec, StorageOptions::shared(name))),
        heap_lcc(graph::largest_component(heap_graph, graph::afforest(heap_graph).labels)),
        shared_lcc(graph::largest_component(shared_graph, graph::afforest(shared_graph).labels,
                                            StorageOptions::shared(name + "-lcc"))) {
    ho.cg.tolerance = o.tolerance;
    ho.connected = true;
  }
  const InteropBenchOptions& o;
  std::string group;
  graph::EdgeList heap_graph, shared_graph;
  graph::LargestComponent heap_lcc, shared_lcc;
  const std::vector<std::uint64_t> target{0};
  linalg::HittingOptions ho{};
  std::optional<graph::Components> lp_heap{}, lp_shared{};
  Solved in_process{}, process{}, container{};
};

// Label propagation, time per global round.
Variant lp_variant(const InteropGroup& x, const std::string& storage, const graph::EdgeList& g,
                   std::optional<graph::Components>& c) {
  return Variant{.group = x.group + " label propagation",
                 .variant = storage,
                 .storage = storage,
                 .reps = x.o.reps,
                 .work = 1.0,
                 // Untimed, one run first on the same graph: each timed
                 // run then starts from its own data, as the rounds of
                 // an analysis do (and not from whatever ran before it).
                 .prepare = [&g] { graph::label_propagation(g); },
                 .run = [&g, &c] { c.emplace(graph::label_propagation(g)); },
                 .verify = [&g, &c](bool& good) {
                   const std::string wrong = graph::check_labels(g, c->labels);
                   good = wrong.empty();
                   return std::to_string(c->rounds) + " global rounds; " + (good ? "labels proven" : wrong);
                 },
                 .measured_seconds = [&c] { return c->seconds / std::max(1, c->rounds); },
                 .details = [&c] { return nlohmann::json{{"rounds", c->rounds}, {"local_rounds", c->local_rounds}}; }};
}

void solve_in_process(InteropGroup& x) {
  if (x.o.solver == "belos") {
    trilinos::BelosHittingOptions bo;
    bo.hitting = x.ho;
    x.in_process.last.emplace(std::move(trilinos::belos_hitting_times(x.heap_lcc.graph, x.target, bo).result));
  } else {
    linalg::EdgeListMatrix a(x.heap_lcc.graph);
    x.in_process.last.emplace(linalg::hitting_times(x.heap_lcc.graph, a, x.target, x.ho));
  }
}

void solve_out_of_process(InteropGroup& x, Solved& s, analyze::Isolation isolation) {
  analyze::ProcessOptions po;
  po.isolation = isolation;
  po.solver = x.o.solver;
  po.quiet = true;
  auto r = analyze::hitting_times_out_of_process(x.shared_lcc.graph, x.target, x.ho, po);
  s.handshake = r.handshake;
  s.last.emplace(std::move(r.result));
}

// Hitting times, time per solver iteration.
Variant hitting_variant(InteropGroup& x, const std::string& variant, const std::string& storage, Solved& s,
                        std::function<void()> run) {
  return Variant{
      .group = x.group + " hitting",
      .variant = variant,
      .storage = storage,
      .reps = x.o.reps,
      .work = 1.0,
      .run = std::move(run),
      .verify = [&x, &s](bool& good) {
        s.times.assign(s.last->times.local().begin(), s.last->times.local().end());
        // The in-process answer runs first and is the reference.
        Verdict v = check_hitting_times(x.heap_lcc.graph, s.times, x.in_process.times, x.o.tolerance);
        good = v.ok && s.last->solve.converged;
        return std::to_string(s.last->solve.iterations) + " iterations; " + v.found;
      },
      .measured_seconds = [&s] { return s.last->solve.seconds_per_iteration(); },
      .details = [&x, &s] {
        nlohmann::json j{{"iterations", s.last->solve.iterations}, {"solver", x.o.solver}};
        if (s.handshake) {
          j["launch_seconds"] = s.handshake->launch_seconds;
          j["request_to_start_seconds"] = s.handshake->request_to_start_seconds;
          j["result_to_resume_seconds"] = s.handshake->result_to_resume_seconds;
          j["liveness_period_seconds"] = s.handshake->period_seconds;
        }
        return j;
      }};
}

// Each comparison: the median of the rounds' paired ratios, and best against best.
void interop_summary(Report& report, const InteropGroup& x, const std::vector<Result>& rows, bool have_container) {
  auto paired = [&](std::size_t a, std::size_t b) { return median_paired_ratio(rows[a].timing, rows[b].timing); };
  auto best = [&](std::size_t a, std::size_t b) { return rows[a].timing.best / rows[b].timing.best; };
  const double lp_ratio = paired(1, 0), process_ratio = paired(3, 2);
  const double container_ratio = have_container ? paired(4, 2) : NAN;
  const analyze::Handshake& hs = *x.process.handshake;
  nlohmann::json values{{"graph", x.group},
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
  report.add_summary(
      strprintf("%s (median of %d paired rounds; best/best): label propagation per round, Shared / Heap %.2fx (%.2fx); "
                "hitting per iteration, process / in-process %.2fx (%.2fx), container / in-process %.2fx (%.2fx); "
                "handshake (process): launch %.3f s, request -> start %.1f us, result -> resume %.1f us",
                x.group.c_str(), rows[0].timing.reps, lp_ratio, best(1, 0), process_ratio, best(3, 2), container_ratio,
                have_container ? best(4, 2) : NAN, hs.launch_seconds, hs.request_to_start_seconds * 1e6,
                hs.result_to_resume_seconds * 1e6),
      values);
}

// One graph's rows and summary; true if every row verified.
bool run_interop_group(Runtime& rt, Report& report, InteropGroup& x, bool have_container, const std::string& launcher) {
  std::vector<Variant> variants{
      lp_variant(x, "heap", x.heap_graph, x.lp_heap), lp_variant(x, "shared", x.shared_graph, x.lp_shared),
      hitting_variant(x, "in-process", "heap", x.in_process, [&x] { solve_in_process(x); }),
      hitting_variant(x, "process", "shared", x.process,
                      [&x] { solve_out_of_process(x, x.process, analyze::Isolation::process); })};
  if (have_container)
    variants.push_back(hitting_variant(x, "container", "shared", x.container,
                                       [&x] { solve_out_of_process(x, x.container, analyze::Isolation::container); }));
  else if (rt.rank() == 0)
    std::fprintf(stderr, "bench interop: no container row: the launcher (%s) is not on PATH (apt install bubblewrap)\n",
                 launcher.c_str());
  // In rounds: the comparisons are of runs a few seconds apart, not of one
  // variant's block against another's on a machine whose speed drifts.
  auto rows = run_variants(rt, report, variants, 1.0, "it/s", RunOrder::interleaved);
  interop_summary(report, x, rows, have_container);
  return std::all_of(rows.begin(), rows.end(), [](const Result& r) { return r.verified; });
}

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
  for (const auto& [group, spec] :
       std::vector<std::pair<std::string, graph::GraphSpec>>{
           {"kron", graph::GraphSpec::kronecker(o.kron_scale)},
           {"mesh", graph::GraphSpec::grid({o.grid_side, o.grid_side, o.grid_side})}}) {
    progress(rt, o.format, "interop: " + spec.describe() + ", largest component, solver " + o.solver);
    InteropGroup x(rt, o, group, spec, "tessera-bench-interop-" + group + "-" + rt.job_id());
    ok = run_interop_group(rt, report, x, have_container, launcher) && ok;
  }
  return report.print() && ok;
}

}  // namespace tessera::bench
