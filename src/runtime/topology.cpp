#include "tessera/runtime/topology.hpp"

#include <hwloc.h>
#include <linux/mempolicy.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <memory>

#include "tessera/runtime/error.hpp"
#include "loaded_topology.hpp"

namespace tessera {

namespace {

struct Bitmap {
  hwloc_bitmap_t map = hwloc_bitmap_alloc();
  ~Bitmap() { hwloc_bitmap_free(map); }
  Bitmap() = default;
  Bitmap(const Bitmap&) = delete;
  Bitmap& operator=(const Bitmap&) = delete;
};

int count(hwloc_topology_t t, hwloc_obj_type_t type) {
  int n = hwloc_get_nbobjs_by_type(t, type);
  return n < 0 ? 0 : n;
}
}  // namespace

std::string format_index_list(const std::vector<int>& values) {
  std::vector<int> v = values;
  std::sort(v.begin(), v.end());
  v.erase(std::unique(v.begin(), v.end()), v.end());
  std::string out;
  for (std::size_t i = 0; i < v.size();) {
    std::size_t j = i;
    while (j + 1 < v.size() && v[j + 1] == v[j] + 1) ++j;
    if (!out.empty()) out.push_back(',');
    out.append(std::to_string(v[i]));
    if (j > i) {
      out.push_back('-');
      out.append(std::to_string(v[j]));
    }
    i = j + 1;
  }
  return out.empty() ? "none" : out;
}

Topology Topology::discover() {
  LoadedTopology h;
  Topology t;
  t.packages = count(h.topo, HWLOC_OBJ_PACKAGE);
  t.numa_nodes = std::max(1, count(h.topo, HWLOC_OBJ_NUMANODE));
  t.cores = count(h.topo, HWLOC_OBJ_CORE);
  t.pus = count(h.topo, HWLOC_OBJ_PU);

  Bitmap bound;
  if (hwloc_get_cpubind(h.topo, bound.map, HWLOC_CPUBIND_PROCESS) != 0)
    hwloc_bitmap_copy(bound.map, hwloc_topology_get_topology_cpuset(h.topo));
  t.bound = !hwloc_bitmap_isincluded(hwloc_topology_get_topology_cpuset(h.topo), bound.map);

  std::vector<int> pus;
  for (int i = 0; i < t.pus; ++i) {
    hwloc_obj_t pu = hwloc_get_obj_by_type(h.topo, HWLOC_OBJ_PU, static_cast<unsigned>(i));
    if (hwloc_bitmap_isset(bound.map, pu->os_index)) pus.push_back(static_cast<int>(pu->os_index));
  }
  t.cpuset = format_index_list(pus);
  for (int i = 0; i < t.cores; ++i) {
    hwloc_obj_t core = hwloc_get_obj_by_type(h.topo, HWLOC_OBJ_CORE, static_cast<unsigned>(i));
    if (hwloc_bitmap_intersects(core->cpuset, bound.map)) t.bound_cores.push_back(i);
  }
  for (int i = 0; i < count(h.topo, HWLOC_OBJ_NUMANODE); ++i) {
    hwloc_obj_t numa = hwloc_get_obj_by_type(h.topo, HWLOC_OBJ_NUMANODE, static_cast<unsigned>(i));
    if (hwloc_bitmap_intersects(numa->cpuset, bound.map)) {
      t.bound_numa.push_back(i);
      t.bound_numa_os.push_back(static_cast<int>(numa->os_index));
    }
  }
  return t;
}

int home_numa_node(const Topology& t) {
  return t.bound && t.numa_nodes > 1 && t.bound_numa_os.size() == 1 ? t.bound_numa_os.front() : -1;
}

namespace {
constexpr unsigned long kMaxNodes = 1024;  // bits in the masks passed to the kernel
}

bool prefer_numa_node(void* data, std::size_t bytes, int os_node) noexcept {
  if (os_node < 0 || static_cast<unsigned long>(os_node) >= kMaxNodes || bytes == 0) return false;
  unsigned long mask[kMaxNodes / (8 * sizeof(unsigned long))] = {};
  mask[static_cast<unsigned long>(os_node) / (8 * sizeof(unsigned long))] |=
      1ul << (static_cast<unsigned long>(os_node) % (8 * sizeof(unsigned long)));
  return ::syscall(SYS_mbind, data, bytes, MPOL_PREFERRED, mask, kMaxNodes + 1, 0) == 0;
}

int memory_policy_at(void* data, int* preferred_node) noexcept {
  int mode = -1;
  unsigned long mask[kMaxNodes / (8 * sizeof(unsigned long))] = {};
  if (::syscall(SYS_get_mempolicy, &mode, mask, kMaxNodes + 1, data, MPOL_F_ADDR) != 0) return -1;
  if (preferred_node) {
    *preferred_node = -1;
    for (unsigned long n = 0; n < kMaxNodes; ++n)
      if (mask[n / (8 * sizeof(unsigned long))] & (1ul << (n % (8 * sizeof(unsigned long))))) {
        *preferred_node = static_cast<int>(n);
        break;
      }
  }
  return mode;
}

std::string Topology::summary() const {
  auto plural = [](int n, const char* one, const char* many) {
    return std::to_string(n) + " " + (n == 1 ? one : many);
  };
  return plural(packages, "socket", "sockets") + ", " + plural(numa_nodes, "NUMA domain", "NUMA domains") +
         ", " + plural(cores, "core", "cores") + ", " + plural(pus, "PU", "PUs") + "; " +
         (bound ? "bound to PUs " + cpuset : "unbound (PUs " + cpuset + ")");
}

}  // namespace tessera
