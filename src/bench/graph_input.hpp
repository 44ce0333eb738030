// The graph of a graph-kernel benchmark: the Kronecker graph of a scale,
// generated in process, or a graph file read as the graph commands read it;
// either way the seconds the user waited for it.
#pragma once
#include <optional>
#include <string>

#include "tessera/bench/report.hpp"
#include "tessera/graph/edge_list.hpp"
#include "tessera/graph/generators.hpp"
#include "tessera/graph/read.hpp"
#include "tessera/runtime/collective.hpp"
#include "tessera/runtime/wait.hpp"

namespace tessera::bench {

struct BenchGraph {
  std::optional<graph::EdgeList> graph;
  std::string described;   // "kron scale 16 ef 16 seed 1" or the file's path
  std::string step;        // "generate" or "read"
  double seconds = 0;      // of that step, slowest rank
};

inline BenchGraph load_bench_graph(Runtime& rt, int kron_scale, const std::string& path, bool symmetric,
                                   bool undirected) {
  BenchGraph b;
  barrier(rt.comm());
  const double t0 = MPI_Wtime();
  if (path.empty()) {
    auto spec = graph::GraphSpec::kronecker(kron_scale);
    b.graph.emplace(graph::generate(rt, spec));
    b.described = spec.describe();
    b.step = "generate";
  } else {
    graph::ReadOptions ro;
    ro.symmetric = symmetric;
    ro.undirected = undirected;
    b.graph.emplace(std::move(graph::read_graph(rt, path, ro).graph));
    b.described = path;
    b.step = "read";
  }
  b.seconds = all_reduce(rt.comm(), MPI_Wtime() - t0, MPI_MAX);
  return b;
}

}  // namespace tessera::bench
