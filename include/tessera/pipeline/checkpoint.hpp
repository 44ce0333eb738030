// Checkpoints of the pipeline's stages (`tessera pipeline --checkpoint DIR`,
// Options::checkpoint): after each stage the graph workflow has completed
// (input loaded, component labels, largest component) it commits a
// checkpoint with the store of resilience/checkpoint.hpp, and a run started
// again with the same settings resumes after the newest valid one, on any
// rank count, without reading the input again.
//
// The stages are also the workflow's steps for a supervisor (`tessera run
// --recover`, runtime/fault_injection.hpp): step 1 = loaded, 2 = labelled,
// 3 = largest component; an in-process solve's iteration k is step 3 + k
// (Tessera's CG reports each iteration, Belos and Anasazi only their end).
//
// A checkpoint belongs to one job: the input (path, size, mtime and a
// checksum of its first and last 64 KiB, or the generator's parameters),
// the reading options and the components algorithm. A checkpoint of another
// job is refused with the differences named, never used. The analysis
// options are not part of it: no checkpoint holds anything they change,
// and a resumed run solves with the options it is given. docs/checkpoint.md.
#pragma once
#include <cstdint>
#include <string>

#include "tessera/resilience/checkpoint.hpp"

namespace tessera::pipeline {

struct CheckpointSettings {
  std::string dir;              // the disk level's directory; "" = no checkpoints
  std::string levels = "disk";  // node, buddy, disk or a comma list (resilience::Level)
  std::string node_dir;         // the node level's; "" = $TESSERA_SHM_DIR or /dev/shm
  bool keep = false;            // leave them after a successful run (else removed)
};

// The checkpoints' program name (`tessera checkpoint list|rm pipeline --dir DIR`).
inline constexpr const char* kCheckpointName = "pipeline";

// The stages, in order; each is its checkpoint's step.
enum Stage : std::uint64_t { kNoStage = 0, kLoaded = 1, kLabelled = 2, kLargest = 3 };
// "loaded", "labels", "largest component" ("none" for 0).
const char* stage_name(std::uint64_t stage);

}  // namespace tessera::pipeline
