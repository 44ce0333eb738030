// Serial references for graph tests: the whole graph gathered on every rank,
// and union-find components computed from it.
#pragma once
#include <mpi.h>

#include <algorithm>
#include <fstream>
#include <string>
#include <cstdint>
#include <numeric>
#include <span>
#include <tuple>
#include <vector>

#include "tessera/bench/union_find.hpp"
#include "tessera/graph/edge_list.hpp"
#include "tessera/graph/read.hpp"
#include "tessera/runtime/wait.hpp"

namespace tessera::test {

using EdgeTuple = std::tuple<std::uint64_t, std::uint64_t, double>;

template <class T>
std::vector<T> gather_all(Runtime& rt, std::span<const T> local) {
  int P = rt.size();
  int mine = static_cast<int>(local.size() * sizeof(T));
  std::vector<int> counts(static_cast<std::size_t>(P)), displ(static_cast<std::size_t>(P));
  MPI_Allgather(&mine, 1, MPI_INT, counts.data(), 1, MPI_INT, rt.comm());
  int total = 0;
  for (int r = 0; r < P; ++r) displ[static_cast<std::size_t>(r)] = total, total += counts[static_cast<std::size_t>(r)];
  std::vector<T> out(static_cast<std::size_t>(total) / sizeof(T));
  MPI_Allgatherv(local.data(), mine, MPI_BYTE, out.data(), counts.data(), displ.data(), MPI_BYTE, rt.comm());
  return out;
}

template <class T>
std::vector<T> gather_all(const DistArray<T>& a) {
  return gather_all<T>(a.runtime(), a.local());
}

// This rank's arcs in stored order as 64-bit (source, destination) columns,
// read the way kernels read them: each row's source from the row offsets,
// destinations from the array at the graph's id width.
struct LocalArcs {
  std::vector<std::uint64_t> src, dst;
};
inline LocalArcs local_arcs(const graph::EdgeList& g) {
  LocalArcs a;
  auto rows = g.row_offsets();
  g.with_dst([&](auto dst) {
    a.src.reserve(dst.size());
    a.dst.assign(dst.begin(), dst.end());
    for (std::size_t i = 0; i + 1 < rows.size(); ++i)
      a.src.insert(a.src.end(), static_cast<std::size_t>(rows[i + 1] - rows[i]), g.local_vertex_begin() + i);
  });
  return a;
}

// Every stored arc of the graph (both arcs of an undirected edge, a self
// loop once), sorted, on every rank.
inline std::vector<EdgeTuple> gather_edges(const graph::EdgeList& g) {
  Runtime& rt = g.runtime();
  auto arcs = local_arcs(g);
  auto s = gather_all<std::uint64_t>(rt, std::span<const std::uint64_t>(arcs.src));
  auto d = gather_all<std::uint64_t>(rt, std::span<const std::uint64_t>(arcs.dst));
  auto w = gather_all<double>(rt, g.local_weight());
  std::vector<EdgeTuple> out;
  for (std::size_t k = 0; k < s.size(); ++k) out.emplace_back(s[k], d[k], w.empty() ? 1.0 : w[k]);
  std::sort(out.begin(), out.end());
  return out;
}

// The serial reference the components benchmark uses too; labels are the
// smallest id of each set.
inline std::vector<std::uint64_t> union_find_labels(std::uint64_t n, const std::vector<EdgeTuple>& edges) {
  bench::UnionFind uf(n);
  for (auto& [u, v, w] : edges) uf.unite(u, v);
  return std::move(uf).labels();
}

// Rank 0 writes `text` to dir/name; every rank gets the path after a barrier.
inline std::string write_file(Runtime& rt, const std::string& dir, const std::string& name, const std::string& text) {
  std::string path = dir + "/" + name;
  if (rt.rank() == 0) std::ofstream(path, std::ios::binary) << text;
  barrier(rt.comm());
  return path;
}

// The error every rank gets reading `path`; empty when reading succeeds.
inline std::string read_error(Runtime& rt, const std::string& path, graph::ReadOptions o = {}) {
  try {
    graph::read_graph(rt, path, o);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

}  // namespace tessera::test
