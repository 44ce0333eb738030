// tessera CMD --session PATH @NAME: the command's workflow run by an
// analyst's session (python/tessera/session) on a graph it holds, instead of
// reading the graph again. The options parsed here travel as JSON
// (pipeline::options_json); the session's ranks run the same workflow on the
// resident graph (its caller's-graph form) and send back the document;
// progress lines arrive while it runs. The session's wire protocol is the
// Python package's alone (python/tessera/session/protocol.py): this command
// runs the package's client (tessera.session.command), which checks its
// server first (the socket's peer must be this user) and refuses a frame
// past its limits before allocating anything for it (docs/security.md).
#include <filesystem>
#include <string>
#include <vector>

#include "commands.hpp"
#include "tessera/runtime/error.hpp"
#include "tessera/runtime/launch.hpp"
#include "tessera/storage/mapping.hpp"

namespace tessera::cli {

namespace {

// The session's ranks write outputs from their own working directory.
void absolute(std::string& path, const char* option) {
  if (path.empty()) return;
  if (path == "-" || path == "/dev/stdout")
    throw ConfigError(std::string(option) + " " + path + ": with --session the session's ranks write the outputs; "
                      "name a file");
  path = std::filesystem::absolute(path).string();
}

}  // namespace

int run_in_session(const GraphArgs& args) {
  const std::string& graph = args.o.input.path;
  if (!names_resident_graph(graph))
    throw ConfigError("--session runs on a graph the session holds: name it @NAME (s.persist(g, \"NAME\") in "
                      "Python), not " + (graph.empty() ? std::string("a generated graph") : graph));
  if (launched_by_mpi())
    throw ConfigError("--session runs the command in the session's own ranks: leave out -n (and mpirun)");
  pipeline::Options o = args.o;
  o.analysis.quiet = args.quiet;
  o.document_on_stdout = args.json;
  for (auto [path, option] : {std::pair{&o.output, "-o"}, {&o.ids_output, "--ids"}, {&o.bfs.subgraph, "--subgraph"},
                              {&o.bfs.subgraph_ids, "--subgraph-ids"}, {&o.spectral.parts, "--parts"}})
    absolute(*path, option);
  std::vector<std::string> module_args = {"--session", args.session, "--graph", graph.substr(1), "--name",
                                          args.command, "--options", pipeline::options_json(o)};
  if (args.json) module_args.push_back("--json");
  if (!args.quiet) module_args.push_back("--verbose");
  exec_python_module("tessera.session.command", module_args, "the session's client");
}

}  // namespace tessera::cli
