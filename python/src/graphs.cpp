// Graphs for Python: reading and generating EdgeLists, components and the
// largest component, every array a NumPy view of the library's own memory.
// Hitting times and the whole pipeline: pipeline.cpp.
#include <optional>
#include <span>

#include "graph_object.hpp"
#include "tessera/graph/components.hpp"
#include "tessera/graph/generators.hpp"
#include "tessera/graph/io.hpp"
#include "tessera/linalg/hitting_summary.hpp"

namespace tessera::python {

namespace {

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

template <class Get>
auto graph_view(Get get) {
  return [get](py::object self) {
    const auto& g = self.cast<const PyGraph&>();
    return view_of(get(g), self, false);
  };
}

}  // namespace

void bind_graphs(py::module_& m) {
  py::class_<PyGraph>(m, "_Graph")
      .def_property_readonly("vertices", [](const PyGraph& g) { return g.graph.vertices(); })
      .def_property_readonly("edges", [](const PyGraph& g) { return g.graph.edges(); })
      .def_property_readonly("arcs", [](const PyGraph& g) { return g.graph.arcs(); })
      .def_property_readonly("self_loops", [](const PyGraph& g) { return g.graph.self_loops(); })
      .def_property_readonly("_cleaning",
                             [](const PyGraph& g) {
                               const auto& c = g.graph.cleaning();
                               return py::make_tuple(c.duplicates, c.self_loops, c.kept);
                             })
      .def_property_readonly("id_bytes", [](const PyGraph& g) { return g.graph.id_bytes(); })
      .def_property_readonly("edge_array_bytes", [](const PyGraph& g) { return g.graph.edge_array_bytes(); })
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
        d["offsets"] = g.graph.offsets_metadata_path();
        d["dst"] = g.graph.dst_metadata_path();
        if (g.graph.weight()) d["weight"] = g.graph.weight()->metadata_path();
        return d;
      })
      .def("dst", [](py::object self) {
        const auto& g = self.cast<const PyGraph&>();
        return g.graph.with_dst([&](auto dst) { return view_of(dst, self, false); });
      })
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
      .def("rebalanced", [](const PyGraph& g) {
        // New vertex ranges (balanced, aligned when the runtime asks): the
        // rows move, the ids stay.
        py::gil_scoped_release other_threads_may_run;
        auto r = g.graph.rebalanced();
        auto ids = g.ids.redistributed(r.vertex_ranges());
        return wrap(std::move(r), std::move(ids), g.connected);
      })
      .def("in_degrees", [](const PyGraph& g) {
        return std::make_unique<PyArray>(PyArray{ArrayVariant(g.graph.in_degrees())});
      })
      .def("out_degrees", [](const PyGraph& g) {
        return std::make_unique<PyArray>(PyArray{ArrayVariant(g.graph.out_degrees())});
      });

  m.def(
      "_read_graph",
      [](const std::string& path, int base, bool relabel, bool undirected, bool symmetric, bool pattern,
         const std::string& storage, const std::string& name, const std::string& dir, bool multigraph) {
        graph::ReadOptions o;
        if (base >= 0) o.base = base;
        o.relabel = relabel;
        o.undirected = undirected;
        o.symmetric = symmetric;
        o.pattern = pattern;
        o.multigraph = multigraph;
        o.storage = storage_options(storage, name, dir);
        Runtime& rt = runtime();
        py::gil_scoped_release other_threads_may_run;  // parsing and building touch no Python object
        auto loaded = graph::read_graph(rt, path, o);
        return wrap(std::move(loaded.graph), std::move(loaded.ids));
      },
      py::arg("path"), py::arg("base"), py::arg("relabel"), py::arg("undirected"), py::arg("symmetric"),
      py::arg("pattern"), py::arg("storage"), py::arg("name"), py::arg("dir"), py::arg("multigraph") = false);

  m.def(
      "_from_edges",
      [](py::array_t<std::uint64_t, py::array::c_style | py::array::forcecast> src,
         py::array_t<std::uint64_t, py::array::c_style | py::array::forcecast> dst, py::object weights,
         bool undirected, bool symmetric, bool relabel, std::int64_t vertices, const std::string& storage,
         const std::string& name, const std::string& dir) {
        std::optional<py::array_t<double, py::array::c_style | py::array::forcecast>> w;
        if (!weights.is_none()) w = weights.cast<py::array_t<double, py::array::c_style | py::array::forcecast>>();
        graph::EdgeBatch local{{src.data(), static_cast<std::size_t>(src.size())},
                               {dst.data(), static_cast<std::size_t>(dst.size())},
                               w ? std::span<const double>(w->data(), static_cast<std::size_t>(w->size()))
                                 : std::span<const double>{}};
        graph::FromEdgesOptions o;
        o.undirected = undirected;
        o.symmetric = symmetric;
        o.relabel = relabel;
        if (vertices >= 0) o.vertices = static_cast<std::uint64_t>(vertices);
        o.storage = storage_options(storage, name, dir);
        Runtime& rt = runtime();
        py::gil_scoped_release other_threads_may_run;  // the build touches no Python object
        auto loaded = graph::from_edges(rt, local, o);
        return wrap(std::move(loaded.graph), std::move(loaded.ids));
      },
      py::arg("src"), py::arg("dst"), py::arg("weights"), py::arg("undirected"), py::arg("symmetric"),
      py::arg("relabel"), py::arg("vertices"), py::arg("storage"), py::arg("name"), py::arg("dir"));

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
        auto [c, s] = [&] {
          py::gil_scoped_release other_threads_may_run;
          auto c = graph::components_by(algorithm, g.graph);
          auto s = graph::summarize(g.graph, c.labels);
          return std::make_pair(std::move(c), std::move(s));
        }();
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
        const auto& l = labels_of(g, labels);
        auto options = storage_options(storage, name, dir);
        auto [lcc, ids] = [&] {
          py::gil_scoped_release other_threads_may_run;
          auto lcc = graph::largest_component(g.graph, l, options);
          auto ids = g.ids.compose(lcc.original_ids);
          return std::make_pair(std::move(lcc), std::move(ids));
        }();
        py::dict info = summary_dict(lcc.summary, g.ids);
        auto original = std::make_unique<PyArray>(PyArray{ArrayVariant(std::move(lcc.original_ids))});
        return py::make_tuple(wrap(std::move(lcc.graph), std::move(ids), true), std::move(original), info);
      },
      py::arg("graph"), py::arg("labels"), py::arg("storage"), py::arg("name"), py::arg("dir"));

  m.def("_highest_degree_vertex", [](const PyGraph& g) { return g.ids.file_id(linalg::highest_degree_vertex(g.graph)); });
}

}  // namespace tessera::python
