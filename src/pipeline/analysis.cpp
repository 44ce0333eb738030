// The analysis backends and the analysis step (include/tessera/pipeline/analysis.hpp).
#include "tessera/pipeline/analysis.hpp"

#include <cmath>
#include <limits>
#include <optional>

#include "tessera/analyze/client.hpp"
#include "tessera/linalg/crs_matrix.hpp"
#include "tessera/linalg/edge_list_matrix.hpp"
#include "tessera/linalg/hitting_summary.hpp"
#include "tessera/pipeline/input.hpp"
#include "tessera/runtime/collective.hpp"
#include "tessera/runtime/error.hpp"
#include "tessera/runtime/fault_injection.hpp"
#include "tessera/trilinos/hitting.hpp"
#include "tessera/trilinos/spectral.hpp"

namespace tessera::pipeline {

using nlohmann::json;

std::string default_solver() { return trilinos::available() ? "belos" : "tessera"; }

namespace {
void one_of(const std::string& what, const std::string& value, std::initializer_list<const char*> choices) {
  std::string names;
  for (const char* c : choices) {
    if (value == c) return;
    names += std::string(names.empty() ? "" : ", ") + c;
  }
  throw ConfigError(what + " must be one of " + names + ", not '" + value + "'");
}
}  // namespace

AnalysisOptions resolved(AnalysisOptions o) {
  if (o.solver.empty()) o.solver = default_solver();
  one_of("the analysis kind", o.kind, {"hitting", "fiedler", "centrality"});
  one_of("the analysis", o.analysis, {"inprocess", "process", "container"});
  one_of("the solver", o.solver, {"tessera", "belos"});
  one_of("the preconditioner", o.preconditioner, {"diagonal", "relaxation"});
  one_of("the matrix", o.matrix, {"edgelist", "crs"});
  one_of("the eigensolver", o.eigensolver, {"lobpcg", "krylov-schur"});
  if (o.max_restarts < 0) throw ConfigError("max_restarts must not be negative, not " + std::to_string(o.max_restarts));
  if (o.subspace < 3) throw ConfigError("the Krylov subspace must hold at least 3 vectors, not " + std::to_string(o.subspace));
  if (!(o.tolerance > 0 && o.tolerance < 1))
    throw ConfigError("the tolerance must lie in (0, 1), not " + std::to_string(o.tolerance));
  if (o.max_iterations <= 0)
    throw ConfigError("max_iterations must be positive, not " + std::to_string(o.max_iterations));
  if (!(o.attach_timeout > 0) || !(o.timeout > 0)) throw ConfigError("the analysis timeouts must be positive");
  return o;
}

void check_packed(const AnalysisOptions& o) {
  if (o.analysis != "inprocess")
    throw ConfigError("--packed analyses the packed rows in this process; tessera-analyze (--analysis " + o.analysis +
                      ", analysis=\"" + o.analysis + "\") reads an EdgeList's Shared arrays: run the analysis in "
                      "process (--analysis inprocess) or drop --packed");
  if (!trilinos::available())
    throw ConfigError("--packed analyses the packed rows with Trilinos (Belos, Anasazi), and this tessera was built "
                      "without it (" + trilinos::description() + "): drop --packed, or install Trilinos "
                      "(scripts/setup.sh) and rebuild with -DTESSERA_WITH_TRILINOS=ON");
  if (o.kind == "hitting" && o.solver != "belos")
    throw ConfigError("--solver " + o.solver + " reads an EdgeList; on the packed rows hitting times are solved by "
                      "Belos: use --solver belos (solver=\"belos\", the default) or drop --packed");
}

std::string verdict(const linalg::CgResult& r) {
  char text[200];
  std::snprintf(text, sizeof(text), "%d iterations%s: true relative residual %.3e, backward error %.1e (%s)",
                r.iterations, r.rounds > 1 ? (", " + std::to_string(r.rounds) + " rounds").c_str() : "",
                r.relative_residual, r.backward_error,
                r.status == linalg::SolveStatus::converged          ? "converged"
                : r.status == linalg::SolveStatus::rounding_limited ? "limited by rounding"
                                                                    : "NOT converged");
  return text;
}

namespace {
linalg::HittingOptions hitting_options(const AnalysisOptions& o, bool connected) {
  linalg::HittingOptions h;
  h.cg.tolerance = o.tolerance;
  h.cg.max_iterations = o.max_iterations;
  h.connected = connected;
  return h;
}
}  // namespace

Solved AnalysisBackend::solve(const graph::PackedGraph&, std::span<const std::uint64_t>, bool, Progress&) const {
  throw ConfigError("this analysis backend reads an EdgeList, not the packed form: drop --packed");
}

Solved TesseraCg::solve(const graph::EdgeList& g, std::span<const std::uint64_t> targets, bool connected,
                        Progress& p) const {
  if (o_.kind != "hitting")
    throw ConfigError("Tessera's CG solves hitting times, not the " + o_.kind + " analysis (AnasaziInProcess does)");
  p.step(o_.matrix == "crs" ? "building the CRS copy of the matrix" : "matrix: EdgeListMatrix on the edge arrays (no copy)");
  linalg::EdgeListMatrix el(g);
  std::optional<linalg::CrsMatrix> crs;
  if (o_.matrix == "crs") crs.emplace(el);
  const linalg::RowMatrix& matrix =
      crs ? static_cast<const linalg::RowMatrix&>(*crs) : static_cast<const linalg::RowMatrix&>(el);
  auto h = hitting_options(o_, connected);
  const int rank = g.runtime().rank();
  h.cg.on_iteration = [&p, rank, steps = o_.steps_before](int it, double res, double) {
    p.tick(false, "CG iteration %d: relative residual %.3e", it, res);
    if (steps > 0) FaultInjection::at_step(rank, steps + static_cast<std::uint64_t>(it));
  };
  p.step("hitting times: CG with Jacobi on the grounded Laplacian");
  Solved s{linalg::hitting_times(g, matrix, targets, h), std::nullopt, 0, 0, json()};
  p.tick(true, "CG stopped after %s", verdict(s.hitting->solve).c_str());
  s.matrix_extra_bytes = all_reduce<std::uint64_t>(g.runtime().comm(), matrix.extra_memory_bytes(), MPI_SUM);
  return s;
}

void BelosInProcess::check() const {
  if (!trilinos::available())
    throw ConfigError("the belos solver: this tessera was built without Trilinos (" + trilinos::description() +
                      "); use the tessera solver (--solver tessera, solver=\"tessera\"), or install Trilinos "
                      "(scripts/setup.sh) and rebuild with -DTESSERA_WITH_TRILINOS=ON");
}

namespace {
// Belos' options from the analysis' (the progress reports each product).
trilinos::BelosHittingOptions belos_options(const AnalysisOptions& a, bool connected, Progress& p) {
  trilinos::BelosHittingOptions o;
  o.hitting = hitting_options(a, connected);
  o.hitting.cg.on_iteration = [&p](int it, double, double seconds) {
    p.tick(false, "Belos iteration %d (%.3g s each)", it, seconds / it);
  };
  o.matrix = a.matrix == "crs" ? trilinos::MatrixKind::crs : trilinos::MatrixKind::edge_list;
  o.preconditioner =
      a.preconditioner == "relaxation" ? trilinos::Preconditioner::relaxation : trilinos::Preconditioner::diagonal;
  return o;
}

// Either graph form: Belos on its RowMatrix (`rows` says which, in the progress line).
template <class Graph>
Solved belos_solve(const AnalysisOptions& a, const Graph& g, std::span<const std::uint64_t> targets, bool connected,
                   Progress& p, const char* rows) {
  if (a.kind != "hitting")
    throw ConfigError("Belos solves hitting times, not the " + a.kind + " analysis (AnasaziInProcess does)");
  std::optional<trilinos::Session> session;
  if (!trilinos::Session::active()) session.emplace(g.runtime());
  const auto o = belos_options(a, connected, p);
  p.step("hitting times: Belos CG with Ifpack2 Jacobi (" + a.preconditioner + ") on the grounded Laplacian, " +
         (a.matrix == "crs" ? std::string("a Tpetra::CrsMatrix copy of the edges") : std::string(rows)) + " (" +
         trilinos::description() + ")");
  auto r = trilinos::belos_hitting_times(g, targets, o);
  p.tick(true, "Belos stopped after %s", verdict(r.result.solve).c_str());
  return {std::move(r.result), std::nullopt, r.matrix_extra_bytes, r.matrix_measured_bytes, json()};
}
}  // namespace

Solved BelosInProcess::solve(const graph::EdgeList& g, std::span<const std::uint64_t> targets, bool connected,
                             Progress& p) const {
  return belos_solve(o_, g, targets, connected, p, "a Tpetra::RowMatrix over the edge arrays (no copy)");
}

Solved BelosInProcess::solve(const graph::PackedGraph& g, std::span<const std::uint64_t> targets, bool connected,
                             Progress& p) const {
  return belos_solve(o_, g, targets, connected, p, "a Tpetra::RowMatrix over the packed rows (decoded as read, no copy)");
}

namespace {
const char* spectral_title(const std::string& kind) {
  return kind == "fiedler" ? "Fiedler vector of the Laplacian" : "eigenvector centrality (adjacency)";
}
void report_spectrum(Progress& p, const std::string& kind, const Spectrum& s) {
  p.tick(true, "%s = %.12g, residual %.3g, %d iterations (%s), %.3f s%s", kind == "fiedler" ? "lambda2" : "lambda",
         s.lambda, s.residual, s.iterations, s.method.c_str(), s.seconds, s.converged ? "" : " (NOT converged)");
}
}  // namespace

void AnasaziInProcess::check() const {
  if (!trilinos::available())
    throw ConfigError("the " + o_.kind + " analysis runs Anasazi: this tessera was built without Trilinos (" +
                      trilinos::description() + "); use --analysis-kind hitting, or install Trilinos "
                      "(scripts/setup.sh) and rebuild with -DTESSERA_WITH_TRILINOS=ON");
}

namespace {
// Either graph form: Anasazi on its RowMatrix (`rows` says which). `fix_sign`
// may change the vector's sign before it is reported.
template <class Graph, class FixSign>
Solved anasazi_solve(const AnalysisOptions& a, const Graph& g, Progress& p, const char* rows, FixSign fix_sign) {
  if (!spectral_kind(a.kind)) throw ConfigError("Anasazi computes the spectral kinds, not " + a.kind);
  std::optional<trilinos::Session> session;
  if (!trilinos::Session::active()) session.emplace(g.runtime());
  trilinos::SpectralOptions so;
  so.what = a.kind == "fiedler" ? trilinos::SpectralWhat::fiedler : trilinos::SpectralWhat::centrality;
  so.tolerance = a.tolerance;
  so.max_iterations = a.max_iterations;
  so.matrix = a.matrix == "crs" ? trilinos::MatrixKind::crs : trilinos::MatrixKind::edge_list;
  so.method = a.eigensolver == "krylov-schur" ? trilinos::EigenMethod::krylov_schur : trilinos::EigenMethod::lobpcg;
  so.max_restarts = a.max_restarts;
  so.subspace = a.subspace;
  p.step(std::string(spectral_title(a.kind)) + " by Anasazi " + trilinos::to_string(so.method) + " on " +
         (a.matrix == "crs" ? std::string("a Tpetra::CrsMatrix copy of the edges") : std::string(rows)) + " (" +
         trilinos::description() + ")");
  auto r = trilinos::spectral(g, so);
  fix_sign(r.vector);
  linalg::Vector vector(g.vertex_map());
  std::copy(r.vector.begin(), r.vector.end(), vector.local().begin());
  Spectrum s{std::move(vector), r.lambda,    r.next_lambda,
             r.residual,        r.iterations, r.converged,
             r.seconds,         r.iterations == 0 ? "dense (LAPACK)" : trilinos::to_string(r.method)};
  report_spectrum(p, a.kind, s);
  return {std::nullopt, std::move(s), r.matrix_extra_bytes, r.matrix_measured_bytes, json()};
}

// The Fiedler vector's sign by the ids of the graph g was packed from, as
// trilinos::spectral fixes an EdgeList's by its own ids: the entry of the
// smallest id above 1e-6 of the largest entry is positive.
void sign_by_original_ids(const graph::PackedGraph& g, std::vector<double>& x) {
  const DistArray<std::uint64_t>* original = g.original_ids();
  if (!original) return;  // the packed ids are the graph's own: trilinos::spectral's rule holds
  MPI_Comm comm = g.runtime().comm();
  auto ids = original->local();
  double largest = 0;
  for (double v : x) largest = std::max(largest, std::abs(v));
  largest = all_reduce(comm, largest, MPI_MAX);
  std::uint64_t first = std::numeric_limits<std::uint64_t>::max();
  double value = 0;
  for (std::size_t i = 0; i < x.size(); ++i)
    if (std::abs(x[i]) > 1e-6 * largest && ids[i] < first) first = ids[i], value = x[i];
  const std::uint64_t global_first = all_reduce(comm, first, MPI_MIN);
  if (all_reduce(comm, global_first == first && value < 0 ? -1.0 : 1.0, MPI_MIN) < 0)
    for (double& v : x) v = -v;
}
}  // namespace

Solved AnasaziInProcess::solve(const graph::EdgeList& g, std::span<const std::uint64_t>, bool, Progress& p) const {
  return anasazi_solve(o_, g, p, "a Tpetra::RowMatrix over the edge arrays (no copy)", [](std::vector<double>&) {});
}

Solved AnasaziInProcess::solve(const graph::PackedGraph& g, std::span<const std::uint64_t>, bool, Progress& p) const {
  const bool fiedler = o_.kind == "fiedler";
  return anasazi_solve(o_, g, p, "a Tpetra::RowMatrix over the packed rows (decoded as read, no copy)",
                       [&](std::vector<double>& x) {
                         if (fiedler) sign_by_original_ids(g, x);
                       });
}

Solved AnalyzeProcess::solve(const graph::EdgeList& g, std::span<const std::uint64_t> targets, bool connected,
                             Progress& p) const {
  analyze::ProcessOptions o;
  o.isolation = contained() ? analyze::Isolation::container : analyze::Isolation::process;
  o.solver = o_.solver;
  o.preconditioner = o_.preconditioner;
  o.program = o_.program;
  o.launcher = o_.launcher;
  o.control = o_.control;
  o.attach_timeout = o_.attach_timeout;
  o.timeout = o_.timeout;
  o.quiet = o_.quiet;
  o.group_access = o_.group_access;
  const bool hitting = o_.kind == "hitting";
  p.step(std::string(hitting ? "hitting times" : spectral_title(o_.kind)) + " in a separate " +
         (contained() ? "sandboxed (bwrap) " : "") + "process (tessera-analyze, " +
         (hitting ? o_.solver + " solver" : std::string("Anasazi")) + ") on the Shared edge arrays (no copy)");
  auto handshake_json = [](const analyze::Handshake& hs, int belos_solves, std::uint64_t growth) {
    return json{{"control", hs.control_path},
                {"result", hs.result_path},
                {"command", hs.command},
                {"launch_seconds", hs.launch_seconds},
                {"request_to_start_seconds", hs.request_to_start_seconds},
                {"result_to_resume_seconds", hs.result_to_resume_seconds},
                {"shutdown_seconds", hs.shutdown_seconds},
                {"liveness_period_seconds", hs.period_seconds},
                {"belos_solves", belos_solves},
                {"analysis_anonymous_memory_growth_bytes", growth}};
  };
  auto timing = [&p](const analyze::Handshake& hs, const std::string& outcome) {
    p.tick(true, "analysis %s: launch %.3f s, request -> start %.1f us, result -> resume %.1f us; %s",
           hs.analysis.c_str(), hs.launch_seconds, hs.request_to_start_seconds * 1e6,
           hs.result_to_resume_seconds * 1e6, outcome.c_str());
  };
  if (!hitting) {
    analyze::SpectralRequest request;
    request.what = o_.kind == "fiedler" ? analyze::SpectralKind::fiedler : analyze::SpectralKind::centrality;
    request.tolerance = o_.tolerance;
    request.max_iterations = o_.max_iterations;
    auto r = analyze::spectral_out_of_process(g, request, o);
    timing(r.handshake, "Anasazi answered");
    Spectrum s{std::move(r.vector), r.lambda, r.next_lambda, r.residual, r.iterations,
               r.converged,        r.seconds, r.method};
    report_spectrum(p, o_.kind, s);
    return {std::nullopt, std::move(s), r.matrix_extra_bytes, 0,
            handshake_json(r.handshake, 0, r.analysis_anonymous_growth_bytes)};
  }
  auto r = analyze::hitting_times_out_of_process(g, targets, hitting_options(o_, connected), o);
  timing(r.handshake, verdict(r.result.solve));
  return {std::move(r.result), std::nullopt, r.matrix_extra_bytes, 0,
          handshake_json(r.handshake, r.belos_solves, r.analysis_anonymous_growth_bytes)};
}

void AnalyzeContainer::check() const {
  analyze::ProcessOptions o;
  o.launcher = o_.launcher;
  std::string program;
  if (!analyze::launcher_available(o, &program))
    throw ConfigError("the container analysis: the launcher '" + program +
                      "' is not installed (Debian: apt-get install bubblewrap), or name another with "
                      "--analysis-launcher / TESSERA_ANALYZE_LAUNCHER");
}

std::unique_ptr<AnalysisBackend> make_backend(const AnalysisOptions& o) {
  if (o.analysis == "container") return std::make_unique<AnalyzeContainer>(o);
  if (o.analysis == "process") return std::make_unique<AnalyzeProcess>(o);
  if (spectral_kind(o.kind)) return std::make_unique<AnasaziInProcess>(o);
  if (o.solver == "belos") return std::make_unique<BelosInProcess>(o);
  return std::make_unique<TesseraCg>(o);
}

namespace {
// The columns of an analysis' output.
graph::VertexValuesOptions columns(const Analyzed& a, graph::PendingOutputs& pending) {
  if (a.hitting)
    return {"vertex", "hitting_time", "nan", &pending, "nan: unreachable (no walk from the vertex reaches a target)"};
  return {"vertex", a.kind, "nan", &pending, ""};
}
std::span<const double> values_of(const Analyzed& a) {
  return a.hitting ? std::span<const double>(a.hitting->times.local()) : std::span<const double>(a.spectrum->vector.local());
}
}  // namespace

void write_result(const graph::IdMap& ids, const Analyzed& a, const std::string& output, Progress& p,
                  graph::PendingOutputs& pending) {
  p.step("writing " + shown(output));
  graph::write_vertex_values(ids, values_of(a), output, columns(a, pending));
}

void write_result(const graph::PackedGraph& g, const graph::IdMap& file_ids, const Analyzed& a,
                  const std::string& output, Progress& p, graph::PendingOutputs& pending) {
  p.step("writing " + shown(output) + " (in the file's vertex order)");
  Runtime& rt = file_ids.runtime();
  // The values and which vertices have one, on the vertex ranges of the
  // graph g was packed from; then this rank's vertices that have one, in
  // order, as a graph of their own (a map of their file ids).
  const auto values = values_of(a);
  const auto placed = in_file_order(g, file_ids, values);
  const std::vector<std::uint8_t> ones(values.size(), 1);
  const auto held = in_file_order(g, file_ids, std::span<const std::uint8_t>(ones));
  const auto h = held.local();
  const auto v = placed.local();
  const DistArray<std::uint64_t>* relabelled = file_ids.relabelled_ids();
  const std::uint64_t begin = file_ids.vertex_ranges().begin(rt.rank());
  std::vector<std::uint64_t> kept_ids;  // file id - base
  std::vector<double> kept_values;
  for (std::size_t i = 0; i < h.size(); ++i)
    if (h[i]) {
      kept_ids.push_back(relabelled ? relabelled->local()[i] : begin + i);
      kept_values.push_back(v[i]);
    }
  DistArray<std::uint64_t> ids(rt, Distribution::weighted_block(all_gather(rt.comm(), std::uint64_t{kept_ids.size()})));
  std::copy(kept_ids.begin(), kept_ids.end(), ids.local().begin());
  const auto lines = graph::IdMap::relabelled(std::move(ids), file_ids.base());
  graph::write_vertex_values(lines, std::span<const double>(kept_values), output, columns(a, pending));
}

namespace {

json hitting_json(const AnalysisOptions& o, const graph::IdMap& ids, const std::vector<std::uint64_t>& targets,
                  Solved& s, Progress& p) {
  const auto& h = *s.hitting;
  auto summary = linalg::summarize(h.times);
  const std::uint64_t farthest = ids.file_id(summary.farthest);
  p.step(count_of(summary.reachable, "reachable vertex", "reachable vertices") + ", " +
         count_of(summary.unreachable, "unreachable", "unreachable") + "; mean hitting time " +
         std::to_string(summary.mean) + ", max " + std::to_string(summary.max) + " (vertex " +
         std::to_string(farthest) + ")");
  std::vector<std::uint64_t> target_ids(targets);
  ids.translate(target_ids);
  return {{"matrix", o.matrix},
          {"solver", o.solver},
          {"preconditioner", o.solver == "belos" ? json(o.preconditioner) : json(nullptr)},
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
          {"reachable", summary.reachable},
          {"unreachable", summary.unreachable},
          {"min", summary.min},
          {"mean", summary.mean},
          {"max", summary.max},
          {"farthest_vertex", farthest == kNoIndex ? json(nullptr) : json(farthest)},
          {"matrix_extra_bytes", s.matrix_extra_bytes},
          {"analysis", o.analysis},
          {"handshake", std::move(s.handshake)}};
}

// The keys of `tessera spectral --json` for the same quantities.
json spectral_json(const AnalysisOptions& o, Solved& s) {
  const auto& r = *s.spectrum;
  const bool fiedler = o.kind == "fiedler";
  return {{"what", o.kind},
          {fiedler ? "lambda2" : "lambda", r.lambda},
          {fiedler ? "lambda3" : "lambda_next", std::isnan(r.next_lambda) ? json() : json(r.next_lambda)},
          {"residual", r.residual},
          {"iterations", r.iterations},
          {"converged", r.converged},
          {"seconds", r.seconds},
          {"solver", r.method},
          {"matrix", o.analysis == "inprocess" ? o.matrix : std::string("edgelist")},
          {"matrix_extra_bytes", s.matrix_extra_bytes},
          {"matrix_measured_bytes", s.matrix_measured_bytes},
          {"analysis", o.analysis},
          {"handshake", std::move(s.handshake)}};
}

}  // namespace

namespace {
template <class Graph>
Analyzed analysis_of(const Graph& g, const graph::IdMap& ids, const std::vector<std::uint64_t>& targets,
                     bool connected, const AnalysisOptions& options, Progress& p) {
  const AnalysisOptions o = resolved(options);
  auto backend = make_backend(o);
  backend->check();
  Solved s = backend->solve(g, targets, connected, p);
  if (s.hitting.has_value() != (o.kind == "hitting") || s.spectrum.has_value() == (o.kind == "hitting"))
    throw Error("the " + o.analysis + " analysis answered another kind than " + o.kind);
  json j = s.hitting ? hitting_json(o, ids, targets, s, p) : spectral_json(o, s);
  return {o.kind, std::move(j), std::move(s.hitting), std::move(s.spectrum)};
}
}  // namespace

Analyzed analysis_step(const graph::EdgeList& g, const graph::IdMap& ids, const std::vector<std::uint64_t>& targets,
                       bool connected, const AnalysisOptions& options, Progress& p) {
  return analysis_of(g, ids, targets, connected, options, p);
}

Analyzed analysis_step(const graph::PackedGraph& g, const graph::IdMap& ids,
                       const std::vector<std::uint64_t>& targets, bool connected, const AnalysisOptions& options,
                       Progress& p) {
  check_packed(resolved(options));
  return analysis_of(g, ids, targets, connected, options, p);
}

}  // namespace tessera::pipeline
