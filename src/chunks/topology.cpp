// Network topologies for task mapping, after Charm++'s TopoManager (Bhatele,
// Kale et al. 2008): a simulated torus/mesh and the real machine.
#include "tessera/chunks/topology.hpp"

#include <algorithm>
#include <charconv>
#include <cstdlib>
#include <limits>
#include <map>
#include <tuple>

#include "tessera/runtime/collective.hpp"
#include "tessera/runtime/error.hpp"
#include "tessera/runtime/runtime.hpp"

namespace tessera::chunks {

// ---- NetworkTopology ----------------------------------------------------

void NetworkTopology::set_shape(std::vector<int> dims, std::vector<bool> wraps, int network_dims,
                                std::vector<int> coords) {
  dims_ = std::move(dims);
  wraps_ = std::move(wraps);
  network_dims_ = network_dims;
  coords_ = std::move(coords);
  ranks_ = dims_.empty() ? 0 : static_cast<int>(coords_.size() / dims_.size());
}

void NetworkTopology::check_rank(int rank) const {
  if (rank < 0 || rank >= ranks_)
    throw RangeError("rank " + std::to_string(rank) + " is outside topology " + describe() + " (ranks 0.." +
                     std::to_string(ranks_ - 1) + ")");
}

bool NetworkTopology::wraps(int d) const {
  if (d < 0 || d >= static_cast<int>(dims_.size()))
    throw RangeError("dimension " + std::to_string(d) + " is outside topology " + describe() + " (" +
                     std::to_string(dims_.size()) + " dimensions)");
  return wraps_[static_cast<std::size_t>(d)];
}

std::span<const int> NetworkTopology::coordinates(int rank) const {
  check_rank(rank);
  return std::span<const int>(coords_).subspan(static_cast<std::size_t>(rank) * dims_.size(), dims_.size());
}

int NetworkTopology::rank_at(std::span<const int> coords) const {
  if (coords.size() != dims_.size())
    throw RangeError("topology " + describe() + " has " + std::to_string(dims_.size()) + " coordinates per rank, not " +
                     std::to_string(coords.size()));
  // A linear scan: rank_at is for user queries, not the mapping loops.
  for (int r = 0; r < ranks_; ++r)
    if (std::equal(coords.begin(), coords.end(), coords_.begin() + static_cast<std::ptrdiff_t>(r) *
                                                                        static_cast<std::ptrdiff_t>(dims_.size())))
      return r;
  std::string where;
  for (int c : coords) where += (where.empty() ? "" : ",") + std::to_string(c);
  throw RangeError("no rank of topology " + describe() + " sits at (" + where + ")");
}

int NetworkTopology::closest_rank(int from, std::span<const int> candidates) const {
  check_rank(from);
  if (candidates.empty()) throw RangeError("closest_rank: the list of candidate ranks is empty");
  int best = -1, best_hops = std::numeric_limits<int>::max();
  for (int c : candidates) {
    check_rank(c);
    int h = hops(from, c);
    if (h < best_hops) best = c, best_hops = h;
  }
  return best;
}

// ---- GridTopology -------------------------------------------------------

namespace {
std::string join_dims(const std::vector<int>& dims) {
  std::string s;
  for (int d : dims) s += (s.empty() ? "" : "x") + std::to_string(d);
  return s;
}

constexpr int kMaxSimulatedRanks = 1 << 24;  // far beyond any study, small enough for the tables
}  // namespace

GridTopology::GridTopology(std::vector<int> node_dims, std::vector<bool> wraps, int ranks_per_node)
    : node_dims_(std::move(node_dims)), node_wraps_(std::move(wraps)), ranks_per_node_(ranks_per_node) {
  if (node_dims_.empty()) throw ConfigError("a torus or mesh needs at least one dimension");
  if (node_wraps_.size() != node_dims_.size())
    throw ConfigError("a torus or mesh needs one wraparound flag per dimension (" + std::to_string(node_dims_.size()) +
                      " dimensions, " + std::to_string(node_wraps_.size()) + " flags)");
  if (ranks_per_node_ < 1) throw ConfigError("ranks per node must be at least 1, not " + std::to_string(ranks_per_node_));
  std::int64_t nodes = 1;
  for (std::size_t d = 0; d < node_dims_.size(); ++d) {
    if (node_dims_[d] < 1)
      throw ConfigError("dimension " + std::to_string(d + 1) + " of a torus or mesh must be at least 1, not " +
                        std::to_string(node_dims_[d]));
    nodes *= node_dims_[d];
    if (nodes * ranks_per_node_ > kMaxSimulatedRanks)
      throw ConfigError("a simulated topology of " + join_dims(node_dims_) + " nodes x " +
                        std::to_string(ranks_per_node_) + " ranks per node exceeds " +
                        std::to_string(kMaxSimulatedRanks) + " ranks");
  }
  nodes_ = static_cast<int>(nodes);
  const int ranks = nodes_ * ranks_per_node_;
  const std::size_t nd = node_dims_.size();
  std::vector<int> dims = node_dims_;
  dims.push_back(ranks_per_node_);
  std::vector<bool> wraps_all = node_wraps_;
  wraps_all.push_back(false);
  std::vector<int> coords(static_cast<std::size_t>(ranks) * (nd + 1));
  for (int r = 0; r < ranks; ++r) {
    int* c = &coords[static_cast<std::size_t>(r) * (nd + 1)];
    int node = r / ranks_per_node_;
    for (std::size_t d = 0; d < nd; ++d) {
      c[d] = node % node_dims_[d];
      node /= node_dims_[d];
    }
    c[nd] = r % ranks_per_node_;
  }
  set_shape(std::move(dims), std::move(wraps_all), static_cast<int>(nd), std::move(coords));
}

GridTopology GridTopology::parse(const std::string& spec) {
  auto bad = [&](const std::string& why) {
    return ConfigError("topology '" + spec + "': " + why +
                       "; expected torus:AxBxC or mesh:AxB, optionally :T ranks per node (e.g. torus:8x8x8:4)");
  };
  auto colon = spec.find(':');
  if (colon == std::string::npos) throw bad("no kind (torus: or mesh:)");
  std::string kind = spec.substr(0, colon);
  bool wrap;
  if (kind == "torus") wrap = true;
  else if (kind == "mesh") wrap = false;
  else throw bad("unknown kind '" + kind + "'");
  std::string rest = spec.substr(colon + 1);
  std::string shape = rest, per_node;
  if (auto c2 = rest.find(':'); c2 != std::string::npos) {
    shape = rest.substr(0, c2);
    per_node = rest.substr(c2 + 1);
  }
  auto number = [&](const std::string& text, const std::string& what) {
    int v = 0;
    auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
    if (text.empty()) throw bad(what + " is empty");
    if (ec == std::errc::result_out_of_range) throw bad(what + " '" + text + "' is too large");
    if (ec != std::errc() || end != text.data() + text.size()) throw bad(what + " '" + text + "' is not a number");
    if (v < 1) throw bad(what + " must be at least 1, not " + text);
    return v;
  };
  std::vector<int> dims;
  std::size_t start = 0;
  while (true) {
    auto x = shape.find('x', start);
    std::string part = shape.substr(start, x == std::string::npos ? std::string::npos : x - start);
    dims.push_back(number(part, "dimension " + std::to_string(dims.size() + 1)));
    if (x == std::string::npos) break;
    start = x + 1;
  }
  int ppn = per_node.empty() && rest.find(':') == std::string::npos ? 1 : number(per_node, "ranks per node");
  try {
    return GridTopology(dims, std::vector<bool>(dims.size(), wrap), ppn);
  } catch (const ConfigError& e) {
    throw bad(e.what());
  }
}

int GridTopology::rank_at(std::span<const int> coords) const {
  const std::size_t nd = node_dims_.size();
  if (coords.size() != nd + 1) return NetworkTopology::rank_at(coords);  // its error names the counts
  int node = 0;
  for (std::size_t d = nd; d-- > 0;) {
    if (coords[d] < 0 || coords[d] >= node_dims_[d]) return NetworkTopology::rank_at(coords);
    node = node * node_dims_[d] + coords[d];
  }
  if (coords[nd] < 0 || coords[nd] >= ranks_per_node_) return NetworkTopology::rank_at(coords);
  return node * ranks_per_node_ + coords[nd];
}

int GridTopology::node_of(int rank) const {
  check_rank(rank);
  return rank / ranks_per_node_;
}

int GridTopology::hops(int a, int b) const {
  auto ca = coordinates(a), cb = coordinates(b);
  int h = 0;
  for (std::size_t d = 0; d < node_dims_.size(); ++d) {
    int diff = std::abs(ca[d] - cb[d]);
    h += node_wraps_[d] ? std::min(diff, node_dims_[d] - diff) : diff;
  }
  return h;
}

std::string GridTopology::describe() const {
  bool all_wrap = std::all_of(node_wraps_.begin(), node_wraps_.end(), [](bool w) { return w; });
  bool none_wrap = std::none_of(node_wraps_.begin(), node_wraps_.end(), [](bool w) { return w; });
  std::string kind = all_wrap ? "torus" : none_wrap ? "mesh" : "grid";
  std::string s = kind + ":" + join_dims(node_dims_);
  if (!all_wrap && !none_wrap) {
    s += " (wraps:";
    for (bool w : node_wraps_) s += w ? " y" : " n";
    s += ")";
  }
  if (ranks_per_node_ > 1) s += ":" + std::to_string(ranks_per_node_);
  return s;
}

// Link (node, dimension, direction): ((node * dims) + d) * 2 + (0 for +, 1 for -).
std::int64_t GridTopology::link_count() const {
  return static_cast<std::int64_t>(nodes_) * static_cast<std::int64_t>(node_dims_.size()) * 2;
}

void GridTopology::route(int a, int b, std::vector<std::int64_t>& links) const {
  links.clear();
  auto ca = coordinates(a), cb = coordinates(b);
  const std::int64_t nd = static_cast<std::int64_t>(node_dims_.size());
  std::vector<int> at(ca.begin(), ca.begin() + nd);
  std::int64_t node = a / ranks_per_node_;
  std::int64_t stride = 1;
  for (std::int64_t d = 0; d < nd; ++d) {
    const int n = node_dims_[static_cast<std::size_t>(d)];
    int forward = ((cb[static_cast<std::size_t>(d)] - at[static_cast<std::size_t>(d)]) % n + n) % n;  // steps going +
    int steps, dir;
    if (!node_wraps_[static_cast<std::size_t>(d)]) {
      int diff = cb[static_cast<std::size_t>(d)] - at[static_cast<std::size_t>(d)];
      steps = std::abs(diff);
      dir = diff >= 0 ? +1 : -1;
    } else if (forward <= n - forward) {
      steps = forward, dir = +1;
    } else {
      steps = n - forward, dir = -1;
    }
    int& x = at[static_cast<std::size_t>(d)];
    for (int s = 0; s < steps; ++s) {
      links.push_back((node * nd + d) * 2 + (dir > 0 ? 0 : 1));
      int next = x + dir;
      if (next == n) next = 0;
      if (next < 0) next = n - 1;
      node += static_cast<std::int64_t>(next - x) * stride;
      x = next;
    }
    stride *= n;
  }
}

// ---- MachineTopology ----------------------------------------------------

MachineTopology::MachineTopology(std::vector<RankPlace> places) : places_(std::move(places)) {
  if (places_.empty()) throw ConfigError("a machine topology needs at least one rank");
  std::map<int, int> per_node;
  for (std::size_t r = 0; r < places_.size(); ++r) {
    if (places_[r].node < 0)
      throw RangeError("rank " + std::to_string(r) + " has node " + std::to_string(places_[r].node) + "; nodes count from 0");
    ++per_node[places_[r].node];
  }
  nodes_ = per_node.rbegin()->first + 1;
  for (auto [node, count] : per_node) ranks_per_node_ = std::max(ranks_per_node_, count);
  // Coordinates: node, socket, NUMA, core, slot on the node (order of rank).
  std::vector<int> slot_of_node(static_cast<std::size_t>(nodes_), 0);
  int max_socket = 0, max_numa = 0, max_core = 0;
  std::vector<int> coords;
  coords.reserve(places_.size() * 5);
  for (const RankPlace& p : places_) {
    coords.insert(coords.end(), {p.node, p.socket, p.numa, p.core, slot_of_node[static_cast<std::size_t>(p.node)]++});
    max_socket = std::max(max_socket, p.socket + 1);
    max_numa = std::max(max_numa, p.numa + 1);
    max_core = std::max(max_core, p.core + 1);
  }
  set_shape({nodes_, std::max(1, max_socket), std::max(1, max_numa), std::max(1, max_core), ranks_per_node_},
            std::vector<bool>(5, false), 1, std::move(coords));
}

MachineTopology MachineTopology::discover(const Runtime& rt) {
  const Topology& local = rt.topology();
  RankPlace mine;
  mine.node = rt.node().index;
  // A rank confined to one core / NUMA domain shares it; an unbound one
  // shares only its node. hwloc numbers NUMA domains package by package, so
  // with an even split the socket follows from the NUMA domain.
  if (local.bound && local.bound_cores.size() == 1) mine.core = local.bound_cores.front();
  if (local.bound_numa.size() == 1 && local.numa_nodes > 1) mine.numa = local.bound_numa.front();
  else if (local.numa_nodes == 1 && local.bound) mine.numa = 0;
  if (local.packages == 1 && local.bound) mine.socket = 0;
  else if (mine.numa >= 0 && local.packages > 0 && local.numa_nodes % local.packages == 0)
    mine.socket = mine.numa / (local.numa_nodes / local.packages);
  std::vector<RankPlace> places = all_gather(rt.comm(), mine);
  return MachineTopology(std::move(places));
}

int MachineTopology::node_of(int rank) const {
  check_rank(rank);
  return places_[static_cast<std::size_t>(rank)].node;
}

int MachineTopology::hops(int a, int b) const {
  check_rank(a);
  check_rank(b);
  if (a == b) return 0;
  const RankPlace& p = places_[static_cast<std::size_t>(a)];
  const RankPlace& q = places_[static_cast<std::size_t>(b)];
  if (p.node != q.node) return kOtherNode;
  auto shared = [](int x, int y) { return x >= 0 && x == y; };
  if (shared(p.core, q.core)) return kSameCore;
  if (shared(p.numa, q.numa)) return kSameNuma;
  if (shared(p.socket, q.socket)) return kSameSocket;
  return kSameNode;
}

std::string MachineTopology::describe() const {
  return "machine:" + std::to_string(nodes_) + (nodes_ == 1 ? " node, " : " nodes, ") + std::to_string(ranks()) +
         (ranks() == 1 ? " rank" : " ranks");
}

void MachineTopology::route(int a, int b, std::vector<std::int64_t>& links) const {
  links.clear();
  int na = node_of(a), nb = node_of(b);
  if (na == nb) return;
  links.push_back(2 * static_cast<std::int64_t>(na));      // out of a's node
  links.push_back(2 * static_cast<std::int64_t>(nb) + 1);  // into b's node
}

// ---- factories ----------------------------------------------------------

std::unique_ptr<NetworkTopology> parse_topology(const std::string& spec, int ranks) {
  if (spec == "machine")
    throw ConfigError("topology 'machine' is this job's machine: it needs the runtime (make_topology), not a string alone");
  auto grid = std::make_unique<GridTopology>(GridTopology::parse(spec));
  if (ranks > 0 && grid->ranks() != ranks)
    throw MismatchError("topology '" + spec + "' has " + std::to_string(grid->ranks()) + " ranks but " +
                        std::to_string(ranks) + " are needed; choose a shape whose dimensions multiply to " +
                        std::to_string(ranks));
  return grid;
}

std::unique_ptr<NetworkTopology> make_topology(const std::string& spec, const Runtime& rt) {
  if (spec == "machine") return std::make_unique<MachineTopology>(MachineTopology::discover(rt));
  return parse_topology(spec, rt.size());
}

}  // namespace tessera::chunks
