// Where an aggregated row's operations went: batches to ranks on this node,
// batches between nodes (messages, always), and operations served through
// the same-node mapping (no message). Across nodes this shows that the
// same-node path and co-locale segments stay inside a node.
#pragma once
#include <cstdint>

#include <nlohmann/json.hpp>

#include "tessera/runtime/collective.hpp"
#include "tessera/runtime/runtime.hpp"

namespace tessera::bench {

struct Traffic {
  std::uint64_t batches_same_node = 0;
  std::uint64_t batches_between_nodes = 0;
  std::uint64_t records_direct = 0;

  // This rank's counts for one repetition (the last one recorded is kept).
  template <class Aggregator>
  void record(const Runtime& rt, const Aggregator& agg) {
    const auto& to = agg.exchange().stats().batches_to;
    batches_same_node = batches_between_nodes = 0;
    for (std::size_t r = 0; r < to.size(); ++r)
      (rt.is_colocal(static_cast<int>(r)) ? batches_same_node : batches_between_nodes) += to[r];
    records_direct = agg.direct_records();
  }

  // Summed over the ranks (collective): the row's JSON "traffic" field.
  nlohmann::json json(Runtime& rt) const {
    std::uint64_t v[3] = {batches_same_node, batches_between_nodes, records_direct};
    all_reduce(rt.comm(), v, 3, MPI_SUM);
    return {{"traffic", {{"batches_same_node", v[0]}, {"batches_between_nodes", v[1]}, {"records_direct", v[2]}}}};
  }
};

}  // namespace tessera::bench
