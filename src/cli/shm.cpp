// tessera shm list|gc: Tessera's shared-memory files and their creators.
#include "commands.hpp"

#include <cstdio>

#include "tessera/storage/registry.hpp"
#include "tessera/storage/storage.hpp"

namespace tessera::cli {

namespace {
struct ShmOptions {
  std::string dir;
  bool dry_run = false;
  bool include_persistent = false;
};

int run_list(const ShmOptions& o) {
  std::string dir = o.dir.empty() ? default_shared_dir() : o.dir;
  auto entries = scan_shared_dir(dir);
  if (entries.empty()) {
    std::printf("no Tessera files in %s\n", dir.c_str());
    return 0;
  }
  std::printf("%-52s %-8s %5s %12s %-20s %8s %-10s %s\n", "file", "kind", "rank", "bytes", "host", "pid", "creator",
              "persist");
  for (const auto& e : entries) {
    std::printf("%-52s %-8s %5s %12llu %-20s %8d %-10s %s\n", e.file.c_str(),
                e.kind == ShmEntry::Kind::segment ? "segment" : "metadata",
                e.rank >= 0 ? std::to_string(e.rank).c_str() : "-", static_cast<unsigned long long>(e.bytes),
                e.creator.host.c_str(), e.creator.pid, e.problem.empty() ? liveness_name(e.liveness) : "corrupt",
                e.persist ? "yes" : "no");
    if (!e.problem.empty()) std::printf("    problem: %s\n", e.problem.c_str());
  }
  return 0;
}

int run_gc(const ShmOptions& o) {
  std::string dir = o.dir.empty() ? default_shared_dir() : o.dir;
  auto removed = collect_garbage(dir, {o.dry_run, o.include_persistent});
  for (const auto& f : removed) std::printf("%s %s/%s\n", o.dry_run ? "would remove" : "removed", dir.c_str(), f.c_str());
  std::printf("%zu file(s) of dead creators %s in %s\n", removed.size(), o.dry_run ? "found" : "removed", dir.c_str());
  return 0;
}
}  // namespace

void add_shm(CLI::App& app, Action& selected) {
  auto o = std::make_shared<ShmOptions>();
  auto* shm = app.add_subcommand("shm", "Inspect or clean Tessera's shared-memory segments");
  shm->require_subcommand(1);
  auto* list = shm->add_subcommand("list", "List segments and metadata with their creators and liveness");
  list->add_option("--dir", o->dir, "Directory (default $TESSERA_SHM_DIR or /dev/shm)");
  list->callback([o, &selected] { selected = [o] { return run_list(*o); }; });
  auto* gc = shm->add_subcommand("gc", "Remove segments and metadata whose creating process is dead");
  gc->add_option("--dir", o->dir, "Directory (default $TESSERA_SHM_DIR or /dev/shm)");
  gc->add_flag("--dry-run", o->dry_run, "Only say what would be removed");
  gc->add_flag("--include-persistent", o->include_persistent, "Also remove persistent arrays of dead creators");
  gc->callback([o, &selected] { selected = [o] { return run_gc(*o); }; });
}

}  // namespace tessera::cli
