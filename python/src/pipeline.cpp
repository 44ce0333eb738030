// The workflows for Python: tessera.pipeline() and tessera.hitting_times()
// call the pipeline/ layer, as `tessera pipeline` and `tessera hitting` do:
// the same defaults (pipeline::Options), the same backends and the same
// result document (returned as JSON text, which Python parses into a dict).
#include <nlohmann/json.hpp>

#include <memory>
#include <optional>

#include "graph_object.hpp"
#include "tessera/runtime/collective.hpp"
#include "tessera/pipeline/memory.hpp"
#include "tessera/pipeline/workflow.hpp"
#include "tessera/trilinos/hitting.hpp"

namespace tessera::python {

namespace {

// Kokkos and Tpetra start once per process (Kokkos cannot start again after
// it ended): the first in-process Belos solve opens the session, the exit
// hook ends it. The pipeline's Belos backend uses the open session.
std::unique_ptr<trilinos::Session> g_trilinos_session;

// Every option a Python caller may set, by its keyword, in one table: the
// defaults Python shows are read from a default-constructed Options through
// it, and the keywords a caller gives are written through it.
template <class F>
void each_option(pipeline::Options& o, F&& f) {
  f("kind", o.input.kind);
  f("scale", o.input.scale);
  f("edge_factor", o.input.edge_factor);
  f("dims", o.input.dims);
  f("seed", o.input.seed);
  f("delete_fraction", o.input.delete_fraction);
  f("permute", o.input.permute);
  f("base", o.input.base);
  f("relabel", o.input.relabel);
  f("undirected", o.input.undirected);
  f("symmetric", o.input.symmetric);
  f("pattern", o.input.pattern);
  f("multigraph", o.input.multigraph);
  f("algorithm", o.algorithm);
  f("targets", o.targets);
  f("output", o.output);
  f("analysis_kind", o.analysis.kind);
  f("analysis", o.analysis.analysis);
  f("solver", o.analysis.solver);
  f("preconditioner", o.analysis.preconditioner);
  f("matrix", o.analysis.matrix);
  f("tolerance", o.analysis.tolerance);
  f("max_iterations", o.analysis.max_iterations);
  f("analysis_program", o.analysis.program);
  f("launcher", o.analysis.launcher);
  f("control", o.analysis.control);
  f("attach_timeout", o.analysis.attach_timeout);
  f("timeout", o.analysis.timeout);
  f("packed", o.packed);
}

py::dict defaults() {
  pipeline::Options o;
  py::dict d;
  each_option(o, [&](const char* name, auto& value) { d[name] = value; });
  d["solver"] = pipeline::default_solver();  // what an empty solver means here
  return d;
}

// The Options `given` sets (keywords without None); ConfigError naming a
// keyword that is not an option, or a value of the wrong type.
pipeline::Options options_from(const py::dict& given, const std::string& path) {
  pipeline::Options o;
  o.input.path = path;
  std::size_t used = 0;
  each_option(o, [&](const char* name, auto& value) {
    if (!given.contains(name)) return;
    ++used;
    try {
      value = given[name].cast<std::remove_reference_t<decltype(value)>>();
    } catch (const py::cast_error&) {
      throw ConfigError(std::string("option ") + name + "=" + py::str(given[name]).cast<std::string>() +
                        " has the wrong type (the default is " + py::str(defaults()[name]).cast<std::string>() + ")");
    }
  });
  if (used != given.size())
    for (auto item : given) {
      bool known = false;
      each_option(o, [&](const char* name, auto&) { known = known || item.first.cast<std::string>() == name; });
      if (!known) throw ConfigError("unknown option " + item.first.cast<std::string>());
    }
  return o;
}

pipeline::Progress progress(bool verbose) {
  return pipeline::Progress(pipeline::stderr_sink(verbose && runtime().rank() == 0));
}

// In process, Belos and Anasazi use the process's session.
void open_session_if_needed(const pipeline::Options& o) {
  const auto a = pipeline::resolved(o.analysis);
  if (a.analysis == "inprocess" && (a.solver == "belos" || pipeline::spectral_kind(a.kind)) && trilinos::available())
    open_trilinos_session();
}

// (document as JSON text, the analysis' vector (times, or a spectral kind's)
// as a float64 array or None, the file id of each local entry, the exit code)
py::tuple returned(pipeline::Result r) {
  py::object times = py::none();
  if (r.hitting) times = py::cast(std::make_unique<PyArray>(PyArray{ArrayVariant(std::move(r.hitting->times.array()))}));
  if (r.spectrum)
    times = py::cast(std::make_unique<PyArray>(PyArray{ArrayVariant(std::move(r.spectrum->vector.array()))}));
  auto ids = py::array_t<std::uint64_t>(static_cast<py::ssize_t>(r.file_ids.size()), r.file_ids.data());
  return py::make_tuple(r.json.dump(), times, ids, r.exit_code());
}

// -- memory guardrails (pipeline/memory.hpp; issue 58) --------------------------
// The estimate of `command` with `options` (pipeline::options_json's
// document): on the graph `sizes` describes (pipeline::size_of_graph's
// document) when given; for from_edges, of `edges` edges among
// sizes["vertices"] (0: unknown); else on the graph the options' input
// names (a generator or a file).
pipeline::MemoryEstimate memory_estimate(const std::string& command, const std::string& options,
                                         const std::string& sizes, std::uint64_t edges,
                                         const pipeline::MemoryContext& where) {
  const pipeline::Options o = options.empty() ? pipeline::Options{} : pipeline::options_from_json(options);
  const nlohmann::json s = sizes.empty() ? nlohmann::json::object() : nlohmann::json::parse(sizes);
  if (command == "from_edges")
    return pipeline::estimate_on(command,
                                 pipeline::size_of_edges(edges, s.value("vertices", std::uint64_t{0}), o.input.undirected,
                                                         s.value("weighted", false), o.input.relabel),
                                 o, where);
  if (command == "restore")
    return pipeline::estimate_restore(pipeline::size_of_graph(s), s.value("array_bytes", 0.0), where);
  if (s.contains("vertices")) return pipeline::estimate_on(command, pipeline::size_of_graph(s), o, where);
  if (command == "generate" || command == "read_graph") {
    std::optional<pipeline::GraphSize> size;
    try {
      size = pipeline::size_of_input(o.input);
    } catch (const Error&) {
      // A file that cannot be sized (missing, unreadable, not a graph) is
      // the reader's to refuse, in its own words: nothing estimated.
      if (command != "read_graph") throw;
      pipeline::MemoryEstimate none;
      none.command = command;
      none.what = o.input.path;
      return none;
    }
    return pipeline::estimate_on(command, *size, o, where);
  }
  return pipeline::estimate_command(command, o, where);
}

}  // namespace

void open_trilinos_session() {
  if (!g_trilinos_session) g_trilinos_session = std::make_unique<trilinos::Session>(runtime());
}
void shutdown_trilinos() { g_trilinos_session.reset(); }

void bind_pipeline(py::module_& m) {
  m.def("_pipeline_defaults", &defaults);
  m.def(
      "_pipeline",
      [](py::object graph, const std::string& path, const py::dict& given, bool verbose) {
        auto o = options_from(given, path);
        Runtime& rt = runtime();
        open_session_if_needed(o);
        auto p = progress(verbose);
        std::optional<pipeline::Result> r;
        const PyGraph* g = graph.is_none() ? nullptr : &graph.cast<const PyGraph&>();
        {
          py::gil_scoped_release other_threads_may_run;
          r.emplace(g ? pipeline::run_pipeline(g->graph, g->ids, o, p) : pipeline::run_pipeline(rt, o, p));
        }
        return returned(std::move(*r));
      },
      py::arg("graph"), py::arg("path"), py::arg("options"), py::arg("verbose"));
  m.def(
      "_hitting",
      [](const PyGraph& g, const py::dict& given, bool verbose) {
        auto o = options_from(given, "");
        runtime();
        open_session_if_needed(o);
        auto p = progress(verbose);
        std::optional<pipeline::Result> r;
        {
          py::gil_scoped_release other_threads_may_run;
          r.emplace(pipeline::run_hitting(g.graph, g.ids, g.connected, o, p));
        }
        return returned(std::move(*r));
      },
      py::arg("graph"), py::arg("options"), py::arg("verbose"));
  // An analyst's session running `tessera CMD --session PATH @NAME`: the
  // command's workflow (options as the front end parsed them, JSON) on a
  // resident graph. (document as JSON text, exit code)
  m.def(
      "_run_command",
      [](const std::string& name, const PyGraph& g, const std::string& options, bool verbose) {
        auto o = pipeline::options_from_json(options);
        runtime();
        open_session_if_needed(o);
        if (name == "spectral" && trilinos::available()) open_trilinos_session();
        auto p = progress(verbose);
        std::optional<pipeline::Result> r;
        {
          py::gil_scoped_release other_threads_may_run;
          if (name == "cc") r.emplace(pipeline::run_components(g.graph, g.ids, o, p));
          else if (name == "hitting") r.emplace(pipeline::run_hitting(g.graph, g.ids, g.connected, o, p));
          else if (name == "pagerank") r.emplace(pipeline::run_pagerank(g.graph, g.ids, o, p));
          else if (name == "bfs") r.emplace(pipeline::run_bfs(g.graph, g.ids, o, p));
          else if (name == "spectral") r.emplace(pipeline::run_spectral(g.graph, g.ids, o, p));
          else
            throw ConfigError("a session runs cc, hitting, pagerank, bfs and spectral on a resident graph, not " +
                              name);
        }
        return py::make_tuple(r->json.dump(), r->exit_code());
      },
      py::arg("name"), py::arg("graph"), py::arg("options"), py::arg("verbose"));
  // -- memory guardrails (issue 58) --------------------------------------------------
  // What a command would need on a node (JSON text), without MPI: `ranks`
  // in the job, `ranks_on_node` on the node; `session`: an analyst's
  // session's layout (every array Shared; the ranks' own memory measured).
  m.def(
      "_memory_estimate",
      [](const std::string& command, const std::string& options, const std::string& sizes, std::uint64_t edges,
         int ranks, int ranks_on_node, bool session) {
        pipeline::MemoryContext where;
        where.ranks = ranks;
        where.ranks_on_node = ranks_on_node;
        where.session = session;
        return memory_estimate(command, options, sizes, edges, where).to_json().dump();
      },
      py::arg("command"), py::arg("options") = "", py::arg("sizes") = "", py::arg("edges") = 0, py::arg("ranks") = 1,
      py::arg("ranks_on_node") = 1, py::arg("session") = true);
  // Collective: the estimate for this job (from_edges: `local_edges` summed
  // over the ranks), checked against each node's memory, Shared directory
  // and `limit` (with the ranks' memory in use when `count_in_use`):
  // RangeError on every rank when it does not fit. The estimate and the
  // node's figures as JSON text.
  m.def(
      "_memory_check",
      [](const std::string& command, const std::string& options, const std::string& sizes, std::uint64_t local_edges,
         const std::string& limit, bool count_in_use) {
        Runtime& rt = runtime();
        py::gil_scoped_release other_threads_may_run;
        const std::uint64_t edges = all_reduce<std::uint64_t>(rt.comm(), local_edges, MPI_SUM);
        pipeline::MemoryContext where;
        where.ranks = rt.size();
        where.ranks_on_node = rt.node().size;
        where.session = count_in_use;
        std::optional<pipeline::MemoryEstimate> e;
        agree(rt.comm(), [&] { e.emplace(memory_estimate(command, options, sizes, edges, where)); });
        return pipeline::check_memory(rt, *e, limit, count_in_use).dump();
      },
      py::arg("command"), py::arg("options"), py::arg("sizes"), py::arg("local_edges"), py::arg("limit"),
      py::arg("count_in_use"));
  m.def("_parse_memory_limit", [](const std::string& text) {
    const auto l = pipeline::parse_memory_limit(text);
    py::dict d;
    d["fraction"] = l.fraction;
    d["bytes"] = l.bytes;
    d["none"] = l.none;
    return d;
  });
  m.def("_default_solver", &pipeline::default_solver);
  m.def("_trilinos_available", [] { return trilinos::available(); });
  m.def("_trilinos_description", [] { return trilinos::description(); });
}

}  // namespace tessera::python
