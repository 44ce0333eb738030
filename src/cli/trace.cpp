// tessera trace summary|plot FILE: where a traced run (--trace FILE,
// TESSERA_TRACE, tessera.trace in Python) spent its time. The tools are the
// Python package's (python/tessera/tracefile.py, pure Python: neither MPI
// nor the extension); this command checks its arguments and runs them.
#include <memory>
#include <string>
#include <vector>

#include "commands.hpp"
#include "tessera/runtime/error.hpp"

namespace tessera::cli {

namespace {
struct TraceFileArgs {
  std::string file;
  bool json = false;
  std::string output;
};

int run_trace_tool(const std::string& tool, const TraceFileArgs& a, int ranks) {
  if (ranks > 0) throw ConfigError("tessera trace reads a file in this process: drop -n");
  std::vector<std::string> args = {tool, a.file};
  if (a.json) args.push_back("--json");
  if (!a.output.empty()) args.insert(args.end(), {"--output", a.output});
  exec_python_module("tessera.tracefile", args, "tessera trace");
}
}  // namespace

void add_trace(CLI::App& app, Action& selected, const int& ranks, bool& launches_jobs) {
  auto a = std::make_shared<TraceFileArgs>();
  auto* trace_command =
      app.add_subcommand("trace", "Where a traced run (--trace FILE) spent its time: a summary or a picture");
  trace_command->require_subcommand(1);
  auto* summary = trace_command->add_subcommand(
      "summary", "Per rank busy, idle, communication and checkpoint seconds and their shares of wall time; the "
                 "costliest phases with their imbalance (slowest rank / mean); the rank-to-rank traffic");
  auto* plot = trace_command->add_subcommand(
      "plot", "The timeline (ranks by time, phases in colours, waiting hatched), the utilization per rank and the "
              "traffic matrix, in one picture (needs matplotlib)");
  for (auto* tool : {summary, plot})
    tool->add_option("FILE", a->file, "A trace file (Chrome Trace Event JSON, format 1: docs/trace.md)")
        ->required()
        ->check(CLI::ExistingFile);
  summary->add_flag("--json", a->json, "Print one JSON document on stdout (nothing else there)");
  plot->add_option("-o,--output", a->output, "The picture: a .png or .svg path")->required();
  for (auto* tool : {summary, plot})
    tool->callback([tool, a, &selected, &ranks, &launches_jobs] {
      launches_jobs = true;  // never relaunched under mpirun: -n is refused
      selected = [name = tool->get_name(), a, &ranks] { return run_trace_tool(name, *a, ranks); };
    });
}

}  // namespace tessera::cli
