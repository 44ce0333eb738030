// Read a graph, find its largest connected component, and compute the
// expected number of random-walk steps from every vertex to vertex 0.
// Run: mpirun -n 2 ./hitting grid.el
#include <cstdio>
#include <vector>

#include "tessera/graph/components.hpp"
#include "tessera/graph/io.hpp"
#include "tessera/linalg/edge_list_matrix.hpp"
#include "tessera/linalg/hitting_times.hpp"
using namespace tessera;

int main(int argc, char** argv) {
  Runtime rt(argc, argv);
  graph::ReadOptions read;
  read.undirected = true;
  read.storage = StorageOptions::shared("web");                 // other tools can attach to web-dst.json
  auto g = graph::read_graph(rt, argc > 1 ? argv[1] : "grid.el", read).graph;  // each rank parses a byte range
  auto c = graph::afforest(g);                                   // labels = smallest id of each component
  auto lcc = graph::largest_component(g, c.labels, StorageOptions::shared("web-lcc"));
  linalg::EdgeListMatrix a(lcc.graph);                           // reads the edge arrays in place
  std::vector<std::uint64_t> target{0};
  auto h = linalg::hitting_times(lcc.graph, a, target);          // CG on the grounded Laplacian
  // h.times.local(): this rank's vertices; lcc.original_ids maps them back.
  double largest = h.times.norm_inf();                           // collective
  if (rt.rank() == 0)
    std::printf("largest component: %llu vertices; CG: %d iterations; longest hitting time %.3f\n",
                static_cast<unsigned long long>(lcc.graph.vertices()), h.solve.iterations, largest);
}
