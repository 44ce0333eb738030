// Graphs for Python: reading and generating EdgeLists, components, the
// largest component and hitting times (Tessera's CG, or Belos when Trilinos
// was built), every array a NumPy view of the library's own memory.
#include <optional>

#include "common.hpp"
#include "tessera/graph/components.hpp"
#include "tessera/graph/generators.hpp"
#include "tessera/graph/io.hpp"
#include "tessera/linalg/edge_list_matrix.hpp"
#include "tessera/linalg/hitting_summary.hpp"
#include "tessera/linalg/hitting_times.hpp"
#include "tessera/linalg/laplacian.hpp"
#include "tessera/trilinos/hitting.hpp"

namespace tessera::python {

namespace {

// Kokkos and Tpetra start once per process (Kokkos cannot start again after
// it ended): the first Belos solve opens the session, the exit hook ends it.
std::unique_ptr<trilinos::Session> g_trilinos_session;

struct PyGraph {
  graph::EdgeList graph;
  graph::IdMap ids;      // the file's id of every vertex
  bool connected = false;  // a largest component: hitting times skip the components pass
};

std::unique_ptr<PyGraph> wrap(graph::EdgeList g, graph::IdMap ids, bool connected = false) {
  return std::make_unique<PyGraph>(PyGraph{std::move(g), std::move(ids), connected});
}

py::dict summary_dict(const graph::ComponentSummary& s, const graph::IdMap& ids) {
  py::dict d;
  d["count"] = s.count;
  d["largest_label"] = ids.file_id(s.largest_label);  // collective
  d["largest_size"] = s.largest_size;
  d["isolated"] = s.isolated;
  return d;
}

const DistArray<std::uint64_t>& labels_of(const PyGraph& g, const PyArray& labels) {
  const auto* l = std::get_if<DistArray<std::uint64_t>>(&labels.array);
  if (!l) throw MismatchError("labels must be a uint64 DistArray (what components() returns)");
  if (l->distribution() != g.graph.vertex_ranges())
    throw MismatchError("labels lie on other vertex ranges than this graph's (use the labels components() gave for it)");
  return *l;
}

// The internal ids of `file_ids`; RangeError naming the first the graph lacks.
std::vector<std::uint64_t> find_targets(const graph::IdMap& ids, const std::vector<std::uint64_t>& file_ids) {
  if (file_ids.empty()) throw ConfigError("hitting_times: name at least one target vertex");
  auto found = ids.find(file_ids);
  for (std::size_t k = 0; k < found.size(); ++k)
    if (found[k] == kNoIndex)
      throw RangeError("target vertex " + std::to_string(file_ids[k]) + " does not occur in the graph" +
                       (ids.is_identity() ? " (its vertex ids are " + std::to_string(ids.base()) + ".." +
                                                std::to_string(ids.base() + ids.vertices() - 1) + ")"
                                          : std::string()));
  return found;
}

py::tuple hitting(const PyGraph& pg, const std::vector<std::uint64_t>& target_file_ids, const std::string& solver,
                  double tolerance, int max_iterations) {
  if (solver != "tessera" && solver != "belos")
    throw ConfigError("solver must be \"tessera\" or \"belos\", not \"" + solver + "\"");
  if (solver == "belos" && !trilinos::available())
    throw ConfigError("solver=\"belos\": this tessera was built without Trilinos (" + trilinos::description() +
                      "); use solver=\"tessera\"");
  Runtime& rt = runtime();
  auto targets = find_targets(pg.ids, target_file_ids);
  // A random walk needs an undirected graph: a directed one is symmetrized
  // (a copy), its id map following the new vertex ranges.
  std::optional<graph::EdgeList> undirected;
  std::optional<graph::IdMap> undirected_ids;
  if (pg.graph.directed()) {
    undirected.emplace(pg.graph.symmetrized());
    undirected_ids.emplace(pg.ids.redistributed(undirected->vertex_ranges()));
  }
  const graph::EdgeList& g = undirected ? *undirected : pg.graph;
  const graph::IdMap& ids = undirected_ids ? *undirected_ids : pg.ids;
  if (g.weighted()) {
    if (auto bad = linalg::find_invalid_weight(g)) {
      bad->row = ids.file_id(bad->row);
      bad->column = ids.file_id(bad->column);
      throw RangeError(bad->describe());
    }
  }
  linalg::HittingOptions o;
  o.cg.tolerance = tolerance;
  o.cg.max_iterations = max_iterations;
  o.connected = pg.connected;
  std::optional<linalg::HittingTimes> h;
  if (solver == "belos") {
    if (!g_trilinos_session) g_trilinos_session = std::make_unique<trilinos::Session>(rt);
    trilinos::BelosHittingOptions bo;
    bo.hitting = o;
    auto r = trilinos::belos_hitting_times(g, targets, bo);
    h.emplace(std::move(r.result));
  } else {
    linalg::EdgeListMatrix matrix(g);
    h.emplace(linalg::hitting_times(g, matrix, targets, o));
  }
  auto s = linalg::summarize(h->times);
  py::dict info;
  info["solver"] = solver;
  info["iterations"] = h->solve.iterations;
  info["converged"] = h->solve.converged;
  info["status"] = linalg::to_string(h->solve.status);
  info["relative_residual"] = h->solve.relative_residual;
  info["backward_error"] = h->solve.backward_error;
  info["rounds"] = h->solve.rounds;
  info["reason"] = h->solve.reason;
  info["solve_seconds"] = h->solve.seconds;
  info["setup_seconds"] = h->setup_seconds;
  info["targets"] = target_file_ids;
  info["reachable"] = s.reachable;
  info["unreachable"] = s.unreachable;
  info["min"] = s.min;
  info["mean"] = s.mean;
  info["max"] = s.max;
  std::uint64_t farthest = ids.file_id(s.farthest);  // collective
  info["farthest"] = farthest == kNoIndex ? py::object(py::none()) : py::object(py::int_(farthest));
  auto file_ids = ids.local_file_ids();
  auto times = std::make_unique<PyArray>(PyArray{ArrayVariant(std::move(h->times.array()))});
  return py::make_tuple(std::move(times), py::array_t<std::uint64_t>(static_cast<py::ssize_t>(file_ids.size()),
                                                                      file_ids.data()),
                        info);
}

template <class Get>
auto graph_view(Get get) {
  return [get](py::object self) {
    const auto& g = self.cast<const PyGraph&>();
    return view_of(get(g), self, false);
  };
}

}  // namespace

void shutdown_trilinos() { g_trilinos_session.reset(); }

void bind_graphs(py::module_& m) {
  py::class_<PyGraph>(m, "_Graph")
      .def_property_readonly("vertices", [](const PyGraph& g) { return g.graph.vertices(); })
      .def_property_readonly("edges", [](const PyGraph& g) { return g.graph.edges(); })
      .def_property_readonly("directed", [](const PyGraph& g) { return g.graph.directed(); })
      .def_property_readonly("weighted", [](const PyGraph& g) { return g.graph.weighted(); })
      .def_property_readonly("connected", [](const PyGraph& g) { return g.connected; })
      .def_property_readonly("local_vertex_range", [](const PyGraph& g) {
        return py::make_tuple(g.graph.local_vertex_begin(), g.graph.local_vertex_end());
      })
      .def_property_readonly("vertex_offsets", [](const PyGraph& g) { return g.graph.vertex_ranges().offsets(); })
      .def_property_readonly("edge_offsets", [](const PyGraph& g) { return g.graph.edge_ranges().offsets(); })
      .def_property_readonly("id_base", [](const PyGraph& g) { return g.ids.base(); })
      .def_property_readonly("metadata_paths", [](const PyGraph& g) {
        py::dict d;
        d["src"] = g.graph.src().metadata_path();
        d["dst"] = g.graph.dst().metadata_path();
        if (g.graph.weight()) d["weight"] = g.graph.weight()->metadata_path();
        return d;
      })
      .def("src", graph_view([](const PyGraph& g) { return g.graph.local_src(); }))
      .def("dst", graph_view([](const PyGraph& g) { return g.graph.local_dst(); }))
      .def("weight", [](py::object self) -> py::object {
        const auto& g = self.cast<const PyGraph&>();
        if (!g.graph.weighted()) return py::none();
        return view_of(g.graph.local_weight(), self, false);
      })
      .def("row_offsets", graph_view([](const PyGraph& g) { return g.graph.row_offsets(); }))
      .def("relabelled_ids", [](py::object self) -> py::object {
        const auto& g = self.cast<const PyGraph&>();
        const auto* ids = g.ids.relabelled_ids();
        if (!ids) return py::none();
        return view_of(ids->local(), self, false);
      })
      .def("file_ids", [](const PyGraph& g) {
        auto ids = g.ids.local_file_ids();
        return py::array_t<std::uint64_t>(static_cast<py::ssize_t>(ids.size()), ids.data());
      })
      .def("symmetrized", [](const PyGraph& g, const std::string& storage, const std::string& name, const std::string& dir) {
        auto s = g.graph.symmetrized(storage_options(storage, name, dir));
        auto ids = g.ids.redistributed(s.vertex_ranges());
        return wrap(std::move(s), std::move(ids), g.connected);
      }, py::arg("storage") = "default", py::arg("name") = "", py::arg("dir") = "")
      .def("in_degrees", [](const PyGraph& g) {
        return std::make_unique<PyArray>(PyArray{ArrayVariant(g.graph.in_degrees())});
      })
      .def("out_degrees", [](const PyGraph& g) {
        return std::make_unique<PyArray>(PyArray{ArrayVariant(g.graph.out_degrees())});
      });

  m.def(
      "_read_graph",
      [](const std::string& path, int base, bool relabel, bool undirected, bool symmetric, bool pattern,
         const std::string& storage, const std::string& name, const std::string& dir) {
        graph::ReadOptions o;
        if (base >= 0) o.base = base;
        o.relabel = relabel;
        o.undirected = undirected;
        o.symmetric = symmetric;
        o.pattern = pattern;
        o.storage = storage_options(storage, name, dir);
        Runtime& rt = runtime();
        py::gil_scoped_release other_threads_may_run;  // parsing and building touch no Python object
        auto loaded = graph::read_graph(rt, path, o);
        return wrap(std::move(loaded.graph), std::move(loaded.ids));
      },
      py::arg("path"), py::arg("base"), py::arg("relabel"), py::arg("undirected"), py::arg("symmetric"),
      py::arg("pattern"), py::arg("storage"), py::arg("name"), py::arg("dir"));

  m.def(
      "_generate",
      [](const std::string& kind, int scale, int edge_factor, const std::string& dims, std::uint64_t seed,
         double delete_fraction, bool permute, const std::string& storage, const std::string& name,
         const std::string& dir) {
        graph::GraphSpec s;
        auto k = graph::parse_graph_kind(kind);
        if (k == graph::GraphSpec::Kind::grid) s = graph::GraphSpec::grid(graph::parse_grid_dims(dims), seed);
        else if (k == graph::GraphSpec::Kind::kron) s = graph::GraphSpec::kronecker(scale, edge_factor, seed);
        else s = graph::GraphSpec::uniform(scale, edge_factor, seed);
        s.delete_fraction = delete_fraction;
        s.permute = s.permute || permute;
        s.validate();
        Runtime& rt = runtime();
        auto options = storage_options(storage, name, dir);
        py::gil_scoped_release other_threads_may_run;
        auto g = graph::generate(rt, s, options);
        auto ids = graph::IdMap::identity(rt, g.vertex_ranges());
        return wrap(std::move(g), std::move(ids));
      },
      py::arg("kind"), py::arg("scale"), py::arg("edge_factor"), py::arg("dims"), py::arg("seed"),
      py::arg("delete_fraction"), py::arg("permute"), py::arg("storage"), py::arg("name"), py::arg("dir"));

  m.def(
      "_components",
      [](const PyGraph& g, const std::string& algorithm) {
        auto c = graph::components_by(algorithm, g.graph);
        auto s = graph::summarize(g.graph, c.labels);
        py::dict info = summary_dict(s, g.ids);
        info["algorithm"] = algorithm;
        info["rounds"] = c.rounds;
        info["seconds"] = c.seconds;
        return py::make_tuple(std::make_unique<PyArray>(PyArray{ArrayVariant(std::move(c.labels))}), info);
      },
      py::arg("graph"), py::arg("algorithm"));

  m.def(
      "_largest_component",
      [](const PyGraph& g, const PyArray& labels, const std::string& storage, const std::string& name,
         const std::string& dir) {
        auto lcc = graph::largest_component(g.graph, labels_of(g, labels), storage_options(storage, name, dir));
        py::dict info = summary_dict(lcc.summary, g.ids);
        auto ids = g.ids.compose(lcc.original_ids);
        auto original = std::make_unique<PyArray>(PyArray{ArrayVariant(std::move(lcc.original_ids))});
        return py::make_tuple(wrap(std::move(lcc.graph), std::move(ids), true), std::move(original), info);
      },
      py::arg("graph"), py::arg("labels"), py::arg("storage"), py::arg("name"), py::arg("dir"));

  m.def("_hitting_times", &hitting, py::arg("graph"), py::arg("targets"), py::arg("solver"), py::arg("tolerance"),
        py::arg("max_iterations"));
  m.def("_highest_degree_vertex", [](const PyGraph& g) { return g.ids.file_id(linalg::highest_degree_vertex(g.graph)); });
  m.def("_trilinos_available", [] { return trilinos::available(); });
  m.def("_trilinos_description", [] { return trilinos::description(); });
}

}  // namespace tessera::python
