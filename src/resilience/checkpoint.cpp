// The checkpoint store: Checkpoint (levels, latest, restore, remove) and
// the commit protocol; the format is store/'s, the levels levels/'s (the
// header explains the layout; docs/checkpoint.md the guarantees).
#include "tessera/resilience/checkpoint.hpp"

#include <sys/stat.h>

#include <algorithm>
#include <filesystem>
#include <map>

#include "levels/level.hpp"
#include "store/manifest.hpp"
#include "tessera/runtime/collective.hpp"
#include "tessera/runtime/error.hpp"
#include "tessera/runtime/fault_injection.hpp"
#include "tessera/runtime/trace.hpp"
#include "tessera/storage/durable_file.hpp"
#include "tessera/storage/metadata.hpp"
#include "tessera/storage/storage.hpp"

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

using namespace store;
namespace fs = std::filesystem;

// ---- LatestCheckpoint -------------------------------------------------------

std::string LatestCheckpoint::message() const {
  std::string out;
  for (const auto& s : skipped) out += (out.empty() ? "" : "\n") + s;
  return out;
}

// ---- Checkpoint -------------------------------------------------------------

Checkpoint::Checkpoint(Runtime& rt, CheckpointOptions options)
    : rt_(&rt), options_(std::move(options)) {
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
  levels_ = levels::make_levels(rt, options_, level_dir(Level::node), level_dir(Level::disk));
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
        if (c.level != Level::disk) mine = levels::complete_on_every_node(rt, m, c.path);
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
  for (auto& l : levels_) l->release();  // the files go: their memory must not stay mapped
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

Checkpoint::~Checkpoint() = default;  // the buddy level completes its transfers, the disk level joins its drain

bool Checkpoint::poll() {
  bool done = true;
  for (auto& l : levels_) done = l->poll() && done;
  return done;
}

bool Checkpoint::draining() const noexcept {
  return std::any_of(levels_.begin(), levels_.end(), [](const auto& l) { return l->pending(); });
}

bool Checkpoint::drain_copied() const noexcept {
  return std::all_of(levels_.begin(), levels_.end(), [](const auto& l) { return l->drained(); });
}

void Checkpoint::finish_drain() {
  for (auto& l : levels_) l->finish(*rt_);  // the buddy copies (level 1), then the disk (3)
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

// This rank's outcome of writing its file, and its pieces: one line of the
// gather that the manifest is built from.
std::string rank_report(std::exception_ptr failure, const std::vector<PieceRecord>& records, std::uint64_t bytes) {
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
    json pieces = json::array();
    for (const auto& r : records) pieces.push_back(piece_json(r));
    report = {{"ok", true}, {"bytes", bytes}, {"pieces", pieces}};
  }
  return report.dump() + "\n";  // one line per rank: dump() writes no newline
}

// Rank 0: the ranks' reports (one line each) as JSON.
std::vector<json> parse_reports(const std::vector<char>& gathered, int ranks) {
  std::vector<json> reports;
  std::size_t pos = 0;
  for (int r = 0; r < ranks; ++r) {
    std::size_t end =
        std::find(gathered.begin() + static_cast<std::ptrdiff_t>(pos), gathered.end(), '\n') - gathered.begin();
    reports.push_back(json::parse(std::string(gathered.data() + pos, end - pos)));
    pos = end + 1;
  }
  return reports;
}

// Rank 0: the manifest body of every rank's pieces, arrays given by span
// placed after the ranks before (checked as a reader will check it).
json manifest_body(const std::vector<json>& reports, const Checkpoint& ck, const Runtime& rt, std::uint64_t step,
                   std::uint64_t epoch, Level level) {
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
  json body{{"format", kFormat}, {"version", kVersion}, {"program", ck.options().name}, {"step", step},
            {"epoch", epoch}, {"ranks", rt.size()}, {"level", level_number(level)}, {"job", rt.job_id()},
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
    throw MismatchError("checkpoint step " + std::to_string(step) + ": the ranks' pieces do not fit together: " +
                        e.what() + " (every rank must add the same names, in the same order, with the same types)");
  }
  return body;
}

// Collective: one gather of every rank's outcome and pieces; rank 0 builds
// the manifest and checks it (a mismatch between ranks fails every rank
// here) and runs `commit_here` with it; one broadcast tells every rank how
// it went. Returns the manifest body, or throws on every rank the first
// failure (this rank's own exception when it is the one).
std::string agree_on_manifest(const Checkpoint& ck, Runtime& rt, std::uint64_t step, std::uint64_t epoch, Level level,
                              std::exception_ptr failure, const std::vector<PieceRecord>& records, std::uint64_t bytes,
                              const std::function<void(const std::string&)>& commit_here) {
  const std::string text = rank_report(failure, records, bytes);
  auto gathered = gather_to_root<char>(rt.comm(), std::span<const char>(text));
  std::string result;
  if (rt.rank() == 0) {
    json outcome;
    try {
      const auto reports = parse_reports(gathered, rt.size());
      for (int r = 0; r < rt.size() && outcome.is_null(); ++r) {
        const json& j = reports[static_cast<std::size_t>(r)];
        if (!j.at("ok").get<bool>()) outcome = {{"rank", r}, {"category", j.at("category")}, {"message", j.at("message")}};
      }
      if (outcome.is_null()) {
        const std::string body = manifest_body(reports, ck, rt, step, epoch, level).dump();
        commit_here(body);
        outcome = {{"body", body}};
      }
    } catch (const Error& e) {
      outcome = {{"rank", 0}, {"category", static_cast<int>(e.category())}, {"message", e.what()}};
    } catch (const std::exception& e) {
      outcome = {{"rank", 0}, {"category", static_cast<int>(ErrorCategory::format)}, {"message", e.what()}};
    }
    result = outcome.dump();
  }
  json outcome = json::parse(broadcast(rt.comm(), result, 0));
  if (!outcome.contains("body")) {
    const int r = outcome.at("rank").get<int>();
    if (r == rt.rank() && failure) std::rethrow_exception(failure);
    throw_error(static_cast<ErrorCategory>(outcome.at("category").get<int>()),
                (r == rt.rank() ? std::string() : "on rank " + std::to_string(r) + ": ") +
                    outcome.at("message").get<std::string>());
  }
  return outcome.at("body").get<std::string>();
}

// This rank's pieces placed in its file (the checksums are taken while the
// bytes are copied).
std::vector<PieceRecord> place_pieces(const std::vector<detail::PieceData>& pieces, int rank) {
  std::vector<PieceRecord> records;
  std::uint64_t at = kHeaderBytes;
  for (const auto& p : pieces) {
    records.push_back({p.name, p.kind, p.type, p.element_size, p.begin, p.count, p.length, at, p.size(), rank, 0});
    at += p.size();
  }
  return records;
}

}  // namespace

// Collective. The levels in order (levels/level.hpp): the first writes
// this rank's file from memory, the ranks agree on the manifest, the first
// level commits it, the later ones copy the committed file.
void CheckpointWriter::commit() {
  Checkpoint& ck = *ck_;
  Runtime& rt = ck.runtime();
  if (committed_) throw Error("checkpoint step " + std::to_string(step_) + ": commit() called twice");
  committed_ = true;
  // The stall the application sees: the first level's write, the agreement,
  // and the copies made before commit() returns.
  trace::Span traced(trace::Category::checkpoint, "checkpoint");
  ck.finish_drain();
  const std::uint64_t epoch = ck.epoch_ + 1;
  std::vector<PieceRecord> records = place_pieces(pieces_, rt.rank());
  const std::uint64_t file_bytes = kHeaderBytes + bytes();
  DataHeader h;
  h.rank = static_cast<std::uint32_t>(rt.rank());
  h.step = step_;
  h.epoch = epoch;
  h.pieces = pieces_.size();
  h.payload = file_bytes - kHeaderBytes;
  h.ranks = static_cast<std::uint32_t>(rt.size());
  h.crc = header_crc(h);
  const levels::NewCheckpoint c{checkpoint_dir_name(step_, epoch), data_file_name(rt.rank()), file_bytes, &h, &pieces_,
                                &records};
  levels::CheckpointLevel& first = *ck.levels_.front();
  const auto later = std::span(ck.levels_).subspan(1);
  if (traced.on()) {
    static const char* const kLevelNames[] = {"unknown", "buddy", "node", "disk"};
    std::string names;
    for (const auto& l : ck.levels_) names += (names.empty() ? "" : "+") + std::string(kLevelNames[level_number(l->level())]);
    traced.arg("step", step_).arg("bytes", file_bytes).arg("level", trace::intern(names));
  }
  const std::string first_dir = first.dir_of(c);

  // 1. Every rank writes its file, with no collective before: the stall is
  // one copy of its bytes (plus the few collectives below).
  std::span<const std::byte> my_file;  // mapped, when the first level keeps it so
  std::exception_ptr failure;
  try {
    std::error_code ec;
    fs::create_directories(first_dir, ec);
    if (!fs::is_directory(first_dir)) throw SystemError("cannot create checkpoint directory " + first_dir, ec.value());
    my_file = first.write(c);
  } catch (...) {
    failure = std::current_exception();
  }
  // A kill here leaves data files without a manifest: latest() skips them.
  if (!failure) FaultInjection::at_point(rt.rank(), FaultPoint::checkpoint, step_);

  // 2. The manifest, agreed and committed at the first level: by rank 0
  // (leading its node) inside the agreement, then on the other nodes; on
  // one node rank 0 also prunes. What the later levels need before the
  // commit counts is reserved in between.
  const bool one_node = rt.node().count < 2;
  std::string body;
  try {
    body = agree_on_manifest(ck, rt, step_, epoch, first.commit_level(), failure, records, file_bytes,
                             [&](const std::string& b) {
                               write_manifest_file(rt, b, first.commit_level(), first_dir);
                               if (one_node) prune(first.root(), ck.options().keep, first.keeps_spare());
                             });
    for (auto& l : later) l->prepare(rt, c, body);
    if (!one_node) {
      agree(rt.comm(), [&] {
        if (node_leader(rt) && rt.rank() != 0) write_manifest_file(rt, body, first.commit_level(), first_dir);
      });
      if (first.prune_at_commit()) first.prune_on_every_node(rt);
    }
  } catch (...) {
    for (auto& l : later) l->abandon();
    discard(rt, first_dir);
    throw;
  }
  ck.epoch_ = epoch;
  // 3. The later levels copy the committed file, at once or in the background.
  for (auto& l : later) l->copy(rt, c, body, my_file, first_dir);
}

}  // namespace tessera::resilience
