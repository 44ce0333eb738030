// tessera pagerank | bfs: the GAPBS kernels on a graph file, option parsing
// only. The workflows are the pipeline/ layer's (pipeline::run_pagerank,
// run_bfs), which Python runs too: the graph read as the other graph
// commands read it, the kernel on its arrays, and with --json one document
// with the time of every step (read, build: a directed graph's transpose
// and PageRank's index, the kernel, verify, write). Ids printed and accepted
// are the file's.
#include "commands.hpp"

namespace tessera::cli {

void add_analyses(CLI::App& app, Action& selected) {
  auto a = std::make_shared<GraphArgs>();
  auto set = [&selected, a](Workflow workflow) {
    return [&selected, a, workflow] { selected = [a, workflow] { return run_workflow(*a, workflow, false); }; };
  };
  auto common = [&](CLI::App* c, const std::string& output_help) {
    add_graph_input(c, a->o.input, "Input graph");
    add_input_options(c, a->o.input);
    add_symmetric_option(c, a->o.input);
    c->add_option("-o,--output", a->o.output, output_help + kOutputNote);
    c->add_flag("--verify", a->o.verify,
                "Check the answer (GAPBS's verifier, distributed) and print what it proved; exit status 3 if wrong");
    add_common(c, *a);
  };

  auto* pr = app.add_subcommand("pagerank", "PageRank scores (GAPBS's rules: damping 0.85, until the L1 change < 1e-4)");
  common(pr, "Write 'vertex score' lines (file ids)");
  pr->add_option("--damping", a->o.pagerank.damping, "Damping factor")->check(CLI::Range(0.0, 0.999999))->capture_default_str();
  pr->add_option("--tolerance", a->o.pagerank.tolerance, "Stop when an iteration changes the scores by less than this (L1)")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  pr->add_option("--max-iterations", a->o.pagerank.max_iterations, "Iteration cap (GAPBS's -i)")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  pr->add_option("--method", a->o.pagerank.method,
                 "gauss-seidel (GAPBS's pull: fewest iterations) or jacobi (the same bits at every rank count)")
      ->check(CLI::IsMember({"gauss-seidel", "jacobi"}))
      ->capture_default_str();
  pr->add_option("--personalization", a->o.pagerank.personalize,
                 "Personalized PageRank: teleport to these vertices (file ids), comma separated (default: every "
                 "vertex; Python: personalization=)")
      ->delimiter(',')
      ->check(kVertexId);
  add_old_spelling(pr, "--personalize", "--personalization", a->o.pagerank.personalize)
      ->delimiter(',')
      ->check(kVertexId);
  pr->callback(set(pipeline::run_pagerank));

  auto* bfs = app.add_subcommand("bfs", "Breadth-first search parents and depths (direction-optimizing, as GAPBS)");
  common(bfs, "Write 'vertex parent depth' lines (file ids; -1 -1 when not reached)");
  bfs->add_option("--source", a->o.bfs.source, "The source vertex (a file id)")->required()->check(kVertexId);
  bfs->add_option("--direction", a->o.bfs.direction,
                  "optimizing (Beamer's top-down/bottom-up switch), top-down or bottom-up")
      ->check(CLI::IsMember({"optimizing", "top-down", "bottom-up"}))
      ->capture_default_str();
  bfs->add_option("--hops", a->o.bfs.hops, "Stop at this depth: the k-hop neighbourhood of the source (Python: max_depth=)")
      ->check(CLI::NonNegativeNumber)
      ->default_str("none");
  bfs->add_option("--subgraph", a->o.bfs.subgraph,
                  "With --hops: write the subgraph the neighbourhood induces, renumbered from 0 (.el, .wel, .mtx, .gr, "
                  ".graph, .sg, .wsg or a .tsg directory; its header says so)" + kOutputNote);
  bfs->add_option("--ids", a->o.bfs.subgraph_ids,
                  "Where the subgraph's id map goes: 'subgraph_id file_id' lines (ids in the subgraph -> ids in "
                  "GRAPH); default OUT.ids beside the --subgraph OUT (none for a stream)" + kOutputNote);
  add_old_spelling(bfs, "--subgraph-ids", "--ids", a->o.bfs.subgraph_ids);
  bfs->callback(set(pipeline::run_bfs));
}

}  // namespace tessera::cli
