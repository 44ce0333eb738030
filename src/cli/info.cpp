// tessera info: what a user needs to trust a run.
#include "commands.hpp"

#include <sys/statvfs.h>
#include <sys/vfs.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <nlohmann/json.hpp>

#include "tessera/array/dist_array.hpp"
#include "tessera/comm/options.hpp"
#include "tessera/runtime/collective.hpp"
#include "tessera/runtime/launch.hpp"
#include "tessera/runtime/runtime.hpp"
#include "tessera/runtime/wait.hpp"
#include "tessera/storage/storage.hpp"

namespace tessera::cli {

namespace {
struct RankView {
  char host[64];
  int node;
  int node_rank;
  char cpuset[64];
  char cores[64];
  char numa[32];
  int colocales;         // other ranks on this node
  int mapped_colocales;  // of those, whose co-locale segment this rank mapped
};

// With co-locale segments on, a small default-storage array shows what every
// array gets: how many co-locales' parts this rank maps (all of them, unless
// /proc/<pid>/fd is closed to it). Collective.
int probe_colocale_segments(Runtime& rt) {
  if (!rt.colocale_segments()) return 0;
  DistArray<std::uint64_t> probe(rt, static_cast<std::uint64_t>(rt.size()));
  int mapped = 0;
  for (int peer : rt.node().world_ranks) mapped += probe.colocal_data(peer) != nullptr;
  barrier(rt.comm());
  return mapped;
}

int run_info(bool as_json) {
  Runtime rt;
  const Topology& topo = rt.topology();
  RankView mine{};
  std::snprintf(mine.host, sizeof(mine.host), "%s", rt.node().hostname.c_str());
  mine.node = rt.node().index;
  mine.node_rank = rt.node().rank;
  std::snprintf(mine.cpuset, sizeof(mine.cpuset), "%s", topo.cpuset.c_str());
  std::snprintf(mine.cores, sizeof(mine.cores), "%s", format_index_list(topo.bound_cores).c_str());
  std::snprintf(mine.numa, sizeof(mine.numa), "%s", format_index_list(topo.bound_numa).c_str());
  mine.colocales = rt.node().size - 1;
  mine.mapped_colocales = probe_colocale_segments(rt);
  auto all = gather_to_root<RankView>(rt.comm(), std::span<const RankView>(&mine, 1), 0);
  if (rt.rank() != 0) return 0;

  int version = 0, subversion = 0;
  MPI_Get_version(&version, &subversion);
  std::string dir = default_shared_dir();
  struct statvfs vfs {};
  bool have_vfs = ::statvfs(dir.c_str(), &vfs) == 0;
  struct statfs fs {};
  bool tmpfs = ::statfs(dir.c_str(), &fs) == 0 && fs.f_type == 0x01021994;  // TMPFS_MAGIC
  double free_gib = have_vfs ? static_cast<double>(vfs.f_bavail) * static_cast<double>(vfs.f_frsize) / (1 << 30) : 0;
  double total_gib = have_vfs ? static_cast<double>(vfs.f_blocks) * static_cast<double>(vfs.f_frsize) / (1 << 30) : 0;
  AggregationOptions agg = AggregationOptions{}.resolved();
  const char* levels[] = {"SINGLE", "FUNNELED", "SERIALIZED", "MULTIPLE"};

  std::vector<int> per_node(static_cast<std::size_t>(rt.node().count), 0);
  for (const auto& v : all) ++per_node[static_cast<std::size_t>(v.node)];
  int colocales = 0, mapped = 0;
  for (const auto& v : all) colocales += v.colocales, mapped += v.mapped_colocales;
  const char* segments_env = std::getenv(kColocaleSegmentsVariable);

  if (as_json) {
    nlohmann::json ranks = nlohmann::json::array();
    for (int r = 0; r < rt.size(); ++r) {
      const auto& v = all[static_cast<std::size_t>(r)];
      ranks.push_back({{"rank", r}, {"host", v.host}, {"node", v.node}, {"node_rank", v.node_rank},
                       {"cpuset", v.cpuset}, {"cores", v.cores}, {"numa", v.numa}});
    }
    nlohmann::json j{
        {"mpi", {{"library", mpi_library_version()}, {"standard", std::to_string(version) + "." + std::to_string(subversion)},
                 {"thread_level", levels[std::clamp(rt.thread_level(), 0, 3)]}}},
        {"version", TESSERA_VERSION},
        {"ranks", rt.size()},
        {"nodes", rt.node().count},
        {"ranks_per_node", per_node},
        {"topology", {{"sockets", topo.packages}, {"numa", topo.numa_nodes}, {"cores", topo.cores}, {"pus", topo.pus}}},
        {"binding", ranks},
        {"colocales", std::getenv("TESSERA_COLOCALES") ? std::getenv("TESSERA_COLOCALES") : "none"},
        {"colocale_segments", {{"on", rt.colocale_segments()},
                               {"default_storage", storage_kind_name(resolved_storage_kind(rt, {}))},
                               {"environment", segments_env ? segments_env : ""},
                               {"colocales", colocales},
                               {"mapped_colocales", mapped}}},
        {"shared_memory", {{"dir", dir}, {"tmpfs", tmpfs}, {"free_bytes", have_vfs ? vfs.f_bavail * vfs.f_frsize : 0},
                           {"total_bytes", have_vfs ? vfs.f_blocks * vfs.f_frsize : 0}}},
        {"aggregation", {{"buffer_bytes", agg.buffer_bytes}, {"max_in_flight", agg.max_in_flight},
                         {"same_node_direct", agg.same_node_direct != 0},
                         {"send_memory_bytes_per_aggregator", agg.send_memory_bytes(rt.size())},
                         {"routing", routing_name(agg.routing)},
                         {"buffer_memory_bytes_per_rank", {{"16", agg.buffer_memory_bytes(16)}, {"1024", agg.buffer_memory_bytes(1024)},
                                                           {"65536", agg.buffer_memory_bytes(65536)}}},
                         {"grid_buffer_memory_bytes_per_rank",
                          {{"16", agg.with_routing(AggregationRouting::grid).buffer_memory_bytes(16)},
                           {"1024", agg.with_routing(AggregationRouting::grid).buffer_memory_bytes(1024)},
                           {"65536", agg.with_routing(AggregationRouting::grid).buffer_memory_bytes(65536)}}}}}};
    std::printf("%s\n", j.dump(2).c_str());
    return 0;
  }
  std::printf("Tessera %s\n", TESSERA_VERSION);
  std::printf("MPI        %s\n", mpi_library_version().c_str());
  std::printf("           MPI %d.%d, thread level %s\n", version, subversion,
              levels[std::clamp(rt.thread_level(), 0, 3)]);
  std::printf("Ranks      %d on %d node(s); co-locales per node:", rt.size(), rt.node().count);
  for (int n : per_node) std::printf(" %d", n);
  std::printf("\nNode 0     %s\n", topo.summary().c_str());
  if (rt.node().size > topo.cores)
    std::printf("           %d ranks share %d cores: oversubscribed, waits yield the core\n", rt.node().size, topo.cores);
  std::printf("Binding    rank  host             node  PUs        cores      NUMA\n");
  for (int r = 0; r < rt.size(); ++r) {
    const auto& v = all[static_cast<std::size_t>(r)];
    std::printf("           %4d  %-16s %4d  %-10s %-10s %s\n", r, v.host, v.node, v.cpuset, v.cores, v.numa);
  }
  if (const char* colocales = std::getenv("TESSERA_COLOCALES"))
    std::printf("Co-locales %s  [--colocales]\n", colocales);
  else
    std::printf("Co-locales not placed (bind with -n K --colocales socket|numa|core)\n");
  if (rt.colocale_segments())
    std::printf("Segments   co-locale segments on [TESSERA_COLOCALE_SEGMENTS=1; --colocales sets it]: arrays with\n"
                "           default storage live in node-shared memory (memfd) that co-locales access directly\n"
                "           (explicit Heap stays Heap); co-locale parts mapped by the ranks: %d of %d\n",
                mapped, colocales);
  else
    std::printf("Segments   co-locale segments off: default storage is Heap; only Shared arrays take the\n"
                "           same-node path (on with --colocales or TESSERA_COLOCALE_SEGMENTS=1)\n");
  std::printf("Shared     %s (%s), %.1f GiB free of %.1f GiB  [TESSERA_SHM_DIR]\n", dir.c_str(),
              tmpfs ? "tmpfs" : "not tmpfs", free_gib, total_gib);
  std::printf("Aggregate  %zu B per destination buffer [TESSERA_AGG_BUFFER_BYTES], %d in flight [TESSERA_AGG_IN_FLIGHT]\n",
              agg.buffer_bytes, agg.max_in_flight);
  std::printf("           send memory per aggregator per rank: %d ranks x %zu B x %d = %zu B\n", rt.size(),
              agg.buffer_bytes, 1 + agg.max_in_flight, agg.send_memory_bytes(rt.size()));
  std::printf("           same-node direct path %s [TESSERA_AGG_SAME_NODE]\n", agg.same_node_direct ? "on" : "off");
  std::printf("           routing %s [TESSERA_AGG_ROUTING=direct|grid]; buffer memory per rank (send + receive):\n",
              routing_name(agg.routing));
  for (int P : {16, 1024, 65536})
    std::printf("             P=%-6d direct %9.2f MiB   grid %7.2f MiB (%zu buffers)\n", P,
                static_cast<double>(agg.with_routing(AggregationRouting::direct).buffer_memory_bytes(P)) / (1 << 20),
                static_cast<double>(agg.with_routing(AggregationRouting::grid).buffer_memory_bytes(P)) / (1 << 20),
                agg.with_routing(AggregationRouting::grid).destinations(P));
  return 0;
}
}  // namespace

void add_info(CLI::App& app, Action& selected) {
  struct Options {
    bool json = false;
    bool quiet = false;  // accepted as by every command; info prints no progress
  };
  // Owned by the callback: CLI11 writes the flags through these references while parsing.
  auto o = std::make_shared<Options>();
  auto* sub = app.add_subcommand("info", "Show MPI, ranks, co-locales, topology, shared memory and aggregation settings");
  sub->add_flag("--json", o->json, "Print JSON");
  sub->add_flag("-q,--quiet", o->quiet, "Accepted as by every command (info prints no progress)");
  sub->callback([o, &selected] { selected = [o] { return run_info(o->json); }; });
}

}  // namespace tessera::cli
