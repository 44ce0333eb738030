// Hitting-times benchmark: the same CG solve with the matrix read straight
// from the edge arrays (EdgeListMatrix, Shared storage) and with the
// conventional CRS copy. Reports time per CG iteration and the anonymous memory
// each matrix adds, measured from /proc/self/smaps_rollup. When the trilinos/
// layer is built, Belos CG + Ifpack2 Jacobi runs on the same arrays through
// EdgeListRowMatrix and on a Tpetra::CrsMatrix copy, in the same run, with
// the anonymous memory each Tpetra operator adds. Every CG here is
// Jacobi-preconditioned (Tessera's M = diag(A), Ifpack2 one Jacobi sweep from
// zero: the same M^-1) with the same relative-residual tolerance.
#include "tessera/bench/benchmarks.hpp"

#include <cmath>
#include <cstdio>
#include <memory>
#include <optional>

#include "tessera/bench/report.hpp"
#include "tessera/bench/verifiers.hpp"
#include "tessera/graph/components.hpp"
#include "tessera/graph/generators.hpp"
#include "tessera/linalg/crs_matrix.hpp"
#include "tessera/linalg/edge_list_matrix.hpp"
#include "tessera/linalg/hitting_times.hpp"
#include "tessera/linalg/laplacian.hpp"
#include "tessera/runtime/collective.hpp"
#include "tessera/runtime/memory.hpp"
#include "tessera/runtime/wait.hpp"
#include "tessera/trilinos/hitting.hpp"

namespace tessera::bench {

Verdict check_hitting_times(const graph::EdgeList& graph, std::span<const double> times,
                            std::span<const double> reference, double tolerance) {
  Runtime& rt = graph.runtime();
  if (times.size() != graph.local_vertices() || reference.size() != times.size())
    throw MismatchError("check_hitting_times: " + std::to_string(times.size()) + " times and " +
                        std::to_string(reference.size()) + " reference times for " +
                        std::to_string(graph.local_vertices()) + " vertices on this rank");
  // The true residual |b - L h| / |b| of the system grounded at vertex 0.
  linalg::EdgeListMatrix a(graph);
  std::vector<std::uint8_t> grounded(graph.local_vertices(), 0);
  if (graph.vertex_ranges().owner(0) == rt.rank()) grounded[0] = 1;
  linalg::Laplacian lap(a, grounded);
  linalg::Vector h(rt, graph.vertex_ranges()), r(rt, graph.vertex_ranges());
  std::copy(times.begin(), times.end(), h.local().begin());
  const linalg::Vector& b = lap.degrees();  // 0 on the grounded vertex
  lap.apply(h, r);
  r.axpy(-1.0, b);
  const double residual = r.norm2() / b.norm2();
  // The largest difference from the reference, and the reference's scale.
  double diff = 0, scale = 0;
  for (std::size_t i = 0; i < times.size(); ++i) {
    diff = std::max(diff, std::fabs(times[i] - reference[i]));
    scale = std::max(scale, std::fabs(reference[i]));
  }
  diff = all_reduce(rt.comm(), diff, MPI_MAX);
  scale = all_reduce(rt.comm(), scale, MPI_MAX);
  char found[160];
  std::snprintf(found, sizeof(found), "max diff from the reference %.1e of %.3g; true residual %.1e (limit %.1e)", diff,
                scale, residual, 10 * tolerance);
  // Written so that a NaN anywhere fails.
  return {diff <= 1e-6 * scale && residual <= 10 * tolerance, found};
}

namespace {
// What every variant shares: the largest component, the solve's options and
// the edge arrays' bytes (the memory figures' denominator).
struct HittingRun {
  const HittingBenchOptions& o;
  const graph::EdgeList& graph;
  double edge_bytes;
  std::vector<std::uint64_t> target{0};
  linalg::HittingOptions ho{};
};

// Each matrix, with the anonymous memory its construction and first apply
// added (an EdgeListMatrix is built under the CRS copy too, as it reads it).
struct Built {
  std::unique_ptr<linalg::EdgeListMatrix> edge_list;
  std::unique_ptr<linalg::CrsMatrix> crs;
  const linalg::RowMatrix* matrix = nullptr;
  double build_seconds = 0;
  std::uint64_t measured = 0, accounted = 0;
  std::optional<linalg::HittingTimes> last;  // the last solve's answer
  std::vector<double> times;
};

Built build_matrix(Runtime& rt, const graph::EdgeList& graph, bool crs) {
  Built b;
  linalg::Vector x(rt, graph.vertex_ranges()), y(rt, graph.vertex_ranges());
  x.fill(1.0);
  y.fill(0.0);
  barrier(rt.comm());
  std::uint64_t before = anonymous_memory_bytes();
  double t0 = MPI_Wtime();
  b.edge_list = std::make_unique<linalg::EdgeListMatrix>(graph);
  if (crs) b.crs = std::make_unique<linalg::CrsMatrix>(*b.edge_list);
  b.matrix = crs ? static_cast<const linalg::RowMatrix*>(b.crs.get()) : b.edge_list.get();
  b.build_seconds = all_reduce(rt.comm(), MPI_Wtime() - t0, MPI_MAX);
  b.matrix->apply(x, y);  // touch everything the matrix uses once, then measure
  std::uint64_t after = anonymous_memory_bytes();
  b.measured = all_reduce<std::uint64_t>(rt.comm(), after > before ? after - before : 0, MPI_SUM);
  std::uint64_t acc = b.edge_list->extra_memory_bytes() + (crs ? b.crs->extra_memory_bytes() : 0);
  b.accounted = all_reduce<std::uint64_t>(rt.comm(), acc, MPI_SUM);
  return b;
}

// The verify text: iterations, the check against the CRS answer (which runs
// first and is the reference: its own difference is zero), the memory added.
std::string hitting_check(const HittingRun& h, const std::string& iterations, std::span<const double> times,
                          const Built& crs, double measured, bool& ok) {
  Verdict v = check_hitting_times(h.graph, times, crs.times, h.o.tolerance);
  ok = v.ok;
  return iterations + "; " + v.found + strprintf("; adds %.1f%% of edge arrays", 100.0 * measured / h.edge_bytes);
}

Variant tessera_variant(const HittingRun& h, const std::string& name, const std::string& storage, Built& b,
                        const Built& crs) {
  return Variant{
      .variant = name,
      .storage = storage,
      .reps = h.o.reps,
      .work = 1.0,  // rate: CG iterations per second
      .run = [&h, &b] { b.last.emplace(linalg::hitting_times(h.graph, *b.matrix, h.target, h.ho)); },
      .verify = [&h, &b, &crs](bool& ok) {
        b.times.assign(b.last->times.local().begin(), b.last->times.local().end());
        return hitting_check(h, strprintf("%d iterations", b.last->solve.iterations), b.times, crs,
                             static_cast<double>(b.measured), ok);
      },
      .measured_seconds = [&b] { return b.last->solve.seconds_per_iteration(); },
      .details = [&h, &b] {
        return nlohmann::json{{"iterations", b.last->solve.iterations},
                              {"build_seconds", b.build_seconds},
                              {"memory_added_bytes", b.measured},
                              {"memory_accounted_bytes", b.accounted},
                              {"edge_array_bytes", h.edge_bytes},
                              {"memory_fraction_of_edges", static_cast<double>(b.measured) / h.edge_bytes}};
      }};
}

// Belos + Ifpack2 on the same arrays (EdgeListRowMatrix) and on a Tpetra
// copy. Each solve builds its operator; the row's time is Belos' own
// seconds per iteration, the operator's memory its accounted bytes.
struct BelosRun {
  trilinos::MatrixKind kind;
  std::optional<trilinos::BelosHittingTimes> last{};
  std::vector<double> times{};
};

Variant belos_variant(const HittingRun& h, const std::string& name, const std::string& storage, BelosRun& b,
                      const Built& crs) {
  return Variant{
      .variant = name,
      .storage = storage,
      .reps = h.o.reps,
      .work = 1.0,
      .run = [&h, &b] {
        trilinos::BelosHittingOptions bo;
        bo.hitting = h.ho;
        bo.matrix = b.kind;
        b.last.emplace(trilinos::belos_hitting_times(h.graph, h.target, bo));
      },
      .verify = [&h, &b, &crs](bool& ok) {
        b.times.assign(b.last->result.times.local().begin(), b.last->result.times.local().end());
        return hitting_check(h,
                             strprintf("%d iterations (%d Belos solves)", b.last->result.solve.iterations,
                                       b.last->belos_solves),
                             b.times, crs, static_cast<double>(b.last->matrix_measured_bytes), ok);
      },
      .measured_seconds = [&b] { return b.last->result.solve.seconds_per_iteration(); },
      .details = [&h, &b] {
        const auto measured = static_cast<double>(b.last->matrix_measured_bytes);
        return nlohmann::json{{"iterations", b.last->result.solve.iterations},
                              {"preconditioner", trilinos::to_string(trilinos::BelosHittingOptions{}.preconditioner)},
                              {"belos_solves", b.last->belos_solves},
                              {"memory_added_bytes", b.last->matrix_measured_bytes},
                              {"memory_accounted_bytes", b.last->matrix_extra_bytes},
                              {"matrix_extra_bytes", b.last->matrix_extra_bytes},
                              {"edge_array_bytes", h.edge_bytes},
                              {"memory_fraction_of_edges", measured / h.edge_bytes}};
      }};
}

// Ratios, not verdicts: the acceptance targets live in the README and its checks.
void tessera_summary(Report& report, const std::vector<Result>& rows, const Built& el, const Built& crs,
                     double edge_bytes) {
  const double ratio = median_paired_ratio(rows[1].timing, rows[0].timing);
  const double el_mem = static_cast<double>(el.measured) / edge_bytes;
  const double crs_mem = static_cast<double>(crs.measured) / edge_bytes;
  report.add_summary(
      strprintf("time per CG iteration (best): EdgeListMatrix %.3f ms, CrsMatrix %.3f ms; median of paired rounds %.2fx\n"
                "memory added (edge arrays %.1f MiB): EdgeListMatrix %.1f MiB = %.1f%%, CrsMatrix %.1f MiB = %.0f%%",
                rows[1].timing.best * 1e3, rows[0].timing.best * 1e3, ratio, edge_bytes / 1048576,
                static_cast<double>(el.measured) / 1048576, 100 * el_mem, static_cast<double>(crs.measured) / 1048576,
                100 * crs_mem),
      {{"time_ratio", ratio}, {"edgelist_memory_fraction", el_mem}, {"crs_memory_fraction", crs_mem}});
}

void belos_summaries(Report& report, const std::vector<Result>& rows, const HittingRun& h, const BelosRun& belos_el,
                     const BelosRun& belos_crs) {
  const double vs_crs = median_paired_ratio(rows[3].timing, rows[2].timing);
  const double vs_tessera = median_paired_ratio(rows[3].timing, rows[1].timing);
  report.add_summary(
      strprintf("Belos per iteration (best): EdgeListRowMatrix %.3f ms, CrsMatrix %.3f ms; median of paired rounds %.2fx; "
                "EdgeListRowMatrix vs Tessera's CG on EdgeListMatrix: %.2fx",
                rows[3].timing.best * 1e3, rows[2].timing.best * 1e3, vs_crs, vs_tessera),
      {{"belos_rowmatrix_vs_crs", vs_crs}, {"belos_rowmatrix_vs_tessera_cg", vs_tessera}});
  // Memory the Tpetra operators add (measured anonymous memory, summed over
  // the ranks) on the solver's path (Ifpack2 Diagonal: no Tpetra column Map
  // or Import), against the CrsMatrix copy.
  const double e = h.edge_bytes;
  const double row_mem = static_cast<double>(belos_el.last->matrix_measured_bytes) / e;
  const double crs_copy_mem = static_cast<double>(belos_crs.last->matrix_measured_bytes) / e;
  report.add_summary(
      strprintf("Tpetra memory added (edge arrays %.1f MiB): EdgeListRowMatrix %.1f MiB = %.1f%%, CrsMatrix %.1f MiB = %.0f%%",
                e / 1048576, row_mem * e / 1048576, 100 * row_mem, crs_copy_mem * e / 1048576, 100 * crs_copy_mem),
      {{"belos_rowmatrix_memory_fraction", row_mem}, {"belos_crs_memory_fraction", crs_copy_mem}});
  // The matrix alone, with Tpetra's column Map and Import (what Ifpack2's
  // Relaxation asks for) and without (Ifpack2 Diagonal's path): Tpetra's
  // part measured alone, the rest the RowMatrix's own.
  const auto split = trilinos::row_matrix_memory(h.graph);
  const double total = static_cast<double>(split.total_bytes) / e, tpetra = static_cast<double>(split.tpetra_bytes) / e;
  const double own = std::max(0.0, total - tpetra), omitted = static_cast<double>(split.omitted_total_bytes) / e;
  report.add_summary(strprintf("EdgeListRowMatrix (%s columns) alone: %.1f%% of edge arrays without Tpetra's column Map "
                               "and Import (Ifpack2 Diagonal); with them (Ifpack2 Relaxation) %.1f%% = Tpetra's %.1f%% + "
                               "its own %.1f%%",
                               split.layout.c_str(), 100 * omitted, 100 * total, 100 * tpetra, 100 * own),
                     {{"rowmatrix_column_layout", split.layout},
                      {"rowmatrix_without_tpetra_columns_fraction", omitted},
                      {"rowmatrix_memory_fraction", total},
                      {"rowmatrix_tpetra_required_fraction", tpetra},
                      {"rowmatrix_own_fraction", own}});
}
}  // namespace

bool run_hitting_bench(Runtime& rt, const HittingBenchOptions& o) {
  auto spec = o.grid_side ? graph::GraphSpec::grid({o.grid_side, o.grid_side, o.grid_side})
                         : graph::GraphSpec::kronecker(o.kron_scale);
  const std::string name = "tessera-bench-hitting-" + rt.job_id();
  progress(rt, o.format,
           strprintf("hitting: %s, largest component, CG tolerance %.1e", spec.describe().c_str(), o.tolerance));
  auto g = graph::generate(rt, spec, StorageOptions::shared(name));
  auto comps = graph::fastsv(g);
  auto lcc = graph::largest_component(g, comps.labels, StorageOptions::shared(name + "-lcc"));
  // The destination (and weight) arrays over all ranks, at the graph's id width.
  HittingRun h{o, lcc.graph, static_cast<double>(lcc.graph.edge_array_bytes())};
  h.ho.cg.tolerance = o.tolerance;
  Report report(rt, "hitting", {{"graph", o.grid_side ? "mesh" : "kron"}, {"kron_scale", o.kron_scale},
                                {"grid_side", o.grid_side}, {"lcc_vertices", h.graph.vertices()},
                                {"lcc_edges", h.graph.edges()}, {"tolerance", o.tolerance}, {"reps", o.reps}}, o.format);
  report.set_baselines({"CrsMatrix"});
  Built el = build_matrix(rt, h.graph, false);
  Built crs = build_matrix(rt, h.graph, true);
  std::vector<Variant> variants{tessera_variant(h, "CrsMatrix", "heap copy", crs, crs),
                                tessera_variant(h, "EdgeListMatrix", "shared", el, crs)};
  std::optional<trilinos::Session> session;
  BelosRun belos_crs{trilinos::MatrixKind::crs}, belos_el{trilinos::MatrixKind::edge_list};
  if (trilinos::available()) {
    if (!trilinos::Session::active()) session.emplace(rt);
    variants.push_back(belos_variant(h, "Belos/CrsMatrix", "heap copy", belos_crs, crs));
    variants.push_back(belos_variant(h, "Belos/EdgeListRowMatrix", "shared", belos_el, crs));
  }
  // The row's time is the best seconds per CG iteration. In rounds, and the
  // ratios are the median of the rounds' paired ratios: the machine's speed
  // drifts over the seconds between one variant's runs and the next's.
  auto rows = run_variants(rt, report, variants, 1.0, "CG it/s", RunOrder::interleaved);
  tessera_summary(report, rows, el, crs, h.edge_bytes);
  if (rows.size() == 4) belos_summaries(report, rows, h, belos_el, belos_crs);
  return report.print();
}

}  // namespace tessera::bench
