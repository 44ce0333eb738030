#include "tessera/graph/format.hpp"

#include <sys/stat.h>

namespace tessera::graph {

FileFormat format_of(const std::string& path) {
  if (path == "-") return FileFormat::edge_list;  // standard input or output: text, whatever "./-" is
  struct stat st {};
  if (::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode)) return FileFormat::binary;
  auto ends_with = [&](const char* ext) {
    std::string e = ext;
    return path.size() >= e.size() && path.compare(path.size() - e.size(), e.size(), e) == 0;
  };
  if (ends_with(".mtx")) return FileFormat::matrix_market;
  if (ends_with(".wel")) return FileFormat::weighted_edge_list;
  if (ends_with(".gr")) return FileFormat::dimacs;
  if (ends_with(".graph")) return FileFormat::metis;
  if (ends_with(".sg")) return FileFormat::gapbs_serialized;
  if (ends_with(".wsg")) return FileFormat::gapbs_weighted_serialized;
  if (ends_with(".tsg") || ends_with("/")) return FileFormat::binary;
  return FileFormat::edge_list;
}

std::string format_name(FileFormat f) {
  switch (f) {
    case FileFormat::edge_list: return "edge list";
    case FileFormat::weighted_edge_list: return "weighted edge list";
    case FileFormat::matrix_market: return "Matrix Market";
    case FileFormat::binary: return "Tessera binary";
    case FileFormat::dimacs: return "DIMACS shortest paths";
    case FileFormat::metis: return "METIS";
    case FileFormat::gapbs_serialized: return "GAPBS serialized";
    case FileFormat::gapbs_weighted_serialized: return "GAPBS weighted serialized";
  }
  return "?";
}

std::uint64_t first_id_of(FileFormat f) {
  return f == FileFormat::matrix_market || f == FileFormat::dimacs || f == FileFormat::metis ? 1 : 0;
}

}  // namespace tessera::graph
