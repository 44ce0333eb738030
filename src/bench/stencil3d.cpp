// tessera bench stencil3d: Charm++'s stencil3d shape (a 128^3 grid in 16^3
// blocks, 7-point stencil, ghost-face exchange between blocks) on chunks,
// under random (RND), round-robin (RR) and topology-aware (TO) placement,
// with the hop-bytes of each (Bhatele, Kale, "Benefits of topology aware
// mapping for mesh interconnects"). The kernel is jacobi3d's, so each run
// is verified against the plain loop bit for bit. Charm++'s own stencil3d is
// not run here: `scripts/peers.py quoted stencil3d` prints its figure as a
// quoted reference, never as a ratio to this run.
#include <cstdio>
#include <memory>

#include "jacobi3d.hpp"
#include "tessera/bench/benchmarks.hpp"
#include "tessera/runtime/collective.hpp"

namespace tessera::bench {
using namespace tessera::chunks;

bool run_stencil3d(Runtime& rt, const Stencil3dOptions& o) {
  if (o.block < 1 || o.n % o.block != 0)
    throw ConfigError("--block " + std::to_string(o.block) + " must divide --n " + std::to_string(o.n));
  jacobi::Problem problem{o.n, o.iterations, false};
  int per_side = o.n / o.block;
  ChunkGrid grid{per_side, per_side, per_side};
  std::shared_ptr<const NetworkTopology> topology = make_topology(o.topology, rt);
  const double cells = static_cast<double>(o.n) * o.n * o.n;
  Report report(rt, "stencil3d", {{"n", o.n}, {"block", o.block}, {"iterations", o.iterations}}, o.format);
  report.set_baselines({"plain"});
  jacobi::Outcome plain;
  run_variants(rt, report, {jacobi::plain_variant(rt, problem, plain)}, 1e6, "M cells/s");

  const CommGraph graph = jacobi::stencil_graph(problem, grid);
  for (std::string mapping : {"rnd", "rr", "to"}) {
    progress(rt, o.format, "mapping " + mapping + " ...");
    auto placement = map_chunks(parse_mapping(mapping), grid, *topology);
    double hb = static_cast<double>(hop_bytes(graph, placement, *topology));
    jacobi::Outcome out;
    Variant v{.variant = "mapping=" + mapping, .storage = std::to_string(grid.count()) + " blocks", .reps = o.reps,
              .work = cells, .run = [&] { out = jacobi::run_chunked(rt, problem, grid, placement); },
              .verify = [&](bool& ok) {
                std::string text = jacobi::check(problem, out, &plain);
                ok = text.rfind("ok", 0) == 0;
                return text;
              },
              .measured_seconds = [&] { return out.seconds_per_iteration; },
              .details = [&] {
                return nlohmann::json{{"mapping", mapping}, {"hop_bytes", hb}, {"seconds_per_iteration", out.seconds_per_iteration}};
              }};
    auto row = run_variants(rt, report, {v}, 1e6, "M cells/s").front();
    nlohmann::json values{{"mapping", mapping}, {"hop_bytes", hb}, {"seconds_per_iteration", row.timing.best},
                          {"verified", row.verified}};
    std::string text = "mapping " + mapping + ": " + std::to_string(row.timing.best) + " s/iteration, hop-bytes " +
                       std::to_string(hb) + " per iteration on " + topology->describe();
    // Projections' evidence: the time the ranks spent waiting under this mapping.
    if (row.extra.contains("idle")) {
      const auto& idle = row.extra["idle"];
      values["idle_share_mean"] = idle["share_mean"];
      values["idle_share_max"] = idle["share_max"];
      text += strprintf("; idle %.1f%% of the time on average, %.1f%% on the most idle rank",
                        100 * idle["share_mean"].get<double>(), 100 * idle["share_max"].get<double>());
    }
    report.add_summary(text, values);
  }
  return report.print();
}

}  // namespace tessera::bench
