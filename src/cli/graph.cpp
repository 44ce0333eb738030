// tessera gen | convert | cc | lcc | hitting | pipeline: option parsing and
// printing, and run_workflow, which every graph command's front end shares. The workflows themselves are the pipeline/ layer's
// (include/tessera/pipeline/workflow.hpp), which Python calls too: the same
// defaults (its Options), checks and result document. Progress lines come
// from the library through a sink printed on rank 0 (stderr); --json prints
// the result document on stdout at the end.
#include "commands.hpp"

#include <sys/stat.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <optional>
#include <nlohmann/json.hpp>

#include "tessera/analyze/client.hpp"
#include "tessera/graph/generators.hpp"
#include "tessera/linalg/cg.hpp"
#include "tessera/pipeline/memory.hpp"
#include "tessera/runtime/collective.hpp"
#include "tessera/runtime/error.hpp"
#include "tessera/pipeline/workflow.hpp"
#include "tessera/runtime/comm_counters.hpp"
#include "tessera/runtime/trace.hpp"

namespace tessera::cli {

// Shared with analyses.cpp and spectral.cpp (declared in commands.hpp).

// A graph path: an existing file or directory, "-" for standard input, or
// @NAME, a graph a session holds (--session).
bool names_resident_graph(const std::string& path) { return path.size() > 1 && path[0] == '@'; }
const CLI::Validator kGraphPath(
    [](std::string& path) {
      return path == "-" || names_resident_graph(path) ? std::string() : CLI::ExistingPath(path);
    },
    "PATH|-|@NAME");

// A vertex id: digits only (CLI11 would read "-1" as 2^64-1).
const CLI::Validator kVertexId(
    [](std::string& id) {
      if (id.empty() || id.size() > 20 || id.find_first_not_of("0123456789") != std::string::npos)
        return "vertex ids are non-negative integers, not '" + id + "'";
      try {
        (void)std::stoull(id);
      } catch (const std::exception&) {
        return "vertex id " + id + " does not fit in 64 bits";
      }
      return std::string();
    },
    "ID");

// Appended to the help of every output option.
const std::string kOutputNote =
    "; - is standard output, devices and FIFOs are written in place, files replaced whole";

// The help of cc's and pipeline's --verify.
const char* const kVerifyComponents =
    "Prove the component labels (every edge inside one label, each label's vertices connected, the sizes summed "
    "to the vertex count; O(vertices) memory); exit status 3 if wrong";

std::vector<std::string>& old_spellings_used() {
  static std::vector<std::string> used;
  return used;
}

void add_graph_input(CLI::App* c, pipeline::Input& in, const std::string& help, bool required) {
  auto* o = c->add_option("graph", in.path, help + " (- reads standard input)")->check(kGraphPath);
  if (required) o->required();
}
void add_input_options(CLI::App* c, pipeline::Input& in) {
  c->add_option("--base", in.base,
                "First vertex id of a text file: 0 or 1 (default: what a '# tessera graph:' header says, else 1 "
                "for .mtx, else 0; an override of the header is printed)")
      ->check(CLI::IsMember({0, 1}))
      ->default_str("auto");
  c->add_flag("--relabel", in.relabel, "Number the ids that occur 0..n-1 (sparse SNAP ids)");
  c->add_flag("--undirected", in.undirected,
              "Add the reverse of every edge (a file whose '# tessera graph:' header says undirected is read as "
              "undirected without it)");
  c->add_flag("--pattern", in.pattern, "Ignore the weights (values of a structural matrix)");
  c->add_flag("--multigraph", in.multigraph,
              "Keep a file's duplicate edges and self loops (default: dropped and counted, a simple graph as GAPBS "
              "and networkx count it; .tsg is read as written)");
}
// Edge lists that already list both directions (GAPBS, SNAP): no reverses added.
void add_symmetric_option(CLI::App* c, pipeline::Input& in) {
  c->add_flag("--symmetric", in.symmetric,
              "The text file lists both directions of every edge: read it as undirected without adding reverses "
              "(verified; duplicates dropped)");
}

// The memory guardrail of a graph command: null when there is nothing to
// size (standard input, an input a checkpoint replaces).
nlohmann::json check_command_memory(Runtime& rt, const std::string& command, const pipeline::Options& o,
                                    pipeline::Progress& progress) {
  const std::string& path = o.input.path;
  if (path == "-" || (!path.empty() && !std::filesystem::exists(path))) return nullptr;
  pipeline::MemoryContext where;
  where.ranks = rt.size();
  where.ranks_on_node = rt.node().size;
  // A file that cannot be sized (not a graph, unreadable) is the reader's
  // to refuse, in its own words: no rank checks unless every rank could size it.
  std::optional<pipeline::MemoryEstimate> sized;
  try {
    sized = pipeline::estimate_command(command, o, where);
  } catch (const FormatError&) {
  } catch (const SystemError&) {
  }
  if (all_reduce<int>(rt.comm(), sized ? 1 : 0, MPI_MIN) == 0) return nullptr;
  const auto& estimate = *sized;
  auto checked = pipeline::check_memory(rt, estimate, o.memory_limit, false);
  if (progress.verbose())
    progress.step("memory estimate: " + pipeline::human_bytes(static_cast<double>(estimate.total())) + " on node " +
                  checked["node"]["host"].get<std::string>() + " at its peak (" + estimate.peak_phase + "), at most " +
                  pipeline::human_bytes(static_cast<double>(estimate.shared_bytes)) + " of Shared storage");
  return checked;
}

int run_workflow(const GraphArgs& args, Workflow workflow, bool analysis) {
  if (!args.session.empty()) return run_in_session(args);
  if (names_resident_graph(args.o.input.path) && !std::filesystem::exists(args.o.input.path))
    throw ConfigError(args.o.input.path + " names a graph a session holds: add --session PATH (tessera serve)");
  pipeline::Options o = args.o;
  o.analysis.quiet = args.quiet;
  o.document_on_stdout = args.json;
  pipeline::check_options(o, analysis);
  if (!args.shm_dir.empty()) {
    // Every Shared array of the command goes there: the option is the
    // environment variable, set in each rank before anything is created.
    struct stat st {};
    if (::stat(args.shm_dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode))
      throw ConfigError("--shm-dir " + args.shm_dir + " is not a directory");
    ::setenv("TESSERA_SHM_DIR", args.shm_dir.c_str(), 1);
  }
  Runtime rt;
  // The whole command is the trace's outermost phase; the stages nest in it.
  trace::Span command(trace::Category::phase, trace::recording() ? trace::intern("tessera " + args.command) : nullptr);
  pipeline::Progress progress(pipeline::stderr_sink(rt.rank() == 0 && !args.quiet), args.verbose);
  // Memory guardrails (pipeline/memory.hpp): the command's peak on each
  // node estimated and checked before anything is allocated; refused on
  // every rank, naming the numbers and the ways out, when it does not fit.
  const nlohmann::json memory_estimate = check_command_memory(rt, args.command, o, progress);
  auto result = workflow(rt, o, progress);
  if (!memory_estimate.is_null()) result.json["memory_estimate"] = memory_estimate;
  if (comm_stats_requested()) {
    const std::string counts = gather_comm_counters_json(rt);
    if (rt.rank() == 0) result.json["comm_stats"] = nlohmann::json::parse(counts);
  }
  if (rt.rank() == 0) {
    if (result.hitting && !result.hitting->solve.succeeded())
      std::fprintf(stderr, "tessera: the hitting-time solve did not converge: %s\n",
                   result.hitting->solve.reason.c_str());
    if (result.spectrum && !result.spectrum->converged)
      std::fprintf(stderr, "tessera: Anasazi did not reach the tolerance %g (true residual %.3g); raise "
                   "--max-iterations (LOBPCG), --max-restarts or --subspace (Krylov-Schur), or the --tolerance\n",
                   o.analysis.tolerance, result.spectrum->residual);
    if (result.verification_failed) {
      auto say = [](const char* what, const nlohmann::json& object) {
        if (object.is_object() && object.contains("verification_problem"))
          std::fprintf(stderr, "tessera: the %s failed verification: %s\n", what,
                       object["verification_problem"].get<std::string>().c_str());
      };
      for (const char* kernel : {"pagerank", "bfs"})
        if (result.json.contains(kernel)) say(kernel == std::string("bfs") ? "BFS" : "PageRank", result.json[kernel]);
      if (result.json.contains("components")) say("components", result.json["components"]);
      if (result.json.contains("results"))
        for (const auto& r : result.json["results"]) say("components", r);
    }
  }
  if (rt.rank() == 0 && args.json) std::printf("%s\n", result.json.dump().c_str());
  return result.exit_code();
}

void add_common(CLI::App* c, GraphArgs& a) {
  c->add_flag("--json", a.json,
              "Print the results as one JSON document on stdout (nothing else there; so not with -o -)");
  c->add_flag("-q,--quiet", a.quiet, "No progress lines on stderr");
  c->add_flag("-v,--verbose", a.verbose, kVerboseHelp);
  c->add_option("--memory-limit", a.o.memory_limit,
                "Refuse the command before it allocates when its estimated peak on a node is over this: a fraction "
                "of the node's memory (0.9, 90%), bytes (20G) or none (the node's free memory and Shared directory "
                "still bound it; docs/memory.md)")
      ->default_str("90%");
  c->add_option("--shm-dir", a.shm_dir,
                "Directory of the Shared arrays (the graph's edge arrays): default $TESSERA_SHM_DIR, else /dev/shm; "
                "a directory on disk holds graphs larger than memory");
  // Several subcommands may share one GraphArgs: the one parsed names itself.
  const std::string name = c->get_name();
  c->preparse_callback([&a, name](std::size_t) { a.command = name; });
  if (name == "cc" || name == "hitting" || name == "pagerank" || name == "bfs" || name == "spectral")
    c->add_option("--session", a.session,
                  "Run in the session serving this Unix socket (tessera serve) on its resident graph: GRAPH is "
                  "@NAME (s.persist(g, NAME) in Python); nothing is read again");
  c->fallthrough();
}

namespace {

int run_write(const GraphArgs& a) {
  if (a.o.output.empty()) throw ConfigError("name the output with -o OUT (.el, .wel, .mtx, .gr, .graph, .sg, .wsg, a .tsg directory, or - for "
                      "standard output)");
  return run_workflow(a, pipeline::run_write, false);
}
int run_cc(const GraphArgs& a) { return run_workflow(a, pipeline::run_components, false); }
int run_lcc(const GraphArgs& a) { return run_workflow(a, pipeline::run_lcc, false); }
int run_hitting(const GraphArgs& a) {
  if (a.o.targets.empty()) throw ConfigError("name at least one --targets vertex");
  return run_workflow(a, pipeline::run_hitting, true);
}
int run_pipeline(const GraphArgs& a) { return run_workflow(a, pipeline::run_pipeline, true); }

const CLI::Validator kGridDims(
    [](std::string& dims) {
      try {
        graph::parse_grid_dims(dims);
      } catch (const std::exception& e) {
        return std::string(e.what());
      }
      return std::string();
    },
    "ROWSxCOLS|XxYxZ");

const std::string kGraphOutputNote =
    kOutputNote + " (- and a device or FIFO named without .el/.wel/.mtx take edge-list text: \"u v\" or \"u v w\")";

void add_generator_options(CLI::App* c, GraphArgs& a) {
  c->add_option("--scale", a.o.input.scale, "kron/urand: 2^scale vertices")->check(CLI::Range(1, 40));
  c->add_option("--edge-factor", a.o.input.edge_factor, "kron/urand: candidate edges per vertex")->check(CLI::Range(1, 1024));
  c->add_option("--dims", a.o.input.dims, "grid: ROWSxCOLS or XxYxZ")->check(kGridDims);
  c->add_option("--seed", a.o.input.seed, "Random seed (the graph does not depend on the rank count)");
  c->add_option("--delete", a.o.input.delete_fraction, "Drop each candidate edge with this probability")->check(CLI::Range(0.0, 0.999999));
  c->add_flag("--permute", a.o.input.permute, "Scramble vertex ids (always on for kron)");
}
void add_hitting_options(CLI::App* c, GraphArgs& a) {
  c->add_option("--tolerance", a.o.analysis.tolerance, "CG relative residual to stop at")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  c->add_option("--max-iterations", a.o.analysis.max_iterations, "CG iteration cap")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  c->add_option("--matrix", a.o.analysis.matrix, "edgelist (no copy) or crs (the conventional copy)")
      ->check(CLI::IsMember({"edgelist", "crs"}));
  c->add_option("--solver", a.o.analysis.solver,
                "tessera (its own Jacobi-preconditioned CG) or belos (Trilinos: Belos CG with an Ifpack2 Jacobi "
                "preconditioner on a Tpetra RowMatrix over the edge arrays; with --matrix crs on a CrsMatrix copy). "
                "Default: belos when built with Trilinos, else tessera; here " + pipeline::default_solver())
      ->check(CLI::IsMember({"tessera", "belos"}));
  c->add_option("--preconditioner", a.o.analysis.preconditioner,
                "--solver belos: Ifpack2's Jacobi as diagonal (Ifpack2::Diagonal: the RowMatrix builds no Tpetra column "
                "Map or Import) or relaxation (Ifpack2::Relaxation, which asks for them at 2+ ranks); same iterates")
      ->check(CLI::IsMember({"diagonal", "relaxation"}));
}
void add_components_algorithm(CLI::App* c, GraphArgs& a, bool both) {
  c->add_option("--algorithm", a.o.algorithm,
                both ? "afforest (default), fastsv, lp (label propagation), or all three (same labels; 'both' is all)"
                     : "afforest (default), fastsv or lp (label propagation)")
      ->check(both ? CLI::IsMember({"afforest", "lp", "fastsv", "all", "both"})
                   : CLI::IsMember({"afforest", "lp", "fastsv"}));
}
}  // namespace

void add_graph(CLI::App& app, Action& selected) {
  auto a = std::make_shared<GraphArgs>();
  auto set = [&selected, a](int (*run)(const GraphArgs&)) {
    return [&selected, a, run] { selected = [a, run] { return run(*a); }; };
  };

  auto* gen = app.add_subcommand("gen", "Generate a graph (kron, urand, grid) and write it");
  gen->add_option("kind", a->o.input.kind, "kron | urand | grid")->required()->check(CLI::IsMember({"kron", "urand", "grid"}));
  gen->add_option("-o,--output", a->o.output, "Output: .el, .mtx or a binary directory (.tsg)" + kGraphOutputNote);
  gen->add_flag("--group", a->o.group_access, "A binary (.tsg) output is group-readable and -writable (0770/0660), "
                                             "for a directory shared by a team");
  gen->add_option("output", a->o.output, "Output (older positional form of -o)");
  add_generator_options(gen, *a);
  add_common(gen, *a);
  gen->callback(set(run_write));

  auto* conv = app.add_subcommand("convert", "Convert between .el/.wel, .mtx, .gr (DIMACS), .graph (METIS), GAPBS's "
                                            ".sg/.wsg and the binary format");
  add_graph_input(conv, a->o.input, "Input graph");
  conv->add_option("-o,--output", a->o.output,
                   "Output graph: .el, .wel, .mtx, .gr, .graph, .sg, .wsg or a binary directory (.tsg)" +
                       kGraphOutputNote);
  conv->add_flag("--group", a->o.group_access, "A binary (.tsg) output is group-readable and -writable (0770/0660), "
                                             "for a directory shared by a team");
  conv->add_option("output", a->o.output, "Output graph (older positional form of -o)");
  add_input_options(conv, a->o.input);
  add_common(conv, *a);
  conv->callback(set(run_write));

  auto* cc = app.add_subcommand("cc", "Connected components (weak for directed graphs; --strong: strong)");
  add_graph_input(cc, a->o.input, "Input graph");
  add_components_algorithm(cc, *a, true);
  cc->add_flag("--strong", a->o.strong, "Strongly connected components of a directed graph (trimming and colouring; "
                                       "an undirected graph's are its connected components)");
  cc->add_option("-o,--output", a->o.output, "Write 'vertex component' lines (file ids; a component is named by its "
                                            "smallest vertex)" + kOutputNote);
  cc->add_flag("--verify", a->o.verify, kVerifyComponents);
  add_input_options(cc, a->o.input);
  add_symmetric_option(cc, a->o.input);
  add_common(cc, *a);
  cc->callback(set(run_cc));

  auto* lcc = app.add_subcommand("lcc", "Extract the largest connected component");
  add_graph_input(lcc, a->o.input, "Input graph");
  lcc->add_option("-o,--output", a->o.output,
                  "Output graph: .el, .wel, .mtx, .gr, .graph, .sg, .wsg or a binary directory (.tsg)" +
                      kGraphOutputNote)
      ->required();
  lcc->add_flag("--group", a->o.group_access, "A binary (.tsg) output is group-readable and -writable (0770/0660), "
                                             "for a directory shared by a team");
  lcc->add_option("--ids", a->o.ids_output,
                  "Where the id map goes: 'lcc_id file_id' lines (ids in OUT -> ids in GRAPH); default OUT.ids "
                  "beside OUT (none for a stream)" + kOutputNote);
  add_components_algorithm(lcc, *a, false);
  add_input_options(lcc, a->o.input);
  add_symmetric_option(lcc, a->o.input);
  add_common(lcc, *a);
  lcc->callback(set(run_lcc));

  auto* hit = app.add_subcommand("hitting", "Random-walk hitting times to a set of target vertices");
  add_graph_input(hit, a->o.input, "Input graph");
  hit->add_option("--targets", a->o.targets, "Target vertex ids (file ids), comma separated (Python: targets=)")
      ->delimiter(',')
      ->check(kVertexId);
  add_old_spelling(hit, "--target", "--targets", a->o.targets)->delimiter(',')->check(kVertexId);
  hit->add_option("-o,--output", a->o.output,
                  "Write 'vertex hitting_time' lines (file ids; nan: no walk reaches a target)" + kOutputNote);
  add_input_options(hit, a->o.input);
  add_symmetric_option(hit, a->o.input);
  add_hitting_options(hit, *a);
  add_common(hit, *a);
  hit->callback(set(run_hitting));

  auto* pipe = app.add_subcommand("pipeline",
                                  "Load into Shared storage, extract the largest component, analyse it (hitting "
                                  "times, Fiedler vector or eigenvector centrality; zero-copy); without GRAPH, on a "
                                  "generated graph");
  // Not required to exist: a run resumed from --checkpoint does not read it
  // (the workflow says when it is missing and nothing resumes).
  pipe->add_option("graph", a->o.input.path,
                   "Input graph (default: generate --kind, kron scale 16; - reads standard input)");
  pipe->add_option("--kind", a->o.input.kind, "Generator when no GRAPH: kron | urand | grid")
      ->check(CLI::IsMember({"kron", "urand", "grid"}));
  pipe->add_option("--targets", a->o.targets,
                   "Target vertex ids, file ids, comma separated (default: the largest component's highest-degree "
                   "vertex; Python: targets=)")
      ->delimiter(',')
      ->check(kVertexId);
  add_old_spelling(pipe, "--target", "--targets", a->o.targets)->delimiter(',')->check(kVertexId);
  pipe->add_option("-o,--output", a->o.output,
                   "Write 'vertex value' lines for the largest component: hitting times (nan: unreachable), or the "
                   "unit-norm Fiedler or centrality vector" + kOutputNote);
  add_components_algorithm(pipe, *a, false);
  pipe->add_flag("--verify", a->o.verify, std::string(kVerifyComponents) + "; stop there when wrong");
  pipe->add_flag("--packed", a->o.packed,
                 "Pack the graph once loaded (rows in byte codes, vertices numbered by degree: about 3-4 bytes an "
                 "undirected edge against 8) and give its EdgeList up: components (Afforest), --verify, the "
                 "largest component and the analysis (Belos, Anasazi in process) on the packed rows; the same "
                 "outputs in the file's ids. Unweighted graphs; not with --algorithm lp|fastsv, --solver tessera, "
                 "--analysis process|container or --checkpoint");
  add_input_options(pipe, a->o.input);
  add_symmetric_option(pipe, a->o.input);
  add_generator_options(pipe, *a);
  add_hitting_options(pipe, *a);
  pipe->add_option("--analysis-kind", a->o.analysis.kind,
                   "What the largest component's analysis computes: hitting (random-walk hitting times to --target, "
                   "the default), fiedler (lambda2 of the Laplacian and its vector) or centrality (the largest "
                   "eigenvalue of the adjacency and its vector); the spectral kinds by Anasazi LOBPCG on the edge "
                   "arrays (--tolerance, --max-iterations, --matrix apply)")
      ->check(CLI::IsMember({"hitting", "fiedler", "centrality"}))
      ->capture_default_str();
  pipe->add_option("--analysis", a->o.analysis.analysis,
                   "Where the analysis runs: inprocess (default), process (a separate tessera-analyze "
                   "job on the Shared arrays) or container (the same inside bwrap namespaces)")
      ->check(CLI::IsMember({"inprocess", "process", "container"}));
  pipe->add_option("--analysis-launcher", a->o.analysis.launcher,
                   std::string("container: the command put before the analysis (SHMDIR = the Shared directory; "
                               "default $TESSERA_ANALYZE_LAUNCHER, else '") + analyze::kDefaultLauncher + "')");
  pipe->add_option("--analysis-control", a->o.analysis.control,
                   "process: start nothing; wait for a user-started 'tessera-analyze --control PATH' on this path");
  pipe->add_option("--analysis-attach-timeout", a->o.analysis.attach_timeout,
                   "Seconds for the analysis to start and attach")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  pipe->add_option("--analysis-timeout", a->o.analysis.timeout, "Seconds for the whole analysis")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  pipe->add_option("--checkpoint", a->o.checkpoint.dir,
                   "Checkpoint each completed stage (loaded graph, labels, largest component) in this directory "
                   "and resume after the newest valid one of this job, on any rank count, without reading the "
                   "input again; removed when the run succeeds (docs/checkpoint.md)");
  pipe->add_option("--checkpoint-levels", a->o.checkpoint.levels,
                   "Where checkpoints are kept: disk (the --checkpoint directory), node ($TESSERA_SHM_DIR or "
                   "/dev/shm), buddy, or a comma list")
      ->capture_default_str();
  pipe->add_flag("--keep-checkpoint", a->o.checkpoint.keep,
                 "Leave the checkpoints after a successful run (tessera checkpoint rm pipeline --dir DIR removes them)");
  add_common(pipe, *a);
  pipe->callback(set(run_pipeline));
}

}  // namespace tessera::cli
