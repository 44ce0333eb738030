// PageRank and personalized PageRank over an EdgeList's arrays (no CSR
// copy), with GAPBS's rules, and the verifier beside it.
//
// The scores solve x = (1 - d) p + d A^T D^-1 x over the stored arcs: a
// duplicate arc counts twice, a self loop is an arc, p is uniform (1/n) or
// uniform on the personalization set. Dangling vertices (no out-arc) are
// handled as GAPBS's `pr` does: their score is passed to nobody, so the
// scores sum to less than 1 when there are any (networkx instead spreads
// that mass over p and renormalizes).
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "tessera/comm/options.hpp"
#include "tessera/graph/edge_list.hpp"
#include "tessera/graph/packed_graph.hpp"

namespace tessera::graph {

enum class PageRankMethod {
  // GAPBS's PageRankPullGS: a sweep reads the scores this rank has already
  // updated in the same sweep (other ranks' from the previous one). Fewest
  // iterations; the iterates depend on the rank count (the answer only
  // within the tolerance).
  gauss_seidel,
  // Every vertex from the previous iterate: the same bits at every rank count.
  jacobi,
};

// From this tolerance up, the contributions x[u] / deg(u) the sweeps read
// are kept as floats (as GAPBS keeps its scores): half the bytes of the
// array every in-arc reads at random. Their rounding, a relative 2^-24,
// moves the fixed point by well under 1e-6 in L1, below what such a
// tolerance stops at. Below it everything is double. Sums and the returned
// scores are double either way.
inline constexpr double kPageRankSinglePrecisionTolerance = 1e-6;

struct PageRankOptions {
  double damping = 0.85;     // GAPBS's kDamp
  double tolerance = 1e-4;   // stop when the L1 change of an iteration is below (GAPBS's default)
  int max_iterations = 20;   // GAPBS's default -i
  PageRankMethod method = PageRankMethod::gauss_seidel;
  // Personalized PageRank: teleport only to these vertices (every rank
  // passes the same set; repeats are ignored). Empty: every vertex.
  std::vector<std::uint64_t> personalization;
  AggregationOptions aggregation;  // the verifier's aggregated add (the kernel's exchange is planned)
  // Called on every rank after each iteration: iteration (1-based), the L1
  // change, seconds since the start.
  std::function<void(int, double, double)> on_iteration;
};

struct PageRank {
  DistArray<double> scores;  // on the graph's vertex ranges
  int iterations = 0;
  double change = 0;         // the L1 change of the last iteration
  bool converged = false;    // change < tolerance
  double seconds = 0;
  // Working memory beyond the scores and the graph, largest rank
  // (communication buffers excluded).
  std::uint64_t extra_bytes = 0;
  bool single_precision = false;  // contributions kept as floats (kPageRankSinglePrecisionTolerance)
};

// The in-arcs of this rank's vertices as PageRank's sweeps read them: each
// in-neighbour replaced by the place of its contribution in one array (its
// offset if local, after the local ones in id order if another rank owns
// it; 4 bytes when every rank's places fit), and the exchange of the
// ghosts' contributions planned. pagerank() makes one when none is given.
// Made beforehand, it serves any number of runs on the same graph
// (personalized PageRank for many sets, or timing the kernel alone as
// GAPBS times its own after building its CSR). It keeps no reference to
// the graph or its transpose. On one rank an undirected graph's own offsets
// and columns already are the rows and places: the index then holds
// nothing, and the runs read the graph they are given.
class PageRankIndex {
 public:
  // Collective. `in_arcs` as for pagerank (made here when needed and not given).
  explicit PageRankIndex(const EdgeList& g, const EdgeList* in_arcs = nullptr);
  PageRankIndex(PageRankIndex&&) noexcept;
  PageRankIndex& operator=(PageRankIndex&&) noexcept;
  ~PageRankIndex();
  struct Data;
  const Data& data() const noexcept { return *data_; }

 private:
  std::unique_ptr<Data> data_;
};

// Collective. Pulls over in-arcs: an undirected graph's own arrays; a
// directed graph's transpose (EdgeList::transposed on the same vertex
// ranges), passed as `in_arcs` or made here. Ghost contributions arrive
// through one all-to-all per iteration, planned once. With `index` (made
// for this graph) the in-arcs are not read. ConfigError for a bad option,
// RangeError naming a personalization vertex outside the graph,
// MismatchError for an index made for another graph.
PageRank pagerank(const EdgeList& g, const PageRankOptions& options = {}, const EdgeList* in_arcs = nullptr,
                  const PageRankIndex* index = nullptr);
// The same reading a packed graph's rows in place at each sweep: no column
// array is made; each neighbour's place is found from a bitmap of the
// ghosts (n / 4 bytes a rank; none at one rank) beside the out-degrees (8
// bytes a local vertex). A directed packed graph's in-arcs are its
// transpose packed on the same ranges and numbering (ConfigError without).
PageRank pagerank(const PackedGraph& g, const PageRankOptions& options = {}, const PackedGraph* in_arcs = nullptr);

// GAPBS's PRVerifier, distributed: one power iteration recomputed from
// `scores` by pushing along out-arcs (an aggregated add, not the kernel's
// pull), and the L1 residual |(1 - d) p + d A^T D^-1 x - x| must be below
// `tolerance`. Uses options' damping and personalization. "" when it passes,
// else what is wrong (the same on every rank). Collective.
std::string check_pagerank(const EdgeList& g, const DistArray<double>& scores, const PageRankOptions& options,
                           double tolerance);
std::string check_pagerank(const PackedGraph& g, const DistArray<double>& scores, const PageRankOptions& options,
                           double tolerance);

// "gauss-seidel" / "jacobi" (ConfigError otherwise), and back.
PageRankMethod parse_pagerank_method(const std::string& name);
const char* pagerank_method_name(PageRankMethod method);

}  // namespace tessera::graph
