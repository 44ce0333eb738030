// The analysis step of a workflow on an undirected graph, of one of three
// kinds (AnalysisOptions::kind): hitting times to a set of targets, the
// Fiedler vector and λ₂ of the Laplacian, or eigenvector centrality (the
// Perron vector of the adjacency). One interface, AnalysisBackend, with one
// backend per place the analysis runs, chosen from AnalysisOptions:
//
//   TesseraCg         in this process, Tessera's Jacobi-preconditioned CG
//                     (on the edge arrays, or on a CRS copy with matrix=crs);
//                     hitting times only
//   BelosInProcess    in this process, Trilinos: Belos CG with an Ifpack2
//                     Jacobi on a Tpetra RowMatrix over the edge arrays
//   AnasaziInProcess  in this process, Trilinos: the spectral kinds by
//                     Anasazi on the same RowMatrix (trilinos/spectral.hpp)
//   AnalyzeProcess    tessera-analyze, a separate MPI job on the graph's
//                     Shared arrays (analyze/client.hpp), any kind
//   AnalyzeContainer  the same behind a container launcher (bwrap)
//
// Every backend's operator reads the graph's own edge arrays: no copy of the
// graph in any mode (matrix=crs asks for the conventional copy in process).
// BelosInProcess and AnasaziInProcess also read a graph::PackedGraph's rows
// in place (the pipeline's --packed); check_packed names what else to use.
//
// THE DEFAULT SOLVER of `tessera hitting`, `tessera pipeline` and Python's
// hitting_times() and pipeline() is default_solver(): Belos when this
// Tessera was built with Trilinos, Tessera's CG otherwise. It is defined
// here and nowhere else; callers leave AnalysisOptions::solver empty to get it.
// The spectral kinds always run Anasazi (LOBPCG): the solver is hitting's.
#pragma once
#include <nlohmann/json.hpp>

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "tessera/graph/edge_list.hpp"
#include "tessera/graph/id_map.hpp"
#include "tessera/graph/packed_graph.hpp"
#include "tessera/graph/write.hpp"
#include "tessera/linalg/hitting_times.hpp"
#include "tessera/linalg/vector.hpp"
#include "tessera/pipeline/progress.hpp"

namespace tessera::pipeline {

// "belos" when Trilinos was built, else "tessera".
std::string default_solver();

struct AnalysisOptions {
  std::string kind = "hitting";             // hitting | fiedler | centrality: what is computed
  std::string analysis = "inprocess";       // inprocess | process (tessera-analyze) | container (bwrap)
  std::string solver;                       // tessera | belos; "" = default_solver()
  std::string preconditioner = "diagonal";  // belos: Ifpack2's Jacobi as diagonal or relaxation
  std::string matrix = "edgelist";          // in process: edgelist (no copy) or crs (the conventional copy)
  double tolerance = 1e-10;                 // relative residual to stop at (CG's; Anasazi's Ritz residual)
  int max_iterations = 20000;               // CG's, or LOBPCG's iterations
  // The spectral kinds in process: Anasazi's lobpcg or krylov-schur, and
  // Krylov-Schur's restarts and basis size (trilinos::SpectralOptions).
  std::string eigensolver = "lobpcg";
  int max_restarts = 1000;
  int subspace = 40;
  // process and container (analyze::ProcessOptions):
  std::string program;         // tessera-analyze; "" = $TESSERA_ANALYZE, beside this program, on PATH
  std::string launcher;        // container: the command put before the analysis; "" = analyze's default
  std::string control;         // process: start nothing; wait for a user-started analysis on this path
  double attach_timeout = 60;  // s for the analysis to start and attach
  double timeout = 3600;       // s for the whole analysis
  bool quiet = false;          // the analysis prints no progress lines
  bool group_access = false;   // its control segment and result group-readable and -writable
  // > 0: the in-process CG's iteration k is the supervisor's step
  // steps_before + k (FaultInjection::at_step: a heartbeat, and where an
  // injected failure strikes); the pipeline's stages are the steps before.
  std::uint64_t steps_before = 0;
};

// The options checked (ConfigError naming the bad value and the choices)
// and the solver filled in with default_solver() when empty.
AnalysisOptions resolved(AnalysisOptions options);
// ConfigError, naming what to use instead, unless `options` (resolved) run
// on a packed graph (graph::PackedGraph): in process, by Belos (hitting
// times) or Anasazi (the spectral kinds), which read its rows in place.
void check_packed(const AnalysisOptions& options);

// The kinds, in the order error messages name them.
inline constexpr const char* kAnalysisKinds[] = {"hitting", "fiedler", "centrality"};
inline bool spectral_kind(const std::string& kind) { return kind == "fiedler" || kind == "centrality"; }

// A spectral kind's answer.
struct Spectrum {
  linalg::Vector vector;  // unit norm, on the graph's vertex ranges; the same at every rank count
  double lambda = 0;      // λ₂ of L (fiedler) or λ_max of A (centrality)
  double next_lambda = 0; // λ₃ of L / A's second largest; NaN when the graph has none
  double residual = 0;    // true ||Mx - λx|| / |λ|
  int iterations = 0;
  bool converged = false;
  double seconds = 0;     // the eigensolver alone
  std::string method;     // "lobpcg", "krylov-schur" or "dense (LAPACK)"
};

// What a backend hands back: `hitting` for kind hitting, else `spectrum`.
struct Solved {
  std::optional<linalg::HittingTimes> hitting;  // times on the graph's vertex ranges
  std::optional<Spectrum> spectrum;
  std::uint64_t matrix_extra_bytes = 0;  // what the operator allocated, summed over ranks
  std::uint64_t matrix_measured_bytes = 0;  // in process: the heap's growth while the operator was built
  nlohmann::json handshake;              // out of process: what the handshake measured; null in process
};

class AnalysisBackend {
 public:
  virtual ~AnalysisBackend() = default;
  // ConfigError when this backend cannot run here (no Trilinos, no
  // launcher); callers ask before reading anything.
  virtual void check() const {}
  // Collective: the options' kind on undirected `g`. Hitting times to
  // `targets` (internal ids), `connected`: every vertex reaches a target (a
  // largest component); a spectral kind ignores both (fiedler: ConfigError
  // when `g` is not connected).
  virtual Solved solve(const graph::EdgeList& g, std::span<const std::uint64_t> targets, bool connected,
                       Progress& progress) const = 0;
  // The same on a packed graph's rows read in place (targets, times and the
  // vector in its numbering). BelosInProcess and AnasaziInProcess read
  // them; the others throw check_packed's ConfigError.
  virtual Solved solve(const graph::PackedGraph& g, std::span<const std::uint64_t> targets, bool connected,
                       Progress& progress) const;
};

class TesseraCg : public AnalysisBackend {
 public:
  using AnalysisBackend::solve;
  explicit TesseraCg(AnalysisOptions options) : o_(std::move(options)) {}
  Solved solve(const graph::EdgeList& g, std::span<const std::uint64_t> targets, bool connected,
               Progress& progress) const override;

 private:
  AnalysisOptions o_;
};

// Needs a trilinos::Session: uses the open one, else opens one for the
// call (Kokkos starts once per process: a caller that solves more than once,
// like Python, keeps a Session open).
class BelosInProcess : public AnalysisBackend {
 public:
  explicit BelosInProcess(AnalysisOptions options) : o_(std::move(options)) {}
  void check() const override;
  Solved solve(const graph::EdgeList& g, std::span<const std::uint64_t> targets, bool connected,
               Progress& progress) const override;
  // trilinos::belos_hitting_times on the packed rows (PackedRowMatrix).
  Solved solve(const graph::PackedGraph& g, std::span<const std::uint64_t> targets, bool connected,
               Progress& progress) const override;

 private:
  AnalysisOptions o_;
};

// The spectral kinds in this process: Anasazi on a Tpetra RowMatrix over
// the edge arrays (matrix=crs: on a CrsMatrix copy); a Session as Belos'.
class AnasaziInProcess : public AnalysisBackend {
 public:
  explicit AnasaziInProcess(AnalysisOptions options) : o_(std::move(options)) {}
  void check() const override;
  Solved solve(const graph::EdgeList& g, std::span<const std::uint64_t> targets, bool connected,
               Progress& progress) const override;
  // trilinos::spectral on the packed rows; the Fiedler vector's sign fixed by
  // the ids of the graph packed (g.original_ids()) as the EdgeList's run
  // fixes it by its own, so both forms give the same vector.
  Solved solve(const graph::PackedGraph& g, std::span<const std::uint64_t> targets, bool connected,
               Progress& progress) const override;

 private:
  AnalysisOptions o_;
};

// `g` must be in Shared storage. Whether tessera-analyze has Trilinos is
// its own to say (it refuses a Belos request it cannot serve).
class AnalyzeProcess : public AnalysisBackend {
 public:
  using AnalysisBackend::solve;
  explicit AnalyzeProcess(AnalysisOptions options) : o_(std::move(options)) {}
  Solved solve(const graph::EdgeList& g, std::span<const std::uint64_t> targets, bool connected,
               Progress& progress) const override;

 protected:
  virtual bool contained() const { return false; }
  AnalysisOptions o_;
};

class AnalyzeContainer : public AnalyzeProcess {
 public:
  using AnalyzeProcess::AnalyzeProcess;
  void check() const override;  // the launcher's program is installed

 protected:
  bool contained() const override { return true; }
};

// The backend `options` (resolved) choose.
std::unique_ptr<AnalysisBackend> make_backend(const AnalysisOptions& options);

// The analysis step of a workflow: solved by the options' backend and
// summarised in file ids (`ids` maps g's vertices to them). `targets`: for
// hitting times only.
struct Analyzed {
  std::string kind;
  nlohmann::json json;  // the document's object of that kind ("hitting", "fiedler", "centrality")
  std::optional<linalg::HittingTimes> hitting;
  std::optional<Spectrum> spectrum;
};
Analyzed analysis_step(const graph::EdgeList& g, const graph::IdMap& ids, const std::vector<std::uint64_t>& targets,
                       bool connected, const AnalysisOptions& options, Progress& progress);
// The same on a packed graph (check_packed's backends); `ids` maps its
// vertices, `targets` are its ids.
Analyzed analysis_step(const graph::PackedGraph& g, const graph::IdMap& ids,
                       const std::vector<std::uint64_t>& targets, bool connected, const AnalysisOptions& options,
                       Progress& progress);
// "vertex time" lines (file ids; "unreachable"), or "vertex fiedler" /
// "vertex centrality" lines, to `output`, through `pending`.
void write_result(const graph::IdMap& ids, const Analyzed& result, const std::string& output, Progress& progress,
                  graph::PendingOutputs& pending);
// The same for a result on packed `g`, in the file's vertex order (the
// lines the EdgeList's run writes): `file_ids` maps the graph g.original_ids()
// leads to (pipeline::in_file_order). Collective.
void write_result(const graph::PackedGraph& g, const graph::IdMap& file_ids, const Analyzed& result,
                  const std::string& output, Progress& progress, graph::PendingOutputs& pending);

// "123 iterations: true relative residual 1e-11, backward error 2e-17 (converged)".
std::string verdict(const linalg::CgResult& r);

}  // namespace tessera::pipeline
