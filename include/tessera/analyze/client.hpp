// The caller's side of an out-of-process analysis: a Tessera job hands its
// graph (already in Shared storage) to `tessera-analyze`, a separate program
// that links Trilinos and nothing of the caller's state, started by this
// job (as its own MPI job, or through a container launcher such as bwrap) or
// by the user. Nothing is copied: the analysis maps the graph's segments and
// writes its result (hitting times, or the eigenvector of a spectral kind)
// into a Shared result vector this job created.
// Synchronisation: storage/control.hpp (futex words, OFD-lock liveness).
//
// Segments to ranks: one analysis rank per caller rank (= per segment of
// every array): analysis rank r maps segment r of each array, so the vertex
// and edge ranges are the caller's. An analysis job of another size is
// refused on both sides with a message naming both counts. Across nodes:
// one control segment per node and analysis rank r on caller rank r's node
// (include/tessera/analyze/README.md).
#pragma once
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "tessera/graph/edge_list.hpp"
#include "tessera/linalg/hitting_times.hpp"
#include "tessera/linalg/vector.hpp"

namespace tessera::analyze {

enum class Isolation { process, container };

struct ProcessOptions {
  Isolation isolation = Isolation::process;
  std::string solver = "tessera";  // tessera (Tessera's CG) or belos (Trilinos); run by the analysis
  std::string preconditioner = "diagonal";  // belos: Ifpack2's Jacobi as diagonal or relaxation
  // tessera-analyze; default: $TESSERA_ANALYZE, else beside this program, else on PATH.
  std::string program;
  // Container: the command prefix (words split at spaces; SHMDIR becomes the
  // Shared directory). Default: $TESSERA_ANALYZE_LAUNCHER, else kDefaultLauncher.
  std::string launcher;
  // Non-empty: start nothing; create the control segment at this path and
  // wait for a user-started `tessera-analyze --control PATH`.
  std::string control;
  double attach_timeout = 60;  // s for every analysis rank to attach
  double timeout = 3600;       // s for the whole analysis
  double period = 0.1;         // s between liveness checks while waiting
  bool quiet = false;          // the analysis prints no progress lines
  // The control segment and the result vector mode 0660 instead of 0600, for
  // an analysis running under another uid of the same group (rootless containers).
  bool group_access = false;
};

inline constexpr const char* kDefaultLauncher =
    "bwrap --unshare-all --die-with-parent --ro-bind / / --proc /proc --dev /dev --tmpfs /tmp --bind SHMDIR SHMDIR";

// Handshake costs as measured by the caller (rank 0's view).
struct Handshake {
  std::string control_path;
  std::string result_path;
  std::string command;                   // what was started ("" when user-started)
  double launch_seconds = 0;             // start -> every analysis rank attached and ready
  double request_to_start_seconds = 0;   // request posted -> analysis rank 0 awake
  double result_to_resume_seconds = 0;   // result posted -> caller rank 0 awake
  double shutdown_seconds = 0;           // shutdown posted -> the launcher exited
  double period_seconds = 0;             // liveness check period (crash detection bound ~ 2 periods)
  std::string analysis;                  // describe() of analysis rank 0
};

struct ProcessHittingTimes {
  linalg::HittingTimes result;           // times: a Shared vector on the graph's vertex ranges
  std::uint64_t matrix_extra_bytes = 0;  // what the analysis' operator allocated, summed over its ranks
  int belos_solves = 0;
  std::uint64_t analysis_anonymous_growth_bytes = 0;  // the analysis job's heap growth, summed over its ranks
  Handshake handshake;
};

// Collective over g's runtime. `g` must be undirected and in Shared storage.
// Throws PeerError when the analysis dies or does not attach/answer in time,
// the analysis' own error (same category and message) when it refuses the
// request, ConfigError when the launcher cannot start.
ProcessHittingTimes hitting_times_out_of_process(const graph::EdgeList& g, std::span<const std::uint64_t> targets,
                                                 const linalg::HittingOptions& hitting, const ProcessOptions& options);

// The spectral kinds tessera-analyze runs (Anasazi on a Tpetra RowMatrix over
// the mapped edge arrays, as trilinos/spectral.hpp).
enum class SpectralKind { fiedler, centrality };
struct SpectralRequest {
  SpectralKind what = SpectralKind::fiedler;
  double tolerance = 1e-10;    // Anasazi's relative Ritz residual to stop at
  int max_iterations = 20000;  // LOBPCG's cap
};
struct ProcessSpectrum {
  linalg::Vector vector;  // unit norm: a Shared vector on the graph's vertex ranges
  double lambda = 0;      // λ₂ of L (fiedler) or λ_max of A (centrality)
  double next_lambda = 0; // the next eigenvalue; NaN when the graph has none
  double residual = 0;    // true ||Mx - λx|| / |λ|
  int iterations = 0;
  bool converged = false;
  double seconds = 0;
  std::string method;     // "lobpcg", "krylov-schur" or "dense (LAPACK)"
  std::uint64_t matrix_extra_bytes = 0;
  std::uint64_t analysis_anonymous_growth_bytes = 0;
  Handshake handshake;
};

// Collective, as hitting_times_out_of_process. Fiedler: the graph must be
// connected (the analysis refuses otherwise, naming the component count);
// an analysis built without Trilinos refuses with a ConfigError.
ProcessSpectrum spectral_out_of_process(const graph::EdgeList& g, const SpectralRequest& request,
                                        const ProcessOptions& options);

// Whether the container launcher's program (its first word) is on PATH.
bool launcher_available(const ProcessOptions& options, std::string* program = nullptr);

}  // namespace tessera::analyze
