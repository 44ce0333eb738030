// What hwloc sees of this node, and where this process is bound.
#pragma once
#include <cstddef>
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
  std::vector<int> bound_numa_os;  // the same domains by OS index (what the kernel's memory policies take)

  // Reads the machine through hwloc. Throws tessera::Error when hwloc fails.
  static Topology discover();
  // One line: "1 socket, 1 NUMA domain, 2 cores, 2 PUs; bound to cores 0-1".
  std::string summary() const;
};

// The OS index of the NUMA domain this process is bound within, when the
// machine has several and the binding (--colocales numa or socket) lies in
// one of them; -1 otherwise (unbound, spanning domains, one-domain machine).
int home_numa_node(const Topology& t);

// Asks the kernel to place the pages of [data, data + bytes) on NUMA node
// `os_node` whoever touches them first (mbind MPOL_PREFERRED, falling back
// to other nodes when it is full). On a shared memory object (a memfd, a
// tmpfs file) the policy belongs to the object, so the faults of every
// process mapping it follow it. `data` page-aligned. Best effort: false when
// the kernel refuses (no NUMA support, a seccomp filter).
bool prefer_numa_node(void* data, std::size_t bytes, int os_node) noexcept;

// The memory policy of the page at `data` (MPOL_* of <linux/mempolicy.h>)
// and its preferred node (or -1); -1 when the kernel cannot tell. For tests.
int memory_policy_at(void* data, int* preferred_node) noexcept;

// "0-3,6" from {0,1,2,3,6}.
std::string format_index_list(const std::vector<int>& values);

}  // namespace tessera
