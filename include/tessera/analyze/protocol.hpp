// What a caller asks tessera-analyze and what it answers: the request and
// reply that travel in the payload area of a control segment
// (storage/control.hpp owns the segment, its futex words, liveness and
// failure message; this file owns the meaning of the payload). Both sides
// include it; the schema version below guards against a caller and an
// analysis from different builds.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <sys/types.h>

#include "tessera/storage/control.hpp"

namespace tessera::analyze::protocol {

// Bump when Placement, Request or Reply change layout or meaning.
inline constexpr std::uint32_t kSchema = 4;
inline constexpr int kMaxTargets = 1024;
inline constexpr std::size_t kPathBytes = 512;
inline constexpr std::size_t kReasonBytes = 1024;
inline constexpr std::size_t kHostBytes = 64;

// What a request asks for: an analysis kind, or shutdown. An analysis
// that does not know a kind refuses the request naming the kinds it knows.
enum class Analysis : std::uint32_t { none = 0, hitting_times = 1, shutdown = 2, fiedler = 3, centrality = 4 };
// "hitting times", "fiedler", ...; "" for a value that is not an Analysis.
const char* analysis_name(std::uint32_t analysis) noexcept;
inline bool spectral(std::uint32_t analysis) noexcept {
  return analysis == static_cast<std::uint32_t>(Analysis::fiedler) ||
         analysis == static_cast<std::uint32_t>(Analysis::centrality);
}
// Anasazi's eigensolver that answered a spectral request.
enum class EigenMethod : std::uint32_t { krylov_schur = 0, lobpcg = 1 };
enum class Solver : std::uint32_t { tessera = 1, belos = 2 };
// Belos' Ifpack2 Jacobi: Diagonal (the RowMatrix then omits Tpetra's column
// Map and Import) or Relaxation.
enum class Preconditioner : std::uint32_t { diagonal = 0, relaxation = 1 };
// A failure is not a reply status: it is the control segment's (fail()).
enum class Status : std::uint32_t { pending = 0, ok = 1 };

struct Request {
  std::uint32_t analysis;  // Analysis: the kind
  std::uint32_t solver;    // Solver (hitting times)
  std::uint32_t target_count;  // hitting times: 1..kMaxTargets; a spectral kind: 0
  std::uint32_t connected;  // the caller knows every vertex reaches a target
  std::uint64_t vertices;
  double tolerance;
  std::int32_t max_iterations;
  std::uint32_t preconditioner;  // Preconditioner (belos only)
  // Metadata paths of Shared arrays: the graph's row offsets, destinations
  // (uint32 or uint64 ids, as their metadata says), weights (empty:
  // unweighted) and the result (float64 over the vertex ranges:
  // hitting times, or the unit-norm eigenvector of a spectral kind). A
  // bare file name lies beside the control segment.
  char offsets[kPathBytes];
  char dst[kPathBytes];
  char weight[kPathBytes];
  char result[kPathBytes];
  std::uint64_t targets[kMaxTargets];
};

struct Reply {
  std::uint32_t status;          // Status
  std::int32_t iterations;
  std::uint32_t converged;
  std::int32_t belos_solves;
  std::uint32_t solve_status;    // linalg::SolveStatus
  std::int32_t rounds;           // inner solves (restarts from the answer + 1)
  double relative_residual;      // true ||b - A x|| / ||b|| of the answer
  double backward_error;         // ||b - A x|| / (||A|| ||x|| + ||b||)
  double solve_seconds;
  double setup_seconds;
  std::uint64_t unreachable;
  std::uint64_t targets;
  std::uint64_t matrix_extra_bytes;
  std::uint64_t anonymous_growth_bytes;  // the analysis job's heap growth over the request (no-copy evidence)
  // CLOCK_MONOTONIC nanoseconds (one clock per host, across namespaces).
  std::int64_t request_posted_ns;  // caller rank 0, just before posting the request
  std::int64_t analysis_woke_ns;   // analysis rank 0, just after its wait returned
  std::int64_t result_posted_ns;   // analysis rank 0, just before posting the reply
  // A spectral kind (iterations, converged, solve_seconds and the bytes above too):
  double lambda;                   // λ₂ of L (fiedler) or λ_max of A (centrality)
  double next_lambda;              // the next eigenvalue in the same direction; NaN when none
  double eigen_residual;           // true ||Mx - λx|| / |λ|
  std::uint32_t eigen_method;      // EigenMethod (0 iterations: solved densely)
  char solve_reason[kReasonBytes];  // why the solve stopped when it did not converge
};

// Which caller ranks a control segment serves, written before the segment
// appears. A caller on several nodes has one control segment per node (the
// same path, in each node's own directory), created by the node's lowest
// rank: caller rank r's segments exist only on its node, so analysis rank r
// must run there and attach to that node's control segment.
struct Placement {
  std::uint32_t node;   // this node's index (nodes numbered by their lowest caller rank)
  std::uint32_t nodes;  // the caller's node count
  char host[kHostBytes];  // this node's host name as its caller ranks see it
  std::uint8_t serves[control::kMaxRanks];  // 1: caller rank r runs on this node
};

// The control segment's payload area, interpreted.
struct Payload {
  Placement placement;
  Request request;
  Reply reply;
  // Analysis rank r's signal handler writes the signal here when it is
  // stopped (SIGTERM: mpirun ends every rank once one rank has died), so a
  // caller tells a rank that was stopped from the one that failed first.
  std::uint32_t stopped[control::kMaxRanks];
  // Set by a caller before it fails the segment because an analysis rank died
  // (on any node): that analysis' mpirun is already ending it.
  std::uint32_t analysis_lost;
};

// The control segment of this schema: created by the caller's lowest rank on
// each node (`placement`: which ranks it serves; none: every rank, one node),
// opened by every other process (FormatError when it is of another schema).
std::unique_ptr<control::ControlSegment> create(const std::string& path, int ranks, mode_t mode,
                                                const Placement* placement = nullptr);
std::unique_ptr<control::ControlSegment> open(const std::string& path);

// A validated copy of the segment's placement (FormatError naming the file
// when the node index, count or host name are malformed).
Placement read_placement(const control::ControlSegment& segment);
// "host h" when the placement names a host, else "this node".
std::string node_name(const Placement& placement);

inline Payload& payload(const control::ControlSegment& segment) noexcept { return segment.payload_as<Payload>(); }

// A validated copy of the request in `segment` (FormatError naming the file
// and what is wrong: unknown analysis kind, solver or preconditioner, target
// count or ids, tolerance, iterations, array paths).
Request read_request(const control::ControlSegment& segment);

}  // namespace tessera::analyze::protocol
