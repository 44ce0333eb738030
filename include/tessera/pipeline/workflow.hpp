// The graph workflows of Tessera as library calls: what `tessera gen |
// convert | cc | lcc | hitting | pipeline | pagerank | bfs | spectral` run
// and what Python's tessera.pipeline(), hitting_times(), pagerank(), bfs()
// and spectral() run, with the same defaults
// (Options below), the same checks and the same result document (the JSON
// the CLI prints with --json and Python returns as a dict).
//
// Every function is collective. Options are checked before anything is
// read, outputs before anything is computed ("-" is standard output; devices
// and FIFOs are written in place: graph/write.hpp), and a workflow's outputs are
// committed together at its end (an error leaves none behind). Ids printed
// and accepted are the file's. Progress lines go to the caller's Progress.
#pragma once
#include <nlohmann/json.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "tessera/graph/bfs.hpp"
#include "tessera/graph/id_map.hpp"
#include "tessera/graph/pagerank.hpp"
#include "tessera/linalg/hitting_times.hpp"
#include "tessera/pipeline/analysis.hpp"
#include "tessera/pipeline/checkpoint.hpp"
#include "tessera/pipeline/input.hpp"
#include "tessera/pipeline/progress.hpp"

namespace tessera::pipeline {

// run_pagerank (GAPBS's rules by default).
struct PageRankSettings {
  double damping = 0.85;
  double tolerance = 1e-4;  // stop when an iteration changes the scores by less (L1)
  int max_iterations = 20;
  std::string method = "gauss-seidel";  // or jacobi (the same bits at every rank count)
  std::vector<std::uint64_t> personalize;  // file ids to teleport to; empty: every vertex
};

// run_bfs.
struct BfsSettings {
  std::uint64_t source = 0;  // a file id
  std::string direction = "optimizing";  // or top-down, bottom-up
  int hops = -1;  // >= 0: stop at this depth (the k-hop neighbourhood)
  // With hops: the subgraph the neighbourhood induces is written here, and
  // "subgraph_id file_id" lines to subgraph_ids.
  std::string subgraph, subgraph_ids;
};

// run_spectral's bisection by the Fiedler vector (the kind and the solver
// are Options::analysis's).
struct SpectralSettings {
  int count = 0;  // 2 (--parts 2): the output holds "vertex fiedler part" lines, the bisection beside the vector
  std::string parts;  // the older form: "vertex part" lines (0/1) written here
  std::string split = "median";  // or sign
};

struct Options {
  Input input;
  AnalysisOptions analysis;
  // Components: afforest | lp | fastsv; run_components also "all" (or "both").
  std::string algorithm = "afforest";
  bool strong = false;  // run_components: strongly connected components
  // Hitting-time targets, file ids. run_pipeline: empty = the highest-degree
  // vertex of the largest component. None with a spectral analysis kind.
  std::vector<std::uint64_t> targets;
  // run_write, run_lcc: the graph written; run_components: "vertex
  // component" lines; run_hitting, run_pipeline: "vertex time" lines (a
  // spectral kind: "vertex fiedler" / "vertex centrality").
  std::string output;
  std::string ids_output;      // run_lcc: "lcc_id file_id" lines
  bool group_access = false;   // binary (.tsg) outputs group-readable and -writable
  // The caller prints the document on standard output (--json): an output
  // that goes there too ("-", /dev/stdout) is refused before any work.
  bool document_on_stdout = false;
  // run_pipeline from a file or generator: a checkpoint after each stage,
  // and a start resumes after the newest valid one (pipeline/checkpoint.hpp).
  CheckpointSettings checkpoint;
  PageRankSettings pagerank;
  BfsSettings bfs;
  SpectralSettings spectral;
  // run_pagerank, run_bfs: the answer checked by GAPBS's verifier
  // (distributed); run_components (not strong) and run_pipeline: the labels
  // proved by graph::check_labels and the component sizes summed to the
  // vertex count (the pipeline stops there when they are wrong). A wrong
  // answer makes exit_code() 3.
  bool verify = false;
  // run_pipeline (and the CLI's bfs, pagerank --packed): the graph packed
  // (graph::PackedGraph: vertices numbered by degree, rows as byte codes,
  // about 3-4 bytes an undirected edge against the EdgeList's 8) once
  // loaded, the EdgeList given up. The pipeline's components (Afforest, the
  // only algorithm that reads the packed form), --verify, the largest
  // component (in place) and its analysis (Belos or Anasazi in this
  // process) read the packed rows; the document has the same keys (its
  // "graph" the packed sizes and "form": "packed", a "packed" object
  // beside) and the outputs are the same files, in the file's ids and
  // order. ConfigError, before any work, with another algorithm, solver,
  // an analysis out of process, or checkpoints (which hold EdgeLists).
  bool packed = false;
  // The memory limit the command is checked against before it allocates
  // (pipeline/memory.hpp): a fraction of the node's memory ("0.9", "90%"),
  // bytes ("20G") or "none"; "" = 90%. --memory-limit, memory_limit=.
  std::string memory_limit;
};

// What a workflow returns: its result document and, after an analysis,
// its vector (hitting times, or a spectral kind's eigenvector) with the
// file id of each of this rank's entries.
struct Result {
  nlohmann::json json;
  std::optional<linalg::HittingTimes> hitting;
  std::vector<std::uint64_t> file_ids;
  std::optional<Spectrum> spectrum;
  std::optional<graph::PageRank> pagerank;  // run_pagerank: the scores (internal ids)
  std::optional<graph::Bfs> bfs;            // run_bfs: parents (internal ids) and depths
  bool verification_failed = false;         // Options::verify rejected the answer
  // The command's exit status: 3 when the analysis' solve did not converge
  // or the answer failed verification (not to be trusted), else 0.
  int exit_code() const;
};

// Options as JSON text and back (every field; missing ones keep their
// defaults): how a front end hands parsed options to a session's ranks.
// FormatError for text that is not such a document.
std::string options_json(const Options& options);
Options options_from_json(const std::string& text);

// What can be checked without a runtime: the generator's options when no
// file is named, and the analysis options (ConfigError naming the value).
void check_options(const Options& options, bool analysis);

// gen (no input path) and convert: the graph written to options.output.
Result run_write(Runtime& rt, const Options& options, Progress& progress);
// cc: components by one algorithm or all; output: "vertex component" lines.
Result run_components(Runtime& rt, const Options& options, Progress& progress);
// The same on a graph the caller holds (an analyst's session's resident graph).
Result run_components(const graph::EdgeList& g, const graph::IdMap& ids, const Options& options, Progress& progress);
// lcc: the largest component written to options.output (and ids_output).
Result run_lcc(Runtime& rt, const Options& options, Progress& progress);
// hitting: hitting times to options.targets on the whole graph.
Result run_hitting(Runtime& rt, const Options& options, Progress& progress);
// The same on a graph the caller holds (`connected`: every vertex reaches
// a target, as in a largest component); a directed one is symmetrized first.
Result run_hitting(const graph::EdgeList& g, const graph::IdMap& ids, bool connected, const Options& options,
                   Progress& progress);
// pipeline: the graph into Shared storage, components, the largest
// component (Shared, zero-copy), the analysis of options.analysis.kind on it
// (hitting times, fiedler, centrality) where options.analysis.analysis says;
// with options.packed, all of it on the graph packed (Options::packed).
Result run_pipeline(Runtime& rt, const Options& options, Progress& progress);
// The same from a graph the caller holds (options.input names nothing).
Result run_pipeline(const graph::EdgeList& g, const graph::IdMap& ids, const Options& options, Progress& progress);

// pagerank: PageRank of the graph (options.pagerank), pulled along in-arcs
// (a directed graph's transpose is made and timed as "build", with the
// kernel's index, as GAPBS builds its CSR before timing its kernel);
// output: "vertex score" lines. The document's "pagerank" object holds the
// settings, the iterations, the score sum and the top vertex (a file id).
Result run_pagerank(Runtime& rt, const Options& options, Progress& progress);
// The settings of options.pagerank (ConfigError for a bad one), and a run's
// "pagerank" object: `ids` is the map of the scored graph's vertices
// (local_begin its first here), so the top vertex is a file id. The
// EdgeList's and the packed run (tessera pagerank --packed) share them.
graph::PageRankOptions pagerank_options(const Options& options);
nlohmann::json pagerank_json(const graph::PageRank& pr, const graph::PageRankOptions& o, const Options& options,
                             std::uint64_t local_begin, const graph::IdMap& ids);
Result run_pagerank(const graph::EdgeList& g, const graph::IdMap& ids, const Options& options, Progress& progress);
// bfs: breadth-first search from options.bfs.source; output: "vertex parent
// depth" lines (file ids; -1 -1 when not reached); with hops, the
// neighbourhood's subgraph (options.bfs.subgraph) and its ids.
Result run_bfs(Runtime& rt, const Options& options, Progress& progress);
// A search's "bfs" object (the source as the file id given), the same for
// the EdgeList's and the packed run.
nlohmann::json bfs_json(const graph::Bfs& b, const graph::BfsOptions& o, const Options& options);
Result run_bfs(const graph::EdgeList& g, const graph::IdMap& ids, const Options& options, Progress& progress);
// spectral: options.analysis.kind fiedler (with the bisection of
// options.spectral) or centrality, by Anasazi in process on the edge arrays
// (a directed graph symmetrized first); output: "vertex fiedler" /
// "vertex centrality" lines. The document holds the analysis' object's
// fields at its top level ("lambda2" or "lambda", ...), as `tessera
// spectral --json` always has.
Result run_spectral(Runtime& rt, const Options& options, Progress& progress);
Result run_spectral(const graph::EdgeList& g, const graph::IdMap& ids, const Options& options, Progress& progress);

}  // namespace tessera::pipeline
