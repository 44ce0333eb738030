// The manifest: format, checks, and the commit steps levels share (manifest.hpp).
#include "manifest.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <map>

#include "tessera/runtime/collective.hpp"
#include "tessera/runtime/error.hpp"
#include "tessera/storage/durable_file.hpp"
#include "tessera/storage/mapping.hpp"
#include "tessera/storage/metadata.hpp"

namespace tessera::resilience::store {

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

std::string manifest_text(const json& body) {
  std::string compact = body.dump();
  json doc{{"checksum", "crc32c:" + hex32(crc32c(std::as_bytes(std::span<const char>(compact))))}, {"manifest", body}};
  return doc.dump(1) + "\n";
}

namespace {

// The manifest's fields, its checksum and text checked (not yet their agreement).
Manifest read_fields(const std::string& text, const std::string& program) {
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
  return m;
}

// One file per rank, named as data_file_name names it.
void check_files(const Manifest& m) {
  if (m.ranks < 1 || static_cast<std::size_t>(m.ranks) != m.files.size())
    throw FormatError("the manifest names " + std::to_string(m.files.size()) + " files for " + std::to_string(m.ranks) +
                      " ranks");
  for (int r = 0; r < m.ranks; ++r) {
    const auto& f = m.files[static_cast<std::size_t>(r)];
    if (f.rank != r || f.file != data_file_name(r))
      throw FormatError("the manifest's file " + std::to_string(r) + " is '" + f.file + "' of rank " +
                        std::to_string(f.rank));
  }
}

// Per rank the pieces lie back to back after the header and fill the
// file; returns every name's pieces, in rank order.
std::map<std::string, std::vector<const PieceRecord*>> check_layout(const Manifest& m) {
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
  return by_name;
}

// The pieces of `name` agree between the ranks and make its whole array
// (or chunk array).
void check_pieces_of(const std::string& name, const std::vector<const PieceRecord*>& ps, int ranks) {
  if (ps.size() != static_cast<std::size_t>(ranks))
    throw FormatError("piece '" + name + "' appears " + std::to_string(ps.size()) + " times for " +
                      std::to_string(ranks) + " ranks");
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

}  // namespace

Manifest parse_manifest(const std::string& text, const std::string& program) {
  Manifest m = read_fields(text, program);
  check_files(m);
  for (const auto& [name, ps] : check_layout(m)) check_pieces_of(name, ps, m.ranks);
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


std::string describe(const Candidate& c) {
  return "checkpoint step " + std::to_string(c.step) + " (epoch " + std::to_string(c.epoch) + ", level " +
         std::to_string(level_number(c.level)) + ", " + c.path + ")";
}

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


}  // namespace tessera::resilience::store
