// The Python-owned graph (tessera.Graph's _impl), shared by the graph and
// pipeline bindings.
#pragma once
#include "common.hpp"
#include "tessera/graph/edge_list.hpp"
#include "tessera/graph/id_map.hpp"

namespace tessera::python {

struct PyGraph {
  graph::EdgeList graph;
  graph::IdMap ids;        // the file's id of every vertex
  bool connected = false;  // a largest component: hitting times skip the components pass
};

void bind_pipeline(py::module_& m);
void bind_analyses(py::module_& m);

}  // namespace tessera::python
