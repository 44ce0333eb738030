// EdgeLists in checkpoints (resilience/checkpoint.hpp): a graph is stored as its
// global edge sequence (source, destination, optional weight arrays, each
// rank's edges in order) plus its vertex count and kind, so it restores on
// any rank count: the restoring ranks read blocks of the sequence and build
// the graph again (EdgeList::build), which gives every rank count the same
// global sorted edge sequence.
#pragma once
#include <string>

#include "tessera/graph/edge_list.hpp"
#include "tessera/resilience/checkpoint.hpp"

namespace tessera::resilience {

// Adds NAME.src, NAME.dst, NAME.weight (weighted graphs) and NAME.graph (the
// vertex count, directedness and weightedness, held by rank 0). No copy: `g`
// must stay unchanged until the commit.
void add_edge_list(CheckpointWriter& w, const std::string& name, const graph::EdgeList& g);

// Collective: the graph `name` rebuilt on the reader's runtime; MismatchError
// or FormatError name what is missing or inconsistent.
graph::EdgeList read_edge_list(const CheckpointReader& r, const std::string& name, const StorageOptions& storage = {});

}  // namespace tessera::resilience
