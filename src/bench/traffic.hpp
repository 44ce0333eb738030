// Where an aggregated row's operations went: batches to ranks on this node,
// batches between nodes (messages, always), and operations served through
// the same-node mapping (no message). Across nodes this shows that the
// same-node path and co-locale segments stay inside a node. Also what each
// operation cost on the wire: the bytes the exchange handed to its transport
// (requests, forwarded batches, replies, headers included) over the
// operations it carried, and the side bytes kept at the origin per operation
// (what a reply in request order saves sending).
#pragma once
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "tessera/bench/report.hpp"
#include "tessera/runtime/collective.hpp"
#include "tessera/runtime/runtime.hpp"

namespace tessera::bench {

struct Traffic {
  std::uint64_t batches_same_node = 0;
  std::uint64_t batches_between_nodes = 0;
  std::uint64_t records_direct = 0;
  std::uint64_t requests = 0;    // operations this rank gave its exchange
  std::uint64_t bytes_sent = 0;  // bytes its exchange handed to the transport
  std::uint64_t side_bytes = 0;  // kept at the origin per operation until its reply

  // This rank's counts for one repetition (the last one recorded is kept).
  // `remote`: this rank's operations on elements it does not own (those
  // served through the same-node mapping are taken off here).
  template <class Aggregator>
  void record(const Runtime& rt, const Aggregator& agg, std::uint64_t remote) {
    const auto& stats = agg.exchange().stats();
    batches_same_node = batches_between_nodes = 0;
    for (std::size_t r = 0; r < stats.batches_to.size(); ++r)
      (rt.is_colocal(static_cast<int>(r)) ? batches_same_node : batches_between_nodes) += stats.batches_to[r];
    records_direct = agg.direct_records();
    requests = remote - records_direct;
    bytes_sent = stats.bytes_sent;
    side_bytes = agg.exchange().shape().side_bytes;
  }

  // Summed over the ranks (collective): the row's JSON "traffic" field.
  nlohmann::json json(Runtime& rt) const {
    std::uint64_t v[5] = {batches_same_node, batches_between_nodes, records_direct, requests, bytes_sent};
    all_reduce(rt.comm(), v, 5, MPI_SUM);
    nlohmann::json t{{"batches_same_node", v[0]}, {"batches_between_nodes", v[1]}, {"records_direct", v[2]},
                     {"requests", v[3]}, {"bytes_sent", v[4]}, {"side_bytes_per_request", side_bytes}};
    t["wire_bytes_per_request"] = v[3] ? nlohmann::json(static_cast<double>(v[4]) / static_cast<double>(v[3])) : nlohmann::json();
    return {{"traffic", t}};
  }
};

// This rank's operations on elements another rank owns.
template <class Array>
std::uint64_t remote_operations(const Array& array, const std::vector<std::uint64_t>& indices) {
  const int me = array.runtime().rank();
  std::uint64_t n = 0;
  for (std::uint64_t i : indices) n += array.owner(i) != me;
  return n;
}

// An aggregated row's last repetition: its own seconds (construction to the
// end of its flush, traffic read after the clock stops) and its traffic.
struct Counted {
  Traffic traffic{};
  double seconds = 0;
};

// Variant v running `kernel` (which returns its own seconds and records into
// the Traffic): the row's time is those seconds, its extra the traffic.
template <class Kernel>
Variant counted_variant(Runtime& rt, Variant v, Counted& c, Kernel kernel) {
  v.run = [&c, kernel] { c.seconds = kernel(c.traffic); };
  v.measured_seconds = [&c] { return c.seconds; };
  v.details = [&rt, &c] { return c.traffic.json(rt); };
  return v;
}

// One summary line: the wire and side bytes per operation of the messages-only
// row (`storage`), as its traffic measured them; `what` names an operation.
inline void add_bytes_summary(Report& report, const std::vector<Result>& rows, const std::string& storage,
                              const std::string& what) {
  const Result* row = find_result(rows, "aggregated", storage);
  if (!row || !row->extra.contains("traffic")) return;
  const auto& t = row->extra["traffic"];
  if (!t["wire_bytes_per_request"].is_number()) return;  // one rank: nothing crossed
  const double wire = t["wire_bytes_per_request"].get<double>();
  const auto side = t["side_bytes_per_request"].get<std::uint64_t>();
  char text[240];
  std::snprintf(text, sizeof(text), "bytes per %s (aggregated, %s, measured): %.3f on the wire (headers included), "
                "%llu kept at the origin and never sent", what.c_str(), storage.c_str(), wire,
                static_cast<unsigned long long>(side));
  report.add_summary(text, {{"wire_bytes_per_request", wire}, {"side_bytes_per_request", side},
                            {"bytes_storage", storage}});
}

}  // namespace tessera::bench
