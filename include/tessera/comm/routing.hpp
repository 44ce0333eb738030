// Routing policies of the aggregation engine: which rank a record goes to
// first on its way to its destination, and which records a rank passes on.
// A route has one or two hops: this rank sends its own records for `dest`
// to first_hop(dest), as final records (the receiver is `dest`) or as
// forward records (the receiver keeps those tagged with itself and passes
// the others on). A rank that receives forward records for `dest` sends them
// on, as final records, to forwards_to(dest).
//
// The engine (RecordExchange) builds its buffers from these answers once, at
// construction: one buffer per (next hop, kind). Policies, one per file:
// direct (every record straight to its destination), grid (ranks on a
// sqrt(P) grid: along the row, then the column) and node-first (the grid
// whose rows are the nodes). A new policy implements this interface and
// adds a case to make_routing().
#pragma once
#include <memory>
#include <vector>

#include "tessera/comm/options.hpp"
#include "tessera/runtime/runtime.hpp"

namespace tessera::comm {

class Routing {
 public:
  struct Hop {
    int rank = -1;
    bool forward = false;  // the receiver passes (some of) the records on
  };
  virtual ~Routing() = default;
  // False: every first hop is the destination itself, as a final record.
  virtual bool multi_hop() const noexcept = 0;
  // The first hop of this rank's own records for `dest` (another rank).
  virtual Hop first_hop(int dest) const = 0;
  // Where this rank sends the forward records it receives for `dest` (as
  // final records); -1: it never receives any.
  virtual int forwards_to(int dest) const = 0;
};

// Ranks placed on a GridRoute: the grid arithmetic runs on positions.
struct GridLayout {
  GridRoute grid;
  std::vector<int> position;  // by rank
  std::vector<int> rank_at;   // by grid position
};

std::unique_ptr<Routing> make_direct_routing();
// Grid routing of `rank` on `layout` (GridRoute's row-then-column rule).
std::unique_ptr<Routing> make_grid_routing(GridLayout layout, int rank);
// The square grid over ranks 0..size-1 in order.
GridLayout square_grid(int size);
// Node-first: rows are the nodes, columns the ranks' indices on their node.
// Throws ConfigError unless every node holds the same number of ranks.
GridLayout node_grid(const NodeGroup& node, int ranks);
// The policy `routing` names for `rank` of `rt`'s ranks (one rank: direct).
std::unique_ptr<Routing> make_routing(const Runtime& rt, AggregationRouting routing, int rank, int size);

}  // namespace tessera::comm
