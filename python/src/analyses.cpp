// Graph analyses for Python: PageRank, breadth-first search and the spectral
// analyses (Fiedler vector, eigenvector centrality). The workflows are the
// pipeline/ layer's (run_pagerank, run_bfs, run_spectral), as `tessera
// pagerank | bfs | spectral` run them: the same checks, messages and result
// document (returned as JSON text, parsed in Python). The result's arrays
// are DistArrays owned by Python (NumPy views of the local part, no copy).
#include <optional>

#include "graph_object.hpp"
#include "tessera/pipeline/workflow.hpp"
#include "tessera/trilinos/spectral.hpp"

namespace tessera::python {

namespace {

std::unique_ptr<PyArray> owned(ArrayVariant array) { return std::make_unique<PyArray>(PyArray{std::move(array)}); }

// Runs a workflow on `g` with the GIL released; progress on rank 0's
// stderr when `verbose`.
template <class Workflow>
pipeline::Result run_on(const PyGraph& g, const pipeline::Options& o, bool verbose, Workflow workflow) {
  pipeline::Progress p(pipeline::stderr_sink(verbose && runtime().rank() == 0));
  std::optional<pipeline::Result> r;
  {
    py::gil_scoped_release other_threads_may_run;
    r.emplace(workflow(g.graph, g.ids, o, p));
  }
  return std::move(*r);
}

}  // namespace

void bind_analyses(py::module_& m) {
  m.def(
      "_pagerank",
      [](const PyGraph& g, double damping, double tolerance, int max_iterations, const std::string& method,
         const std::vector<std::uint64_t>& personalization, bool verbose) {
        pipeline::Options o;
        o.pagerank = {damping, tolerance, max_iterations, method, personalization};
        auto r = run_on(g, o, verbose, [](auto&... args) { return pipeline::run_pagerank(args...); });
        return py::make_tuple(owned(std::move(r.pagerank->scores)), r.json.dump());
      },
      py::arg("graph"), py::arg("damping"), py::arg("tolerance"), py::arg("max_iterations"), py::arg("method"),
      py::arg("personalization"), py::arg("verbose"));

  m.def(
      "_bfs",
      [](const PyGraph& g, std::uint64_t source, const std::string& direction, int max_depth, bool verbose) {
        pipeline::Options o;
        o.bfs.source = source;
        o.bfs.direction = direction;
        o.bfs.hops = max_depth;
        auto r = run_on(g, o, verbose, [](auto&... args) { return pipeline::run_bfs(args...); });
        return py::make_tuple(owned(std::move(r.bfs->parents)), owned(std::move(r.bfs->depths)), r.json.dump());
      },
      py::arg("graph"), py::arg("source"), py::arg("direction"), py::arg("max_depth"), py::arg("verbose"));

  m.def(
      "_spectral",
      [](const PyGraph& g, const std::string& what, const std::string& method, double tolerance, int max_iterations,
         const std::string& matrix, bool verbose) {
        pipeline::Options o;
        o.analysis.kind = what;
        o.analysis.eigensolver = method;
        o.analysis.tolerance = tolerance;
        o.analysis.max_iterations = max_iterations;
        o.analysis.matrix = matrix;
        runtime();
        if (trilinos::available()) open_trilinos_session();
        auto r = run_on(g, o, verbose, [](auto&... args) { return pipeline::run_spectral(args...); });
        return py::make_tuple(owned(std::move(r.spectrum->vector.array())), r.json.dump());
      },
      py::arg("graph"), py::arg("what"), py::arg("method"), py::arg("tolerance"), py::arg("max_iterations"),
      py::arg("matrix"), py::arg("verbose"));
}

}  // namespace tessera::python
