// The checkpoint format: names, the data file's header, candidates (format.hpp).
#include "format.hpp"

#include <cctype>
#include <cinttypes>
#include <cstddef>
#include <cstdio>
#include <filesystem>

#include "tessera/runtime/error.hpp"
#include "tessera/storage/durable_file.hpp"

namespace tessera::resilience::store {

namespace fs = std::filesystem;

std::uint32_t header_crc(const DataHeader& h) {
  return crc32c(std::as_bytes(std::span<const DataHeader>(&h, 1)).first(offsetof(DataHeader, crc)));
}

std::string hex32(std::uint32_t v) {
  char buf[16];
  std::snprintf(buf, sizeof buf, "%08" PRIx32, v);
  return buf;
}

std::string checkpoint_dir_name(std::uint64_t step, std::uint64_t epoch) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "s%012" PRIu64 "-e%08" PRIu64, step, epoch);
  return buf;
}
bool parse_dir_name(const std::string& s, std::uint64_t& step, std::uint64_t& epoch) {
  if (s.size() != 1 + 12 + 2 + 8 || s[0] != 's' || s[13] != '-' || s[14] != 'e') return false;
  auto digits = [&](std::size_t at, std::size_t n, std::uint64_t& v) {
    v = 0;
    for (std::size_t i = at; i < at + n; ++i) {
      if (s[i] < '0' || s[i] > '9') return false;
      v = v * 10 + static_cast<std::uint64_t>(s[i] - '0');
    }
    return true;
  };
  return digits(1, 12, step) && digits(15, 8, epoch);
}
std::string data_file_name(int rank) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "r%06d.data", rank);
  return buf;
}

void check_name(const std::string& name) {
  bool ok = !name.empty() && name.size() <= 128 && name[0] != '.';
  for (char c : name) ok = ok && (std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-' || c == '.');
  if (!ok)
    throw ConfigError("checkpoint name '" + name +
                      "': give the program's name, 1 to 128 characters of [A-Za-z0-9_.-], not starting with '.'");
}


// Never throws: rank 0 lists alone before telling the others, and an
// unreadable directory simply holds no checkpoint.
std::vector<Candidate> list_candidates(const std::string& program_dir, Level level) {
  std::vector<Candidate> out;
  std::error_code ec;
  if (!fs::is_directory(program_dir, ec)) return out;
  for (fs::directory_iterator it(program_dir, ec), end; !ec && it != end; it.increment(ec)) {
    Candidate c;
    c.level = level;
    std::error_code type_ec;
    if (!it->is_directory(type_ec) || !parse_dir_name(it->path().filename().string(), c.step, c.epoch)) continue;
    c.path = it->path().string();
    out.push_back(c);
  }
  return out;
}


void remove_tree(const std::string& path) {
  std::error_code ec;
  fs::remove_all(path, ec);  // another node's leader may remove the same shared tree
}

}  // namespace tessera::resilience::store
