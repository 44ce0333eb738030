// Graph analyses for Python: PageRank, breadth-first search and the spectral
// analyses (Fiedler vector, eigenvector centrality), the library's kernels on
// the graph's own arrays, as `tessera pagerank | bfs | spectral` run them.
// Each result is a DistArray owned by Python (NumPy views of its local part,
// no copy) with a dict of what the kernel reports.
#include <optional>

#include "graph_object.hpp"
#include "tessera/graph/bfs.hpp"
#include "tessera/graph/pagerank.hpp"
#include "tessera/trilinos/spectral.hpp"

namespace tessera::python {

namespace {

// The internal id of each file id; RangeError naming the first one the graph lacks.
std::vector<std::uint64_t> internal_ids(const PyGraph& g, const std::vector<std::uint64_t>& file_ids,
                                        const std::string& role) {
  auto found = g.ids.find(file_ids);
  for (std::size_t k = 0; k < found.size(); ++k)
    if (found[k] == kNoIndex)
      throw RangeError(role + " " + std::to_string(file_ids[k]) + " does not occur in the graph (" +
                       std::to_string(g.graph.vertices()) + " vertices, ids from " + std::to_string(g.ids.base()) +
                       ")");
  return found;
}

std::unique_ptr<PyArray> owned(ArrayVariant array) { return std::make_unique<PyArray>(PyArray{std::move(array)}); }

}  // namespace

void bind_analyses(py::module_& m) {
  m.def(
      "_pagerank",
      [](const PyGraph& g, double damping, double tolerance, int max_iterations, const std::string& method,
         const std::vector<std::uint64_t>& personalization) {
        graph::PageRankOptions o;
        o.damping = damping;
        o.tolerance = tolerance;
        o.max_iterations = max_iterations;
        o.method = graph::parse_pagerank_method(method);
        o.personalization = internal_ids(g, personalization, "personalization vertex");
        runtime();
        std::optional<graph::PageRank> r;
        {
          py::gil_scoped_release other_threads_may_run;
          r.emplace(graph::pagerank(g.graph, o));
        }
        py::dict info;
        info["iterations"] = r->iterations;
        info["change"] = r->change;
        info["converged"] = r->converged;
        info["seconds"] = r->seconds;
        info["method"] = graph::pagerank_method_name(o.method);
        return py::make_tuple(owned(std::move(r->scores)), info);
      },
      py::arg("graph"), py::arg("damping"), py::arg("tolerance"), py::arg("max_iterations"), py::arg("method"),
      py::arg("personalization"));

  m.def(
      "_bfs",
      [](const PyGraph& g, std::uint64_t source, const std::string& direction, int max_depth) {
        graph::BfsOptions o;
        o.direction = graph::parse_bfs_direction(direction);
        o.max_depth = max_depth;
        const std::uint64_t s = internal_ids(g, {source}, "source vertex").front();
        runtime();
        std::optional<graph::Bfs> r;
        {
          py::gil_scoped_release other_threads_may_run;
          r.emplace(graph::bfs(g.graph, s, o));
        }
        py::dict info;
        info["source"] = source;
        info["reached"] = r->reached;
        info["levels"] = r->levels;
        info["top_down_steps"] = r->top_down_steps;
        info["bottom_up_steps"] = r->bottom_up_steps;
        info["seconds"] = r->seconds;
        return py::make_tuple(owned(std::move(r->parents)), owned(std::move(r->depths)), info);
      },
      py::arg("graph"), py::arg("source"), py::arg("direction"), py::arg("max_depth"));

  m.def(
      "_spectral",
      [](const PyGraph& g, const std::string& what, const std::string& method, double tolerance, int max_iterations,
         const std::string& matrix) {
        trilinos::SpectralOptions o;
        if (what != "fiedler" && what != "centrality")
          throw ConfigError("spectral(what=...) must be fiedler or centrality, not '" + what + "'");
        if (method != "lobpcg" && method != "krylov-schur")
          throw ConfigError("spectral(method=...) must be lobpcg or krylov-schur, not '" + method + "'");
        if (matrix != "edgelist" && matrix != "crs")
          throw ConfigError("spectral(matrix=...) must be edgelist or crs, not '" + matrix + "'");
        if (!trilinos::available())
          throw ConfigError("spectral() runs Anasazi: this tessera was built without Trilinos (" +
                            trilinos::description() + ")");
        o.what = what == "fiedler" ? trilinos::SpectralWhat::fiedler : trilinos::SpectralWhat::centrality;
        o.method = method == "lobpcg" ? trilinos::EigenMethod::lobpcg : trilinos::EigenMethod::krylov_schur;
        o.tolerance = tolerance;
        o.max_iterations = max_iterations;
        o.matrix = matrix == "crs" ? trilinos::MatrixKind::crs : trilinos::MatrixKind::edge_list;
        Runtime& rt = runtime();
        open_trilinos_session();
        std::optional<trilinos::SpectralResult> r;
        {
          py::gil_scoped_release other_threads_may_run;
          r.emplace(trilinos::spectral(g.graph, o));
        }
        // The kernel hands back this rank's entries; a DistArray on the
        // graph's vertex ranges holds them for Python.
        DistArray<double> vector(rt, g.graph.vertex_ranges());
        std::copy(r->vector.begin(), r->vector.end(), vector.local().begin());
        py::dict info;
        info["what"] = what;
        info["lambda"] = r->lambda;
        info["next_lambda"] = r->next_lambda;
        info["residual"] = r->residual;
        info["iterations"] = r->iterations;
        info["converged"] = r->converged;
        info["seconds"] = r->seconds;
        info["solver"] = r->iterations == 0 ? "dense (LAPACK)" : trilinos::to_string(r->method);
        info["matrix"] = matrix;
        info["matrix_extra_bytes"] = r->matrix_extra_bytes;
        return py::make_tuple(owned(std::move(vector)), info);
      },
      py::arg("graph"), py::arg("what"), py::arg("method"), py::arg("tolerance"), py::arg("max_iterations"),
      py::arg("matrix"));
}

}  // namespace tessera::python
