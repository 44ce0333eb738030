// The checkpoint store: layout, manifest, commit protocol, validation and
// restore (the header explains the layout; docs/checkpoint.md the guarantees).
#include "tessera/resilience/checkpoint.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <cstddef>
#include <cinttypes>
#include <cstdio>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <thread>

#include "tessera/comm/bulk_exchange.hpp"
#include "tessera/runtime/collective.hpp"
#include "tessera/runtime/error.hpp"
#include "tessera/runtime/fault_injection.hpp"
#include "tessera/runtime/wait.hpp"
#include "tessera/storage/durable_file.hpp"
#include "tessera/storage/mapping.hpp"
#include "tessera/storage/storage.hpp"
#include "tessera/storage/metadata.hpp"

namespace tessera::resilience {

Levels parse_levels(const std::string& text, const std::string& what) {
  Levels set;
  std::size_t start = 0;
  for (;;) {
    const std::size_t comma = text.find(',', start);
    const std::string part = text.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    if (part == "node") set = set | Level::node;
    else if (part == "buddy") set = set | Level::buddy;
    else if (part == "disk") set = set | Level::disk;
    else if (!part.empty() || comma != std::string::npos)
      throw ConfigError(what + ": '" + part + "' is not a level (node, buddy, disk, or a comma list of them)");
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  if (set.empty()) throw ConfigError(what + ": give at least one of node, buddy, disk");
  return set;
}

using nlohmann::json;
namespace fs = std::filesystem;

namespace {

constexpr const char* kFormat = "tessera.checkpoint";
constexpr int kVersion = 1;
constexpr const char* kManifest = "manifest.json";
constexpr std::uint32_t kDataVersion = 1;
// In a level's directory: the data files of the last pruned checkpoint,
// which the next commit takes over instead of allocating new ones.
constexpr const char* kSpare = "spare";

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
constexpr std::uint64_t kHeaderBytes = sizeof(DataHeader);

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
// step and epoch from a checkpoint directory's name; false for any other name.
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

// A node-level data file this rank wrote, still mapped.
struct MappedFile {
  dev_t dev = 0;
  ino_t ino = 0;
  Mapping map;
};

// A candidate directory of a level.
struct Candidate {
  Level level = Level::node;
  std::string path;
  std::uint64_t step = 0, epoch = 0;
};
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

// ---- manifest -------------------------------------------------------------

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

json piece_json(const PieceRecord& p) {
  return json{{"name", p.name},       {"kind", p.kind},   {"type", p.type},   {"element_size", p.element_size},
              {"rank", p.rank},       {"begin", p.begin}, {"count", p.count}, {"length", p.length},
              {"offset", p.offset},   {"bytes", p.bytes}, {"crc32c", hex32(p.crc)}};
}
PieceRecord piece_from(const json& j) {
  PieceRecord p;
  p.name = j.at("name").get<std::string>();
  p.kind = j.at("kind").get<std::string>();
  p.type = j.at("type").get<std::string>();
  p.element_size = j.at("element_size").get<std::uint64_t>();
  p.rank = j.at("rank").get<int>();
  p.begin = j.at("begin").get<std::uint64_t>();
  p.count = j.at("count").get<std::uint64_t>();
  p.length = j.at("length").get<std::uint64_t>();
  p.offset = j.at("offset").get<std::uint64_t>();
  p.bytes = j.at("bytes").get<std::uint64_t>();
  std::string c = j.at("crc32c").get<std::string>();
  char* end = nullptr;
  unsigned long v = std::strtoul(c.c_str(), &end, 16);
  if (c.size() != 8 || *end != '\0') throw FormatError("piece '" + p.name + "': crc32c '" + c + "' is not 8 hex digits");
  p.crc = static_cast<std::uint32_t>(v);
  return p;
}

// The manifest file's text: the body under a checksum of its compact form,
// written indented; a reader re-dumps and compares, so no byte of the file
// escapes the check.
std::string manifest_text(const json& body) {
  std::string compact = body.dump();
  json doc{{"checksum", "crc32c:" + hex32(crc32c(std::as_bytes(std::span<const char>(compact))))}, {"manifest", body}};
  return doc.dump(1) + "\n";
}

// Parses and checks a manifest's every field and their agreement; throws
// FormatError (MismatchError for another program's) with the reason.
Manifest parse_manifest(const std::string& text, const std::string& program) {
  json doc;
  try {
    doc = json::parse(text);
  } catch (const json::exception&) {
    throw FormatError("the manifest is not valid JSON (damaged)");
  }
  Manifest m;
  try {
    if (!doc.is_object() || !doc.contains("manifest") || !doc.contains("checksum"))
      throw FormatError("the manifest lacks its checksum or body");
    const json& body = doc.at("manifest");
    std::string compact = body.dump();
    if (doc.at("checksum").get<std::string>() != "crc32c:" + hex32(crc32c(std::as_bytes(std::span<const char>(compact)))))
      throw FormatError("the manifest's checksum does not match its contents (damaged)");
    if (manifest_text(body) != text) throw FormatError("the manifest's text was altered (damaged)");
    if (body.at("format").get<std::string>() != kFormat)
      throw FormatError("not a checkpoint manifest (format '" + body.at("format").get<std::string>() + "')");
    if (body.at("version").get<int>() != kVersion)
      throw FormatError("manifest version " + std::to_string(body.at("version").get<int>()) + ", this build reads " +
                        std::to_string(kVersion));
    m.program = body.at("program").get<std::string>();
    if (m.program != program)
      throw MismatchError("written by program '" + m.program + "', not by '" + program + "'");
    m.step = body.at("step").get<std::uint64_t>();
    m.epoch = body.at("epoch").get<std::uint64_t>();
    m.ranks = body.at("ranks").get<int>();
    const int level = body.at("level").get<int>();
    if (level < level_number(Level::buddy) || level > level_number(Level::disk))
      throw FormatError("the manifest names level " + std::to_string(level) + " (levels are 1, 2 and 3)");
    m.level = static_cast<Level>(level);
    for (const auto& f : body.at("files"))
      m.files.push_back({f.at("rank").get<int>(), f.at("file").get<std::string>(), f.at("bytes").get<std::uint64_t>()});
    for (const auto& p : body.at("pieces")) m.pieces.push_back(piece_from(p));
  } catch (const json::exception& e) {
    throw FormatError(std::string("the manifest lacks a field or has a wrong one: ") + e.what());
  }
  if (m.ranks < 1 || static_cast<std::size_t>(m.ranks) != m.files.size())
    throw FormatError("the manifest names " + std::to_string(m.files.size()) + " files for " + std::to_string(m.ranks) +
                      " ranks");
  for (int r = 0; r < m.ranks; ++r) {
    const auto& f = m.files[static_cast<std::size_t>(r)];
    if (f.rank != r || f.file != data_file_name(r))
      throw FormatError("the manifest's file " + std::to_string(r) + " is '" + f.file + "' of rank " +
                        std::to_string(f.rank));
  }
  // Per rank the pieces lie back to back after the header and fill the file.
  std::vector<std::uint64_t> end(static_cast<std::size_t>(m.ranks), kHeaderBytes);
  std::map<std::string, std::vector<const PieceRecord*>> by_name;
  for (const auto& p : m.pieces) {
    if (p.rank < 0 || p.rank >= m.ranks) throw FormatError("piece '" + p.name + "' names rank " + std::to_string(p.rank));
    auto& e = end[static_cast<std::size_t>(p.rank)];
    if (p.offset != e) throw FormatError("piece '" + p.name + "' of rank " + std::to_string(p.rank) + " is not where the previous one ends");
    e += p.bytes;
    by_name[p.name].push_back(&p);
  }
  for (int r = 0; r < m.ranks; ++r)
    if (end[static_cast<std::size_t>(r)] != m.files[static_cast<std::size_t>(r)].bytes)
      throw FormatError("the pieces of rank " + std::to_string(r) + " do not fill its file");
  for (const auto& [name, ps] : by_name) {
    if (ps.size() != static_cast<std::size_t>(m.ranks))
      throw FormatError("piece '" + name + "' appears " + std::to_string(ps.size()) + " times for " +
                        std::to_string(m.ranks) + " ranks");
    std::uint64_t at = 0, chunks = 0;
    for (std::size_t r = 0; r < ps.size(); ++r) {
      const PieceRecord& p = *ps[r];
      if (p.rank != static_cast<int>(r) || p.kind != ps[0]->kind || p.type != ps[0]->type ||
          p.element_size != ps[0]->element_size || p.length != ps[0]->length)
        throw FormatError("the pieces of '" + name + "' disagree between ranks");
      if (p.kind == "array") {
        if (p.begin != at || p.bytes != p.count * p.element_size)
          throw FormatError("array '" + name + "': the piece of rank " + std::to_string(r) + " is not where expected");
        at += p.count;
      } else if (p.kind == "chunks") {
        if (p.bytes < p.count * 3 * sizeof(std::uint64_t))
          throw FormatError("chunk array '" + name + "': the piece of rank " + std::to_string(r) + " is too small");
        chunks += p.count;
      } else {
        throw FormatError("piece '" + name + "' has unknown kind '" + p.kind + "'");
      }
    }
    if (ps[0]->kind == "array" && at != ps[0]->length)
      throw FormatError("array '" + name + "': the pieces cover " + std::to_string(at) + " of " +
                        std::to_string(ps[0]->length) + " elements");
    if (ps[0]->kind == "chunks" && chunks != ps[0]->length)
      throw FormatError("chunk array '" + name + "': the pieces hold " + std::to_string(chunks) + " of " +
                        std::to_string(ps[0]->length) + " chunks");
  }
  return m;
}

// "" when data file `r` of the checkpoint in `dir` is exactly what `m` says.
std::string check_data_file(const Manifest& m, int r, const std::string& dir) {
  const FileRecord& f = m.files[static_cast<std::size_t>(r)];
  std::string path = dir + "/" + f.file;
  FileDescriptor fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW));
  if (!fd) return "data file " + f.file + " of rank " + std::to_string(r) + " is missing";
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0 || !S_ISREG(st.st_mode)) return "data file " + f.file + " is not a regular file";
  if (static_cast<std::uint64_t>(st.st_size) != f.bytes)
    return "data file " + f.file + " has " + std::to_string(st.st_size) + " bytes, the manifest says " +
           std::to_string(f.bytes) + (static_cast<std::uint64_t>(st.st_size) < f.bytes ? " (truncated)" : "");
  try {
    DataHeader h;
    read_exactly(fd.get(), 0, std::as_writable_bytes(std::span<DataHeader>(&h, 1)), path);
    if (std::memcmp(h.magic, DataHeader{}.magic, 8) != 0 || header_crc(h) != h.crc)
      return "data file " + f.file + " has a damaged header";
    if (h.step != m.step || h.epoch != m.epoch)
      return "data file " + f.file + " belongs to step " + std::to_string(h.step) + " epoch " + std::to_string(h.epoch) +
             ", the manifest to step " + std::to_string(m.step) + " epoch " + std::to_string(m.epoch) +
             " (files of two checkpoints mixed)";
    std::uint64_t pieces = 0;
    for (const auto& p : m.pieces) pieces += p.rank == r ? 1 : 0;
    if (h.version != kDataVersion || h.rank != static_cast<std::uint32_t>(r) ||
        h.ranks != static_cast<std::uint32_t>(m.ranks) || h.payload + kHeaderBytes != f.bytes || h.pieces != pieces)
      return "data file " + f.file + "'s header disagrees with the manifest";
    // Checked in place through a mapping: no copy through a buffer.
    Mapping map = Mapping::file(fd.get(), static_cast<std::size_t>(f.bytes), false, path);
    for (const auto& p : m.pieces) {
      if (p.rank != r) continue;
      if (crc32c(std::span<const std::byte>(map.data() + p.offset, p.bytes)) != p.crc)
        return "piece '" + p.name + "' of rank " + std::to_string(r) + " fails its checksum (damaged)";
    }
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

// A node-level checkpoint across nodes: each node holds its own ranks' files
// and (level 1) those of the ranks whose buddies it holds. But a restore may
// read any rank's file on any rank (spans and chunks are not placed as they
// were written; a node lost or another rank count moves every block), so
// every file a node lacks is first copied there over MPI from a node that
// holds it: after a lost node on 3 or more nodes its files live on one
// survivor only. The cost, once per restore: every node then holds the whole
// checkpoint. On one node it only names a file that is missing. Collective;
// "" when the checkpoint is complete on every node, otherwise which file no
// node holds.
std::string complete_on_every_node(Runtime& rt, const Manifest& m, const std::string& dir) {
  const NodeGroup& node = rt.node();
  const auto files = static_cast<std::size_t>(m.ranks), nodes = static_cast<std::size_t>(node.count);
  // have[n * files + r]: node n holds a file of rank r of the size the
  // manifest gives (its contents are checked after, as on one node).
  std::vector<int> have(nodes * files, 0);
  if (node.rank == 0)
    for (std::size_t r = 0; r < files; ++r) {
      struct stat st {};
      const std::string path = dir + "/" + m.files[r].file;
      have[static_cast<std::size_t>(node.index) * files + r] =
          ::lstat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode) && static_cast<std::uint64_t>(st.st_size) == m.files[r].bytes;
    }
  all_reduce(rt.comm(), have.data(), static_cast<int>(have.size()), MPI_MAX);

  std::vector<std::vector<int>> ranks_on(nodes);
  for (std::size_t k = 0; k < node.node_of_rank.size(); ++k)
    ranks_on[static_cast<std::size_t>(node.node_of_rank[k])].push_back(static_cast<int>(k));
  struct Copy {
    std::size_t file;
    int from, to;
  };
  std::vector<Copy> copies;  // the same plan on every rank
  for (std::size_t r = 0; r < files; ++r) {
    std::vector<std::size_t> holders;
    for (std::size_t n = 0; n < nodes; ++n)
      if (have[n * files + r]) holders.push_back(n);
    if (holders.empty())  // lost with its node (and its buddy's), or deleted
      return "data file " + m.files[r].file + " of rank " + std::to_string(r) + " is missing" +
             (nodes > 1 ? " on all " + std::to_string(nodes) + " nodes of the job" : std::string()) +
             (m.level == Level::node && (nodes > 1 || m.ranks != rt.size())
                  ? " (level 2 keeps no copy on another node; level 1, buddy, does)"
                  : std::string());
    for (std::size_t n = 0; n < nodes; ++n) {
      if (have[n * files + r]) continue;  // spread the senders over the holders and their ranks
      const auto& from = ranks_on[holders[n % holders.size()]];
      copies.push_back({r, from[r % from.size()], ranks_on[n][r % ranks_on[n].size()]});
    }
  }
  if (copies.empty()) return "";
  const int me = rt.rank();
  std::vector<Copy> sent, received;
  for (const auto& c : copies) {
    if (c.from == me) sent.push_back(c);
    if (c.to == me) received.push_back(c);
  }
  std::stable_sort(sent.begin(), sent.end(), [](const Copy& a, const Copy& b) { return a.to < b.to; });
  std::stable_sort(received.begin(), received.end(), [](const Copy& a, const Copy& b) { return a.from < b.from; });
  std::vector<std::uint64_t> counts(static_cast<std::size_t>(rt.size()), 0), got;
  std::vector<std::byte> send;
  agree(rt.comm(), [&] {
    std::uint64_t total = 0;
    for (const auto& c : sent) total += m.files[c.file].bytes;
    send.resize(total);
    std::uint64_t at = 0;
    for (const auto& c : sent) {
      const std::string path = dir + "/" + m.files[c.file].file;
      FileDescriptor fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW));
      if (!fd) throw SystemError("cannot open checkpoint data " + path + " to copy it to another node", errno);
      read_exactly(fd.get(), 0, std::span<std::byte>(send).subspan(at, m.files[c.file].bytes), path);
      at += m.files[c.file].bytes;
      counts[static_cast<std::size_t>(c.to)] += m.files[c.file].bytes;
    }
  });
  auto arrived = comm::exchange_bytes(rt.comm(), send, counts, 1, got);
  send = {};
  agree(rt.comm(), [&] {
    std::uint64_t at = 0;
    for (const auto& c : received) {
      const std::uint64_t bytes = m.files[c.file].bytes;
      if (at + bytes > arrived.size()) throw FormatError("checkpoint " + dir + ": a copied data file came short");
      write_file_atomically(dir + "/" + m.files[c.file].file, std::span<const std::byte>(arrived).subspan(at, bytes), false);
      at += bytes;
    }
  });
  return "";
}

std::string describe(const Candidate& c) {
  return "checkpoint step " + std::to_string(c.step) + " (epoch " + std::to_string(c.epoch) + ", level " +
         std::to_string(level_number(c.level)) + ", " + c.path + ")";
}

// Rank 0's first look at a candidate: its manifest text or why it is refused.
std::string read_manifest(const Candidate& c, const std::string& program, std::string& problem) {
  std::string path = c.path + "/" + kManifest;
  struct stat st {};
  if (::lstat(path.c_str(), &st) != 0) {
    problem = "incomplete: it has no manifest (the job stopped while writing it)";
    return "";
  }
  std::string text;
  try {
    text = read_small_regular_file(path, "checkpoint manifest");
    Manifest m = parse_manifest(text, program);
    if (m.step != c.step || m.epoch != c.epoch)
      problem = "stale manifest: it describes step " + std::to_string(m.step) + " epoch " + std::to_string(m.epoch);
  } catch (const Error& e) {
    problem = e.what();
  }
  return text;
}

void remove_tree(const std::string& path) {
  std::error_code ec;
  fs::remove_all(path, ec);  // another node's leader may remove the same shared tree
}

bool node_leader(Runtime& rt) { return rt.node().rank == 0; }

}  // namespace

// A disk copy in progress: the thread copies this rank's committed node file.
struct Checkpoint::Drain {
  std::thread thread;
  std::exception_ptr failure;  // set by the thread
  std::atomic<bool> copied{false};  // set by the thread when it ends
  std::string dir;             // the disk checkpoint's directory
  std::string body;            // the manifest body, for the disk manifest
};

// The communicator of level 1's copies: theirs alone, so no other receive
// (an aggregation's, any source) can match them.
struct Checkpoint::CopyComm {
  MPI_Comm comm = MPI_COMM_NULL;
  explicit CopyComm(MPI_Comm from) { TESSERA_MPI(MPI_Comm_dup(from, &comm)); }
  CopyComm(const CopyComm&) = delete;
  CopyComm& operator=(const CopyComm&) = delete;
  ~CopyComm() { MPI_Comm_free(&comm); }
};

// The mapped node-level files of this rank, least recently written first.
struct Checkpoint::Slots {
  std::vector<MappedFile> slots;
  std::vector<MappedFile> received;  // level 1: the buddy copies this rank received
};

bool Checkpoint::drain_copied() const noexcept { return !drain_ || drain_->copied.load(); }

// ---- LatestCheckpoint -------------------------------------------------------

std::string LatestCheckpoint::message() const {
  std::string out;
  for (const auto& s : skipped) out += (out.empty() ? "" : "\n") + s;
  return out;
}

// ---- Checkpoint -------------------------------------------------------------

Checkpoint::Checkpoint(Runtime& rt, CheckpointOptions options)
    : rt_(&rt), options_(std::move(options)), slots_(std::make_unique<Slots>()) {
  check_name(options_.name);
  if (options_.levels.empty())
    throw ConfigError("checkpoint '" + options_.name + "': no level chosen (Level::buddy, Level::node, Level::disk)");
  if (has_level(options_.levels, Level::disk) && options_.dir.empty())
    throw ConfigError("checkpoint '" + options_.name + "': Level::disk needs a directory (CheckpointOptions::dir)");
  if (options_.keep < 1) throw ConfigError("checkpoint '" + options_.name + "': keep must be at least 1");
  std::uint64_t newest = 0;
  agree(rt.comm(), [&] {
    for (Level level : {Level::node, Level::disk}) {
      if (!uses(level)) continue;
      std::error_code ec;
      fs::create_directories(level_dir(level), ec);
      if (!fs::is_directory(level_dir(level)))
        throw ConfigError("checkpoint directory " + level_dir(level) + " cannot be created" +
                          (ec ? ": " + ec.message() : std::string()));
      for (const auto& c : list_candidates(level_dir(level), level)) newest = std::max(newest, c.epoch);
    }
  });
  // Epochs continue from the newest found on any node, so a relaunched job
  // never reuses the name of a checkpoint that is still on some disk.
  epoch_ = all_reduce<std::uint64_t>(rt.comm(), newest, MPI_MAX);
  if (has_level(options_.levels, Level::buddy) && rt.node().count > 1)
    copy_comm_ = std::make_unique<CopyComm>(rt.comm());
  FaultInjection::heartbeat(rt.rank());  // alive for a supervisor watching heartbeats
}

bool Checkpoint::uses(Level level) const {
  if (directory_level(level) == Level::node) return options_.levels.has(Level::node) || options_.levels.has(Level::buddy);
  return options_.levels.has(level);
}

std::string Checkpoint::level_dir(Level level) const {
  if (directory_level(level) == Level::node)
    return (options_.node_dir.empty() ? default_shared_dir() : options_.node_dir) + "/" + options_.name + ".ckpt";
  if (level == Level::disk) return options_.dir + "/" + options_.name + ".ckpt";
  throw RangeError("checkpoint level " + std::to_string(level_number(level)) +
                   ": levels 1 and 2 (node) and 3 (disk) have directories");
}

LatestCheckpoint Checkpoint::latest() {
  finish_drain();
  Runtime& rt = *rt_;
  MPI_Comm comm = rt.comm();
  LatestCheckpoint out;
  std::vector<Candidate> candidates;
  std::string listed;
  if (rt.rank() == 0) {
    const Level node_level = options_.levels.has(Level::buddy) ? Level::buddy : Level::node;
    for (Level level : {Level::node, Level::disk})
      if (uses(level))
        for (auto& c : list_candidates(level_dir(level), level == Level::node ? node_level : level))
          candidates.push_back(c);
    std::sort(candidates.begin(), candidates.end(), [](const Candidate& a, const Candidate& b) {
      return a.epoch != b.epoch ? a.epoch > b.epoch : a.level < b.level;
    });
    json j = json::array();
    for (const auto& c : candidates) j.push_back({level_number(c.level), c.path, c.step, c.epoch});
    listed = j.dump();
  }
  listed = broadcast(comm, listed, 0);
  if (rt.rank() != 0)
    for (const auto& e : json::parse(listed))
      candidates.push_back({static_cast<Level>(e[0].get<int>()), e[1].get<std::string>(), e[2].get<std::uint64_t>(), e[3].get<std::uint64_t>()});
  for (const auto& c : candidates) {
    std::string problem, text;
    if (rt.rank() == 0) text = read_manifest(c, options_.name, problem);
    problem = broadcast(comm, problem, 0);
    if (problem.empty()) {
      text = broadcast(comm, text, 0);
      std::string mine;
      try {
        Manifest m = parse_manifest(text, options_.name);
        if (c.level != Level::disk) mine = complete_on_every_node(rt, m, c.path);
        for (int r = rt.rank(); r < m.ranks && mine.empty(); r += rt.size()) mine = check_data_file(m, r, c.path);
        // The node directory holds levels 1 and 2 alike (a run may switch).
        if (mine.empty() && rt.rank() == 0 && (m.level == Level::disk) != (c.level == Level::disk))
          mine = "its manifest is for level " + std::to_string(level_number(m.level));
      } catch (const Error& e) {
        mine = e.what();
      }
      problem = first_problem(comm, mine);
    }
    if (problem.empty()) {
      Manifest m = parse_manifest(text, options_.name);
      out.info = CheckpointInfo{m.level, c.path, c.step, c.epoch, m.ranks};
      if (rt.rank() == 0) FaultInjection::note_resume(m.step, level_number(m.level), c.path);
      return out;
    }
    out.skipped.push_back(describe(c) + " skipped: " + problem);
  }
  return out;
}

CheckpointReader Checkpoint::restore(const CheckpointInfo& info) {
  FaultInjection::at_point(rt_->rank(), FaultPoint::restart, info.step);  // a kill while restarting
  std::string text, problem;
  if (rt_->rank() == 0) {
    try {
      text = read_small_regular_file(info.path + "/" + kManifest, "checkpoint manifest");
    } catch (const Error& e) {
      problem = e.what();
    }
  }
  problem = broadcast(rt_->comm(), problem, 0);
  if (!problem.empty()) throw FormatError("cannot restore checkpoint " + info.path + ": " + problem);
  text = broadcast(rt_->comm(), text, 0);
  Manifest m;
  try {
    m = parse_manifest(text, options_.name);
  } catch (const Error& e) {
    throw_error(e.category(), "cannot restore checkpoint " + info.path + ": " + e.what());
  }
  CheckpointInfo full = info;
  full.step = m.step;
  full.epoch = m.epoch;
  full.ranks = m.ranks;
  std::vector<CheckpointReader::Piece> pieces;
  for (const auto& p : m.pieces)
    pieces.push_back({p.name, p.kind, p.type, p.element_size, p.begin, p.count, p.length, p.offset, p.bytes, p.rank});
  return CheckpointReader(*rt_, std::move(full), std::move(pieces));
}

void Checkpoint::remove() {
  try {
    finish_drain();
  } catch (const Error&) {  // every rank alike: what it left is removed below anyway
  }
  slots_->slots.clear();  // the files go: their memory must not stay mapped
  slots_->received.clear();
  barrier(rt_->comm());  // no rank may still be reading what the node leader removes
  agree(rt_->comm(), [&] {
    if (!node_leader(*rt_)) return;
    for (Level level : {Level::node, Level::disk})
      if (uses(level)) remove_tree(level_dir(level));
  });
}

std::vector<CheckpointStatus> Checkpoint::inspect(const std::string& dir, const std::string& name) {
  check_name(name);
  std::vector<CheckpointStatus> out;
  for (const auto& c : list_candidates(dir + "/" + name + ".ckpt", Level::unknown)) {
    CheckpointStatus s;
    s.info = CheckpointInfo{Level::unknown, c.path, c.step, c.epoch, 0};
    std::string text = read_manifest(c, name, s.problem);
    if (s.problem.empty()) {
      Manifest m = parse_manifest(text, name);
      s.info.level = m.level;
      s.info.ranks = m.ranks;
      for (int r = 0; r < m.ranks && s.problem.empty(); ++r) s.problem = check_data_file(m, r, c.path);
    }
    out.push_back(std::move(s));
  }
  std::sort(out.begin(), out.end(), [](const auto& a, const auto& b) { return a.info.epoch > b.info.epoch; });
  return out;
}

std::size_t Checkpoint::remove_all(const std::string& dir, const std::string& name) {
  check_name(name);
  std::string root = dir + "/" + name + ".ckpt";
  std::size_t n = list_candidates(root, Level::unknown).size();
  std::error_code ec;
  fs::remove_all(root, ec);
  if (ec) throw SystemError("cannot remove the checkpoints in " + root, ec.value());
  return n;
}

// ---- CheckpointWriter -------------------------------------------------------

void CheckpointWriter::add_array(const std::string& name, const ElementType& type, std::uint64_t begin,
                                 std::uint64_t count, std::uint64_t length, std::span<const std::byte> bytes) {
  detail::PieceData p;
  p.name = name;
  p.kind = "array";
  p.type = type.name;
  p.element_size = type.size;
  p.begin = begin;
  p.count = count;
  p.length = length;
  p.bytes = bytes;
  add_piece(std::move(p));
}

void CheckpointWriter::add_piece(detail::PieceData p) {
  if (committed_) throw Error("checkpoint step " + std::to_string(step_) + ": add('" + p.name + "') after commit()");
  if (p.name.empty() || p.name.size() > 256)
    throw ConfigError("checkpoint piece name '" + p.name + "': 1 to 256 characters");
  for (const auto& q : pieces_)
    if (q.name == p.name) throw ConfigError("checkpoint step " + std::to_string(step_) + ": '" + p.name + "' added twice");
  pieces_.push_back(std::move(p));
}

namespace {

// Removes the checkpoint directory `dir` of a failed commit on every node
// (every rank has left the failed step: agree returned on all of them).
void discard(Runtime& rt, const std::string& dir) {
  agree(rt.comm(), [&] {
    if (node_leader(rt)) remove_tree(dir);
  });
}

// Deletes what `keep` newer complete checkpoints make unnecessary: older
// complete ones and older incomplete ones (leftovers of a killed commit).
// With `spare`, the newest checkpoint deleted becomes the level's spare
// (its data files are taken over by the next commit) instead of being freed.
void prune(const std::string& level_dir, int keep, bool spare) {
  auto all = list_candidates(level_dir, Level::unknown);
  std::sort(all.begin(), all.end(), [](const auto& a, const auto& b) { return a.epoch > b.epoch; });
  int complete = 0;
  std::uint64_t oldest_kept = 0;
  for (const auto& c : all) {
    struct stat st {};
    if (complete < keep && ::lstat((c.path + "/" + kManifest).c_str(), &st) == 0) {
      ++complete;
      oldest_kept = c.epoch;
    }
  }
  if (complete < keep) return;
  const std::string spare_dir = level_dir + "/" + kSpare;
  if (spare) remove_tree(spare_dir);  // what the last commit did not take over (another rank count)
  for (const auto& c : all) {
    if (c.epoch >= oldest_kept) continue;
    if (spare) {
      spare = false;
      // Without its manifest first: a spare is never mistaken for a checkpoint.
      ::unlink((c.path + "/" + kManifest).c_str());
      if (::rename(c.path.c_str(), spare_dir.c_str()) == 0) continue;
    }
    remove_tree(c.path);
  }
}

// The manifest of `body` at `level`, written by one rank per node.
void write_manifest_file(Runtime& rt, const std::string& body_text, Level level, const std::string& dir) {
  if (!node_leader(rt)) return;
  json body = json::parse(body_text);
  body["level"] = level_number(level);
  std::string t = manifest_text(body);
  write_file_atomically(dir + "/" + kManifest, std::as_bytes(std::span<const char>(t)), level == Level::disk);
}

void copy_file_durably(const std::string& from, const std::string& to, std::uint64_t bytes) {
  FileDescriptor in(::open(from.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW));
  if (!in) throw SystemError("cannot open " + from + " to copy it to " + to, errno);
  DurableFile out(to, bytes, true);
  std::vector<std::byte> buf;
  for (std::uint64_t at = 0; at < bytes;) {
    std::size_t n = static_cast<std::size_t>(std::min<std::uint64_t>(bytes - at, 8u << 20));
    buf.resize(n);
    read_exactly(in.get(), at, buf, from);
    out.write_at(at, buf);
    at += n;
  }
  out.commit();
}

// This rank's file `file` of the checkpoint directory `dir`, filled under a
// temporary name and renamed into place by commit(): the level's spare of
// the same name when there is one no larger than needed (its pages exist
// already), else a new file; either way `bytes` are reserved, so a full file
// system is an error here, never a SIGBUS later.
std::unique_ptr<DurableFile> file_to_fill(const std::string& level_dir, const std::string& dir, const std::string& file,
                                          std::uint64_t bytes) {
  return std::make_unique<DurableFile>(dir + "/" + file, bytes, false, level_dir + "/" + kSpare + "/" + file);
}

// A writable mapping of `file`: this process's mapping of it when it still
// has one (a spare it wrote or received before: no page to fault in), else
// a new one with every page placed in one call instead of a fault per page
// (received bytes fault 3x slower, measured, than a populated mapping).
MappedFile map_for_writing(std::vector<MappedFile>& all, const DurableFile& file, std::uint64_t bytes) {
  struct stat st {};
  if (::fstat(file.fd(), &st) != 0) throw SystemError("cannot stat " + file.temporary_path(), errno);
  auto it = std::find_if(all.begin(), all.end(), [&](const MappedFile& s) {
    return s.dev == st.st_dev && s.ino == st.st_ino && s.map.size() == bytes;
  });
  MappedFile slot;
  if (it != all.end()) {
    slot = std::move(*it);
    all.erase(it);
    return slot;
  }
  slot.dev = st.st_dev;
  slot.ino = st.st_ino;
  slot.map = Mapping::file(file.fd(), static_cast<std::size_t>(bytes), true, file.temporary_path());
  ::madvise(slot.map.data(), slot.map.size(), MADV_POPULATE_WRITE);
  return slot;
}

// This rank's node-level data file: the header and the pieces copied into a
// mapping of the file, each piece's CRC32C computed on the way (`mine`).
// The file is the spare left by the last pruned checkpoint when there is
// one (its pages exist, and are still mapped when this process wrote it).
// A kill leaves no partial file under the real name. Returns the file's
// bytes, mapped until `mapped_files` newer files were written.
std::span<const std::byte> write_node_file(std::vector<MappedFile>& all, std::size_t mapped_files,
                                           const std::string& level_dir, const std::string& dir,
                                           const std::string& file, const DataHeader& h,
                                           const std::vector<detail::PieceData>& pieces,
                                           std::vector<PieceRecord>& mine, std::uint64_t bytes) {
  auto out = file_to_fill(level_dir, dir, file, bytes);
  const std::uint64_t had = out->adopted_bytes();
  MappedFile slot = map_for_writing(all, *out, bytes);
  std::byte* base = slot.map.data();
  std::memcpy(base, &h, sizeof h);
  // Into a reused spare, the copy pauses once halfway for an injected kill
  // (FaultPoint::spare): a kill there leaves the file half new, half old.
  const std::uint64_t half = kHeaderBytes + (bytes - kHeaderBytes) / 2;
  bool paused = had == 0;
  auto pause = [&] {
    paused = true;
    FaultInjection::at_point(static_cast<int>(h.rank), FaultPoint::spare, h.step);
  };
  for (std::size_t k = 0; k < pieces.size(); ++k) {
    const std::uint64_t at = mine[k].offset;
    if (pieces[k].fill) {  // serialized in place, then checksummed where it lies
      pieces[k].fill(base + at);
      mine[k].crc = crc32c(std::span<const std::byte>(base + at, pieces[k].fill_bytes));
      if (!paused && half < at + pieces[k].fill_bytes) pause();
      continue;
    }
    std::span<const std::byte> from = pieces[k].bytes;
    std::size_t n = from.size();
    if (!paused && half < at + n) n = static_cast<std::size_t>(half - std::min(half, at));
    std::uint32_t crc = crc32c_copy(base + at, from.first(n));
    if (n < from.size()) {
      pause();
      crc = crc32c_copy(base + at + n, from.subspan(n), crc);
    }
    mine[k].crc = crc;
  }
  if (!paused) pause();
  out->commit();
  // The files of the `mapped_files` newest checkpoints stay mapped: with
  // keep K, the spare a commit takes over is the file written K + 1 commits
  // before. Older mappings go, so a deleted file's memory is not held.
  const std::span<const std::byte> written(slot.map.data(), slot.map.size());
  all.push_back(std::move(slot));
  while (all.size() > mapped_files) all.erase(all.begin());
  return written;
}

// Level 1's transfers are cut into requests of this many bytes: each
// completed one is progress, so a long transfer keeps polling instead of
// backing off into sleeps, which would throttle a TCP link to what one
// fragment per sleep carries (0.2 GB/s here before).
constexpr std::uint64_t kCopyChunk = std::uint64_t{4} << 20;
constexpr int kCopyTag = 1;

}  // namespace

// Level 1: each rank's file also goes to its buddy, which receives it
// straight into a file of its own node's checkpoint directory (the spare's
// pages when there is one): no copy but the transfer's own. So every node
// holds its ranks' files and their buddies', and the ranks of one node
// surviving the loss of any other node find a complete checkpoint. On one
// node the copy would land in the same directory: there level 1 is level 2.
// In flight from commit() to finish_drain() (at once without async_drain).
struct Checkpoint::BuddyCopies {
  struct Incoming {
    std::unique_ptr<DurableFile> file;
    MappedFile map;  // of file, kept mapped after for the next commits that take it over as a spare
  };
  std::string dir;   // the checkpoint's directory on this node
  std::string body;  // its manifest, committed at level 1 once every copy is in
  std::vector<Incoming> incoming;
  std::vector<int> senders;  // incoming[i] comes from rank senders[i]
  std::vector<MPI_Request> requests;
  std::vector<int> index;  // MPI_Testsome's output, reused by every test()

  BuddyCopies() = default;
  BuddyCopies(const BuddyCopies&) = delete;
  BuddyCopies& operator=(const BuddyCopies&) = delete;
  // The buffers must outlive their requests: an abandoned copy (an error
  // elsewhere on this rank) is still completed, as the peer completes its
  // side; its temporary files are then unlinked.
  ~BuddyCopies() {
    try {
      Backoff backoff;
      while (!test()) backoff.idle();
    } catch (...) {  // an MPI error now: the job is failing anyway
    }
  }

  // The files this rank receives at level 1: from every rank whose buddy it
  // is, each reserved now (a full /dev/shm fails the commit here, not the copy).
  static std::unique_ptr<BuddyCopies> reserve(Runtime& rt, std::vector<MappedFile>& mapped,
                                                const std::string& level_dir, const std::string& dir,
                                                const std::string& body) {
    auto c = std::make_unique<BuddyCopies>();
    c->dir = dir;
    c->body = body;
    const auto partner = buddy_ranks(rt.node());
    const json files = json::parse(body).at("files");
    for (std::size_t r = 0; r < partner.size(); ++r) {
      if (partner[r] != rt.rank() || static_cast<int>(r) == rt.rank()) continue;
      const std::uint64_t bytes = files.at(r).at("bytes").get<std::uint64_t>();
      Incoming in;
      in.file = file_to_fill(level_dir, dir, data_file_name(static_cast<int>(r)), bytes);
      in.map = map_for_writing(mapped, *in.file, bytes);
      c->incoming.push_back(std::move(in));
      c->senders.push_back(static_cast<int>(r));
    }
    return c;
  }
  // Posts the receives of the files of the ranks whose buddy this rank is
  // (reserved already) and the send of this rank's file to its buddy.
  void post(MPI_Comm comm, std::span<const std::byte> mine, int buddy) {
    auto chunks = [&](std::uint64_t bytes, auto&& each) {
      for (std::uint64_t at = 0; at < bytes; at += kCopyChunk) {
        requests.push_back(MPI_REQUEST_NULL);
        each(at, static_cast<int>(std::min(kCopyChunk, bytes - at)), requests.back());
      }
    };
    for (std::size_t i = 0; i < senders.size(); ++i)
      chunks(incoming[i].map.map.size(), [&](std::uint64_t at, int n, MPI_Request& r) {
        TESSERA_MPI(MPI_Irecv(incoming[i].map.map.data() + at, n, MPI_BYTE, senders[i], kCopyTag, comm, &r));
      });
    if (buddy >= 0)
      chunks(mine.size(), [&](std::uint64_t at, int n, MPI_Request& r) {
        TESSERA_MPI(MPI_Isend(mine.data() + at, n, MPI_BYTE, buddy, kCopyTag, comm, &r));
      });
  }
  // One test of every request: true when all are complete.
  bool test(bool* progressed = nullptr) {
    if (requests.empty()) return true;
    index.resize(requests.size());  // kept: a waiting rank polls this often
    int count = 0;
    TESSERA_MPI(MPI_Testsome(static_cast<int>(requests.size()), requests.data(), &count, index.data(),
                             MPI_STATUSES_IGNORE));
    if (progressed) *progressed = count > 0;
    if (count == MPI_UNDEFINED || std::all_of(requests.begin(), requests.end(),
                                              [](MPI_Request r) { return r == MPI_REQUEST_NULL; })) {
      requests.clear();
      return true;
    }
    return false;
  }
  // Waits for every request, serving the Runtime's exchanges meanwhile.
  void complete(ProgressEngine& engine) {
    Backoff backoff;
    unsigned idle = 0;
    bool progressed = false;
    while (!test(&progressed)) {
      if (progressed)
        backoff.reset();
      else
        engine.serve_once(backoff, idle);
    }
  }
  // Renames the received files into place; their mappings join `mapped`,
  // which keeps the newest `limit`.
  void commit_files(std::vector<MappedFile>& mapped, std::size_t limit) {
    for (auto& in : incoming) {
      in.file->commit();
      mapped.push_back(std::move(in.map));
    }
    while (mapped.size() > limit) mapped.erase(mapped.begin());
  }
};

namespace {

}  // namespace

std::vector<int> buddy_ranks(const NodeGroup& node) {
  const std::size_t ranks = node.node_of_rank.size();
  std::vector<std::vector<int>> on(static_cast<std::size_t>(node.count));
  for (std::size_t r = 0; r < ranks; ++r) on.at(static_cast<std::size_t>(node.node_of_rank[r])).push_back(static_cast<int>(r));
  std::vector<int> buddy(ranks);
  for (std::size_t n = 0; n < on.size(); ++n)
    for (std::size_t i = 0; i < on[n].size(); ++i) {
      if (on.size() < 2) {
        buddy[static_cast<std::size_t>(on[n][i])] = on[n][(i + 1) % on[n].size()];
        continue;
      }
      const auto& next = on[(n + 1) % on.size()];
      buddy[static_cast<std::size_t>(on[n][i])] = next[i % next.size()];
    }
  return buddy;
}

Checkpoint::~Checkpoint() {
  copies_.reset();  // completes the transfers: their buffers go with it
  if (drain_ && drain_->thread.joinable()) drain_->thread.join();
}

void Checkpoint::finish_copies() {
  if (!copies_) return;
  std::unique_ptr<BuddyCopies> c = std::move(copies_);
  Runtime& rt = *rt_;
  // On failure the level-2 manifest stays (every node's own files are in)
  // and so do the older checkpoints: the next commit prunes them.
  agree(rt.comm(), [&] {
    c->complete(rt.progress());
    c->commit_files(slots_->received, mapped_files() * c->incoming.size());
  });
  agree(rt.comm(), [&] { write_manifest_file(rt, c->body, Level::buddy, c->dir); });
  agree(rt.comm(), [&] {
    if (node_leader(rt)) prune(level_dir(Level::node), options_.keep, true);
  });

}

bool Checkpoint::poll() {
  return (!copies_ || copies_->test()) && drain_copied();
}

void Checkpoint::finish_drain() {
  finish_copies();
  if (!drain_) return;
  std::unique_ptr<Drain> d = std::move(drain_);
  if (d->thread.joinable()) d->thread.join();
  Runtime& rt = *rt_;
  try {
    agree(rt.comm(), [&] {
      if (d->failure) std::rethrow_exception(d->failure);
    });
    agree(rt.comm(), [&] { write_manifest_file(rt, d->body, Level::disk, d->dir); });
  } catch (...) {
    discard(rt, d->dir);
    throw;
  }
  agree(rt.comm(), [&] {
    if (node_leader(rt)) prune(level_dir(Level::disk), options_.keep, false);
  });
}

void CheckpointWriter::commit() {
  Checkpoint& ck = *ck_;
  Runtime& rt = ck.runtime();
  MPI_Comm comm = rt.comm();
  if (committed_) throw Error("checkpoint step " + std::to_string(step_) + ": commit() called twice");
  committed_ = true;
  ck.finish_drain();
  const std::uint64_t epoch = ck.epoch_ + 1;

  // This rank's pieces: their places in its file (the checksums are taken
  // while the bytes are copied).
  std::vector<PieceRecord> mine;
  std::uint64_t at = kHeaderBytes;
  for (const auto& p : pieces_) {
    mine.push_back({p.name, p.kind, p.type, p.element_size, p.begin, p.count, p.length, at, p.size(), rt.rank(), 0});
    at += p.size();
  }
  const std::uint64_t file_bytes = at;
  DataHeader h;
  h.rank = static_cast<std::uint32_t>(rt.rank());
  h.step = step_;
  h.epoch = epoch;
  h.pieces = pieces_.size();
  h.payload = file_bytes - kHeaderBytes;
  h.ranks = static_cast<std::uint32_t>(rt.size());
  h.crc = header_crc(h);

  const std::string sub = checkpoint_dir_name(step_, epoch);
  const std::string file = data_file_name(rt.rank());
  const bool buddy = ck.options().levels.has(Level::buddy);
  const bool one_node = rt.node().count < 2;
  // The first level is written from memory; the disk level after the node
  // level is a copy of the committed node files (what an asynchronous drain
  // does once the application has moved on).
  const Level first_dir_level = ck.uses(Level::node) ? Level::node : Level::disk;
  const Level first_level = first_dir_level == Level::node && buddy ? Level::buddy : first_dir_level;
  const std::string first_dir = ck.level_dir(first_dir_level) + "/" + sub;

  // Level 1 on several nodes: the manifest is committed at level 2 first,
  // and at level 1 once every buddy copy is in (finish_copies).
  const bool copies = first_level == Level::buddy && !one_node;
  const Level manifest_level = copies ? Level::node : first_level;

  // 1. Every rank writes its file, with no collective before: the stall is
  // one copy of its bytes (plus the few collectives below).
  std::span<const std::byte> my_file;  // the node file, mapped
  std::exception_ptr failure;
  try {
    std::error_code ec;
    fs::create_directories(first_dir, ec);
    if (!fs::is_directory(first_dir)) throw SystemError("cannot create checkpoint directory " + first_dir, ec.value());
    if (first_dir_level == Level::node) {
      my_file = write_node_file(ck.slots_->slots, ck.mapped_files(), ck.level_dir(Level::node), first_dir,
                      file, h, pieces_, mine, file_bytes);
    } else {
      DurableFile f(first_dir + "/" + file, file_bytes, true);
      f.write_at(0, std::as_bytes(std::span<const DataHeader>(&h, 1)));
      for (std::size_t k = 0; k < pieces_.size(); ++k) {
        std::vector<std::byte> filled;  // a piece written by its fill: serialized here first
        std::span<const std::byte> bytes = pieces_[k].bytes;
        if (pieces_[k].fill) {
          filled.resize(pieces_[k].fill_bytes);
          pieces_[k].fill(filled.data());
          bytes = filled;
        }
        mine[k].crc = crc32c(bytes);
        f.write_at(mine[k].offset, bytes);
      }
      f.commit();
    }
  } catch (...) {
    failure = std::current_exception();
  }
  // A kill here leaves data files without a manifest: latest() skips them.
  if (!failure) FaultInjection::at_point(rt.rank(), FaultPoint::checkpoint, step_);

  std::string body_text;
  std::unique_ptr<Checkpoint::BuddyCopies> buddy_copies;
  try {
    // 2. One gather of every rank's outcome and pieces. Rank 0 places arrays
    // given by span, builds the manifest and checks it as a reader will (a
    // mismatch between ranks fails every rank here); on one node it also
    // commits it and prunes. One broadcast tells every rank how it went.
    json report;
    if (failure) {
      report = {{"ok", false}, {"category", static_cast<int>(ErrorCategory::generic)}, {"message", "unknown error"}};
      try {
        std::rethrow_exception(failure);
      } catch (const Error& e) {
        report["category"] = static_cast<int>(e.category());
        report["message"] = e.what();
      } catch (const std::exception& e) {
        report["message"] = e.what();
      } catch (...) {
      }
    } else {
      json records = json::array();
      for (const auto& r : mine) records.push_back(piece_json(r));
      report = {{"ok", true}, {"bytes", file_bytes}, {"pieces", records}};
    }
    std::string text = report.dump() + "\n";  // one line per rank: dump() writes no newline
    auto gathered = gather_to_root<char>(comm, std::span<const char>(text));
    std::string result;
    if (rt.rank() == 0) {
      json outcome;
      try {
        std::vector<json> reports;
        std::size_t pos = 0;
        for (int r = 0; r < rt.size(); ++r) {
          std::size_t end = std::find(gathered.begin() + static_cast<std::ptrdiff_t>(pos), gathered.end(), '\n') -
                            gathered.begin();
          reports.push_back(json::parse(std::string(gathered.data() + pos, end - pos)));
          pos = end + 1;
        }
        for (int r = 0; r < rt.size() && outcome.is_null(); ++r) {
          const json& j = reports[static_cast<std::size_t>(r)];
          if (!j.at("ok").get<bool>()) outcome = {{"rank", r}, {"category", j.at("category")}, {"message", j.at("message")}};
        }
        if (outcome.is_null()) {
          std::vector<PieceRecord> all;
          for (const auto& j : reports)
            for (const auto& p : j.at("pieces")) all.push_back(piece_from(p));
          std::map<std::string, std::uint64_t> total;
          for (const auto& p : all)
            if (p.kind == "array" && p.begin == detail::kUnplaced) total[p.name] += p.count;
          std::map<std::string, std::uint64_t> next;
          for (auto& p : all)
            if (p.kind == "array" && p.begin == detail::kUnplaced) {
              p.begin = next[p.name];
              next[p.name] += p.count;
              p.length = total[p.name];
            }
          json body{{"format", kFormat}, {"version", kVersion}, {"program", ck.options().name}, {"step", step_},
                    {"epoch", epoch}, {"ranks", rt.size()}, {"level", level_number(manifest_level)}, {"job", rt.job_id()},
                    {"created", utc_now_iso8601()}};
          json files = json::array();
          for (int r = 0; r < rt.size(); ++r)
            files.push_back({{"rank", r}, {"file", data_file_name(r)},
                             {"bytes", reports[static_cast<std::size_t>(r)].at("bytes").get<std::uint64_t>()}});
          body["files"] = files;
          json pieces = json::array();
          for (const auto& p : all) pieces.push_back(piece_json(p));
          body["pieces"] = pieces;
          try {
            parse_manifest(manifest_text(body), ck.options().name);
          } catch (const Error& e) {
            throw MismatchError("checkpoint step " + std::to_string(step_) +
                                ": the ranks' pieces do not fit together: " + e.what() +
                                " (every rank must add the same names, in the same order, with the same types)");
          }
          std::string b = body.dump();
          write_manifest_file(rt, b, manifest_level, first_dir);  // rank 0 leads its node
          if (one_node) prune(ck.level_dir(first_dir_level), ck.options().keep, first_dir_level == Level::node);
          outcome = {{"body", b}};
        }
      } catch (const Error& e) {
        outcome = {{"rank", 0}, {"category", static_cast<int>(e.category())}, {"message", e.what()}};
      } catch (const std::exception& e) {
        outcome = {{"rank", 0}, {"category", static_cast<int>(ErrorCategory::format)}, {"message", e.what()}};
      }
      result = outcome.dump();
    }
    json outcome = json::parse(broadcast(comm, result, 0));
    if (!outcome.contains("body")) {
      const int r = outcome.at("rank").get<int>();
      if (r == rt.rank() && failure) std::rethrow_exception(failure);
      throw_error(static_cast<ErrorCategory>(outcome.at("category").get<int>()),
                  (r == rt.rank() ? std::string() : "on rank " + std::to_string(r) + ": ") +
                      outcome.at("message").get<std::string>());
    }
    body_text = outcome.at("body").get<std::string>();
    if (copies)
      agree(comm, [&] {
        buddy_copies = Checkpoint::BuddyCopies::reserve(rt, ck.slots_->received, ck.level_dir(Level::node), first_dir, body_text);
      });
    if (!one_node) {  // the other nodes' manifests, then every node prunes
      agree(comm, [&] {
        if (node_leader(rt) && rt.rank() != 0) write_manifest_file(rt, body_text, manifest_level, first_dir);
      });
      // With buddy copies in flight, the older checkpoints stay until they
      // are in: the newest may not survive the loss of a node before then.
      if (!copies)
        agree(comm, [&] {
          if (node_leader(rt)) prune(ck.level_dir(first_dir_level), ck.options().keep, first_dir_level == Level::node);
        });
    }
  } catch (...) {
    buddy_copies.reset();
    discard(rt, first_dir);
    throw;
  }
  ck.epoch_ = epoch;
  if (copies) {
    buddy_copies->post(ck.copy_comm_->comm, my_file, buddy_ranks(rt.node())[static_cast<std::size_t>(rt.rank())]);
    ck.copies_ = std::move(buddy_copies);
    if (!ck.options().async_drain) ck.finish_copies();
  }
  if (first_dir_level == Level::disk || !ck.uses(Level::disk)) return;

  // 3. The disk level, copied from the committed node files.
  const std::string written_from = first_dir;
  const std::string dir = ck.level_dir(Level::disk) + "/" + sub;
  if (ck.options().async_drain) {
    // The copy touches files only (no MPI, no application memory), so it
    // runs beside the application until finish_drain(), directory included:
    // the commit adds no collective to level 2's (a failure to create it is
    // the drain's, reported by finish_drain() on every rank).
    auto d = std::make_unique<Checkpoint::Drain>();
    d->dir = dir;
    d->body = body_text;
    Checkpoint::Drain* raw = d.get();
    std::string from = written_from + "/" + file, to = dir + "/" + file;
    d->thread = std::thread([raw, dir, from, to, file_bytes] {
      try {
        std::error_code ec;
        fs::create_directories(dir, ec);
        if (!fs::is_directory(dir)) throw SystemError("cannot create checkpoint directory " + dir, ec.value());
        copy_file_durably(from, to, file_bytes);
      } catch (...) {
        raw->failure = std::current_exception();
      }
      raw->copied = true;
    });
    ck.drain_ = std::move(d);
    return;
  }
  try {
    agree(comm, [&] {
      std::error_code ec;
      fs::create_directories(dir, ec);
      if (!fs::is_directory(dir)) throw SystemError("cannot create checkpoint directory " + dir, ec.value());
      copy_file_durably(written_from + "/" + file, dir + "/" + file, file_bytes);
    });
    agree(comm, [&] { write_manifest_file(rt, body_text, Level::disk, dir); });
  } catch (...) {
    discard(rt, dir);
    throw;
  }
  agree(comm, [&] {
    if (node_leader(rt)) prune(ck.level_dir(Level::disk), ck.options().keep, false);
  });
}

// ---- CheckpointReader -------------------------------------------------------

std::vector<std::string> CheckpointReader::names() const {
  std::set<std::string> s;
  for (const auto& p : pieces_) s.insert(p.name);
  return {s.begin(), s.end()};
}

std::vector<const CheckpointReader::Piece*> CheckpointReader::pieces_of(const std::string& name) const {
  std::vector<const Piece*> out;
  for (const auto& p : pieces_)
    if (p.name == name) out.push_back(&p);
  if (out.empty()) {
    std::string have;
    for (const auto& n : names()) have += (have.empty() ? "" : ", ") + n;
    throw RangeError("checkpoint " + info_.path + " has no '" + name + "' (it has: " + have + ")");
  }
  return out;
}

std::uint64_t CheckpointReader::length(const std::string& name) const { return pieces_of(name)[0]->length; }

void CheckpointReader::check_length(const std::string& name, std::uint64_t length) const {
  if (this->length(name) != length)
    throw MismatchError("checkpoint " + info_.path + ": '" + name + "' has " + std::to_string(this->length(name)) +
                        " elements, the array to fill " + std::to_string(length));
}

std::string CheckpointReader::data_path(int rank) const { return info_.path + "/" + data_file_name(rank); }

void CheckpointReader::read_range(const std::string& name, const ElementType& type, std::uint64_t begin,
                                  std::uint64_t count, std::span<std::byte> out) const {
  auto ps = pieces_of(name);
  const Piece& first = *ps[0];
  if (first.kind != "array")
    throw MismatchError("checkpoint " + info_.path + ": '" + name + "' is a chunk array, not an array");
  if (first.type != type.name || first.element_size != type.size)
    throw MismatchError("checkpoint " + info_.path + ": '" + name + "' holds " + first.type + " (" +
                        std::to_string(first.element_size) + " bytes), not " + type.name + " (" +
                        std::to_string(type.size) + " bytes)");
  if (begin > first.length || count > first.length - begin)
    throw RangeError("checkpoint " + info_.path + ": elements [" + std::to_string(begin) + ", " +
                     std::to_string(begin + count) + ") of '" + name + "', which has " + std::to_string(first.length));
  const std::uint64_t end = begin + count, es = first.element_size;
  for (const Piece* p : ps) {
    std::uint64_t lo = std::max(begin, p->begin), hi = std::min(end, p->begin + p->count);
    if (lo >= hi) continue;
    std::string path = data_path(p->rank);
    FileDescriptor fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW));
    if (!fd) throw SystemError("cannot open checkpoint data " + path, errno);
    struct stat st {};
    const std::uint64_t from = p->offset + (lo - p->begin) * es, n = (hi - lo) * es;
    if (::fstat(fd.get(), &st) != 0 || static_cast<std::uint64_t>(st.st_size) < from + n)
      throw FormatError("checkpoint data " + path + " is truncated: it must hold " + std::to_string(from + n) + " bytes");
    // Copied from a mapping: the page cache's pages are read in place (a
    // read() would copy them page by page through the kernel).
    Mapping map = Mapping::file(fd.get(), static_cast<std::size_t>(st.st_size), false, path);
    std::memcpy(out.data() + (lo - begin) * es, map.data() + from, n);
  }
}

std::vector<std::pair<std::uint64_t, std::vector<std::byte>>> CheckpointReader::chunk_bytes(
    const std::string& name, const std::string& type, std::uint64_t size) const {
  auto ps = pieces_of(name);
  if (ps[0]->kind != "chunks")
    throw MismatchError("checkpoint " + info_.path + ": '" + name + "' is an array, not a chunk array");
  if (ps[0]->type != type || ps[0]->element_size != size)
    throw MismatchError("checkpoint " + info_.path + ": '" + name + "' holds chunks of type " + ps[0]->type + " (" +
                        std::to_string(ps[0]->element_size) + " bytes), not " + type + " (" + std::to_string(size) +
                        " bytes)");
  auto placement = chunks::block_placement(static_cast<std::size_t>(ps[0]->length), rt_->size());
  auto lo = static_cast<std::uint64_t>(std::find(placement.begin(), placement.end(), rt_->rank()) - placement.begin());
  auto hi = lo + chunks::chunks_per_rank(placement, rt_->size())[static_cast<std::size_t>(rt_->rank())];
  std::vector<std::pair<std::uint64_t, std::vector<std::byte>>> out;
  for (const Piece* p : ps) {
    if (p->count == 0) continue;
    std::string path = data_path(p->rank);
    FileDescriptor fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW));
    if (!fd) throw SystemError("cannot open checkpoint data " + path, errno);
    std::vector<std::uint64_t> index(p->count * 3);
    read_exactly(fd.get(), p->offset, std::as_writable_bytes(std::span<std::uint64_t>(index)), path);
    for (std::uint64_t k = 0; k < p->count; ++k) {
      std::uint64_t id = index[3 * k], off = index[3 * k + 1], n = index[3 * k + 2];
      if (id < lo || id >= hi) continue;
      if (off > p->bytes || n > p->bytes - off) throw FormatError("checkpoint " + path + ": a damaged chunk index");
      std::vector<std::byte> bytes(n);
      read_exactly(fd.get(), p->offset + off, bytes, path);
      out.emplace_back(id, std::move(bytes));
    }
  }
  std::sort(out.begin(), out.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  for (std::size_t k = 0; k < out.size(); ++k)
    if (out[k].first != lo + k)
      throw FormatError("checkpoint " + info_.path + ": chunk array '" + name + "' lacks chunk " + std::to_string(lo + k) +
                        " or holds one twice");
  if (out.size() != hi - lo)
    throw FormatError("checkpoint " + info_.path + ": chunk array '" + name + "' lacks chunks " +
                      std::to_string(lo + out.size()) + ".." + std::to_string(hi - 1));
  return out;
}

}  // namespace tessera::resilience
