// Hitting-times benchmark: the same CG solve with the matrix read straight
// from the edge arrays (EdgeListMatrix, Shared storage) and with the
// conventional CRS copy. Reports time per CG iteration and the anonymous memory
// each matrix adds, measured from /proc/self/smaps_rollup.
#include "tessera/bench/benchmarks.hpp"

#include <cmath>
#include <cstdio>
#include <memory>

#include "tessera/bench/report.hpp"
#include "tessera/graph/components.hpp"
#include "tessera/graph/generators.hpp"
#include "tessera/linalg/crs_matrix.hpp"
#include "tessera/linalg/edge_list_matrix.hpp"
#include "tessera/linalg/hitting_times.hpp"
#include "tessera/linalg/laplacian.hpp"
#include "tessera/runtime/collective.hpp"
#include "tessera/runtime/memory.hpp"
#include "tessera/runtime/wait.hpp"

namespace tessera::bench {

bool run_hitting_bench(Runtime& rt, const HittingBenchOptions& o) {
  auto spec = graph::GraphSpec::kronecker(o.kron_scale);
  const std::string name = "tessera-bench-hitting-" + rt.job_id();
  if (rt.rank() == 0 && !o.format.quiet)
    std::fprintf(stderr, "hitting: %s, largest component, CG tolerance %.1e\n", spec.describe().c_str(), o.tolerance);
  auto g = graph::generate(rt, spec, StorageOptions::shared(name));
  auto comps = graph::fastsv(g);
  auto lcc = graph::largest_component(g, comps.labels, StorageOptions::shared(name + "-lcc"));
  const graph::EdgeList& graph = lcc.graph;
  const double edge_bytes = static_cast<double>(graph.edges()) * 2 * sizeof(std::uint64_t);
  std::vector<std::uint64_t> target{0};
  linalg::HittingOptions ho;
  ho.cg.tolerance = o.tolerance;

  Report report(rt, "hitting", {{"kron_scale", o.kron_scale}, {"lcc_vertices", graph.vertices()},
                                {"lcc_edges", graph.edges()}, {"tolerance", o.tolerance}, {"reps", o.reps}}, o.format);
  report.set_baselines({"CrsMatrix"});

  struct Run {
    std::vector<double> times;
    int iterations = 0;
    double per_iteration = 1e300;
    double build_seconds = 0;
    std::uint64_t measured = 0, accounted = 0;
  };
  auto solve_with = [&](bool crs) {
    Run run;
    linalg::Vector x(rt, graph.vertex_ranges()), y(rt, graph.vertex_ranges());
    x.fill(1.0);
    y.fill(0.0);
    barrier(rt.comm());
    std::uint64_t before = anonymous_memory_bytes();
    double t0 = MPI_Wtime();
    auto el = std::make_unique<linalg::EdgeListMatrix>(graph);
    std::unique_ptr<linalg::CrsMatrix> copy;
    if (crs) copy = std::make_unique<linalg::CrsMatrix>(*el);
    const linalg::RowMatrix& a = crs ? static_cast<const linalg::RowMatrix&>(*copy) : *el;
    run.build_seconds = all_reduce(rt.comm(), MPI_Wtime() - t0, MPI_MAX);
    a.apply(x, y);  // touch everything the matrix uses once, then measure
    std::uint64_t after = anonymous_memory_bytes();
    run.measured = all_reduce<std::uint64_t>(rt.comm(), after > before ? after - before : 0, MPI_SUM);
    std::uint64_t acc = crs ? copy->extra_memory_bytes() + el->extra_memory_bytes() : el->extra_memory_bytes();
    run.accounted = all_reduce<std::uint64_t>(rt.comm(), acc, MPI_SUM);
    for (int r = 0; r < o.reps; ++r) {
      barrier(rt.comm());
      auto h = linalg::hitting_times(graph, a, target, ho);
      double per = all_reduce(rt.comm(), h.solve.seconds_per_iteration(), MPI_MAX);
      run.per_iteration = std::min(run.per_iteration, per);
      run.iterations = h.solve.iterations;
      if (r == o.reps - 1) run.times.assign(h.times.local().begin(), h.times.local().end());
    }
    return run;
  };
  Run crs = solve_with(true);
  Run el = solve_with(false);

  // Verification: the two answers agree, and the true residual is small.
  double diff = 0, scale = 0;
  for (std::size_t i = 0; i < el.times.size(); ++i) {
    diff = std::max(diff, std::fabs(el.times[i] - crs.times[i]));
    scale = std::max(scale, std::fabs(crs.times[i]));
  }
  diff = all_reduce(rt.comm(), diff, MPI_MAX);
  scale = all_reduce(rt.comm(), scale, MPI_MAX);
  double residual = 0;
  {
    linalg::EdgeListMatrix a(graph);
    std::vector<std::uint8_t> grounded(graph.local_vertices(), 0);
    if (graph.vertex_ranges().owner(0) == rt.rank()) grounded[0] = 1;
    linalg::Laplacian lap(a, grounded);
    linalg::Vector h(rt, graph.vertex_ranges()), r(rt, graph.vertex_ranges()), b(rt, graph.vertex_ranges());
    std::copy(el.times.begin(), el.times.end(), h.local().begin());
    auto bs = b.local();
    auto deg = lap.degrees().local();
    for (std::size_t i = 0; i < bs.size(); ++i) bs[i] = grounded[i] ? 0.0 : deg[i];
    lap.apply(h, r);
    r.axpy(-1.0, b);
    residual = r.norm2() / b.norm2();
  }
  bool agree = diff <= 1e-6 * scale && residual <= 10 * o.tolerance;

  auto add = [&](const std::string& variant, const std::string& storage, const Run& run) {
    Timing t{run.per_iteration, run.per_iteration, o.reps};
    Result r = rate_result(variant, storage, t, 1.0, 1.0, "CG it/s");
    r.verified = agree;
    char buf[160];
    std::snprintf(buf, sizeof(buf), "%d iterations; max diff %.1e of %.3g; true residual %.1e; adds %.1f%% of edge arrays",
                  run.iterations, diff, scale, residual, 100.0 * static_cast<double>(run.measured) / edge_bytes);
    r.check = buf;
    r.extra = {{"seconds_per_iteration", run.per_iteration},
               {"iterations", run.iterations},
               {"build_seconds", run.build_seconds},
               {"memory_added_bytes", run.measured},
               {"memory_accounted_bytes", run.accounted},
               {"edge_array_bytes", edge_bytes},
               {"memory_fraction_of_edges", static_cast<double>(run.measured) / edge_bytes}};
    report.add(r);
  };
  add("CrsMatrix", "heap copy", crs);
  add("EdgeListMatrix", "shared", el);
  // Ratios, not verdicts: the acceptance targets live in the README and its checks.
  double ratio = el.per_iteration / crs.per_iteration;
  double el_mem = static_cast<double>(el.measured) / edge_bytes, crs_mem = static_cast<double>(crs.measured) / edge_bytes;
  char text[320];
  std::snprintf(text, sizeof(text),
                "time per CG iteration: EdgeListMatrix %.3f ms, CrsMatrix %.3f ms: %.2fx\n"
                "memory added (edge arrays %.1f MiB): EdgeListMatrix %.1f MiB = %.1f%%, CrsMatrix %.1f MiB = %.0f%%",
                el.per_iteration * 1e3, crs.per_iteration * 1e3, ratio, edge_bytes / 1048576,
                static_cast<double>(el.measured) / 1048576, 100 * el_mem, static_cast<double>(crs.measured) / 1048576,
                100 * crs_mem);
  report.add_summary(text, {{"time_ratio", ratio}, {"edgelist_memory_fraction", el_mem}, {"crs_memory_fraction", crs_mem}});
  return report.print();
}

}  // namespace tessera::bench
