// Poisson3D by Jacobi on over-decomposed chunks (jacobi3d.cpp), shared by
// the jacobi3d and stencil3d benchmarks and the chunk tests.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "tessera/bench/report.hpp"
#include "tessera/chunks/balance.hpp"
#include "tessera/resilience/checkpoint.hpp"
#include "tessera/chunks/mapping.hpp"
#include "tessera/chunks/placement.hpp"
#include "tessera/runtime/runtime.hpp"

namespace tessera::bench::jacobi {

struct Problem {
  int n = 192;             // interior points per side (grid n^3, Dirichlet boundary)
  int iterations = 40;
  bool imbalance = false;  // hot region: 8 sweeps per iteration at the k = 0 face, falling to 1 (work_factor)
};

struct Balancing {
  chunks::Strategy strategy = chunks::Strategy::none;
  int at_iteration = 4;     // at_sync after this many iterations (measured ones)
  int scramble_every = 0;   // tests: migrate to a random placement every k iterations
  std::uint64_t seed = 1;
  chunks::HopDistance hops{chunks::same_rank_hops};  // the comm strategy's objective
  bool print_measurements = false;  // the measurement database on stderr (rank 0) before balancing
};

// Sweeps per iteration of a chunk whose centre lies at height z (0..1) along
// k: 8 up to z = 1/8, falling linearly to 1 at z = 5/8, 1 above (rounded).
int work_factor(bool imbalance, double z);

struct Outcome {
  double seconds_per_iteration = 0;  // slowest rank, the whole run (with the balancing step)
  double steady_seconds_per_iteration = 0;  // slowest rank, the iterations after Balancing::at_iteration
  double cpu_seconds_per_iteration = 0;  // thread CPU time, slowest rank: blind to descheduling on shared cores
  double error = 0;        // max |u_k - u*| (u* the exact solution)
  double expected_error = 0;  // rho^k max|u*|: u* is an eigenvector of the Jacobi iteration
  double deviation = 0;    // max |u_k - (1 - rho^k) u*|: 0 up to rounding
  double residual = 0;     // max |f - A u_k|
  double expected_residual = 0;
  std::uint64_t checksum = 0;  // order-independent hash of every (cell, bits of u_k)
  std::vector<chunks::BalanceReport> balancing;
  std::vector<double> chunk_loads;  // measured CPU seconds per step of each chunk before at_iteration's balancing
  chunks::Placement placement_before;  // where the chunks were then
  // Each rank's share of its time spent waiting (trace::idle_seconds): over
  // the iterations up to the balancing step, and over those after it (the
  // whole run when there is no balancing step; then `before` is empty).
  std::vector<double> idle_share_before, idle_share_after;
  // run_recoverable: each commit's stall (slowest rank), the bytes the
  // largest rank checkpoints, and latest() + restore + read (-1: no restore).
  std::vector<double> checkpoint_seconds;
  std::uint64_t checkpoint_bytes_per_rank = 0;
  double restore_seconds = -1;
};

// Chunked run over `grid` (collective); the placement's empty means block.
Outcome run_chunked(Runtime& rt, const Problem& p, const chunks::ChunkGrid& grid, const chunks::Placement& placement,
                    const Balancing& lb = {});
// Checkpoints of a recoverable run (run_recoverable).
struct Recovery {
  resilience::CheckpointOptions checkpoint;  // where, at which levels; the name defaults to "jacobi3d"
  int every = 5;                         // a checkpoint after every `every` iterations (0: none)
  bool remove_at_end = true;             // a finished run removes its checkpoints
};
// run_chunked with block placement and no balancing, restartable: it
// checkpoints every `every` iterations and, started again after a failure
// (on any rank count), resumes from the newest complete checkpoint. Calls
// FaultInjection::at_step after every iteration (heartbeat, injected
// kills). The final iterate is bit-identical to an uninterrupted run's.
// `resumed_from` receives the step it resumed from (0: from the start).
Outcome run_recoverable(Runtime& rt, const Problem& p, const chunks::ChunkGrid& grid, const Recovery& recovery,
                        std::uint64_t* resumed_from = nullptr);
// The plain sequential loop on one process, no decomposition.
Outcome run_plain(const Problem& p);
// One line: "ok: ..." when the outcome agrees with the theory (and with
// `reference`'s checksum when given), else "WRONG: ..." with the figures.
std::string check(const Problem& p, const Outcome& o, const Outcome* reference = nullptr);

// The plain loop as a one-process baseline row (rank 0; the time is its own
// per iteration): verified against the theory, and its checksum sent to
// every rank, the reference for the chunked runs' checks.
Variant plain_variant(Runtime& rt, const Problem& p, Outcome& plain, std::string group = "");

// The chunk one step along `axis` (0, 1, 2) in `direction` (-1, +1), or -1
// past the edge of the grid.
std::int64_t face_neighbour(const chunks::ChunkGrid& grid, std::uint64_t id, int axis, int direction);
// The 7-point stencil's chunk communication graph for this problem (bytes
// per iteration between face neighbours), for hop-bytes.
chunks::CommGraph stencil_graph(const Problem& p, const chunks::ChunkGrid& grid);

}  // namespace tessera::bench::jacobi
