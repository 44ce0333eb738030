// tessera bench stream|ra|indexgather|histogram|all|pagerank|bfs|spectral|...
#include "commands.hpp"

#include <cstdio>
#include <initializer_list>

#include "tessera/bench/benchmarks.hpp"
#include "tessera/comm/options.hpp"
#include "tessera/runtime/comm_counters.hpp"
#include "tessera/runtime/runtime.hpp"
#include "tessera/runtime/trace.hpp"

namespace tessera::cli {

namespace {
struct BenchOptions {
  bench::StreamOptions stream;
  bench::RaOptions ra;
  bench::GatherOptions gather;
  bench::HistogramOptions histo;
  bench::ComponentsBenchOptions cc;
  bench::HittingBenchOptions hitting;
  bench::InteropBenchOptions interop;
  bench::ParseBenchOptions parse;
  bench::IsxOptions isx;  // sorting benchmarks
  bench::ArgsortBenchOptions argsort;
  bench::Jacobi3dOptions jacobi;    // over-decomposition benchmarks
  bench::Stencil3dOptions stencil;
  bench::GraphKernelBenchOptions pagerank, bfs;  // beside GAPBS
  bench::SpectralBenchOptions spectral;
  int reps = 0;
  std::string buffer;  // "64K"
  int in_flight = 0;
  bool demo = false;
  bench::ReportFormat format;
};

void apply_common(const BenchOptions& o, bench::CommonOptions& c) {
  if (o.reps > 0) c.reps = o.reps;
  if (o.buffer == "auto")
    c.aggregation.buffer_bytes = AggregationOptions::kAutoBufferBytes;
  else if (!o.buffer.empty())
    c.aggregation.buffer_bytes = parse_byte_size(o.buffer, "--buffer-bytes");
  if (o.in_flight > 0) c.aggregation.max_in_flight = o.in_flight;
  c.format = o.format;
}

int run(BenchOptions o, const std::string& which) {
  Runtime rt;
  trace::Span command(trace::Category::phase, trace::recording() ? trace::intern("tessera bench " + which) : nullptr);
  const std::initializer_list<bench::CommonOptions*> every{&o.stream, &o.ra,      &o.gather, &o.histo,   &o.cc,
                                                           &o.hitting, &o.interop, &o.parse,  &o.isx,     &o.argsort,
                                                           &o.jacobi,  &o.stencil, &o.pagerank, &o.bfs,   &o.spectral};
  for (bench::CommonOptions* c : every) apply_common(o, *c);
  if (o.demo) {  // the suite in about a minute at 4 ranks on a 2-core machine
    o.stream.elements = std::uint64_t{1} << 26;
    o.ra.log_table_per_rank = 21;
    o.gather.requests_per_rank = std::uint64_t{1} << 22;
    o.histo.updates_per_rank = std::uint64_t{1} << 22;
  }
  bool ok = true;
  if (which == "stream" || which == "all") ok = bench::run_stream(rt, o.stream) && ok;
  if (which == "ra" || which == "all") ok = bench::run_ra(rt, o.ra) && ok;
  if (which == "indexgather" || which == "all") ok = bench::run_indexgather(rt, o.gather) && ok;
  if (which == "histogram" || which == "all") ok = bench::run_histogram(rt, o.histo) && ok;
  if (which == "cc") ok = bench::run_components_bench(rt, o.cc) && ok;
  if (which == "parse") ok = bench::run_parse_bench(rt, o.parse) && ok;
  if (which == "hitting") ok = bench::run_hitting_bench(rt, o.hitting) && ok;
  if (which == "interop") ok = bench::run_interop_bench(rt, o.interop) && ok;
  if (which == "isx") ok = bench::run_isx(rt, o.isx) && ok;
  if (which == "argsort") ok = bench::run_argsort_bench(rt, o.argsort) && ok;
  if (which == "jacobi3d") ok = bench::run_jacobi3d(rt, o.jacobi) && ok;
  if (which == "stencil3d") ok = bench::run_stencil3d(rt, o.stencil) && ok;
  if (which == "pagerank") ok = bench::run_pagerank_bench(rt, o.pagerank) && ok;
  if (which == "bfs") ok = bench::run_bfs_bench(rt, o.bfs) && ok;
  if (which == "spectral") ok = bench::run_spectral_bench(rt, o.spectral) && ok;
  if (o.format.json && comm_stats_requested()) {
    // The counts of the whole run (every variant and repetition), one JSON line.
    const std::string counts = gather_comm_counters_json(rt);
    if (rt.rank() == 0) std::printf("{\"bench\":\"%s\",\"comm_stats\":%s}\n", which.c_str(), counts.c_str());
  }
  if (rt.rank() == 0 && !ok) std::fprintf(stderr, "tessera bench: a result FAILED verification\n");
  return ok ? 0 : 2;
}
}  // namespace

void add_bench(CLI::App& app, Action& selected) {
  auto o = std::make_shared<BenchOptions>();
  auto* bench = app.add_subcommand("bench", "Run a benchmark (verified, with baselines measured in the same run)");
  bench->require_subcommand(1);
  bench->add_option("--reps", o->reps, "Timed repetitions (best is reported)")->check(CLI::Range(1, 1000));
  bench->add_option("--buffer-bytes", o->buffer, "Aggregation buffer per destination, e.g. 64K, or auto");
  bench->add_option("--in-flight", o->in_flight, "Aggregation batches in flight per destination")
      ->check(CLI::Range(1, 64));
  bench->add_flag("--json", o->format.json, "Only JSON lines on stdout (one per result), no table");
  bench->add_flag("-q,--quiet", o->format.quiet, "No progress notes on stderr");
  bench->fallthrough();

  auto* s = bench->add_subcommand("stream", "STREAM copy/scale/add/triad: DistArray vs plain OpenMP loops");
  s->add_option("--elements", o->stream.elements, "Elements per array (whole job)")->check(CLI::PositiveNumber);
  s->add_option("--threads", o->stream.baseline_threads, "Baseline OpenMP threads (default: ranks)");
  auto* r = bench->add_subcommand("ra", "HPCC RandomAccess: aggregated vs fine-grained MPI_Accumulate");
  r->add_option("--log-table", o->ra.log_table_per_rank, "log2 of table words per rank")->check(CLI::Range(4, 34));
  r->add_option("--fine-updates", o->ra.fine_updates_per_rank, "Updates per rank for the fine-grained baseline");
  auto* g = bench->add_subcommand("indexgather", "Bale indexgather: aggregated vs MPI_Get vs alltoallv");
  g->add_option("--table", o->gather.table_per_rank, "Table entries per rank")->check(CLI::PositiveNumber);
  g->add_option("--requests", o->gather.requests_per_rank, "Reads per rank")->check(CLI::PositiveNumber);
  g->add_option("--fine-requests", o->gather.fine_requests_per_rank, "Reads per rank for the MPI_Get baseline");
  g->add_flag("--sweep", o->gather.sweep, "Aggregated reads at buffer sizes 1K..1M and auto (TESSERA_AGG_BUFFER_BYTES=auto)");
  auto* h = bench->add_subcommand("histogram", "Bale histogram: aggregated vs MPI_Accumulate vs alltoallv");
  h->add_option("--counts", o->histo.counts_per_rank, "Counts per rank")->check(CLI::PositiveNumber);
  h->add_option("--updates", o->histo.updates_per_rank, "Updates per rank")->check(CLI::PositiveNumber);
  h->add_option("--fine-updates", o->histo.fine_updates_per_rank, "Updates per rank for the MPI_Accumulate baseline");
  auto* c = bench->add_subcommand("cc", "Components: label propagation and FastSV vs serial union-find");
  c->add_option("--scale", o->cc.kron_scale, "Kronecker scale")->check(CLI::Range(4, 32));
  c->add_option("--grid", o->cc.grid_side, "Grid side (a side x side grid, ids scrambled)")->check(CLI::PositiveNumber);
  auto* t = bench->add_subcommand("hitting", "Hitting times: EdgeListMatrix vs CrsMatrix per CG iteration and memory");
  t->add_option("--scale", o->hitting.kron_scale, "Kronecker scale")->check(CLI::Range(4, 32));
  t->add_option("--grid", o->hitting.grid_side, "A 3D grid (mesh) of this side instead of the Kronecker graph")
      ->check(CLI::Range(2, 4096));
  t->add_option("--tolerance", o->hitting.tolerance, "CG relative residual")->check(CLI::PositiveNumber);
  auto* io = bench->add_subcommand(
      "interop", "One graph, three analyses: in process (Heap) vs tessera-analyze (Shared) vs bwrap; LP Heap vs Shared");
  io->add_option("--scale", o->interop.kron_scale, "Kronecker scale")->check(CLI::Range(4, 32));
  io->add_option("--grid", o->interop.grid_side, "Side of the 3D grid (mesh) graph")->check(CLI::Range(2, 4096));
  io->add_option("--solver", o->interop.solver, "The analysis' solver")->check(CLI::IsMember({"belos", "tessera"}));
  io->add_option("--tolerance", o->interop.tolerance, "Solver relative residual")->check(CLI::PositiveNumber);
  auto* p = bench->add_subcommand("parse", "Edge-list parse rate (MB/s per rank) on a generated .el file in page cache");
  p->add_option("--scale", o->parse.kron_scale, "Kronecker scale")->check(CLI::Range(4, 32));
  // Sorting: ISx and argsort.
  auto* x = bench->add_subcommand("isx", "ISx integer sort: ParRes ISx's alltoallv shape vs bulk exchange vs aggregation");
  x->add_option("--keys", o->isx.keys_per_rank, "Keys per rank (weak scaling)")->check(CLI::PositiveNumber);
  x->add_option("--total-keys", o->isx.total_keys, "Keys in all, split over the ranks (strong scaling)");
  x->add_option("--max-key", o->isx.max_key, "Keys are uniform in [0, max-key), at most 2^32");
  auto* z = bench->add_subcommand("argsort", "Radix argsort of 64-bit keys and the gather a[perm] vs std::sort on one rank");
  z->add_option("--keys", o->argsort.keys_per_rank, "Keys per rank")->check(CLI::PositiveNumber);
  z->add_option("--key-bits", o->argsort.key_bits, "Keys are uniform in [0, 2^bits)")->check(CLI::Range(1, 64));
  z->add_option("--digit-bits", o->argsort.digit_bits, "Bits per radix pass")->check(CLI::Range(1, 20));
  z->add_option("--gather-limit", o->argsort.gather_limit, "Largest array the std::sort baseline gathers to one rank");
  auto* a = bench->add_subcommand("all", "The four core benchmarks (stream, ra, indexgather, histogram)");
  a->add_flag("--demo", o->demo, "Larger sizes, about a minute at 4 ranks on 2 cores (make demo)");

  // Over-decomposition benchmarks.
  auto* j = bench->add_subcommand("jacobi3d", "Poisson3D by Jacobi on chunks vs the plain loop; --imbalance: load balancers");
  j->add_option("--n", o->jacobi.n, "Interior grid points per side")->check(CLI::Range(2, 2048));
  j->add_option("--iterations", o->jacobi.iterations, "Jacobi iterations per run")->check(CLI::Range(1, 100000));
  j->add_option("--chunks", o->jacobi.chunks, "Chunk grid, e.g. 4x4x4 (default: 1, 8 and 64 chunks)");
  j->add_option("--mapping", o->jacobi.mapping, "Initial placement: rnd, rr, block or to");
  j->add_option("--lb", o->jacobi.lb, "Load balancer also run: none, greedy, refine or comm");
  j->add_flag("--show-measurements", o->jacobi.show_measurements, "Print per-chunk loads and chunk-pair bytes at the LB step");
  j->add_flag("--imbalance", o->jacobi.imbalance, "Hot region (8 sweeps per iteration at the k=0 face falling to 1): lb none/greedy/refine/comm");
  auto* st = bench->add_subcommand("stencil3d", "7-point stencil in blocks (Charm++ stencil3d shape): RND/RR/TO mapping, hop-bytes");
  st->add_option("--n", o->stencil.n, "Grid points per side")->check(CLI::Range(2, 2048));
  st->add_option("--block", o->stencil.block, "Block side (must divide --n)")->check(CLI::Range(1, 2048));
  st->add_option("--iterations", o->stencil.iterations, "Iterations per run")->check(CLI::Range(1, 100000));
  st->add_option("--topology", o->stencil.topology, "machine, or a simulated torus:AxB[xC] / mesh:... of the job's ranks");

  // GAPBS's kernels and the spectral analysis, on a Kronecker graph or a file.
  auto graph_input = [](CLI::App* sub, int& scale, std::string& graph, bool& symmetric, bool& undirected) {
    sub->add_option("--scale", scale, "Kronecker scale")->check(CLI::Range(4, 32))->capture_default_str();
    sub->add_option("--graph", graph,
                    "A graph file (.el, .wel, .mtx, .gr, .graph, .sg, .wsg, .tsg) instead of the Kronecker graph")
        ->check(CLI::ExistingPath);
    sub->add_flag("--symmetric", symmetric, "The text file lists both directions of every edge");
    sub->add_flag("--undirected", undirected, "Add the reverse of every edge of the file");
  };
  auto peer_gapbs = [](CLI::App* sub, std::string& tree, const std::string& kernel) {
    sub->add_option("--peer-gapbs", tree,
                    "A GAPBS source tree: its " + kernel +
                        " runs on the same graph, as many threads as ranks (built once in ~/.cache)")
        ->check(CLI::ExistingDirectory);
  };
  auto* pr = bench->add_subcommand("pagerank", "PageRank (GAPBS's rules) step by step, verified; GAPBS's pr in the same run "
                                               "with --peer-gapbs");
  graph_input(pr, o->pagerank.kron_scale, o->pagerank.graph, o->pagerank.symmetric, o->pagerank.undirected);
  pr->add_option("--method", o->pagerank.method, "gauss-seidel (GAPBS's) or jacobi")
      ->check(CLI::IsMember({"gauss-seidel", "jacobi"}))
      ->capture_default_str();
  peer_gapbs(pr, o->pagerank.peer_gapbs, "pr");
  auto* bf = bench->add_subcommand("bfs", "Direction-optimizing BFS step by step, verified; GAPBS's bfs in the same run "
                                          "with --peer-gapbs");
  graph_input(bf, o->bfs.kron_scale, o->bfs.graph, o->bfs.symmetric, o->bfs.undirected);
  bf->add_option("--source", o->bfs.source, "Source vertex (0-based id; default: the vertex of largest degree)")
      ->check(CLI::NonNegativeNumber);
  peer_gapbs(bf, o->bfs.peer_gapbs, "bfs");
  auto* sp = bench->add_subcommand("spectral", "Fiedler vector by Anasazi: the edge arrays (EdgeListRowMatrix) vs a Tpetra "
                                               "CrsMatrix copy, time per iteration and memory");
  graph_input(sp, o->spectral.kron_scale, o->spectral.graph, o->spectral.symmetric, o->spectral.undirected);
  sp->add_option("--solver", o->spectral.method, "Anasazi's lobpcg or krylov-schur")
      ->check(CLI::IsMember({"lobpcg", "krylov-schur"}))
      ->capture_default_str();
  sp->add_option("--tolerance", o->spectral.tolerance, "Anasazi's relative residual")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();

  for (auto* sub : {s, r, g, h, c, t, io, p, x, z, a, j, st, pr, bf, sp}) {
    std::string name = sub->get_name();
    sub->callback([o, name, &selected] { selected = [o, name] { return run(*o, name); }; });
  }
}

}  // namespace tessera::cli
