// Hitting times solved by Trilinos (Belos CG with an Ifpack2 Jacobi
// preconditioner) on the graph's own edge arrays. Tessera types only: what
// the CLI and other callers include; no Trilinos header is reached from here.
// When Tessera was built without Trilinos every entry point below throws a
// ConfigError saying so (available() tells beforehand).
#pragma once
#include <cstdint>
#include <memory>
#include <span>
#include <string>

#include "tessera/graph/edge_list.hpp"
#include "tessera/graph/packed_graph.hpp"
#include "tessera/linalg/hitting_times.hpp"

namespace tessera::trilinos {

// Whether this Tessera was built with the trilinos/ layer.
bool available() noexcept;
// "Trilinos 13.2 (Tpetra, Belos, Ifpack2; Kokkos Serial)", or why it is absent.
std::string description();

// Kokkos and Tpetra, once per process (a Tpetra::ScopeGuard on the runtime's
// communicator). Create it after the Runtime, destroy it before: every
// Tpetra object must be gone by then. At most one at a time; the solvers
// below need one alive (ConfigError otherwise).
class Session {
 public:
  explicit Session(Runtime& rt);
  ~Session();
  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;
  static bool active() noexcept;

 private:
  struct State;
  std::unique_ptr<State> state_;
};

// Which operator Belos and Ifpack2 see.
enum class MatrixKind {
  edge_list,  // EdgeListRowMatrix: the grounded Laplacian read from the edge arrays (no copy)
  crs,        // a Tpetra::CrsMatrix copied from it (the conventional path, for comparison)
};
inline const char* to_string(MatrixKind kind) noexcept { return kind == MatrixKind::crs ? "crs" : "edgelist"; }

// Ifpack2's Jacobi preconditioner (M = diag(A), applied once from zero),
// two ways: the same iterates, different demands on the matrix.
enum class Preconditioner {
  diagonal,    // Ifpack2::Diagonal: reads the diagonal only, so the RowMatrix omits Tpetra's column Map and Import
  relaxation,  // Ifpack2::Relaxation ("Jacobi", one sweep): asks the graph for its Import at 2+ ranks
};
inline const char* to_string(Preconditioner p) noexcept {
  return p == Preconditioner::diagonal ? "diagonal" : "relaxation";
}

struct BelosHittingOptions {
  linalg::HittingOptions hitting;  // cg.tolerance / cg.max_iterations drive Belos; `solver` is set here
  MatrixKind matrix = MatrixKind::edge_list;
  Preconditioner preconditioner = Preconditioner::diagonal;
};

struct BelosHittingTimes {
  linalg::HittingTimes result;  // result.solve: Belos' iterations and seconds; relative_residual is the true one
  std::uint64_t matrix_extra_bytes = 0;  // summed over ranks: what the operator allocated (maps, importer, flags / the copy)
  int belos_solves = 0;                  // > 1 when Belos' own estimate stopped early and the true residual asked for more
  // Summed over ranks: anonymous memory the operator's construction and first
  // apply added (the CrsMatrix path: the copy alone, its RowMatrix source
  // released), as measured from /proc; the vectors and Belos are not in it.
  std::uint64_t matrix_measured_bytes = 0;
};

// The anonymous memory an EdgeListRowMatrix over `g` adds, summed over the
// ranks and measured from /proc (its construction and one apply): all of it,
// the part that is Tpetra's column Map and Import (built again the same way
// and measured alone), and all of it when those are omitted. That part is
// required of any RowMatrix Ifpack2's Relaxation preconditions: it asks the
// graph for its Import at 2+ ranks, and a Tpetra 13.2 Map that is not a
// plain range keeps an id per column. The rest is the matrix's own (the
// product's column values, flags, plans). Collective; needs a Session; `g`
// undirected.
struct RowMatrixMemory {
  std::uint64_t total_bytes = 0;
  std::uint64_t tpetra_bytes = 0;          // column Map + Import, as Tpetra holds them
  std::uint64_t omitted_total_bytes = 0;   // the matrix built with TpetraColumns::omitted (Ifpack2 Diagonal's path)
  std::string layout;                      // "owned", "dense" or "compact" (EdgeListRowMatrix's column layout)
};
RowMatrixMemory row_matrix_memory(const graph::EdgeList& g);

// Collective. Like linalg::hitting_times (same grounding, unreachable
// vertices NaN) with the solve done by Belos; `g` must be undirected.
BelosHittingTimes belos_hitting_times(const graph::EdgeList& g, std::span<const std::uint64_t> targets,
                                      const BelosHittingOptions& options = {});

// The same on a PackedGraph read in place (PackedRowMatrix: its byte-coded
// rows decoded by every product; no id array, no CrsMatrix unless
// options.matrix asks). Targets, times and the vertex ranges are the packed
// graph's (original_ids() maps them back). Unreachable vertices (NaN) are
// found by a breadth-first walk from the targets through the matrix's own
// products (reached_from), skipped with options.hitting.connected; the true
// residual is judged on the same grounded operator (Tessera's Laplacian
// needs an EdgeList). Collective; `g` undirected.
BelosHittingTimes belos_hitting_times(const graph::PackedGraph& g, std::span<const std::uint64_t> targets,
                                      const BelosHittingOptions& options = {});

}  // namespace tessera::trilinos
