// tessera spectral GRAPH [--what fiedler|centrality] [-o VECTOR] [--parts PARTS] [--json]:
// option parsing only. The workflow is the pipeline/ layer's
// (pipeline::run_spectral, which Python's spectral() runs too): the Fiedler
// vector and λ₂ of the graph Laplacian (with spectral bisection from it),
// or eigenvector centrality, by Anasazi (LOBPCG or Krylov–Schur) on the
// graph's own edge arrays, with the same time and memory report as the
// other graph commands.
#include "commands.hpp"

#include <memory>

namespace tessera::cli {

void add_spectral(CLI::App& app, Action& selected) {
  auto a = std::make_shared<GraphArgs>();
  a->o.analysis.kind = "fiedler";
  auto& an = a->o.analysis;
  auto* c = app.add_subcommand(
      "spectral",
      "Fiedler vector and lambda2 of the Laplacian, with spectral bisection, or eigenvector centrality "
      "(Anasazi LOBPCG or Krylov-Schur on the edge arrays, no matrix copy)");
  add_graph_input(c, a->o.input, "Input graph");
  c->add_option("--what", an.kind, "fiedler (lambda2 of the Laplacian; the graph must be connected) or centrality "
                                   "(largest eigenvalue of the adjacency)")
      ->check(CLI::IsMember({"fiedler", "centrality"}))
      ->capture_default_str();
  c->add_option("-o,--output", a->o.output,
                "Write 'vertex value' lines: the unit-norm vector (file ids); with --parts 2 'vertex fiedler part' "
                "lines" + kOutputNote);
  auto parts = std::make_shared<std::string>();
  c->add_option("--parts", *parts,
                "fiedler: the number of parts, 2 (spectral bisection): -o then writes 'vertex fiedler part' lines "
                "(part 0 or 1). An older form, --parts FILE, writes 'vertex part' lines to FILE (this release only)")
      ->type_name("K")
      ->each([a, parts](const std::string& value) {  // holds *parts, which CLI11 writes, alive
        if (!value.empty() && value.find_first_not_of("0123456789") == std::string::npos) {
          a->o.spectral.count = std::stoi(value.substr(0, 6));
          a->o.spectral.parts.clear();
          return;
        }
        a->o.spectral.parts = value;
        old_spellings_used().push_back("--parts " + value + " (a file) is the old form: write --parts 2 -o " + value +
                                       " (one file: 'vertex fiedler part'); accepted in this release only");
      });
  c->add_option("--split", a->o.spectral.split, "fiedler: bisect at the median value (halves) or at zero (sign)")
      ->check(CLI::IsMember({"median", "sign"}))
      ->capture_default_str();
  c->add_option("--solver", an.eigensolver,
                "Anasazi's lobpcg (Jacobi-preconditioned for fiedler; graphs under 13 vertices get krylov-schur) "
                "or krylov-schur (Block Krylov-Schur)")
      ->check(CLI::IsMember({"krylov-schur", "lobpcg"}))
      ->capture_default_str();
  c->add_option("--max-iterations", an.max_iterations, "LOBPCG iterations at most")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  c->add_option("--tolerance", an.tolerance, "Anasazi's relative residual ||Mx - lambda x|| / |lambda| to stop at")
      ->check(CLI::Range(0.0, 1.0))
      ->capture_default_str();
  c->add_option("--max-restarts", an.max_restarts, "Krylov-Schur restarts at most")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  c->add_option("--subspace", an.subspace, "Krylov basis size")->check(CLI::Range(3, 100000))->capture_default_str();
  c->add_option("--matrix", an.matrix, "edgelist (the edge arrays, no copy) or crs (a Tpetra CrsMatrix copy, for comparison)")
      ->check(CLI::IsMember({"edgelist", "crs"}))
      ->capture_default_str();
  add_input_options(c, a->o.input);
  add_symmetric_option(c, a->o.input);
  add_common(c, *a);
  c->callback([&selected, a] { selected = [a] { return run_workflow(*a, pipeline::run_spectral, false); }; });
}

}  // namespace tessera::cli
