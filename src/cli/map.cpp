// tessera map: the hop-bytes and link load of chunk mappings (RND, RR, block,
// TO) for a 7-point stencil on a simulated torus or mesh, computed without
// running the stencil, after Bhatele and Kale's topology-mapping study.
#include <chrono>
#include <cstdio>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "commands.hpp"
#include "tessera/chunks/mapping.hpp"
#include "tessera/chunks/topology.hpp"
#include "tessera/graph/write.hpp"
#include "tessera/runtime/error.hpp"
#include "tessera/runtime/runtime.hpp"

namespace tessera::cli {

namespace {
struct MapArgs {
  std::string chunks, topology, mapping = "all", output, placement_file;
  std::uint64_t face_bytes = 16 * 16 * 8;  // a 16^3 block's face of doubles (Charm++ stencil3d)
  std::uint64_t seed = 1;
  bool periodic = false, json = false, quiet = false;
};

struct MappingRow {
  std::string name;
  chunks::MappingQuality quality;
  int max_chunks_per_rank = 0;
  double seconds = 0;
};

int run_map(const MapArgs& a) {
  Runtime rt;
  // Options first, before any work: every one names what is wrong.
  const chunks::ChunkGrid grid = chunks::ChunkGrid::parse(a.chunks);
  std::vector<std::string> names;
  if (a.mapping == "all") names = {"rnd", "rr", "block", "to"};
  else names = {chunks::mapping_name(chunks::parse_mapping(a.mapping))};
  if (!a.output.empty()) {
    if (names.size() != 1) throw ConfigError("-o writes one mapping's placement; choose --mapping rnd, rr, block or to");
    if (graph::check_output_path(rt, a.output, graph::OutputKind::text_lines).standard_output())
      throw ConfigError("-o " + a.output + ": map prints its table on standard output; write the placement to a file");
  }
  std::unique_ptr<chunks::NetworkTopology> topology =
      a.topology == "machine" ? chunks::make_topology(a.topology, rt) : chunks::parse_topology(a.topology);
  // An outside mapping (SCOTCH's gmap, or an earlier -o) read before computing.
  chunks::Placement from_file;
  if (!a.placement_file.empty()) {
    from_file = chunks::read_placement(a.placement_file, grid.count(), topology->ranks());
    names.push_back("file");
  }
  if (rt.rank() != 0) return 0;  // the evaluation is serial: one rank computes and prints

  using Clock = std::chrono::steady_clock;
  const chunks::CommGraph graph = chunks::stencil7_graph(grid, a.face_bytes, a.periodic);
  std::vector<MappingRow> rows;
  for (const std::string& name : names) {
    auto start = Clock::now();
    chunks::Placement placement = name == "file" ? from_file
                                  : chunks::map_chunks(chunks::parse_mapping(name), grid, *topology, a.seed);
    MappingRow row{name, chunks::evaluate(graph, placement, *topology), 0, 0};
    row.seconds = std::chrono::duration<double>(Clock::now() - start).count();
    std::vector<int> per_rank(static_cast<std::size_t>(topology->ranks()), 0);
    for (int r : placement) row.max_chunks_per_rank = std::max(row.max_chunks_per_rank, ++per_rank[static_cast<std::size_t>(r)]);
    if (!a.output.empty() && name != "file") chunks::write_placement(placement, a.output);
    rows.push_back(row);
  }

  if (a.json) {
    nlohmann::json list = nlohmann::json::array();
    for (const MappingRow& r : rows)
      list.push_back({{"mapping", r.name}, {"hop_bytes", r.quality.hop_bytes}, {"total_bytes", r.quality.total_bytes},
                      {"hops_per_byte", r.quality.hops_per_byte()}, {"max_link_load", r.quality.max_link_load},
                      {"max_chunks_per_rank", r.max_chunks_per_rank}, {"seconds", r.seconds}});
    nlohmann::json j{{"chunks", grid.describe()}, {"chunk_count", grid.count()}, {"topology", topology->describe()},
                     {"ranks", topology->ranks()}, {"face_bytes", a.face_bytes}, {"periodic", a.periodic},
                     {"seed", a.seed}, {"mappings", list}};
    std::printf("%s\n", j.dump().c_str());
    return 0;
  }
  std::printf("chunks %s (%lld), topology %s (%d ranks on %d nodes), 7-point stencil%s, %llu B per face\n",
              grid.describe().c_str(), static_cast<long long>(grid.count()), topology->describe().c_str(),
              topology->ranks(), topology->nodes(), a.periodic ? " (periodic)" : "",
              static_cast<unsigned long long>(a.face_bytes));
  std::printf("%-8s %20s %12s %20s %12s %10s\n", "mapping", "hop-bytes", "hops/byte", "max link load (B)",
              "chunks/rank", "seconds");
  for (const MappingRow& r : rows)
    std::printf("%-8s %20llu %12.3f %20llu %12d %10.3f\n", r.name.c_str(),
                static_cast<unsigned long long>(r.quality.hop_bytes), r.quality.hops_per_byte(),
                static_cast<unsigned long long>(r.quality.max_link_load), r.max_chunks_per_rank, r.seconds);
  if (!a.quiet)
    std::fprintf(stderr, "total %llu bytes per step over %zu chunk-to-chunk messages\n",
                 static_cast<unsigned long long>(rows.empty() ? 0 : rows.front().quality.total_bytes),
                 graph.edges.size());
  return 0;
}
}  // namespace

void add_map(CLI::App& app, Action& selected) {
  auto a = std::make_shared<MapArgs>();
  auto* sub = app.add_subcommand(
      "map", "Hop-bytes and max link load of chunk mappings (rnd, rr, block, to) for a 7-point stencil on a "
             "simulated torus or mesh, without running it");
  sub->add_option("--chunks", a->chunks, "Chunk grid IxJxK (e.g. 64x64x64)")->required();
  sub->add_option("--topology", a->topology,
                  "torus:AxBxC or mesh:AxB, optionally :T ranks per node (torus:8x8x8:4), or machine")
      ->required();
  sub->add_option("--mapping", a->mapping, "rnd, rr, block, to, or all (the four)")->capture_default_str();
  sub->add_option("--face-bytes", a->face_bytes, "Bytes per face message between neighbouring chunks")
      ->capture_default_str();
  sub->add_option("--seed", a->seed, "Seed of the random mapping")->capture_default_str();
  sub->add_option("--placement", a->placement_file,
                  "Also evaluate this placement: 'chunk rank' lines, or a SCOTCH mapping file (reported as 'file')");
  sub->add_flag("--periodic", a->periodic, "The chunk grid wraps around (every chunk has 6 neighbours)");
  sub->add_option("-o,--output", a->output, "Write the placement ('chunk rank' lines) of the one chosen mapping");
  sub->add_flag("--json", a->json, "Print one JSON document");
  sub->add_flag("-q,--quiet", a->quiet, "No summary line on stderr");
  sub->callback([a, &selected] { selected = [a] { return run_map(*a); }; });
}

}  // namespace tessera::cli
