// Node-first routing is grid routing on the grid whose rows are the nodes and
// whose columns are the ranks' indices on their node: a record for another
// node first goes to the co-locale with its destination's index, which
// forwards it off-node with every other record of its node for that
// destination. Ranks are numbered node by node ("grid positions") so that
// GridRoute's row-major arithmetic applies whatever the placement (by slot
// or round-robin over nodes).
#include <string>

#include "tessera/comm/routing.hpp"
#include "tessera/runtime/error.hpp"

namespace tessera::comm {

GridLayout node_grid(const NodeGroup& node, int ranks) {
  std::vector<int> per_node(static_cast<std::size_t>(node.count), 0);
  GridLayout g;
  g.position.resize(static_cast<std::size_t>(ranks));
  std::vector<int> local(static_cast<std::size_t>(ranks));
  for (int r = 0; r < ranks; ++r)
    local[static_cast<std::size_t>(r)] = per_node[static_cast<std::size_t>(node.node_of_rank[static_cast<std::size_t>(r)])]++;
  for (int n : per_node)
    if (n != per_node[0])
      throw ConfigError("node-first aggregation routing needs the same number of ranks on every node; this job has " +
                        std::to_string(per_node[0]) + " on node 0 and " + std::to_string(n) +
                        " on another (use TESSERA_AGG_ROUTING=grid or direct)");
  g.grid.columns = per_node[0];
  g.grid.rows = node.count;
  g.rank_at.resize(static_cast<std::size_t>(ranks));
  for (int r = 0; r < ranks; ++r) {
    int p = node.node_of_rank[static_cast<std::size_t>(r)] * g.grid.columns + local[static_cast<std::size_t>(r)];
    g.position[static_cast<std::size_t>(r)] = p;
    g.rank_at[static_cast<std::size_t>(p)] = r;
  }
  return g;
}

}  // namespace tessera::comm
