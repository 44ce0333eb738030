// Formats, chosen by the path:
//   DIR (holding edgelist.json)  Tessera binary: edgelist.json + offsets/dst/weight arrays
//   *.mtx                        Matrix Market coordinate: pattern | real | integer,
//                                general | symmetric, 1-based
//   *.wel                        weighted edge list: "u v w" per line
//   anything else (.el, .txt)    edge list: "u v" per line (SNAP, GAP)
//   -                            standard input or output: edge list (written
//                                with "u v w" lines for a weighted graph)
// Edge lists allow '#' and '%' comment lines and blank lines.
#pragma once
#include <string>

namespace tessera::graph {

enum class FileFormat { edge_list, weighted_edge_list, matrix_market, binary };

FileFormat format_of(const std::string& path);
std::string format_name(FileFormat f);

}  // namespace tessera::graph
