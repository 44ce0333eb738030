// Direct routing: one hop, one buffer per destination rank.
#include "tessera/comm/routing.hpp"

namespace tessera::comm {

namespace {
class DirectRouting final : public Routing {
 public:
  bool multi_hop() const noexcept override { return false; }
  Hop first_hop(int dest) const override { return {dest, false}; }
  int forwards_to(int) const override { return -1; }
};
}  // namespace

std::unique_ptr<Routing> make_direct_routing() { return std::make_unique<DirectRouting>(); }

std::unique_ptr<Routing> make_routing(const Runtime& rt, AggregationRouting routing, int rank, int size) {
  if (size <= 1 || routing == AggregationRouting::direct || routing == AggregationRouting::unset)
    return make_direct_routing();
  if (routing == AggregationRouting::node_first) return make_grid_routing(node_grid(rt.node(), size), rank);
  return make_grid_routing(square_grid(size), rank);
}

}  // namespace tessera::comm
