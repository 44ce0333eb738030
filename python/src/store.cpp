// A session's residents saved and restored through the resilience store
// (resilience/checkpoint.hpp): one disk checkpoint named "session" in the
// save's directory, every piece checksummed, a save complete or refused
// (never half loaded), readable at any rank count. Graphs travel as their
// edge sequence (resilience/edge_list.hpp) with the file ids of a relabelled
// id map; arrays as their global sequence. What each name is (kind, fields,
// dtypes) is the caller's manifest, a JSON text stored beside the pieces.
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "common.hpp"
#include "graph_object.hpp"
#include "tessera/resilience/checkpoint.hpp"
#include "tessera/runtime/collective.hpp"
#include "tessera/resilience/edge_list.hpp"

namespace tessera::python {

namespace {

resilience::CheckpointOptions store_options(const std::string& dir) {
  resilience::CheckpointOptions o;
  o.dir = dir;
  o.levels = resilience::Level::disk;
  o.name = "session";
  o.keep = 1;
  return o;
}

constexpr const char* kManifest = "manifest.json";

struct PyStoreWriter {
  std::unique_ptr<resilience::Checkpoint> checkpoint;
  std::optional<resilience::CheckpointWriter> writer;
  std::vector<py::object> held;  // what the pieces point into, alive until commit
};

struct PyStoreReader {
  std::unique_ptr<resilience::Checkpoint> checkpoint;
  std::optional<resilience::CheckpointReader> reader;
  std::string manifest;
};

}  // namespace

void bind_store(py::module_& m) {
  py::class_<PyStoreWriter>(m, "_StoreWriter")
      .def("add_graph",
           [](PyStoreWriter& s, const std::string& name, py::object graph) {
             const auto& g = graph.cast<const PyGraph&>();
             resilience::add_edge_list(*s.writer, name, g.graph);
             if (!g.ids.is_identity()) s.writer->add(name + ".file_ids", *g.ids.relabelled_ids());
             py::dict ids;  // what read_graph needs back: the manifest keeps it
             ids["relabelled"] = !g.ids.is_identity();
             ids["base"] = g.ids.base();
             ids["connected"] = g.connected;
             s.held.push_back(std::move(graph));
             return ids;
           })
      .def("add_array",
           [](PyStoreWriter& s, const std::string& name, py::object array) {
             std::visit([&](const auto& a) { s.writer->add(name, a); }, array.cast<const PyArray&>().array);
             s.held.push_back(std::move(array));
           })
      .def("commit", [](PyStoreWriter& s, const std::string& manifest) {
        // The manifest: rank 0's bytes (every rank adds its part, possibly none).
        std::vector<std::uint8_t> text;
        if (runtime().rank() == 0) text.assign(manifest.begin(), manifest.end());
        s.writer->add(kManifest, std::move(text));
        py::gil_scoped_release other_threads_may_run;
        s.writer->commit();
        s.held.clear();
      }, py::arg("manifest"));

  m.def(
      "_store_begin",
      [](const std::string& dir) {
        auto s = std::make_unique<PyStoreWriter>();
        s->checkpoint = std::make_unique<resilience::Checkpoint>(runtime(), store_options(dir));
        s->writer.emplace(s->checkpoint->begin(0));
        return s;
      },
      py::arg("dir"));

  py::class_<PyStoreReader>(m, "_StoreReader")
      .def_readonly("manifest", &PyStoreReader::manifest)
      .def_property_readonly("ranks", [](const PyStoreReader& s) { return s.reader->info().ranks; })
      .def("read_graph",
           [](PyStoreReader& s, const std::string& name, bool relabelled, std::uint64_t base, bool connected) {
             Runtime& rt = runtime();
             auto [g, ids] = [&] {
               py::gil_scoped_release other_threads_may_run;
               auto g = resilience::read_edge_list(*s.reader, name, {});
               if (!relabelled) {
                 auto ids = graph::IdMap::identity(rt, g.vertex_ranges(), base);
                 return std::make_pair(std::move(g), std::move(ids));
               }
               DistArray<std::uint64_t> file_ids(rt, g.vertex_ranges());
               agree(rt.comm(), [&] { s.reader->read(name + ".file_ids", file_ids); });
               auto ids = graph::IdMap::relabelled(std::move(file_ids), base);
               return std::make_pair(std::move(g), std::move(ids));
             }();
             return std::make_unique<PyGraph>(PyGraph{std::move(g), std::move(ids), connected});
           })
      .def("length",  // collective: an array's elements, before reading it (restore's memory guardrail)
           [](PyStoreReader& s, const std::string& name) {
             std::uint64_t n = 0;
             agree(runtime().comm(), [&] { n = s.reader->length(name); });
             return n;
           })
      .def("read_array",
           [](PyStoreReader& s, const std::string& name, const py::dtype& dtype, py::object on_graph) {
             Runtime& rt = runtime();
             return with_element_type(dtype, [&](auto zero) {
               using T = decltype(zero);
               std::uint64_t n = 0;
               agree(rt.comm(), [&] { n = s.reader->length(name); });
               // A vertex array lies on its graph's vertex ranges; others, in blocks.
               DistArray<T> a = on_graph.is_none()
                                    ? DistArray<T>(rt, n)
                                    : DistArray<T>(rt, on_graph.cast<const PyGraph&>().graph.vertex_ranges());
               agree(rt.comm(), [&] { s.reader->read(name, a); });
               return std::make_unique<PyArray>(PyArray{ArrayVariant(std::move(a))});
             });
           });

  m.def(
      "_store_open",
      [](const std::string& dir) {
        Runtime& rt = runtime();
        auto s = std::make_unique<PyStoreReader>();
        s->checkpoint = std::make_unique<resilience::Checkpoint>(rt, store_options(dir));
        auto latest = s->checkpoint->latest();
        if (!latest.info) {
          std::string why;
          for (const auto& reason : latest.skipped) why += "\n  " + reason;
          throw FormatError("no complete, intact session save in " + dir +
                            (why.empty() ? std::string(" (nothing saved there)") : ":" + why));
        }
        s->reader.emplace(s->checkpoint->restore(*latest.info));
        const auto bytes = s->reader->read<std::uint8_t>(kManifest, 0, s->reader->length(kManifest));
        s->manifest.assign(bytes.begin(), bytes.end());
        return s;
      },
      py::arg("dir"));
}

}  // namespace tessera::python
