// Formats, chosen by the path:
//   DIR (holding edgelist.json)  Tessera binary: edgelist.json + offsets/dst/weight arrays
//   *.mtx                        Matrix Market coordinate: pattern | real | integer,
//                                general | symmetric, 1-based
//   *.wel                        weighted edge list: "u v w" per line
//   *.gr                         DIMACS shortest paths: "c" comments, "p sp N M",
//                                then M arcs "a u v w", 1-based; directed, weighted
//   *.graph                      METIS: "n m [fmt [ncon]]", then line i lists vertex
//                                i's neighbours, 1-based (fmt 1: each with its weight;
//                                fmt 10/11: ncon vertex weights first, skipped); '%'
//                                comments. m edges listed at both ends (2m entries):
//                                undirected; m entries (GAPBS's test graphs): directed
//   *.sg, *.wsg                  GAPBS serialized CSR (writer.h): bool directed, int64
//                                arcs, int64 vertices, int64 offsets[n+1], int32
//                                neighbours (.wsg: int32 neighbour, int32 weight), and
//                                for a directed graph the in-arcs' offsets and neighbours
//   anything else (.el, .txt)    edge list: "u v" per line (SNAP, GAP)
//   -                            standard input or output: edge list (written
//                                with "u v w" lines for a weighted graph)
// Edge lists allow '#' and '%' comment lines and blank lines.
#pragma once
#include <cstdint>
#include <string>

namespace tessera::graph {

enum class FileFormat {
  edge_list,
  weighted_edge_list,
  matrix_market,
  binary,
  dimacs,                // .gr
  metis,                 // .graph
  gapbs_serialized,      // .sg
  gapbs_weighted_serialized  // .wsg
};

FileFormat format_of(const std::string& path);
std::string format_name(FileFormat f);
// The first vertex id a file of format `f` writes: 1 for .mtx, .gr and
// .graph, else 0.
std::uint64_t first_id_of(FileFormat f);

}  // namespace tessera::graph
