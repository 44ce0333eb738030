// A workflow's Options as JSON and back: how `tessera CMD --session PATH
// @NAME` hands the options it parsed to an analyst's session, whose ranks
// run the same workflow on a resident graph. Every field travels; a field
// the document lacks keeps its default (an older front end's request).
#include <nlohmann/json.hpp>

#include "tessera/pipeline/workflow.hpp"
#include "tessera/runtime/error.hpp"

namespace tessera::pipeline {

NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE_WITH_DEFAULT(Input, path, base, relabel, undirected, pattern, symmetric, multigraph,
                                                kind, scale, edge_factor, dims, seed, delete_fraction, permute)
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE_WITH_DEFAULT(AnalysisOptions, kind, analysis, solver, preconditioner, matrix,
                                                tolerance, max_iterations, eigensolver, max_restarts, subspace,
                                                program, launcher, control, attach_timeout, timeout, quiet,
                                                group_access, steps_before)
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE_WITH_DEFAULT(CheckpointSettings, dir, levels, node_dir, keep)
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE_WITH_DEFAULT(PageRankSettings, damping, tolerance, max_iterations, method,
                                                personalize)
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE_WITH_DEFAULT(BfsSettings, source, direction, hops, subgraph, subgraph_ids)
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE_WITH_DEFAULT(SpectralSettings, count, parts, split)
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE_WITH_DEFAULT(Options, input, analysis, algorithm, strong, targets, output,
                                                ids_output, group_access, document_on_stdout, checkpoint, pagerank,
                                                bfs, spectral, verify, packed, memory_limit)

std::string options_json(const Options& options) { return nlohmann::json(options).dump(); }

Options options_from_json(const std::string& text) {
  try {
    return nlohmann::json::parse(text).get<Options>();
  } catch (const nlohmann::json::exception& e) {
    throw FormatError(std::string("workflow options that are not this Tessera's: ") + e.what());
  }
}

}  // namespace tessera::pipeline
