// The subcommands of the `tessera` program. Each registers itself on the
// CLI11 app and, when chosen on the command line, sets `selected` to its work.
#pragma once
#include <CLI/CLI.hpp>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "tessera/pipeline/input.hpp"
#include "tessera/pipeline/memory.hpp"
#include "tessera/pipeline/progress.hpp"
#include "tessera/pipeline/workflow.hpp"
#include "tessera/runtime/runtime.hpp"

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
// tessera serve (src/cli/serve.cpp): an analyst's session, python/tessera/session.
void add_serve(CLI::App& app, Action& selected, const int& ranks, bool& launches_jobs);
// tessera trace summary|plot (src/cli/trace.cpp): python/tessera/tracefile.py on a trace file.
void add_trace(CLI::App& app, Action& selected, const int& ranks, bool& launches_jobs);
// Replaces this process by `PYTHON -m MODULE ARGS...` (serve, trace): the
// Python package found beside this program (a build tree's build/python,
// put first on PYTHONPATH) or installed; PYTHON is $TESSERA_PYTHON, else the
// Python the package was built for. Throws SystemError naming `purpose` when
// that Python cannot start (src/cli/python_package.cpp).
[[noreturn]] void exec_python_module(const std::string& module, const std::vector<std::string>& args,
                                     const std::string& purpose);
// `tessera -n K CMD...` outside MPI: CMD on K ranks under the supervisor, not
// relaunched; a dead, hung or lost rank is reported in one line and the dead
// job's segments removed. Returns the exit code (src/cli/run.cpp).
// The variables of this process that a job it launches must see on every
// node (a trace file, the communication counts): mpirun names them with -x.
std::vector<std::pair<std::string, std::string>> observability_environment();
int run_job(int ranks, const std::string& program, const std::vector<std::string>& args,
            const std::vector<std::string>& mpirun_options);
void add_spectral(CLI::App& app, Action& selected);    // tessera spectral (src/cli/spectral.cpp)
void add_analyses(CLI::App& app, Action& selected);  // tessera pagerank | bfs (src/cli/analyses.cpp)

// What the commands that read a graph share (defined in graph.cpp).
extern const CLI::Validator kGraphPath;  // an existing path, or - for standard input
extern const CLI::Validator kVertexId;   // digits only, 64 bits
extern const std::string kOutputNote;    // appended to the help of every output option
void add_graph_input(CLI::App* c, pipeline::Input& in, const std::string& help, bool required = true);
void add_input_options(CLI::App* c, pipeline::Input& in);     // --base --relabel --undirected --pattern
void add_symmetric_option(CLI::App* c, pipeline::Input& in);  // --symmetric
// An option's older spelling, kept for one release: hidden from --help,
// bound to the same variable, and a warning on stderr when used
// (old_spellings_used(), printed by main once per command).
template <class T>
CLI::Option* add_old_spelling(CLI::App* c, const std::string& old_name, const std::string& new_name, T& variable);
std::vector<std::string>& old_spellings_used();
// Rank 0's "-v" (show every line, the memory report too).
inline constexpr const char* kVerboseHelp = "Also the lines only a curious user needs: the memory report";

// A graph command's settings: the workflow's options (every default is the
// library's) and how the front end presents the result.
struct GraphArgs {
  pipeline::Options o;
  bool json = false, quiet = false, verbose = false;
  std::string shm_dir;  // --shm-dir: TESSERA_SHM_DIR for this command
  // --session PATH: run in an analyst's session on its resident graph @NAME
  // (src/cli/session_client.cpp); `command` is the subcommand's name.
  std::string session, command;
};
// The workflow run by the session at args.session on its resident graph
// (args.o.input.path = "@NAME"): progress lines as they come, the document
// on stdout with --json. Returns the exit code.
int run_in_session(const GraphArgs& args);
// Whether a graph argument is @NAME, a graph a session holds (graph.cpp).
bool names_resident_graph(const std::string& path);
using Workflow = pipeline::Result (*)(Runtime&, const pipeline::Options&, pipeline::Progress&);
// Runs a workflow: options checked before the runtime starts (`analysis`:
// the analysis options too), progress on rank 0's stderr unless -q, why an
// answer is not to be trusted on stderr, the document on stdout with
// --json. Returns the exit code.
int run_workflow(const GraphArgs& args, Workflow workflow, bool analysis);
void add_common(CLI::App* c, GraphArgs& a);  // --json -q --shm-dir

template <class T>
CLI::Option* add_old_spelling(CLI::App* c, const std::string& old_name, const std::string& new_name, T& variable) {
  auto* o = c->add_option(old_name, variable, "Old spelling of " + new_name);
  o->group("");  // not shown: the new name is the one to learn
  o->each([old_name, new_name](const std::string&) {
    const std::string warning = old_name + " is the old spelling of " + new_name +
                                "; it is accepted in this release only: write " + new_name;
    auto& used = old_spellings_used();
    for (const auto& w : used)
      if (w == warning) return;
    used.push_back(warning);
  });
  return o;
}

}  // namespace tessera::cli
