// Spectral benchmark: Anasazi's Fiedler vector on the graph's own edge
// arrays (EdgeListRowMatrix) against Anasazi on a Tpetra CrsMatrix copy of
// them (`tessera spectral --matrix crs`), in the same run. Each row's time is
// the eigensolver's seconds per iteration (Anasazi's setup and iterations
// over its iteration count; both operators take the same path, so their
// counts differ only by rounding); the memory each operator adds is what
// trilinos::spectral measures from /proc around its construction and first
// product (scripts/bench_spectral.py reads the same figure from `tessera
// spectral --json`).
#include <cmath>
#include <cstdio>

#include "graph_input.hpp"
#include "tessera/bench/benchmarks.hpp"
#include "tessera/bench/report.hpp"
#include "tessera/bench/verifiers.hpp"
#include "tessera/graph/components.hpp"
#include "tessera/linalg/edge_list_matrix.hpp"
#include "tessera/linalg/laplacian.hpp"
#include "tessera/runtime/collective.hpp"
#include "tessera/runtime/error.hpp"
#include "tessera/trilinos/spectral.hpp"

namespace tessera::bench {

Verdict check_laplacian_eigenpair(const graph::EdgeList& graph, std::span<const double> x, double lambda,
                                  double limit) {
  Runtime& rt = graph.runtime();
  if (x.size() != graph.local_vertices())
    throw MismatchError("check_laplacian_eigenpair: " + std::to_string(x.size()) + " entries for " +
                        std::to_string(graph.local_vertices()) + " vertices on this rank");
  linalg::EdgeListMatrix a(graph);
  linalg::Laplacian lap(a);
  linalg::Vector v(rt, graph.vertex_ranges()), lv(rt, graph.vertex_ranges());
  std::copy(x.begin(), x.end(), v.local().begin());
  lap.apply(v, lv);
  double sums[4] = {0, 0, 0, 0};  // sum x, x.x, x.Lx, |Lx - lambda x|^2
  auto ls = lv.local();
  for (std::size_t i = 0; i < x.size(); ++i) {
    sums[0] += x[i];
    sums[1] += x[i] * x[i];
    sums[2] += x[i] * ls[i];
    sums[3] += (ls[i] - lambda * x[i]) * (ls[i] - lambda * x[i]);
  }
  all_reduce(rt.comm(), sums, 4, MPI_SUM);
  const double n = static_cast<double>(graph.vertices());
  const double mean = std::fabs(sums[0]) / std::sqrt(n), norm = std::sqrt(sums[1]);
  const double rayleigh = sums[2] / sums[1];
  const double residual = std::sqrt(sums[3]) / std::fabs(lambda);
  char found[240];
  std::snprintf(found, sizeof(found),
                "|x| - 1 = %.1e, |sum x|/sqrt(n) = %.1e, lambda %.12g vs Rayleigh quotient %.12g, "
                "||Lx - lambda x|| / lambda = %.1e (limit %.1e)",
                norm - 1, mean, lambda, rayleigh, residual, limit);
  // Written so that a NaN anywhere fails.
  const bool ok = lambda > 0 && std::fabs(norm - 1) <= 1e-8 && mean <= 1e-8 &&
                  std::fabs(rayleigh - lambda) <= 1e-8 * lambda && residual <= limit;
  return {ok, found};
}

namespace {
// The graph's largest component (the Fiedler vector of a disconnected graph
// is not defined), with the seconds of each step.
struct SpectralInput {
  SpectralInput(const graph::EdgeList& input, const BenchGraph& b)
      : comps(graph::afforest(input)), lcc(graph::largest_component(input, comps.labels)), step(b.step),
        step_seconds(b.seconds) {}
  graph::Components comps;  // kept to the end, so the memory figures see the same heap
  graph::LargestComponent lcc;
  std::string step;
  double step_seconds = 0, lcc_seconds = 0;
};

SpectralInput spectral_input(Runtime& rt, const SpectralBenchOptions& o) {
  BenchGraph input = load_bench_graph(rt, o.kron_scale, o.graph, o.symmetric, o.undirected);
  if (input.graph->directed())
    throw ConfigError("tessera bench spectral: " + input.described +
                      " is read as a directed graph; the Laplacian needs an undirected one: give --symmetric (the "
                      "file lists both directions) or --undirected (add the reverse of every edge)");
  barrier(rt.comm());
  double t0 = MPI_Wtime();
  SpectralInput in(*input.graph, input);
  in.lcc_seconds = all_reduce(rt.comm(), MPI_Wtime() - t0, MPI_MAX);
  return in;
}

struct SpectralRun {
  trilinos::MatrixKind kind;
  std::optional<trilinos::SpectralResult> last{};
  double wall = 0;  // the whole call: connectivity check, operator, eigensolver, its own check
};

// What both variants share.
struct Spectral {
  Runtime& rt;
  const SpectralBenchOptions& o;
  const graph::EdgeList& g;
  double edge_bytes;  // the destination (and weight) arrays over all ranks
  trilinos::SpectralOptions so{};
  SpectralRun crs{trilinos::MatrixKind::crs}, el{trilinos::MatrixKind::edge_list};
};

// The agreement of the two answers: the same lambda2, and (when lambda2 is
// simple, so the vector is unique up to sign) the same vector.
std::string agreement(Runtime& rt, const trilinos::SpectralResult& a, const trilinos::SpectralResult& b, bool& ok) {
  double diff = 0, diff_flipped = 0;
  for (std::size_t i = 0; i < a.vector.size(); ++i) {
    diff = std::max(diff, std::fabs(a.vector[i] - b.vector[i]));
    diff_flipped = std::max(diff_flipped, std::fabs(a.vector[i] + b.vector[i]));
  }
  diff = all_reduce(rt.comm(), std::min(diff, diff_flipped), MPI_MAX);
  const double gap = std::isnan(b.next_lambda) ? INFINITY : (b.next_lambda - b.lambda) / b.lambda;
  const bool simple = gap > 1e-3;
  const bool same_lambda = std::fabs(a.lambda - b.lambda) <= 1e-8 * b.lambda;
  ok = same_lambda && (!simple || diff <= 1e-6);
  return strprintf("; vs the CrsMatrix answer: lambda2 diff %.1e, vector diff (up to sign) %.1e%s",
                   std::fabs(a.lambda - b.lambda) / b.lambda, diff,
                   simple ? "" : " (lambda2 not simple: vector not compared)");
}

double per_product(const trilinos::SpectralResult& s) {
  return s.operator_seconds / static_cast<double>(std::max<std::uint64_t>(1, s.operator_products));
}

nlohmann::json spectral_details(const Spectral& x, const SpectralRun& r) {
  const auto& s = *r.last;
  return nlohmann::json{{"lambda2", s.lambda},
                        {"lambda3", std::isnan(s.next_lambda) ? nlohmann::json() : nlohmann::json(s.next_lambda)},
                        {"residual", s.residual},
                        {"iterations", s.iterations},
                        {"solver", trilinos::to_string(s.method)},
                        {"eigensolver_seconds", s.seconds},
                        {"operator_products", s.operator_products},
                        {"operator_seconds", s.operator_seconds},
                        {"operator_seconds_per_product", per_product(s)},
                        {"call_seconds", r.wall},
                        {"memory_added_bytes", s.matrix_measured_bytes},
                        {"memory_accounted_bytes", s.matrix_extra_bytes},
                        {"edge_array_bytes", x.edge_bytes},
                        {"memory_fraction_of_edges", static_cast<double>(s.matrix_measured_bytes) / x.edge_bytes}};
}

Variant spectral_variant(Spectral& x, const std::string& name, const std::string& storage, SpectralRun& r) {
  return Variant{
      .variant = name,
      .storage = storage,
      .reps = x.o.reps,
      .work = 1.0,  // rate: eigensolver iterations per second
      .run = [&x, &r] {
        x.so.matrix = r.kind;
        const double start = MPI_Wtime();
        r.last.emplace(trilinos::spectral(x.g, x.so));
        r.wall = MPI_Wtime() - start;
      },
      .verify = [&x, &r](bool& ok) {
        // The CrsMatrix answer is verified first and is the reference.
        const auto& s = *r.last;
        Verdict v = check_laplacian_eigenpair(x.g, s.vector, s.lambda, 100 * x.o.tolerance);
        bool agrees = true;
        std::string found = strprintf("%d %s iterations%s; ", s.iterations, trilinos::to_string(s.method),
                                      s.converged ? "" : " (NOT converged)") +
                            v.found + agreement(x.rt, s, *x.crs.last, agrees);
        ok = s.converged && v.ok && agrees;
        return found + strprintf("; adds %.1f%% of edge arrays",
                                 100.0 * static_cast<double>(s.matrix_measured_bytes) / x.edge_bytes);
      },
      .measured_seconds = [&r] { return r.last->seconds / std::max(1, r.last->iterations); },
      .details = [&x, &r] { return spectral_details(x, r); }};
}

void spectral_summary(Report& report, const Spectral& x, const std::vector<Result>& rows) {
  const double ratio = median_paired_ratio(rows[1].timing, rows[0].timing);
  // The operator's share: its products' time per vector, from the last round
  // of each (the eigensolver's own work is the same for both).
  const auto &el = *x.el.last, &crs = *x.crs.last;
  const double el_product = per_product(el), crs_product = per_product(crs), e = x.edge_bytes;
  const double el_mem = static_cast<double>(el.matrix_measured_bytes) / e;
  const double crs_mem = static_cast<double>(crs.matrix_measured_bytes) / e;
  report.add_summary(
      strprintf("time per iteration (best): EdgeListRowMatrix %.3f ms, CrsMatrix %.3f ms; median of paired rounds "
                "%.2fx\noperator per product (last round): EdgeListRowMatrix %.3f us, CrsMatrix %.3f us: %.2fx; "
                "products take %.0f%% / %.0f%% of the eigensolver's time\nmemory added (edge arrays %.1f MiB): "
                "EdgeListRowMatrix %.2f MiB = %.1f%%, CrsMatrix %.1f MiB = %.0f%%",
                rows[1].timing.best * 1e3, rows[0].timing.best * 1e3, ratio, el_product * 1e6, crs_product * 1e6,
                el_product / crs_product, 100 * el.operator_seconds / el.seconds,
                100 * crs.operator_seconds / crs.seconds, e / 1048576, el_mem * e / 1048576, 100 * el_mem,
                crs_mem * e / 1048576, 100 * crs_mem),
      {{"edgelist_over_crs_per_iteration", ratio},
       {"edgelist_seconds_per_iteration", rows[1].timing.best},
       {"crs_seconds_per_iteration", rows[0].timing.best},
       {"edgelist_over_crs_per_product", el_product / crs_product},
       {"edgelist_memory_fraction", el_mem},
       {"crs_memory_fraction", crs_mem}});
}
}  // namespace

bool run_spectral_bench(Runtime& rt, const SpectralBenchOptions& o) {
  if (!trilinos::available())
    throw ConfigError("tessera bench spectral needs the trilinos/ layer (Anasazi): " + trilinos::description());
  progress(rt, o.format, "spectral: " + (o.graph.empty() ? "kron scale " + std::to_string(o.kron_scale) : o.graph) +
                             ", its largest component, Fiedler vector by Anasazi " + o.method);
  SpectralInput in = spectral_input(rt, o);
  const graph::EdgeList& g = in.lcc.graph;
  std::optional<trilinos::Session> session;
  if (!trilinos::Session::active()) session.emplace(rt);
  Spectral x{rt, o, g, static_cast<double>(g.edge_array_bytes())};
  x.so.what = trilinos::SpectralWhat::fiedler;
  x.so.method = o.method == "krylov-schur" ? trilinos::EigenMethod::krylov_schur : trilinos::EigenMethod::lobpcg;
  x.so.tolerance = o.tolerance;
  Report report(rt, "spectral",
                {{"graph", o.graph.empty() ? "kron" : o.graph}, {"kron_scale", o.kron_scale},
                 {"lcc_vertices", g.vertices()}, {"lcc_edges", g.edges()}, {"solver", o.method},
                 {"tolerance", o.tolerance}, {"reps", o.reps},
                 {"step_seconds", {{in.step, in.step_seconds}, {"largest_component", in.lcc_seconds}}}},
                o.format);
  report.set_baselines({"Anasazi/CrsMatrix"});
  std::vector<Variant> variants{spectral_variant(x, "Anasazi/CrsMatrix", "heap copy", x.crs),
                                spectral_variant(x, "Anasazi/EdgeListRowMatrix", "edge arrays", x.el)};
  // In rounds: the ratio is the median of the rounds' paired ratios (the
  // machine's speed drifts between one variant's runs and the next's).
  auto rows = run_variants(rt, report, variants, 1.0, "it/s", RunOrder::interleaved);
  spectral_summary(report, x, rows);
  return report.print();
}

}  // namespace tessera::bench
