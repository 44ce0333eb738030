// Names of the binary graph format, shared by its writer (write.cpp) and its
// loader (read.cpp): a directory holding edgelist.json and one persisted
// Shared-storage array per column (src.json, dst.json, weight.json).
#pragma once
#include <string>

namespace tessera::graph::binary_format {

inline constexpr const char* kGraphFile = "edgelist.json";
inline constexpr const char* kGraphFormat = "tessera.edge-list";

inline std::string array_file(const std::string& dir, const std::string& name) { return dir + "/" + name + ".json"; }

}  // namespace tessera::graph::binary_format
