// Parts every workflow file uses (internal to src/pipeline/).
#pragma once
#include <nlohmann/json.hpp>

#include <optional>
#include <string>

#include "tessera/graph/write.hpp"
#include "tessera/pipeline/report.hpp"
#include "tessera/pipeline/input.hpp"
#include "tessera/pipeline/workflow.hpp"

namespace tessera::pipeline {

// A Result holding only its document.
Result document_only(nlohmann::json document);

// Checks an output before any work (graph::check_output_path). An output
// on standard output while the caller prints the document there is refused
// (`option` names it: "-o", "--parts").
OutputPath check_output(Runtime& rt, const Options& options, const std::string& path, graph::OutputKind kind,
                        const char* option);

// Where a renumbered graph's id map goes: `given` (--ids), else beside the
// output (OUT.ids; nothing for a stream).
std::string id_map_path(const std::string& output, const std::string& given);
// The comment line a renumbered graph's file carries.
std::string renumbered_note(const std::string& what);

// The name of the loading step in the report: "generate" or "read".
std::string load_step(const Input& input);

// A caller's graph for an analysis of undirected graphs: a directed one is
// symmetrized (a copy, timed as "symmetrize"; `why` says why in the
// progress line), its ids following the new vertex ranges; nothing for an
// undirected one (use it as it is).
std::optional<graph::LoadedGraph> undirected_copy(const graph::EdgeList& given, const graph::IdMap& ids,
                                                  Report& report, Progress& p, const std::string& why);

// An answer checked by `check()` (timed as "verify"; "" when right):
// "verified" in `object`, and when wrong the problem there too and a
// progress line naming `what`. True when right.
template <class Check>
bool record_verification(Report& report, Progress& p, nlohmann::json& object, const std::string& what, Check check) {
  const std::string problem = report.timed("verify", check);
  object["verified"] = problem.empty();
  if (problem.empty()) return true;
  object["verification_problem"] = problem;
  p.step("the " + what + " failed verification: " + problem);
  return false;
}

}  // namespace tessera::pipeline
