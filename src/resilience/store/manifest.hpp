// The manifest (internal): what a checkpoint holds, checked as a reader
// checks it, and the commit steps every level shares (write a level's
// manifest, prune older checkpoints, discard a failed one).
#pragma once
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "format.hpp"

namespace tessera::resilience::store {

using nlohmann::json;

struct FileRecord {
  int rank = 0;
  std::string file;
  std::uint64_t bytes = 0;
};
struct PieceRecord {
  std::string name, kind, type;
  std::uint64_t element_size = 0, begin = 0, count = 0, length = 0, offset = 0, bytes = 0;
  int rank = 0;
  std::uint32_t crc = 0;
};
struct Manifest {
  std::string program;
  std::uint64_t step = 0, epoch = 0;
  int ranks = 0;
  Level level = Level::unknown;
  std::vector<FileRecord> files;
  std::vector<PieceRecord> pieces;
};

json piece_json(const PieceRecord& p);
PieceRecord piece_from(const json& j);
// The manifest file's text: the body under a checksum of its compact form,
// written indented; a reader re-dumps and compares, so no byte of the file
// escapes the check.
std::string manifest_text(const json& body);
// Parses and checks a manifest's every field and their agreement; throws
// FormatError (MismatchError for another program's) with the reason.
Manifest parse_manifest(const std::string& text, const std::string& program);
// "" when data file `r` of the checkpoint in `dir` is exactly what `m` says.
std::string check_data_file(const Manifest& m, int r, const std::string& dir);

// "checkpoint step S (epoch E, level L, PATH)"
std::string describe(const Candidate& c);
// Rank 0's first look at a candidate: its manifest text or why it is refused.
std::string read_manifest(const Candidate& c, const std::string& program, std::string& problem);

// Collective: removes the checkpoint directory `dir` of a failed commit on every node.
void discard(Runtime& rt, const std::string& dir);
// Deletes what `keep` newer complete checkpoints of a level's directory
// make unnecessary; with `spare`, the newest deleted becomes the spare.
void prune(const std::string& level_dir, int keep, bool spare);
// The manifest of `body` at `level`, written by one rank per node.
void write_manifest_file(Runtime& rt, const std::string& body_text, Level level, const std::string& dir);

}  // namespace tessera::resilience::store
