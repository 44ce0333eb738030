// The benchmarks' verifiers as functions of any answer, with the problem
// definitions they regenerate. The benchmarks run them on their own results;
// tests/bench feeds them deliberately wrong answers (a verifier that cannot
// fail proves nothing). Each check is collective and returns the same Verdict
// on every rank. A rank's part of a distributed answer is passed as its local
// span and the global index of its first element.
#pragma once
#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <vector>

#include "tessera/runtime/runtime.hpp"

namespace tessera::graph {
class EdgeList;
}

namespace tessera::bench {

struct Verdict {
  bool ok = false;
  std::string found;  // what the check found, one line
};

// A benchmark variant's verify step (Variant::verify) from a check that
// returns a Verdict.
template <class Check>
std::function<std::string(bool&)> verify_by(Check check) {
  return [check](bool& ok) {
    Verdict v = check();
    ok = v.ok;
    return v.found;
  };
}

// --- HPCC RandomAccess -----------------------------------------------------
// The table starts as table[i] = i; rank r's k-th update XORs the k-th value v
// of its part of the HPCC stream into table[v mod table_words].
struct RaProblem {
  std::uint64_t table_words = 0;       // a power of two
  std::uint64_t updates_per_rank = 0;  // 4 x table_words / ranks
  // 2^log_words_per_rank words per rank, rounded down to a power of two in all.
  static RaProblem for_job(int ranks, int log_words_per_rank);
  std::uint64_t stream_start(int rank) const;  // the stream value before rank's first update
  static std::uint64_t next(std::uint64_t value);
  std::uint64_t index_of(std::uint64_t value) const { return value & (table_words - 1); }
};
// Every word must be exact: each variant applies its updates atomically (the
// aggregated owner, or MPI_Accumulate), so HPCC's 1% allowance for lost
// updates would only hide a defect. Checks the table after every rank applied
// its first `updates_done` updates.
Verdict check_ra(Runtime& rt, const RaProblem& problem, std::span<const std::uint64_t> local,
                 std::uint64_t local_begin, std::uint64_t updates_done);

// --- Bale histogram --------------------------------------------------------
// Rank r's first `count` increments of a table of `counts` entries.
std::vector<std::uint64_t> histogram_indices(int rank, std::uint64_t count, std::uint64_t counts);
// Every count equals the recount of every rank's first `updates_done` increments.
Verdict check_histogram(Runtime& rt, std::span<const std::int64_t> local, std::uint64_t local_begin,
                        std::uint64_t counts, std::uint64_t updates_done);
// The per-core ceiling row: every rank counted its own increments into a
// private table of all `counts` entries; summed over the ranks (collective),
// the tables must pass check_histogram, block [local_begin, local_begin +
// local_size) on each rank.
Verdict check_histogram_private(Runtime& rt, std::span<const std::int64_t> private_counts, std::uint64_t local_begin,
                                std::size_t local_size, std::uint64_t updates_done);

// --- Bale indexgather ------------------------------------------------------
std::vector<std::uint64_t> indexgather_indices(int rank, std::uint64_t count, std::uint64_t table);
std::uint64_t indexgather_value(std::uint64_t i);  // table[i], a closed form
// fetched[k] == indexgather_value(indices[k]) for every k on every rank.
Verdict check_indexgather(Runtime& rt, std::span<const std::uint64_t> indices, std::span<const std::uint64_t> fetched);

// --- STREAM ----------------------------------------------------------------
// The arrays start as a = 1, b = 2, c = 0; the kernels run in STREAM's order
// copy (c = a), scale (b = 3c), add (c = a + b), triad (a = b + 3c). Each
// kernel is idempotent on its inputs, so repeating one does not change the
// values. `kernels_done` (0-4): how many of the four have run.
struct StreamValues {
  double a, b, c;
  static StreamValues after(int kernels_done);
};
// This rank's elements only (the one-process baseline checks itself with it).
bool stream_arrays_match(std::span<const double> a, std::span<const double> b, std::span<const double> c,
                         int kernels_done);
Verdict check_stream(Runtime& rt, std::span<const double> a, std::span<const double> b, std::span<const double> c,
                     int kernels_done);

// --- Connected components --------------------------------------------------
// The labels (every rank's part, in rank order) equal the reference labels
// (bench::UnionFind's: the smallest vertex id of each component), which only
// rank 0 needs to hold.
// With `local_original_ids` (a renumbered graph's, such as a PackedGraph's
// original_ids(): vertex k here is vertex ids[k] of the reference's graph),
// the labels are ids of the renumbered graph: each component is labelled by
// its smallest original id before the comparison.
Verdict check_components(Runtime& rt, std::span<const std::uint64_t> local_labels,
                         const std::vector<std::uint64_t>& reference_on_root,
                         std::span<const std::uint64_t> local_original_ids = {});

// --- Hitting times ---------------------------------------------------------
// Expected hitting times to vertex 0 of a connected graph (this rank's part,
// on the graph's vertex ranges): the true residual |b - L h| / |b| of the
// grounded Laplacian system must be within 10x the solver's tolerance, and
// the answer must agree with `reference` (another matrix's answer) to 1e-6 of
// its largest value, so two matrices agreeing on a wrong answer still fail.
Verdict check_hitting_times(const graph::EdgeList& graph, std::span<const double> times,
                            std::span<const double> reference, double tolerance);

// --- Laplacian eigenpairs (the Fiedler vector) -----------------------------
// (lambda, x) as an eigenpair of the Laplacian L = D - A of an undirected
// graph (x this rank's part, on the graph's vertex ranges), checked apart
// from the eigensolver through linalg's EdgeListMatrix and Laplacian: x of
// unit norm (to 1e-8) and orthogonal to the constants (|sum x| / sqrt(n) <=
// 1e-8), lambda > 0 and equal to x's Rayleigh quotient (to 1e-8 of it), and
// the residual ||L x - lambda x|| / lambda at most `limit`.
Verdict check_laplacian_eigenpair(const graph::EdgeList& graph, std::span<const double> x, double lambda,
                                  double limit);

}  // namespace tessera::bench
