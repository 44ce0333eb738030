// The pipeline's stage checkpoints (stages.hpp, include/tessera/pipeline/checkpoint.hpp).
#include "stages.hpp"

#include <sys/stat.h>

#include <algorithm>
#include <array>
#include <filesystem>
#include <fstream>
#include <set>
#include <span>
#include <sstream>

#include "tessera/graph/generators.hpp"
#include "tessera/runtime/collective.hpp"
#include "tessera/runtime/error.hpp"
#include "tessera/storage/durable_file.hpp"

namespace tessera::pipeline {

namespace fs = std::filesystem;
using nlohmann::json;

const char* stage_name(std::uint64_t stage) {
  switch (stage) {
    case kLoaded: return "loaded";
    case kLabelled: return "labels";
    case kLargest: return "largest component";
    default: return "none";
  }
}


namespace {

constexpr const char* kRecord = "pipeline.record";
constexpr std::uint64_t kIdMapMagic = 0x5445535349444d31ull;  // "TESSIDM1": an id map record, version 1
constexpr std::size_t kSample = 64 * 1024;

// CRC32C of a file's first and last kSample bytes: a content check that
// costs two reads, not a pass over the input.
std::uint32_t sample_of(const std::string& path, std::uint64_t size, std::uint32_t crc) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw SystemError("cannot read " + path + " to identify it for its checkpoint", errno);
  std::vector<char> buf(kSample);
  auto take = [&](std::uint64_t at, std::uint64_t n) {
    in.seekg(static_cast<std::streamoff>(at));
    in.read(buf.data(), static_cast<std::streamsize>(n));
    crc = crc32c(std::as_bytes(std::span<const char>(buf.data(), static_cast<std::size_t>(in.gcount()))), crc);
  };
  take(0, std::min<std::uint64_t>(size, kSample));
  if (size > kSample) take(size - std::min<std::uint64_t>(size - kSample, kSample), std::min<std::uint64_t>(size - kSample, kSample));
  return crc;
}

std::int64_t mtime_ns(const struct stat& st) {
  return static_cast<std::int64_t>(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec;
}

// A file, or a .tsg directory (its files' sizes summed, the newest mtime,
// their names and samples in the checksum).
json file_identity(const std::string& path) {
  json j = {{"path", fs::absolute(path).lexically_normal().string()}};
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) {
    j["missing"] = true;
    return j;
  }
  std::uint64_t size = 0;
  std::int64_t mtime = mtime_ns(st);
  std::uint32_t crc = 0;
  if (S_ISDIR(st.st_mode)) {
    std::vector<std::string> files;
    for (const auto& e : fs::recursive_directory_iterator(path))
      if (e.is_regular_file()) files.push_back(e.path().string());
    std::sort(files.begin(), files.end());
    for (const auto& f : files) {
      struct stat fst {};
      if (::stat(f.c_str(), &fst) != 0) continue;
      size += static_cast<std::uint64_t>(fst.st_size);
      mtime = std::max(mtime, mtime_ns(fst));
      const std::string rel = fs::relative(f, path).string();
      crc = crc32c(std::as_bytes(std::span<const char>(rel.data(), rel.size())), crc);
      crc = sample_of(f, static_cast<std::uint64_t>(fst.st_size), crc);
    }
  } else {
    size = static_cast<std::uint64_t>(st.st_size);
    crc = sample_of(path, size, 0);
  }
  j["size"] = size;
  j["mtime_ns"] = mtime;
  j["sample_crc32c"] = crc;
  return j;
}

// "input.size: 1234 in the checkpoint, 1240 now; ..." ("" when none).
// An input file that is gone cannot be compared: its path must match.
std::string differences(const json& saved, const json& now) {
  const json a = saved.flatten(), b = now.flatten();
  const bool gone = b.contains("/input/missing");
  std::set<std::string> keys;
  for (auto it = a.begin(); it != a.end(); ++it) keys.insert(it.key());
  for (auto it = b.begin(); it != b.end(); ++it) keys.insert(it.key());
  std::string out;
  for (const auto& k : keys) {
    if (gone && k.rfind("/input/", 0) == 0 && k != "/input/path") continue;
    const json x = a.contains(k) ? a[k] : json("(none)"), y = b.contains(k) ? b[k] : json("(none)");
    if (x == y) continue;
    std::string name = k.substr(1);
    std::replace(name.begin(), name.end(), '/', '.');
    out += (out.empty() ? "" : "; ") + name + ": " + x.dump() + " in the checkpoint, " + y.dump() + " now";
  }
  return out;
}

}  // namespace

json job_identity(const Input& in, const std::string& algorithm) {
  json j;
  if (in.path.empty()) {
    auto s = spec_of(in);
    j["input"] = {{"generated", s.describe()},  {"kind", in.kind},
                  {"scale", s.scale},           {"edge_factor", s.edge_factor},
                  {"dims", s.dims},             {"seed", s.seed},
                  {"delete_fraction", s.delete_fraction}, {"permute", s.permute}};
  } else {
    if (in.path == "-")
      throw ConfigError("--checkpoint cannot tell a restart's standard input from the first one's: name the graph "
                        "file instead of -");
    j["input"] = file_identity(in.path);
    j["read"] = {{"base", in.base},         {"relabel", in.relabel}, {"undirected", in.undirected},
                 {"pattern", in.pattern},   {"symmetric", in.symmetric}, {"multigraph", in.multigraph}};
  }
  j["algorithm"] = algorithm;
  return j;
}

StageStore::StageStore(Runtime& rt, const CheckpointSettings& settings, json identity, Progress& p)
    : rt_(rt), settings_(settings), identity_(std::move(identity)) {
  resilience::CheckpointOptions o;
  o.dir = settings.dir;
  o.levels = resilience::parse_levels(settings.levels, "--checkpoint-levels");
  o.node_dir = settings.node_dir;
  o.name = kCheckpointName;
  o.keep = 2;  // a damaged newest checkpoint falls back to the stage before
  ck_.emplace(rt, o);
  report_ = {{"dir", settings.dir}, {"levels", settings.levels}, {"resumed_from", nullptr},
             {"skipped_checkpoints", json::array()}, {"written", json::array()}};
  auto found = ck_->latest();
  for (const auto& s : found.skipped) {
    report_["skipped_checkpoints"].push_back(s);
    p.step(s);
  }
  const std::string fresh = "start fresh with `tessera checkpoint rm " + std::string(kCheckpointName) + " --dir " +
                            settings.dir + "`" +
                            (has_level(o.levels, resilience::Level::node) || has_level(o.levels, resilience::Level::buddy)
                                 ? " (and --dir " + ck_->level_dir(resilience::Level::node) + " for the node level)"
                                 : "") +
                            ", or give another --checkpoint directory";
  if (!found) {
    if (!found.skipped.empty()) p.step("no valid checkpoint left: starting from the input");
    return;
  }
  const auto& info = *found.info;
  reader_.emplace(ck_->restore(info));
  std::string text;
  agree(rt.comm(), [&] {
    if (rt.rank() != 0) return;
    auto names = reader_->names();
    if (std::find(names.begin(), names.end(), kRecord) == names.end())
      throw ConfigError("checkpoint " + info.path + " was not written by tessera pipeline (it has no " + kRecord +
                        "); " + fresh);
    auto bytes = reader_->read<std::uint8_t>(kRecord, 0, reader_->length(kRecord));
    text.assign(bytes.begin(), bytes.end());
  });
  text = broadcast(rt.comm(), text, 0);
  saved_ = json::parse(text, nullptr, false);
  if (saved_.is_discarded() || !saved_.contains("identity") || saved_.value("stage", std::uint64_t{0}) != info.step)
    throw ConfigError("checkpoint " + info.path + " holds no pipeline record of its step " +
                      std::to_string(info.step) + "; " + fresh);
  // Rank 0 compares (a file's identity is read there), every rank refuses.
  std::string diff = rt.rank() == 0 ? differences(saved_["identity"], identity_) : std::string();
  diff = broadcast(rt.comm(), diff, 0);
  if (!diff.empty())
    throw ConfigError("checkpoint " + info.path + " (stage '" + stage_name(info.step) +
                      "') is of another job, not resumed from: " + diff + "; " + fresh);
  if (identity_["input"].contains("missing"))
    p.step("the input " + identity_["input"]["path"].get<std::string>() +
           " is gone: resuming from the checkpoint made from it (size " + saved_["identity"]["input"]["size"].dump() +
           ")");
  resumed_ = info.step;
  json skipped = json::object();
  const json seconds = saved_.value("seconds", json::object());
  for (const auto& [k, v] : seconds.items()) skipped[k] = v;
  report_["resumed_from"] = stage_name(resumed_);
  report_["resumed_step"] = resumed_;
  report_["resumed_path"] = info.path;
  report_["resumed_level"] = info.level;
  report_["written_by_ranks"] = info.ranks;
  report_["skipped_seconds"] = skipped;
  std::string times;
  for (const auto& [k, v] : skipped.items()) {
    char buf[64];
    std::snprintf(buf, sizeof buf, "%s %.3f s", k.c_str(), v.get<double>());
    times += (times.empty() ? "" : ", ") + std::string(buf);
  }
  p.step("resuming after stage '" + std::string(stage_name(resumed_)) + "' from " + info.path + " (written by " +
         std::to_string(info.ranks) + " ranks" + (times.empty() ? "" : "; skipping " + times) + ")");
}

StageStore::~StageStore() = default;

void StageStore::commit(std::uint64_t stage, const json& record,
                        const std::function<void(resilience::CheckpointWriter&)>& add) {
  json rec = saved_;
  for (const auto& [k, v] : record.items()) {
    if (k == "seconds") {
      if (!rec.contains("seconds")) rec["seconds"] = json::object();
      for (const auto& [s, t] : v.items()) rec["seconds"][s] = t;
    } else {
      rec[k] = v;
    }
  }
  rec["format"] = "tessera.pipeline.checkpoint";
  rec["version"] = 1;
  rec["stage"] = stage;
  rec["stage_name"] = stage_name(stage);
  rec["identity"] = identity_;
  saved_ = rec;
  auto w = ck_->begin(stage);
  std::vector<std::uint8_t> bytes;
  if (rt_.rank() == 0) {
    const std::string text = rec.dump();
    bytes.assign(text.begin(), text.end());
  }
  w.add(kRecord, std::move(bytes));
  add(w);
  w.commit();
  report_["written"].push_back(stage_name(stage));
}

void StageStore::finish(bool keep) {
  reader_.reset();
  if (!keep) ck_->remove();
  report_["removed"] = !keep;
}

void add_id_map(resilience::CheckpointWriter& w, const std::string& name, const graph::IdMap& ids) {
  std::vector<std::uint64_t> record;
  if (ids.runtime().rank() == 0) record = {kIdMapMagic, ids.base(), ids.is_identity() ? 1u : 0u, ids.vertices()};
  w.add(name + ".idmap", std::move(record));
  if (!ids.is_identity()) w.add(name + ".fileids", *ids.relabelled_ids());
}

graph::IdMap read_id_map(const resilience::CheckpointReader& r, const std::string& name, const graph::EdgeList& g) {
  Runtime& rt = g.runtime();
  std::vector<std::uint64_t> rec;
  agree(rt.comm(), [&] {
    const std::string where = "checkpoint " + r.info().path + ": id map '" + name + "'";
    if (r.length(name + ".idmap") != 4) throw FormatError(where + ": its record has the wrong length");
    rec = r.read<std::uint64_t>(name + ".idmap", 0, 4);
    if (rec[0] != kIdMapMagic || rec[2] > 1) throw FormatError(where + ": not an id map record of this version");
    if (rec[3] != g.vertices())
      throw FormatError(where + ": it maps " + std::to_string(rec[3]) + " vertices, the graph has " +
                        std::to_string(g.vertices()));
  });
  if (rec[2] == 1) return graph::IdMap::identity(rt, g.vertex_ranges(), rec[1]);
  DistArray<std::uint64_t> ids(rt, g.vertex_ranges());
  agree(rt.comm(), [&] { r.read(name + ".fileids", ids); });
  return graph::IdMap::relabelled(std::move(ids), rec[1]);
}

}  // namespace tessera::pipeline
