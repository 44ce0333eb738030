// The network as task mapping sees it, after Charm++'s TopoManager (Bhatele,
// Kale et al., "Benefits of topology aware mapping for mesh interconnects",
// 2008): partition dimensions, torus wraparound per dimension, rank <->
// coordinates, hops between two ranks, the closest rank of a list, ranks per
// node.
//
// Named NetworkTopology, not Topology: tessera::Topology (runtime/topology.hpp)
// is hwloc's view of this one node; this is the view of the whole job as a
// set of ranks with distances, real (MachineTopology) or simulated
// (GridTopology: a torus or mesh of any shape, so that mapping quality at
// thousands of ranks can be measured on one machine).
#pragma once
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

namespace tessera {
class Runtime;
}

namespace tessera::chunks {

class NetworkTopology {
 public:
  virtual ~NetworkTopology() = default;

  int ranks() const noexcept { return ranks_; }
  // Extent of every coordinate dimension. The first network_dimensions() are
  // links between nodes (a torus/mesh's X, Y, Z, ...; the machine's node);
  // the rest tell ranks apart inside a node (TopoManager's T; the machine's
  // socket, NUMA domain, core, slot), coarsest first.
  const std::vector<int>& dims() const noexcept { return dims_; }
  int network_dimensions() const noexcept { return network_dims_; }
  // True when dimension `d` wraps around (a torus ring).
  bool wraps(int d) const;
  // Coordinates of `rank`, one per dimension (dims().size() values).
  std::span<const int> coordinates(int rank) const;
  // The rank at `coords`; throws RangeError when no rank sits there.
  virtual int rank_at(std::span<const int> coords) const;
  // Network distance between two ranks (0 for the same rank).
  virtual int hops(int a, int b) const = 0;
  // The rank of `candidates` nearest `from` (fewest hops; the earliest of a
  // tie). Throws RangeError when `candidates` is empty or holds a bad rank.
  int closest_rank(int from, std::span<const int> candidates) const;
  // Ranks on the fullest node (TopoManager's getDimNT).
  virtual int ranks_per_node() const = 0;
  // The node `rank` lives on, 0 .. nodes()-1.
  virtual int node_of(int rank) const = 0;
  virtual int nodes() const = 0;
  // "torus:8x8x8", "mesh:4x4:2", "machine:2 nodes, 4 ranks per node".
  virtual std::string describe() const = 0;

  // The link model behind max_link_load: directed links numbered
  // 0 .. link_count()-1. route() replaces `links` with the links a message
  // from rank a to rank b crosses (none when a and b share a node).
  virtual std::int64_t link_count() const = 0;
  virtual void route(int a, int b, std::vector<std::int64_t>& links) const = 0;

 protected:
  NetworkTopology() = default;
  // coords: ranks x dims.size(), row-major.
  void set_shape(std::vector<int> dims, std::vector<bool> wraps, int network_dims, std::vector<int> coords);
  void check_rank(int rank) const;

 private:
  int ranks_ = 0;
  int network_dims_ = 0;
  std::vector<int> dims_;
  std::vector<bool> wraps_;
  std::vector<int> coords_;
};

// A simulated torus or mesh: nodes on a grid of `node_dims` (wraparound per
// dimension), `ranks_per_node` ranks on each node. Rank r sits on node
// r / ranks_per_node, slot r % ranks_per_node; nodes are numbered with the
// first dimension fastest. Coordinates: (x, y, z, ..., slot).
// Hops: the shortest way along each dimension (around the ring on a torus),
// summed; 0 between ranks of one node.
// Links: per node, per dimension, one each way; messages are routed
// dimension by dimension (dimension-ordered routing), the shorter way around
// a ring (the + way on a tie).
class GridTopology final : public NetworkTopology {
 public:
  GridTopology(std::vector<int> node_dims, std::vector<bool> wraps, int ranks_per_node = 1);

  // "torus:16x16x32", "mesh:8x8", with an optional ":T" ranks per node
  // ("torus:8x8x8:4"). Throws ConfigError naming what does not parse.
  static GridTopology parse(const std::string& spec);

  int rank_at(std::span<const int> coords) const override;  // O(dimensions)
  int hops(int a, int b) const override;
  int ranks_per_node() const override { return ranks_per_node_; }
  int node_of(int rank) const override;
  int nodes() const override { return nodes_; }
  std::string describe() const override;
  std::int64_t link_count() const override;
  void route(int a, int b, std::vector<std::int64_t>& links) const override;

 private:
  std::vector<int> node_dims_;
  std::vector<bool> node_wraps_;
  int ranks_per_node_ = 1;
  int nodes_ = 1;
};

// Where one rank runs: its node and, when the rank is bound inside one,
// its socket, NUMA domain and core (-1 when not confined to one).
struct RankPlace {
  int node = 0;
  int socket = -1;
  int numa = -1;
  int core = -1;
};

// The real machine: ranks on nodes (the runtime's node-local groups), inside
// a node by socket / NUMA domain / core from hwloc. Hops by the finest level
// two ranks share: same rank 0, same core 1, same NUMA domain 2, same socket
// 3, same node 4, different nodes 5. Coordinates: (node, socket, NUMA, core,
// slot on the node), -1 where a rank is not confined. Links: one out of and
// one into each node (its network port); same-node messages cross none.
class MachineTopology final : public NetworkTopology {
 public:
  static constexpr int kSameCore = 1, kSameNuma = 2, kSameSocket = 3, kSameNode = 4, kOtherNode = 5;

  // From each rank's place (places[rank]); for tests and replays.
  explicit MachineTopology(std::vector<RankPlace> places);
  // This job: collective over the runtime's communicator (every rank calls).
  static MachineTopology discover(const Runtime& rt);

  int hops(int a, int b) const override;
  int ranks_per_node() const override { return ranks_per_node_; }
  int node_of(int rank) const override;
  int nodes() const override { return nodes_; }
  std::string describe() const override;
  std::int64_t link_count() const override { return 2 * static_cast<std::int64_t>(nodes_); }
  void route(int a, int b, std::vector<std::int64_t>& links) const override;
  const std::vector<RankPlace>& places() const noexcept { return places_; }

 private:
  std::vector<RankPlace> places_;
  int nodes_ = 0;
  int ranks_per_node_ = 0;
};

// A topology from a string: "torus:AxBxC[:T]" or "mesh:AxB[:T]" (simulated),
// or "machine" (this job's machine; collective, needs `rt`). When `ranks` is
// positive a simulated shape must hold exactly that many ranks (MismatchError
// otherwise, naming both counts); 0 accepts any size.
std::unique_ptr<NetworkTopology> parse_topology(const std::string& spec, int ranks = 0);
std::unique_ptr<NetworkTopology> make_topology(const std::string& spec, const Runtime& rt);

}  // namespace tessera::chunks
