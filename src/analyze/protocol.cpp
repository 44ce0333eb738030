// The request and reply of an out-of-process analysis (include/tessera/analyze/protocol.hpp).
#include "tessera/analyze/protocol.hpp"

#include <cmath>
#include <cstring>

#include "tessera/runtime/error.hpp"

namespace tessera::analyze::protocol {

std::unique_ptr<control::ControlSegment> create(const std::string& path, int ranks, mode_t mode,
                                                const Placement* placement) {
  return control::ControlSegment::create(path, ranks, mode, kSchema, [&](control::ControlSegment& segment) {
    Placement& p = payload(segment).placement;
    if (placement) {
      std::memcpy(&p, placement, sizeof(p));
      p.host[sizeof(p.host) - 1] = '\0';
    } else {
      std::memset(&p, 0, sizeof(p));
      p.nodes = 1;
      for (int r = 0; r < ranks && r < control::kMaxRanks; ++r) p.serves[r] = 1;
    }
  });
}

Placement read_placement(const control::ControlSegment& segment) {
  Placement p{};
  std::memcpy(&p, &payload(segment).placement, sizeof(p));
  const std::string& path = segment.path();
  if (p.nodes < 1 || p.nodes > static_cast<std::uint32_t>(control::kMaxRanks) || p.node >= p.nodes)
    throw FormatError(path + ": placement names node " + std::to_string(p.node) + " of " + std::to_string(p.nodes) +
                      " (corrupt control segment)");
  control::checked_string(p.host, sizeof(p.host), "placement host name", path);
  return p;
}

std::string node_name(const Placement& placement) {
  return placement.host[0] ? "host " + std::string(placement.host) : std::string("this node");
}

std::unique_ptr<control::ControlSegment> open(const std::string& path) {
  return control::ControlSegment::open(path, kSchema);
}

static_assert(sizeof(Payload) <= control::kPayloadBytes, "the payload must fit the control segment's payload area");

const char* analysis_name(std::uint32_t analysis) noexcept {
  switch (static_cast<Analysis>(analysis)) {
    case Analysis::hitting_times: return "hitting times";
    case Analysis::shutdown: return "shutdown";
    case Analysis::fiedler: return "fiedler";
    case Analysis::centrality: return "centrality";
    default: return "";
  }
}

Request read_request(const control::ControlSegment& segment) {
  // Copied first: the other side may write the mapping at any time.
  Request r{};
  std::memcpy(&r, &payload(segment).request, sizeof(r));
  const std::string& path = segment.path();
  auto bad = [&](const std::string& what) { throw FormatError(path + ": request " + what); };
  if (r.analysis == static_cast<std::uint32_t>(Analysis::none) || !*analysis_name(r.analysis))
    bad("names unknown analysis kind " + std::to_string(r.analysis) +
        " (known: 1 hitting times, 3 fiedler, 4 centrality; 2 shutdown): a caller of a newer build?");
  if (r.analysis == static_cast<std::uint32_t>(Analysis::shutdown)) return r;
  const bool spectral_kind = spectral(r.analysis);
  if (!spectral_kind && r.solver != static_cast<std::uint32_t>(Solver::tessera) && r.solver != static_cast<std::uint32_t>(Solver::belos))
    bad("names unknown solver " + std::to_string(r.solver) + " (known: 1 tessera, 2 belos)");
  if (!spectral_kind && r.preconditioner != static_cast<std::uint32_t>(Preconditioner::diagonal) &&
      r.preconditioner != static_cast<std::uint32_t>(Preconditioner::relaxation))
    bad("names unknown preconditioner " + std::to_string(r.preconditioner) + " (known: 0 diagonal, 1 relaxation)");
  if (spectral_kind && r.target_count != 0)
    bad("names " + std::to_string(r.target_count) + " targets for the " + analysis_name(r.analysis) +
        " analysis, which takes none");
  if (!spectral_kind && (r.target_count == 0 || r.target_count > static_cast<std::uint32_t>(kMaxTargets)))
    bad("has " + std::to_string(r.target_count) + " targets (1.." + std::to_string(kMaxTargets) + ")");
  if (!(r.tolerance > 0 && r.tolerance < 1 && std::isfinite(r.tolerance)))
    bad("tolerance " + std::to_string(r.tolerance) + " is not in (0, 1)");
  if (r.max_iterations <= 0) bad("max iterations " + std::to_string(r.max_iterations) + " is not positive");
  control::checked_string(r.offsets, sizeof(r.offsets), "row offsets array path", path);
  control::checked_string(r.dst, sizeof(r.dst), "destination array path", path);
  control::checked_string(r.weight, sizeof(r.weight), "weight array path", path);
  control::checked_string(r.result, sizeof(r.result), "result array path", path);
  if (!r.offsets[0] || !r.dst[0] || !r.result[0]) bad("lacks a row offsets, destination or result array path");
  for (std::uint32_t i = 0; i < r.target_count; ++i)
    if (r.targets[i] >= r.vertices)
      bad("target " + std::to_string(r.targets[i]) + " is not a vertex (the graph has " + std::to_string(r.vertices) +
          ")");
  return r;
}

}  // namespace tessera::analyze::protocol
