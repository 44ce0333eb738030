// What hwloc sees of this node, and where this process is bound.
#pragma once
#include <string>
#include <vector>

namespace tessera {

struct Topology {
  int packages = 0;    // sockets
  int numa_nodes = 0;
  int cores = 0;
  int pus = 0;         // hardware threads
  std::string cpuset;  // this process's binding as a list ("0-1"), all PUs if unbound
  bool bound = false;  // true when the binding is narrower than the machine
  std::vector<int> bound_cores;  // logical core indices this process may run on
  std::vector<int> bound_numa;   // NUMA domains those cores belong to

  // Reads the machine through hwloc. Throws tessera::Error when hwloc fails.
  static Topology discover();
  // One line: "1 socket, 1 NUMA domain, 2 cores, 2 PUs; bound to cores 0-1".
  std::string summary() const;
};

// "0-3,6" from {0,1,2,3,6}.
std::string format_index_list(const std::vector<int>& values);

}  // namespace tessera
