// The subcommands of the `tessera` program. Each registers itself on the
// CLI11 app and, when chosen on the command line, sets `selected` to its work.
#pragma once
#include <CLI/CLI.hpp>
#include <functional>

namespace tessera::cli {

using Action = std::function<int()>;  // returns the exit code

void add_info(CLI::App& app, Action& selected);
void add_shm(CLI::App& app, Action& selected);
void add_bench(CLI::App& app, Action& selected);
void add_graph(CLI::App& app, Action& selected);
void add_map(CLI::App& app, Action& selected);  // tessera map (src/cli/map.cpp)
void add_checkpoint(CLI::App& app, Action& selected);  // tessera checkpoint (src/cli/checkpoint.cpp)
// tessera run, bench faults (src/cli/run.cpp; after add_bench): they launch
// mpirun themselves with -n K ranks, so they set launches_jobs.
void add_run(CLI::App& app, Action& selected, const int& ranks, bool& launches_jobs);

}  // namespace tessera::cli
