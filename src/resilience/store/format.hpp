// The checkpoint format (internal): names of directories and files, the
// data file's header, the candidates a level's directory holds. The
// manifest is manifest.hpp's; the layout is explained in
// include/tessera/resilience/checkpoint.hpp.
#pragma once
#include <cstdint>
#include <string>
#include <type_traits>
#include <vector>

#include "tessera/resilience/level.hpp"
#include "tessera/runtime/runtime.hpp"

namespace tessera::resilience::store {

inline constexpr const char* kFormat = "tessera.checkpoint";
inline constexpr int kVersion = 1;
inline constexpr const char* kManifest = "manifest.json";
inline constexpr std::uint32_t kDataVersion = 1;
// In a level's directory: the data files of the last pruned checkpoint,
// which the next commit takes over instead of allocating new ones.
inline constexpr const char* kSpare = "spare";

// The first 64 bytes of every data file; `crc` covers the 60 before it, so
// every byte of a data file is checked (the pieces by their own CRCs).
struct DataHeader {
  char magic[8] = {'T', 'E', 'S', 'S', 'C', 'K', 'D', '1'};
  std::uint32_t version = kDataVersion;
  std::uint32_t rank = 0;
  std::uint64_t step = 0;
  std::uint64_t epoch = 0;
  std::uint64_t pieces = 0;
  std::uint64_t payload = 0;  // bytes after the header
  std::uint32_t ranks = 0;
  std::uint32_t reserved[2] = {0, 0};
  std::uint32_t crc = 0;
};
static_assert(sizeof(DataHeader) == 64 && std::is_trivially_copyable_v<DataHeader>);
inline constexpr std::uint64_t kHeaderBytes = sizeof(DataHeader);

std::uint32_t header_crc(const DataHeader& h);
// 8 lower-case hex digits.
std::string hex32(std::uint32_t v);
// sSTEP-eEPOCH
std::string checkpoint_dir_name(std::uint64_t step, std::uint64_t epoch);
// step and epoch from a checkpoint directory's name; false for any other name.
bool parse_dir_name(const std::string& s, std::uint64_t& step, std::uint64_t& epoch);
// rRANK.data
std::string data_file_name(int rank);
// ConfigError unless `name` can name a program's checkpoints.
void check_name(const std::string& name);

// A candidate directory of a level.
struct Candidate {
  Level level = Level::node;
  std::string path;
  std::uint64_t step = 0, epoch = 0;
};
// The checkpoint directories under a level's directory for one program,
// as candidates of `level`.
std::vector<Candidate> list_candidates(const std::string& program_dir, Level level);

// Removes a tree, quietly: another node's leader may remove the same shared tree.
void remove_tree(const std::string& path);
// The rank that writes its node's manifests and prunes its node's directories.
inline bool node_leader(Runtime& rt) { return rt.node().rank == 0; }

}  // namespace tessera::resilience::store
