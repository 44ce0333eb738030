// tessera checkpoint list|rm: a program's checkpoints in a directory, each
// fully checked (resilience/checkpoint.hpp), without MPI. Checkpoint files are
// persistent by design, so `shm gc` never removes them: this does.
#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "commands.hpp"
#include "tessera/resilience/checkpoint.hpp"
#include "tessera/storage/storage.hpp"

namespace tessera::cli {

namespace {
struct CheckpointCliOptions {
  std::string dir;  // "" = the node level's default
  std::string name;
  bool json = false;
};

std::string dir_of(const CheckpointCliOptions& o) { return o.dir.empty() ? default_shared_dir() : o.dir; }

// The names with checkpoints in `dir` (NAME.ckpt directories), sorted.
std::vector<std::string> names_in(const std::string& dir) {
  std::vector<std::string> names;
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator(dir, ec)) {
    const std::string file = e.path().filename().string();
    if (file.size() > 5 && file.compare(file.size() - 5, 5, ".ckpt") == 0 && e.is_directory(ec))
      names.push_back(file.substr(0, file.size() - 5));
  }
  std::sort(names.begin(), names.end());
  return names;
}

int run_list_one(const CheckpointCliOptions& opts);

// Without a NAME: every name's checkpoints in the directory.
int run_list(const CheckpointCliOptions& opts) {
  if (!opts.name.empty()) return run_list_one(opts);
  const std::string dir = dir_of(opts);
  const auto names = names_in(dir);
  if (opts.json) {
    nlohmann::json all = nlohmann::json::array();
    for (const auto& name : names) all.push_back(name);
    std::printf("%s\n", nlohmann::json{{"command", "checkpoint list"}, {"dir", dir}, {"names", all}}.dump().c_str());
    return 0;
  }
  if (names.empty()) {
    std::printf("no checkpoints in %s\n", dir.c_str());
    return 0;
  }
  for (const auto& name : names) {
    CheckpointCliOptions one = opts;
    one.name = name;
    std::printf("%s:\n", name.c_str());
    run_list_one(one);
  }
  return 0;
}

int run_list_one(const CheckpointCliOptions& opts) {
  CheckpointCliOptions o = opts;
  o.dir = dir_of(opts);
  auto all = resilience::Checkpoint::inspect(o.dir, o.name);
  if (o.json) {
    nlohmann::json list = nlohmann::json::array();
    for (const auto& s : all)
      list.push_back({{"step", s.info.step},
                      {"epoch", s.info.epoch},
                      {"level", s.info.level},
                      {"ranks", s.info.ranks},
                      {"path", s.info.path},
                      {"valid", s.problem.empty()},
                      {"problem", s.problem}});
    std::printf("%s\n", nlohmann::json{{"command", "checkpoint list"}, {"dir", o.dir}, {"name", o.name},
                                       {"checkpoints", list}}
                            .dump()
                            .c_str());
    return 0;
  }
  if (all.empty()) {
    std::printf("no checkpoints of %s in %s\n", o.name.c_str(), o.dir.c_str());
    return 0;
  }
  std::printf("%12s %8s %5s %5s  %-7s %s\n", "step", "epoch", "level", "ranks", "status", "path");
  for (const auto& s : all) {
    std::printf("%12llu %8llu %5d %5d  %-7s %s\n", static_cast<unsigned long long>(s.info.step),
                static_cast<unsigned long long>(s.info.epoch), resilience::level_number(s.info.level), s.info.ranks,
                s.problem.empty() ? "valid" : "refused", s.info.path.c_str());
    if (!s.problem.empty()) std::printf("    %s\n", s.problem.c_str());
  }
  return 0;
}

int run_rm(const CheckpointCliOptions& o) {
  std::string dir = dir_of(o);
  std::size_t n = resilience::Checkpoint::remove_all(dir, o.name);
  std::printf("removed %zu checkpoint(s) of %s in %s\n", n, o.name.c_str(), dir.c_str());
  return 0;
}
}  // namespace

void add_checkpoint(CLI::App& app, Action& selected) {
  auto o = std::make_shared<CheckpointCliOptions>();
  auto* ck = app.add_subcommand("checkpoint", "List (fully checked) or remove a program's checkpoints");
  ck->require_subcommand(1);
  ck->fallthrough();
  auto* list = ck->add_subcommand("list", "Every checkpoint of NAME in the directory, newest first, each checked "
                                          "(without NAME: every name's)");
  auto* rm = ck->add_subcommand("rm", "Remove every checkpoint of NAME in the directory");
  const char* name_help = "The name the program gives its checkpoints (tessera pipeline's: pipeline; "
                          "bench jacobi3d-recover's: its --name)";
  list->add_option("name", o->name, std::string(name_help) + "; default: every name in the directory");
  rm->add_option("name", o->name, name_help)->required();
  for (auto* sub : {list, rm})
    sub->add_option("--dir", o->dir,
                    "The directory: the node level's ($TESSERA_SHM_DIR or /dev/shm, the default) or the disk "
                    "level's (pipeline --checkpoint DIR)");
  list->add_flag("--json", o->json, "Print one JSON document on stdout (nothing else there)");
  list->callback([o, &selected] { selected = [o] { return run_list(*o); }; });
  rm->callback([o, &selected] { selected = [o] { return run_rm(*o); }; });
}

}  // namespace tessera::cli
