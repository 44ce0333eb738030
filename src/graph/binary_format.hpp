// Names of the binary graph format, shared by its writer (write.cpp) and its
// loader (read.cpp): a directory holding edgelist.json and one persisted
// Shared-storage array per column: offsets.json (each writing rank's row
// offsets, local_vertices + 1 of them), dst.json (uint32 or uint64, as
// "id_type" says), weight.json. Version 1 held src and dst arrays instead.
#pragma once
#include <string>

namespace tessera::graph::binary_format {

inline constexpr const char* kGraphFile = "edgelist.json";
inline constexpr const char* kGraphFormat = "tessera.edge-list";
inline constexpr int kGraphVersion = 2;

inline std::string array_file(const std::string& dir, const std::string& name) { return dir + "/" + name + ".json"; }

}  // namespace tessera::graph::binary_format
