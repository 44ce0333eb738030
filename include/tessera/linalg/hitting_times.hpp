// Hitting times of a random walk on an undirected graph: h(v) is the expected
// number of steps a walk from v takes to first reach the target set T. It
// solves h = 0 on T and L_UU h_U = d_U on the other vertices U (L = D - A,
// d = weighted degrees), here by Jacobi-preconditioned CG on the grounded
// Laplacian. Vertices whose component holds no target never arrive: they are
// grounded too and reported as unreachable (NaN), not as a number.
#pragma once
#include <cstdint>
#include <functional>
#include <span>

#include "tessera/graph/components.hpp"
#include "tessera/linalg/cg.hpp"
#include "tessera/linalg/row_matrix.hpp"

namespace tessera::linalg {

class Laplacian;

// Solves the grounded system L x = b from x = 0 in place of
// conjugate_gradient (another library's solver: trilinos/). `grounded` holds
// the local rows' flags (1 = grounded: an identity row, its column dropped).
using GroundedSolver = std::function<CgResult(const Laplacian& grounded_laplacian,
                                              std::span<const std::uint8_t> grounded, const Vector& b, Vector& x)>;

struct HittingOptions {
  CgOptions cg;
  graph::ComponentsOptions components;
  // The caller knows the graph is connected (it is a largest component it
  // just extracted): every vertex reaches a target, so the components pass
  // that finds unreachable vertices is skipped.
  bool connected = false;
  // Empty: Tessera's own Jacobi-preconditioned CG (options `cg`).
  GroundedSolver solver;
  // The grounded Laplacian's own buffers: `released` when another library's
  // solver iterates and Tessera's Laplacian only checks its answers.
  ProductBuffers laplacian_buffers = ProductBuffers::kept;
};

struct HittingTimes {
  Vector times;                  // on the graph's vertex ranges; NaN = unreachable
  std::uint64_t unreachable = 0;
  std::uint64_t targets = 0;     // distinct targets
  CgResult solve;
  double setup_seconds = 0;      // components, grounding, right-hand side
};

// Collective. `a` is the graph's adjacency matrix (an EdgeListMatrix or any
// RowMatrix on the same vertex ranges); every rank passes the same targets.
// The targets sorted and distinct: ConfigError for none, RangeError for one
// that is not among the graph's `vertices`. Every hitting-time solver
// checks its targets through it.
std::vector<std::uint64_t> checked_targets(std::span<const std::uint64_t> targets, std::uint64_t vertices);

HittingTimes hitting_times(const graph::EdgeList& g, const RowMatrix& a, std::span<const std::uint64_t> targets,
                           const HittingOptions& options = {});

}  // namespace tessera::linalg
