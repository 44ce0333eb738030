// The pipeline's stage checkpoints (include/tessera/pipeline/checkpoint.hpp),
// internal to the workflows: the job's identity, finding and checking the
// checkpoint to resume from, committing a stage, removing them at the end.
#pragma once
#include <nlohmann/json.hpp>

#include <functional>
#include <optional>
#include <string>

#include "tessera/graph/edge_list.hpp"
#include "tessera/graph/id_map.hpp"
#include "tessera/pipeline/checkpoint.hpp"
#include "tessera/pipeline/input.hpp"
#include "tessera/pipeline/progress.hpp"
#include "tessera/pipeline/report.hpp"

namespace tessera::pipeline {

inline void to_json(nlohmann::json& j, const ArrayBytes& a) { j = {{"edges", a.edges}, {"vertices", a.vertices}}; }
inline void from_json(const nlohmann::json& j, ArrayBytes& a) {
  a.edges = j.at("edges").get<std::uint64_t>();
  a.vertices = j.at("vertices").get<std::uint64_t>();
}

// What a checkpoint must match to be resumed from: the input (a file's
// absolute path, size, mtime and a checksum of its first and last 64 KiB;
// a generator's parameters), the reading options and the algorithm.
nlohmann::json job_identity(const Input& input, const std::string& algorithm);

// The store of one run. Every member is collective.
class StageStore {
 public:
  // Opens the store and finds the newest valid checkpoint; a damaged one is
  // skipped with a progress line naming it. ConfigError when that
  // checkpoint belongs to another job (naming each difference and how to
  // start fresh) or was not written by the pipeline.
  StageStore(Runtime& rt, const CheckpointSettings& settings, nlohmann::json identity, Progress& progress);
  ~StageStore();
  StageStore(const StageStore&) = delete;
  StageStore& operator=(const StageStore&) = delete;

  // The stage the run resumes after (kNoStage: none).
  std::uint64_t resumed() const noexcept { return resumed_; }
  // That checkpoint's record (stage times, graph documents) and reader.
  const nlohmann::json& saved() const noexcept { return saved_; }
  const resilience::CheckpointReader& reader() const { return *reader_; }
  // Drops the reader once the run holds what it needs.
  void release() { reader_.reset(); }

  // Commits checkpoint `stage` with `record` (merged into the saved one)
  // and the pieces `add` adds.
  void commit(std::uint64_t stage, const nlohmann::json& record,
              const std::function<void(resilience::CheckpointWriter&)>& add);
  // At the end: removes every checkpoint unless `keep`; what to report.
  void finish(bool keep);
  nlohmann::json report() const { return report_; }

 private:
  Runtime& rt_;
  CheckpointSettings settings_;
  nlohmann::json identity_;
  std::optional<resilience::Checkpoint> ck_;
  std::optional<resilience::CheckpointReader> reader_;
  std::uint64_t resumed_ = kNoStage;
  nlohmann::json saved_ = nlohmann::json::object();
  nlohmann::json report_;
};

// An IdMap in a checkpoint (NAME.idmap: base and kind, held by rank 0;
// NAME.fileids: the file ids, unless identity) and back on `g`'s vertex ranges.
void add_id_map(resilience::CheckpointWriter& w, const std::string& name, const graph::IdMap& ids);
graph::IdMap read_id_map(const resilience::CheckpointReader& r, const std::string& name, const graph::EdgeList& g);

}  // namespace tessera::pipeline
