// PageRank and BFS benchmarks beside GAPBS: Tessera's kernels on a
// Kronecker graph (or a file), every step the user waits for timed, the
// answer checked by the kernels' own distributed verifiers; GAPBS's `pr` and
// `bfs` on the same graph in the same run when a GAPBS source tree is given.
// GAPBS is built, converted to and run by scripts/bench_vs_gapbs.py --peer
// (the code that builds it outside the tree and parses its output lives
// there once); its stdout is one JSON line per kernel.
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <optional>

#include "graph_input.hpp"
#include "tessera/bench/benchmarks.hpp"
#include "tessera/bench/report.hpp"
#include "tessera/graph/bfs.hpp"
#include "tessera/graph/packed_graph.hpp"
#include "tessera/graph/pagerank.hpp"
#include "tessera/graph/write.hpp"
#include "tessera/runtime/collective.hpp"
#include "tessera/runtime/error.hpp"
#include "tessera/runtime/exit_cleanup.hpp"
#include "tessera/storage/metadata.hpp"

namespace tessera::bench {

namespace {

// The GAPBS driver: $TESSERA_BENCH_VS_GAPBS, else scripts/bench_vs_gapbs.py
// of the source tree this build directory sits in; "" when neither exists.
std::string gapbs_script() {
  if (const char* env = std::getenv("TESSERA_BENCH_VS_GAPBS"); env && *env) return env;
  std::error_code ec;
  const auto exe = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (ec) return "";
  for (auto dir = exe.parent_path(); !dir.empty() && dir != dir.root_path(); dir = dir.parent_path()) {
    const auto candidate = dir / "scripts" / "bench_vs_gapbs.py";
    if (std::filesystem::is_regular_file(candidate, ec)) return candidate.string();
  }
  return "";
}

std::string shell_quoted(const std::string& s) {
  std::string q = "'";
  for (char c : s) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

// Runs a shell command on this rank; its stdout and exit status (stderr passes through).
std::pair<std::string, int> capture(const std::string& command) {
  std::FILE* pipe = ::popen(command.c_str(), "r");
  if (!pipe) throw SystemError("cannot start " + command, errno);
  std::string out;
  char buf[4096];
  std::size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, pipe)) > 0) out.append(buf, n);
  const int status = ::pclose(pipe);
  return {out, WIFEXITED(status) ? WEXITSTATUS(status) : 128};
}

// The graph as an edge list GAPBS reads: rank 0 names it, every exit path removes it.
struct TemporaryGraphFile {
  std::string path;
  int slot = -1;
  Runtime& rt;
  explicit TemporaryGraphFile(Runtime& runtime) : rt(runtime) {
    if (rt.rank() == 0) {
      const char* env = std::getenv("TMPDIR");
      path = unique_temporary_name(std::string(env && *env ? env : "/tmp") + "/tessera-bench-gapbs") + ".el";
      slot = exit_cleanup::add(path);
    }
    path = broadcast(rt.comm(), path, 0);
  }
  TemporaryGraphFile(const TemporaryGraphFile&) = delete;
  TemporaryGraphFile& operator=(const TemporaryGraphFile&) = delete;
  ~TemporaryGraphFile() {
    if (rt.rank() != 0) return;
    ::unlink(path.c_str());
    exit_cleanup::remove(slot);
  }
};

// Without a tree: the row says it was skipped, and how to get one (from the
// script, which says it once for both ways in) goes to stderr and the row.
void gapbs_how_to(Runtime& rt, const GraphKernelBenchOptions& o, const std::string& script, const std::string& kernel,
                  Result& row) {
  std::string how;
  if (rt.rank() == 0 && !script.empty())
    how = capture("python3 " + shell_quoted(script) + " --how-to " + (kernel == "pr" ? "pagerank" : "bfs")).first;
  how = broadcast(rt.comm(), how, 0);
  if (rt.rank() == 0 && !o.format.quiet && !how.empty()) std::fprintf(stderr, "%s", how.c_str());
  row.skipped = "no GAPBS tree (--peer-gapbs DIR); how to get one: on stderr, and in the summary's gapbs_how_to";
  row.extra = {{"how_to", how}};
}

// The driver's first output line (JSON, or null) and its exit status, on
// every rank: GAPBS run on rank 0 on `g` written as an edge list (untimed).
std::pair<nlohmann::json, int> run_gapbs(Runtime& rt, const GraphKernelBenchOptions& o, const graph::EdgeList& g,
                                         const std::string& script, const std::string& kernel, std::int64_t source) {
  TemporaryGraphFile file(rt);
  graph::write_graph(g, file.path);
  std::string out;
  int status = 0;
  if (rt.rank() == 0) {
    std::string command = "python3 " + shell_quoted(script) + " --gapbs " + shell_quoted(o.peer_gapbs) + " --peer " +
                          shell_quoted(file.path) + " --kernels " + kernel + " --threads " + std::to_string(rt.size()) +
                          " --rounds " + std::to_string(o.reps) + (g.directed() ? "" : " --symmetric");
    if (kernel == "bfs") command += " --source " + std::to_string(source);
    std::tie(out, status) = capture(command);
  }
  barrier(rt.comm());
  out = broadcast(rt.comm(), out, 0);
  status = broadcast(rt.comm(), status, 0);
  nlohmann::json line;
  try {
    line = nlohmann::json::parse(out.substr(0, out.find('\n')));
  } catch (const nlohmann::json::exception&) {
  }
  return {line, status};
}

// GAPBS's kernel on `g` through the driver script, on rank 0 while the
// other ranks wait in a yielding barrier; the row, the same on every rank.
Result gapbs_row(Runtime& rt, const GraphKernelBenchOptions& o, const graph::EdgeList& g, const std::string& kernel,
                 std::int64_t source) {
  Result row;
  row.variant = "GAPBS " + kernel;
  row.storage = std::to_string(rt.size()) + (rt.size() == 1 ? " thread" : " threads");
  row.unit = "M arcs/s";
  row.work = static_cast<double>(g.arcs());
  const std::string script = gapbs_script();
  if (o.peer_gapbs.empty()) {
    gapbs_how_to(rt, o, script, kernel, row);
    return row;
  }
  if (script.empty())
    throw ConfigError("--peer-gapbs: scripts/bench_vs_gapbs.py is not found above " +
                      std::filesystem::read_symlink("/proc/self/exe").parent_path().string() +
                      "; set TESSERA_BENCH_VS_GAPBS to its path");
  progress(rt, o.format, "GAPBS " + kernel + " with " + std::to_string(rt.size()) + " thread(s), " +
                             std::to_string(o.reps) + " runs (writing the graph for it, untimed)...");
  const auto [line, status] = run_gapbs(rt, o, g, script, kernel, source);
  if (status != 0 || !line.is_object() || !line.contains("trials")) {
    row.check = "GAPBS did not run (bench_vs_gapbs.py --peer exited " + std::to_string(status) +
                "; its message is above)";
    return row;
  }
  row.timing = timing_of(line["trials"].get<std::vector<double>>());
  row.rate = row.work / row.timing.best / 1e6;
  // The same graph: edges() counts as GAPBS does (an undirected edge once,
  // a directed graph's arcs); GAPBS cannot know isolated vertices past the
  // largest id in the file.
  const auto nodes = line["nodes"].get<std::uint64_t>(), edges = line["edges"].get<std::uint64_t>();
  const bool same = nodes <= g.vertices() && edges == g.edges();
  row.verified = line["verified"].get<bool>() && same;
  row.check = std::string("GAPBS's own verifier (-v): ") + (line["verified"].get<bool>() ? "PASS" : "FAIL") +
              "; it read " + std::to_string(nodes) + " nodes, " + std::to_string(edges) +
              (g.directed() ? " arcs" : " undirected edges") + (same ? " (the same graph)" : " (NOT the same graph)");
  row.extra = {{"gapbs_tree", line.value("tree", "")},
               {"read_seconds", line["read"]},
               {"build_seconds", line["build"]},
               {"threads", rt.size()}};
  return row;
}

// What both kernels share: the graph and its steps, the Tessera rows, the
// peer's row, the summary.
struct KernelRun {
  std::string kernel;  // GAPBS's name: "pr" or "bfs"
  std::function<void()> run;
  std::function<void()> reset;
  std::function<std::string(bool&)> verify;
  std::function<nlohmann::json()> details;
  // The same kernel on the graph packed (an undirected graph's compact
  // form): a second row, timed beside the first; unset for a directed graph.
  std::function<void()> packed_run{}, packed_reset{};
  std::function<std::string(bool&)> packed_verify{};
  std::function<nlohmann::json()> packed_details{};
};

// The graph packed, its build timed as a step the user waits for.
struct Packed {
  std::optional<graph::PackedGraph> graph;
  double seconds = 0;
};
Packed pack_for_bench(Runtime& rt, const graph::EdgeList& g) {
  Packed p;
  if (g.directed() || g.weighted()) return p;
  barrier(rt.comm());
  const double t0 = MPI_Wtime();
  p.graph.emplace(graph::PackedGraph::pack(g));
  p.seconds = all_reduce(rt.comm(), MPI_Wtime() - t0, MPI_MAX);
  return p;
}

// The packed graph's id of vertex v of g (its numbering by degree).
std::uint64_t packed_id(Runtime& rt, const graph::PackedGraph& p, std::uint64_t v) {
  const DistArray<std::uint64_t>* old = p.original_ids();
  if (!old) return v;
  std::uint64_t found = kNoIndex;
  auto ids = old->local();
  for (std::size_t i = 0; i < ids.size(); ++i)
    if (ids[i] == v) found = p.local_vertex_begin() + i;
  return all_reduce(rt.comm(), found, MPI_MIN);
}

// The packed row's time against GAPBS's, and its bytes per edge beside
// the EdgeList's and GAPBS's.
void add_packed_summary(Report& report, const std::string& bench, double packed_seconds, double gapbs_seconds,
                        const graph::PackedGraph& packed, const graph::EdgeList& g) {
  const double edges = static_cast<double>(std::max<std::uint64_t>(g.edges(), 1));
  const double gapbs_bytes = 4.0 * static_cast<double>(g.arcs()) / edges;
  char text[300];
  std::snprintf(text, sizeof(text),
                "%s packed: %.4f s, %.2fx GAPBS; %.2f bytes per undirected edge (EdgeList %.2f, GAPBS %.2f)",
                bench.c_str(), packed_seconds, packed_seconds / gapbs_seconds, packed.bytes_per_edge(),
                g.bytes_per_edge(), gapbs_bytes);
  report.add_summary(text, {{"packed_over_gapbs", packed_seconds / gapbs_seconds},
                            {"packed_seconds", packed_seconds},
                            {"packed_bytes_per_edge", packed.bytes_per_edge()},
                            {"bytes_per_edge", g.bytes_per_edge()},
                            {"gapbs_bytes_per_edge", gapbs_bytes}});
}

bool run_graph_kernel(Runtime& rt, const GraphKernelBenchOptions& o, const std::string& bench, const BenchGraph& input,
                      const graph::EdgeList& g, double build_seconds, const KernelRun& k, std::int64_t source,
                      nlohmann::json config, const Packed& packed) {
  // Bytes per edge as the field counts edges, beside GAPBS's CSR of the
  // same graph (32-bit ids, every stored arc: 4 bytes an arc).
  const double edges = static_cast<double>(std::max<std::uint64_t>(g.edges(), 1));
  config.update({{"graph", o.graph.empty() ? "kron" : o.graph}, {"kron_scale", o.kron_scale},
                 {"vertices", g.vertices()}, {"arcs", g.arcs()}, {"edges", g.edges()}, {"directed", g.directed()},
                 {"reps", o.reps}, {"bytes_per_edge", g.bytes_per_edge()},
                 {"gapbs_bytes_per_edge", 4.0 * static_cast<double>(g.arcs()) / edges},
                 {"packed_bytes_per_edge", packed.graph ? nlohmann::json(packed.graph->bytes_per_edge()) : nlohmann::json()}});
  Report report(rt, bench, config, o.format);
  report.set_baselines({"GAPBS"});
  double verify_seconds = 0;
  std::vector<Variant> variants{{
      .variant = "Tessera " + bench,
      .storage = "heap",
      .reps = o.reps,
      .work = static_cast<double>(g.arcs()),
      .prepare = k.reset,
      .run = k.run,
      .verify = [&](bool& ok) {
        barrier(rt.comm());
        const double t0 = MPI_Wtime();
        std::string found = k.verify(ok);
        verify_seconds = all_reduce(rt.comm(), MPI_Wtime() - t0, MPI_MAX);
        return found;
      },
      .details = [&] {
        nlohmann::json j = k.details();
        j["step_seconds"] = {{input.step, input.seconds}, {"build", build_seconds}, {"verify", verify_seconds}};
        j["verifier"] = bench == "pagerank" ? "graph::check_pagerank (GAPBS's PRVerifier, distributed)"
                                            : "graph::check_bfs (GAPBS's BFS verifier, distributed)";
        return j;
      }}};
  if (k.packed_run) {
    char name[96];
    std::snprintf(name, sizeof(name), "Tessera %s, packed (%.2f B/edge)", bench.c_str(), packed.graph->bytes_per_edge());
    variants.push_back({.variant = name,
                        .storage = "heap",
                        .reps = o.reps,
                        .work = static_cast<double>(g.arcs()),
                        .prepare = k.packed_reset,
                        .run = k.packed_run,
                        .verify = k.packed_verify,
                        .details = [&] {
                          nlohmann::json j = k.packed_details();
                          j["step_seconds"] = {{"pack", packed.seconds}};
                          j["bytes_per_edge"] = packed.graph->bytes_per_edge();
                          return j;
                        }});
  }
  auto rows = run_variants(rt, report, variants, 1e6, "M arcs/s");
  Result peer = gapbs_row(rt, o, g, k.kernel, source);
  report.add(peer);
  char text[300];
  if (peer.skipped.empty() && peer.timing.best > 0) {
    const double ratio = rows[0].timing.best / peer.timing.best;
    std::snprintf(text, sizeof(text),
                  "%s kernel time (best of %d): Tessera %.4f s at %d rank(s), GAPBS %.4f s at %d thread(s): %.2fx",
                  bench.c_str(), o.reps, rows[0].timing.best, rt.size(), peer.timing.best, rt.size(), ratio);
    report.add_summary(text, {{"tessera_over_gapbs", ratio},
                              {"tessera_seconds", rows[0].timing.best},
                              {"gapbs_seconds", peer.timing.best},
                              {"gapbs_threads", rt.size()}});
    if (rows.size() > 1 && rows[1].timing.best > 0)
      add_packed_summary(report, bench, rows[1].timing.best, peer.timing.best, *packed.graph, g);
  } else {
    std::snprintf(text, sizeof(text), "%s kernel time (best of %d): Tessera %.4f s at %d rank(s); GAPBS not run",
                  bench.c_str(), o.reps, rows[0].timing.best, rt.size());
    report.add_summary(text, {{"tessera_seconds", rows[0].timing.best},
                              {"gapbs_seconds", nullptr},
                              {"gapbs_how_to", peer.extra.value("how_to", "")}});
  }
  return report.print();
}

// The graph and, for a directed one, the transpose the pull kernels read.
struct Prepared {
  BenchGraph input;
  std::optional<graph::EdgeList> in_arcs;
  double build_seconds = 0;
};

Prepared prepare(Runtime& rt, const GraphKernelBenchOptions& o, const std::string& bench, bool needs_in_arcs) {
  progress(rt, o.format, bench + ": " + (o.graph.empty() ? "kron scale " + std::to_string(o.kron_scale) : o.graph) +
                             ", " + std::to_string(o.reps) + " runs...");
  Prepared p{load_bench_graph(rt, o.kron_scale, o.graph, o.symmetric, o.undirected), {}, 0};
  if (needs_in_arcs && p.input.graph->directed()) {
    barrier(rt.comm());
    const double t0 = MPI_Wtime();
    p.in_arcs.emplace(p.input.graph->transposed({}, true));
    p.build_seconds = all_reduce(rt.comm(), MPI_Wtime() - t0, MPI_MAX);
  }
  return p;
}

}  // namespace

bool run_pagerank_bench(Runtime& rt, const GraphKernelBenchOptions& o) {
  graph::PageRankOptions po;
  po.method = graph::parse_pagerank_method(o.method);
  po.aggregation = o.aggregation;
  Prepared p = prepare(rt, o, "pagerank", true);
  const graph::EdgeList& g = *p.input.graph;
  const graph::EdgeList* in = p.in_arcs ? &*p.in_arcs : nullptr;
  std::optional<graph::PageRank> pr;
  KernelRun k{
      .kernel = "pr",
      .run = [&] { pr.emplace(graph::pagerank(g, po, in)); },
      .reset = [&] { pr.reset(); },
      .verify = [&](bool& ok) {
        const std::string problem = graph::check_pagerank(g, pr->scores, po, po.tolerance);
        ok = problem.empty();
        char buf[160];
        std::snprintf(buf, sizeof(buf), "%d iterations, last L1 change %.2e; ", pr->iterations, pr->change);
        return buf + (ok ? "check_pagerank: the L1 residual of one power iteration is below " +
                               std::to_string(po.tolerance).substr(0, 6)
                         : "check_pagerank FAILED: " + problem);
      },
      .details = [&] {
        return nlohmann::json{{"iterations", pr->iterations}, {"change", pr->change}, {"converged", pr->converged},
                              {"kernel_seconds", pr->seconds}, {"extra_bytes", pr->extra_bytes}};
      }};
  Packed packed = pack_for_bench(rt, g);
  if (packed.graph) {
    // Numbered by degree, Gauss-Seidel sweeps in another order and needs
    // more iterations than GAPBS's cap of 20 on Kronecker graphs: the row
    // shows how many (docs/graph-formats.md).
    k.packed_run = [&] {
      graph::PageRankOptions patient = po;
      patient.max_iterations = std::max(po.max_iterations, 100);
      pr.emplace(graph::pagerank(*packed.graph, patient));
    };
    k.packed_reset = k.reset;
    k.packed_verify = [&](bool& ok) {
      const std::string problem = graph::check_pagerank(*packed.graph, pr->scores, po, po.tolerance);
      ok = problem.empty();
      return std::to_string(pr->iterations) + " iterations; " + (ok ? "check_pagerank passed" : "check_pagerank FAILED: " + problem);
    };
    k.packed_details = k.details;
  }
  return run_graph_kernel(rt, o, "pagerank", p.input, g, p.build_seconds, k, -1,
                          {{"method", graph::pagerank_method_name(po.method)}, {"damping", po.damping},
                           {"tolerance", po.tolerance}, {"max_iterations", po.max_iterations}},
                          packed);
}

bool run_bfs_bench(Runtime& rt, const GraphKernelBenchOptions& o) {
  Prepared p = prepare(rt, o, "bfs", true);
  const graph::EdgeList& g = *p.input.graph;
  const graph::EdgeList* in = p.in_arcs ? &*p.in_arcs : nullptr;
  std::int64_t source = o.source;
  if (source < 0) {  // the vertex of largest out-degree: in the giant component of a Kronecker graph
    auto offsets = g.row_offsets();
    std::uint64_t best = 0, best_v = kNoIndex;
    for (std::size_t i = 0; i + 1 < offsets.size(); ++i)
      if (offsets[i + 1] - offsets[i] > best || best_v == kNoIndex)
        best = offsets[i + 1] - offsets[i], best_v = g.local_vertex_begin() + i;
    source = static_cast<std::int64_t>(all_argmax<std::uint64_t>(rt.comm(), best, best_v).index);
  }
  if (static_cast<std::uint64_t>(source) >= g.vertices())
    throw RangeError("--source " + std::to_string(source) + " is not a vertex: the graph's ids are 0.." +
                     std::to_string(g.vertices() - 1));
  graph::BfsOptions bo;
  bo.aggregation = o.aggregation;
  std::optional<graph::Bfs> b;
  KernelRun k{
      .kernel = "bfs",
      .run = [&] { b.emplace(graph::bfs(g, static_cast<std::uint64_t>(source), bo, in)); },
      .reset = [&] { b.reset(); },
      .verify = [&](bool& ok) {
        const std::string problem = graph::check_bfs(g, static_cast<std::uint64_t>(source), b->parents);
        ok = problem.empty();
        char buf[160];
        std::snprintf(buf, sizeof(buf), "%" PRIu64 " reached, %d levels; ", b->reached, b->levels);
        return buf + (ok ? std::string("check_bfs: parents are arcs, chains reach the source, depths are shortest")
                         : "check_bfs FAILED: " + problem);
      },
      .details = [&] {
        return nlohmann::json{{"reached", b->reached},           {"levels", b->levels},
                              {"top_down_steps", b->top_down_steps}, {"bottom_up_steps", b->bottom_up_steps},
                              {"kernel_seconds", b->seconds},      {"extra_bytes", b->extra_bytes}};
      }};
  Packed packed = pack_for_bench(rt, g);
  if (packed.graph) {
    const std::uint64_t packed_source = packed_id(rt, *packed.graph, static_cast<std::uint64_t>(source));
    k.packed_run = [&, packed_source] { b.emplace(graph::bfs(*packed.graph, packed_source, bo)); };
    k.packed_reset = k.reset;
    k.packed_verify = [&, packed_source](bool& ok) {
      const std::string problem = graph::check_bfs(*packed.graph, packed_source, b->parents);
      ok = problem.empty();
      return std::to_string(b->reached) + " reached; " + (ok ? "check_bfs passed" : "check_bfs FAILED: " + problem);
    };
    k.packed_details = k.details;
  }
  return run_graph_kernel(rt, o, "bfs", p.input, g, p.build_seconds, k, source, {{"source", source}}, packed);
}

}  // namespace tessera::bench
