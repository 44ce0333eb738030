// tessera: the command-line program.
//   tessera info                    what this job runs on
//   tessera shm list|gc             shared-memory segments and their owners
//   tessera checkpoint list|rm      a program's checkpoints, checked, or removed
//   tessera gen|convert|cc|lcc|hitting|pipeline   the graph workflow
//   tessera pagerank|bfs            GAPBS's kernels on a graph
//   tessera spectral                Fiedler vector / eigenvector centrality (Anasazi)
//   tessera bench NAME              the benchmark suite
//   tessera map                     hop-bytes of chunk mappings on a simulated torus
//   tessera -n K run --recover CMD  CMD under the recovery supervisor
//   tessera trace summary|plot FILE where a traced run spent its time
//   tessera mpirun ARGS             mpirun as Tessera starts every job (plumbing:
//                                   Python sessions and scripts/mpirun.sh run it)
// -n K starts the job under mpirun with K ranks when not already under MPI,
// watched by the supervisor (src/cli/run.cpp, run_job).
#include "commands.hpp"

#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include "tessera/runtime/comm_counters.hpp"
#include "tessera/runtime/error.hpp"
#include "tessera/runtime/launch.hpp"
#include "tessera/runtime/trace.hpp"

namespace {
// The arguments without "-n K" / "--ranks K" / "-nK" / "--ranks=K".
std::vector<std::string> without_rank_option(int argc, char** argv) {
  std::vector<std::string> out;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "-n" || a == "--ranks") {
      ++i;
      continue;
    }
    if ((a.rfind("-n", 0) == 0 && a.size() > 2 && std::isdigit(static_cast<unsigned char>(a[2]))) ||
        a.rfind("--ranks=", 0) == 0)
      continue;
    out.push_back(a);
  }
  return out;
}
}  // namespace

int main(int argc, char** argv) {
  // `tessera mpirun ARGS`: every argument is mpirun's, so none is parsed
  // here; mpirun gets the launch environment of runtime/launch.hpp.
  if (argc >= 2 && std::strcmp(argv[1], "mpirun") == 0) {
    try {
      tessera::exec_mpirun(std::vector<std::string>(argv + 2, argv + argc));
    } catch (const std::exception& e) {
      std::fprintf(stderr, "tessera: error: %s\n", e.what());
      return 127;
    }
  }
  CLI::App app{"Tessera: distributed graph and array analytics on MPI, zero-copy and aggregated", "tessera"};
  app.require_subcommand(1);
  app.set_version_flag("--version", std::string("tessera ") + TESSERA_VERSION);
  app.fallthrough();  // -n may follow the subcommand: `tessera bench all -n 4`
  // Every option's default in --help (subcommands inherit this).
  app.option_defaults()->always_capture_default();
  int ranks = 0;
  app.add_option("-n,--ranks", ranks, "Launch K ranks with mpirun (when not already under MPI)")
      ->check(CLI::Range(1, 4096));
  // Co-locales: place and bind each node's ranks by sockets, NUMA domains or cores.
  std::string colocales;
  app.add_option("--colocales", colocales,
                 "Bind each node's ranks one per socket, NUMA domain or core (hwloc); arrays with default storage "
                 "then live in co-locale segments (node-shared memory; TESSERA_COLOCALE_SEGMENTS=0: on the Heap)")
      ->check(CLI::IsMember({"socket", "numa", "core"}));
  // Seeing where the time goes: a trace file, and the communication counts.
  std::string trace_file;
  app.add_option("--trace", trace_file,
                 "Record the job into FILE (Chrome Trace Event JSON: Perfetto, chrome://tracing, 'tessera trace "
                 "summary FILE'); the same as TESSERA_TRACE=FILE")
      ->type_name("FILE");
  bool comm_stats = false;
  app.add_flag("--comm-stats", comm_stats,
               "At the end, print per rank the records, batches and bytes the aggregation engine sent and "
               "received (same node and other nodes apart) and the one-sided operations (TESSERA_COMM_STATS=1)");
  tessera::cli::Action selected;
  tessera::cli::add_info(app, selected);
  tessera::cli::add_shm(app, selected);
  tessera::cli::add_graph(app, selected);
  tessera::cli::add_analyses(app, selected);
  tessera::cli::add_bench(app, selected);
  tessera::cli::add_map(app, selected);
  tessera::cli::add_checkpoint(app, selected);
  tessera::cli::add_spectral(app, selected);
  bool launches_jobs = false;  // run, bench faults: they start mpirun themselves
  tessera::cli::add_run(app, selected, ranks, launches_jobs);
  tessera::cli::add_serve(app, selected, ranks, launches_jobs);
  tessera::cli::add_trace(app, selected, ranks, launches_jobs);
  // A default that says nothing (an empty list, a required value) is not shown.
  std::function<void(CLI::App*)> tidy = [&tidy](CLI::App* a) {
    for (CLI::Option* o : a->get_options())
      if (o->get_default_str() == "[]" || o->get_required()) o->default_str("");
    for (CLI::App* sub : a->get_subcommands([](CLI::App*) { return true; })) tidy(sub);
  };
  tidy(&app);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  try {
    // The ranks read these when their Runtime starts (and run_job names them
    // for ranks on other nodes).
    if (!trace_file.empty())
      ::setenv(tessera::trace::kTraceVariable, std::filesystem::absolute(trace_file).string().c_str(), 1);
    if (comm_stats) ::setenv(tessera::kCommStatsVariable, "1", 1);
    std::vector<std::string> mpirun_options;
    if (!colocales.empty()) mpirun_options = {"--bind-to", "none"};  // the ranks bind themselves
    const bool relaunch = ranks > 0 && !tessera::launched_by_mpi() && !launches_jobs;
    // Old spellings: said once, by the process the user sees (not by every rank).
    const char* world_rank = std::getenv("OMPI_COMM_WORLD_RANK");
    if (!relaunch && (!world_rank || std::strcmp(world_rank, "0") == 0))
      for (const auto& warning : tessera::cli::old_spellings_used())
        std::fprintf(stderr, "tessera: warning: %s\n", warning.c_str());
    if (relaunch)
      return tessera::cli::run_job(ranks, std::filesystem::read_symlink("/proc/self/exe").string(),
                                   without_rank_option(argc, argv), mpirun_options);
    if (!colocales.empty()) tessera::bind_colocale(tessera::parse_colocale_kind(colocales));
    return selected ? selected() : 1;
  } catch (const std::exception& e) {
    tessera::abort_job(e, 1);
  }
}
