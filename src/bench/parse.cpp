// Text parse rate: a Kronecker graph written as an edge list (untimed, so it
// sits in the page cache), then parsed by every rank's byte range
// (parse_text_edges) and read whole (read_graph: parse + build), in MB/s of
// file per rank. Both are verified against the generated graph's arcs.
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <optional>

#include "tessera/bench/benchmarks.hpp"
#include "tessera/bench/report.hpp"
#include "tessera/graph/generators.hpp"
#include "tessera/graph/read.hpp"
#include "tessera/graph/write.hpp"
#include "tessera/runtime/collective.hpp"
#include "tessera/runtime/exit_cleanup.hpp"
#include "tessera/runtime/splitmix64.hpp"
#include "tessera/storage/metadata.hpp"

namespace tessera::bench {

namespace {

// Order-free fingerprint of a multiset of arcs: the count and two sums of
// independent hashes of (u, v), over all ranks (one all-reduce).
struct ArcFingerprint {
  std::uint64_t arcs = 0, sum_a = 0, sum_b = 0;
  bool operator==(const ArcFingerprint&) const = default;
};

std::uint64_t mix(std::uint64_t x) { return splitmix64(x); }  // a copy: splitmix64 advances its state

// This rank's part: the count and the two sums.
struct ArcSums {
  std::uint64_t v[3] = {0, 0, 0};
  void add(std::uint64_t u, std::uint64_t w) {
    ++v[0];
    v[1] += mix(mix(u) + w);
    v[2] += mix(mix(w ^ 0x9e3779b97f4a7c15ull) + 3 * u);
  }
  ArcFingerprint reduced(Runtime& rt) {
    all_reduce(rt.comm(), v, 3, MPI_SUM);
    return {v[0], v[1], v[2]};
  }
};

// Of parsed edges (parallel source and destination arrays).
ArcFingerprint fingerprint(Runtime& rt, std::span<const std::uint64_t> src, std::span<const std::uint64_t> dst) {
  ArcSums sums;
  for (std::size_t k = 0; k < src.size(); ++k) sums.add(src[k], dst[k]);
  return sums.reduced(rt);
}

// Of a graph's stored arcs: a source is the row an arc sits in.
ArcFingerprint fingerprint(Runtime& rt, const graph::EdgeList& g) {
  ArcSums sums;
  g.for_each_arc([&](std::uint64_t u, std::uint64_t v, std::size_t) { sums.add(u, v); });
  return sums.reduced(rt);
}

// The temporary .el file: named by rank 0, removed on every exit path.
struct TemporaryEdgeList {
  std::string path;
  int slot = -1;
  Runtime& rt;
  explicit TemporaryEdgeList(Runtime& runtime) : rt(runtime) {
    if (rt.rank() == 0) {
      const char* env = std::getenv("TMPDIR");
      path = unique_temporary_name(std::string(env && *env ? env : "/tmp") + "/tessera-bench-parse") + ".el";
      slot = exit_cleanup::add(path);
    }
    path = broadcast(rt.comm(), path, 0);
  }
  ~TemporaryEdgeList() {
    if (rt.rank() != 0) return;
    ::unlink(path.c_str());
    exit_cleanup::remove(slot);
  }
};

}  // namespace

namespace {
// The file's size in bytes, as rank 0 sees it, on every rank.
std::uint64_t file_size(Runtime& rt, const std::string& path) {
  std::uint64_t bytes = 0;
  if (rt.rank() == 0) {
    struct stat st {};
    if (::stat(path.c_str(), &st) == 0) bytes = static_cast<std::uint64_t>(st.st_size);
  }
  return broadcast(rt.comm(), bytes, 0);
}
}  // namespace

bool run_parse_bench(Runtime& rt, const ParseBenchOptions& o) {
  auto spec = graph::GraphSpec::kronecker(o.kron_scale);
  progress(rt, o.format, "parse: " + spec.describe() + ", generating and writing the edge list (untimed)...");
  auto g = graph::generate(rt, spec);
  TemporaryEdgeList file(rt);
  graph::write_graph(g, file.path);
  const ArcFingerprint want = fingerprint(rt, g);
  const std::uint64_t vertices = g.vertices();
  const std::uint64_t file_bytes = file_size(rt, file.path);
  const double per_rank = static_cast<double>(file_bytes) / rt.size();
  Report report(rt, "parse",
                {{"kron_scale", o.kron_scale}, {"file_bytes", file_bytes}, {"arcs", want.arcs}, {"reps", o.reps}},
                o.format);
  report.set_baselines({"parse_text_edges"});

  std::optional<graph::ParsedText> parsed;
  std::optional<graph::LoadedGraph> loaded;
  // Vertices may be fewer than generated when the top ids are isolated: the
  // file cannot name them, so they are compared only as "at most".
  auto verdict = [&](const ArcFingerprint& got, std::uint64_t got_vertices, bool& ok) {
    ok = got == want && got_vertices <= vertices;
    return ok ? std::string("arcs = generated (") + std::to_string(got.arcs) + ")"
              : std::to_string(got.arcs) + " arcs (want " + std::to_string(want.arcs) + "), fingerprint " +
                    (got == want ? "equal" : "differs") + ", " + std::to_string(got_vertices) + " vertices";
  };
  std::vector<Variant> variants{
      {.variant = "parse_text_edges",
       .storage = "page cache",
       .reps = o.reps,
       .work = per_rank,
       .prepare = [&] { parsed.reset(); },
       .run = [&] { parsed = graph::parse_text_edges(rt, file.path); },
       .verify =
           [&](bool& ok) {
             return verdict(fingerprint(rt, parsed->edges.src, parsed->edges.dst),
                            all_reduce<std::uint64_t>(rt.comm(), parsed->vertices, MPI_MAX), ok);
           },
       .details = [&] { return nlohmann::json{{"bytes_per_rank", per_rank}, {"what", "parse only"}}; }},
      {.variant = "read_graph",
       .storage = "page cache",
       .reps = o.reps,
       .work = per_rank,
       .prepare = [&] { loaded.reset(); },
       .run = [&] { loaded = graph::read_graph(rt, file.path); },
       .verify =
           [&](bool& ok) { return verdict(fingerprint(rt, loaded->graph), loaded->graph.vertices(), ok); },
       .details = [&] { return nlohmann::json{{"bytes_per_rank", per_rank}, {"what", "parse + build"}}; }}};
  run_variants(rt, report, variants, 1e6, "MB/s per rank");
  return report.print();
}

}  // namespace tessera::bench
