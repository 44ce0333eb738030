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
  if (ends_with(".tsg") || ends_with("/")) return FileFormat::binary;
  return FileFormat::edge_list;
}

std::string format_name(FileFormat f) {
  switch (f) {
    case FileFormat::edge_list: return "edge list";
    case FileFormat::weighted_edge_list: return "weighted edge list";
    case FileFormat::matrix_market: return "Matrix Market";
    case FileFormat::binary: return "Tessera binary";
  }
  return "?";
}

}  // namespace tessera::graph
