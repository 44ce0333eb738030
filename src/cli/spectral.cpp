// tessera spectral GRAPH [--what fiedler|centrality] [-o VECTOR] [--parts PARTS] [--json]:
// the Fiedler vector and λ₂ of the graph Laplacian (with spectral bisection
// from it), or eigenvector centrality, by Anasazi (LOBPCG or Krylov–Schur) on the
// graph's own edge arrays (trilinos/spectral.hpp). The graph is read as the
// other graph commands read it (pipeline/input.hpp), with the same time and
// memory report.
#include "commands.hpp"

#include <cmath>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <optional>

#include "tessera/graph/write.hpp"
#include "tessera/pipeline/input.hpp"
#include "tessera/pipeline/report.hpp"
#include "tessera/trilinos/spectral.hpp"

namespace tessera::cli {

namespace {

struct SpectralArgs {
  pipeline::Input input;
  std::string what = "fiedler", output, parts, split = "median", matrix = "edgelist", method = "lobpcg";
  trilinos::SpectralOptions solver;
  bool json = false, quiet = false;
};

// An output checked before any work; refused on standard output with --json.
void check_output(Runtime& rt, const SpectralArgs& a, const std::string& path, const char* option) {
  if (path.empty()) return;
  auto out = graph::check_output_path(rt, path, graph::OutputKind::text_lines);
  if (out.standard_output() && a.json)
    throw ConfigError(std::string(option) + " " + path + " writes to standard output, where --json prints its "
                      "document; write it to a file, or drop --json");
}

int run_spectral(const SpectralArgs& a) {
  trilinos::SpectralOptions so = a.solver;
  so.what = a.what == "centrality" ? trilinos::SpectralWhat::centrality : trilinos::SpectralWhat::fiedler;
  so.method = a.method == "lobpcg" ? trilinos::EigenMethod::lobpcg : trilinos::EigenMethod::krylov_schur;
  so.matrix = a.matrix == "crs" ? trilinos::MatrixKind::crs : trilinos::MatrixKind::edge_list;
  const bool fiedler = so.what == trilinos::SpectralWhat::fiedler;
  if (!a.parts.empty() && !fiedler) throw ConfigError("--parts is the bisection by the Fiedler vector: use --what fiedler");
  if (!trilinos::available()) throw ConfigError("tessera spectral needs the trilinos/ layer (Anasazi): " + trilinos::description());
  Runtime rt;
  pipeline::ProgressSink sink = stderr_progress(rt, a.quiet);
  pipeline::Progress p(sink);
  pipeline::Report report(rt, p);
  check_output(rt, a, a.output, "-o");
  check_output(rt, a, a.parts, "--parts");
  auto loaded = report.timed("read", [&] { return pipeline::load(rt, a.input, p); });
  pipeline::describe(p, loaded.graph);
  const pipeline::ArrayBytes arrays = pipeline::array_bytes(loaded.graph);
  if (loaded.graph.directed())
    report.timed("symmetrize", [&] {
      pipeline::make_undirected(loaded, p, "the Laplacian and adjacency of an undirected graph");
    });
  const graph::EdgeList& g = loaded.graph;

  trilinos::Session session(rt);
  p.step(std::string(fiedler ? "Fiedler vector of the Laplacian" : "eigenvector centrality (adjacency)") +
         " by Anasazi " + trilinos::to_string(so.method) + " on " + (so.matrix == trilinos::MatrixKind::crs ? "a CrsMatrix copy" : "the edge arrays"));
  auto r = report.timed(fiedler ? "fiedler" : "centrality", [&] { return trilinos::spectral(g, so); });
  char line[200];
  std::snprintf(line, sizeof(line), "%s = %.12g, residual %.3g, %d iterations, %.3f s%s", fiedler ? "lambda2" : "lambda",
                r.lambda, r.residual, r.iterations, r.seconds, r.converged ? "" : " (NOT converged)");
  p.step(line);

  nlohmann::json j = {{"command", "spectral"},
                      {"what", trilinos::to_string(so.what)},
                      {"stats", pipeline::graph_json(g)},
                      {fiedler ? "lambda2" : "lambda", r.lambda},
                      {"residual", r.residual},
                      {"iterations", r.iterations},
                      {"converged", r.converged},
                      {"seconds", r.seconds},
                      {"solver", r.iterations == 0 ? "dense (LAPACK)" : trilinos::to_string(r.method)},
                      {"matrix", trilinos::to_string(so.matrix)},
                      {"matrix_extra_bytes", r.matrix_extra_bytes},
                      {"matrix_measured_bytes", r.matrix_measured_bytes},
                      {"edge_array_bytes", arrays.edges}};
  // The next eigenvalue tells whether the vector is unique (a gap) or one of an eigenspace.
  j[fiedler ? "lambda3" : "lambda_next"] = std::isnan(r.next_lambda) ? nlohmann::json() : nlohmann::json(r.next_lambda);

  graph::PendingOutputs outputs(rt);
  if (fiedler) {
    const auto rule = a.split == "sign" ? trilinos::SplitRule::sign : trilinos::SplitRule::median;
    auto b = report.timed("bisection", [&] { return trilinos::bisect(g, r.vector, rule); });
    p.step("bisection at the " + std::string(trilinos::to_string(rule)) + ": " + std::to_string(b.sizes[0]) + " + " +
           std::to_string(b.sizes[1]) + " vertices, " + std::to_string(b.cut_edges) + " edges cut");
    j["bisection"] = {{"split", trilinos::to_string(rule)},
                      {"threshold", b.threshold},
                      {"sizes", {b.sizes[0], b.sizes[1]}},
                      {"cut_edges", b.cut_edges}};
    if (!a.parts.empty())
      report.timed("write", [&] {
        std::vector<std::uint64_t> parts(b.part.begin(), b.part.end());
        p.step("writing " + pipeline::shown(a.parts));
        graph::write_vertex_values(loaded.ids, std::span<const std::uint64_t>(parts), a.parts,
                                   {"vertex", "part", "nan", &outputs});
      });
  }
  if (!a.output.empty())
    report.timed("write", [&] {
      p.step("writing " + pipeline::shown(a.output));
      graph::write_vertex_values(loaded.ids, std::span<const double>(r.vector), a.output,
                                 {"vertex", fiedler ? "fiedler" : "centrality", "nan", &outputs});
    });
  outputs.commit();
  report.finish(j, arrays);
  if (!r.converged && rt.rank() == 0)
    std::fprintf(stderr, "tessera: Anasazi did not reach the tolerance %g (true residual %.3g); raise --max-restarts "
                 "or --subspace\n", so.tolerance, r.residual);
  if (rt.rank() == 0 && a.json) std::printf("%s\n", j.dump().c_str());
  return r.converged ? 0 : 3;
}

}  // namespace

void add_spectral(CLI::App& app, Action& selected) {
  auto a = std::make_shared<SpectralArgs>();
  auto* c = app.add_subcommand(
      "spectral",
      "Fiedler vector and lambda2 of the Laplacian, with spectral bisection, or eigenvector centrality "
      "(Anasazi LOBPCG or Krylov-Schur on the edge arrays, no matrix copy)");
  c->add_option("graph", a->input.path, "Input graph (- reads standard input)")
      ->required()
      ->check(CLI::Validator(
          [](std::string& path) { return path == "-" ? std::string() : CLI::ExistingPath(path); }, "PATH|-"));
  c->add_option("--what", a->what, "fiedler (lambda2 of the Laplacian; the graph must be connected) or centrality "
                                   "(largest eigenvalue of the adjacency)")
      ->check(CLI::IsMember({"fiedler", "centrality"}))
      ->capture_default_str();
  c->add_option("-o,--output", a->output, "Write 'vertex value' lines: the unit-norm vector (file ids); - is standard output");
  c->add_option("--parts", a->parts, "fiedler: write 'vertex part' lines (0/1) of the bisection; - is standard output");
  c->add_option("--split", a->split, "fiedler: bisect at the median value (halves) or at zero (sign)")
      ->check(CLI::IsMember({"median", "sign"}))
      ->capture_default_str();
  c->add_option("--solver", a->method,
                "Anasazi's lobpcg (Jacobi-preconditioned for fiedler; graphs under 13 vertices get krylov-schur) "
                "or krylov-schur (Block Krylov-Schur)")
      ->check(CLI::IsMember({"krylov-schur", "lobpcg"}))
      ->capture_default_str();
  c->add_option("--max-iterations", a->solver.max_iterations, "LOBPCG iterations at most")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  c->add_option("--tolerance", a->solver.tolerance, "Anasazi's relative residual ||Mx - lambda x|| / |lambda| to stop at")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  c->add_option("--max-restarts", a->solver.max_restarts, "Krylov-Schur restarts at most")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  c->add_option("--subspace", a->solver.subspace, "Krylov basis size")->check(CLI::Range(3, 100000))->capture_default_str();
  c->add_option("--matrix", a->matrix, "edgelist (the edge arrays, no copy) or crs (a Tpetra CrsMatrix copy, for comparison)")
      ->check(CLI::IsMember({"edgelist", "crs"}))
      ->capture_default_str();
  c->add_option("--base", a->input.base, "First vertex id of a text file: 0 or 1 (default 1 for .mtx, else 0)")
      ->check(CLI::IsMember({0, 1}));
  c->add_flag("--relabel", a->input.relabel, "Number the ids that occur 0..n-1 (sparse SNAP ids)");
  c->add_flag("--undirected", a->input.undirected, "Add the reverse of every edge");
  c->add_flag("--symmetric", a->input.symmetric, "The text file lists both directions of every edge");
  c->add_flag("--pattern", a->input.pattern, "Ignore the weights (values of a structural matrix)");
  c->add_flag("--json", a->json, "Print the results as one JSON document on stdout");
  c->add_flag("-q,--quiet", a->quiet, "No progress lines on stderr");
  c->fallthrough();
  c->callback([&selected, a] { selected = [a] { return run_spectral(*a); }; });
}

}  // namespace tessera::cli
