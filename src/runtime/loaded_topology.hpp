// One loaded hwloc topology: this machine's, or a synthetic description
// ("pack:2 numa:2 core:16 pu:1", for testing placement), destroyed with the
// handle. Internal to runtime/ (topology.cpp, launch.cpp).
#pragma once
#include <hwloc.h>

#include <string>

#include "tessera/runtime/error.hpp"

namespace tessera {

struct LoadedTopology {
  hwloc_topology_t topo = nullptr;
  explicit LoadedTopology(const std::string* synthetic = nullptr) {
    if (hwloc_topology_init(&topo) != 0) throw Error("hwloc: cannot initialise a topology");
    if (synthetic && hwloc_topology_set_synthetic(topo, synthetic->c_str()) != 0) {
      hwloc_topology_destroy(topo);
      throw ConfigError("hwloc cannot read the synthetic topology '" + *synthetic + "'");
    }
    if (hwloc_topology_load(topo) != 0) {
      hwloc_topology_destroy(topo);
      throw Error("hwloc: cannot load the topology of this machine");
    }
  }
  ~LoadedTopology() { hwloc_topology_destroy(topo); }
  LoadedTopology(const LoadedTopology&) = delete;
  LoadedTopology& operator=(const LoadedTopology&) = delete;
};

}  // namespace tessera
