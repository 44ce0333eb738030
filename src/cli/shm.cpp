// tessera shm list|gc: Tessera's shared-memory files and their creators.
#include "commands.hpp"

#include <cstdio>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "tessera/runtime/launch.hpp"
#include "tessera/storage/registry.hpp"
#include "tessera/storage/storage.hpp"

namespace tessera::cli {

namespace {
struct ShmOptions {
  std::string dir;
  bool dry_run = false;
  bool include_persistent = false;
  bool include_mpi = false;
  bool json = false;   // one JSON document on stdout, nothing else there
  bool quiet = false;  // gc: only the summary line
};

// A persistent file (a converted graph's .tsg, a kept array) outlives its
// creator by design: "ended", not "dead", and why it stays.
std::string creator_word(const ShmEntry& e) {
  if (!e.problem.empty()) return "corrupt";
  if (e.persist && e.liveness == ProcessIdentity::Liveness::dead) return "ended";
  return liveness_name(e.liveness);
}
std::string creator_reason(const ShmEntry& e) {
  if (e.persist && e.liveness == ProcessIdentity::Liveness::dead)
    return "persistent: kept after the process that wrote it ended (a saved graph or array); shm gc leaves it, "
           "--include-persistent removes it";
  return e.liveness_reason;
}

int run_list(const ShmOptions& o) {
  std::string dir = o.dir.empty() ? default_shared_dir() : o.dir;
  auto entries = scan_shared_dir(dir);
  if (o.json) {
    nlohmann::json files = nlohmann::json::array();
    for (const auto& e : entries)
      files.push_back({{"file", e.file},
                       {"kind", e.kind == ShmEntry::Kind::segment ? "segment" : "metadata"},
                       {"array", e.array_name},
                       {"rank", e.rank >= 0 ? nlohmann::json(e.rank) : nlohmann::json(nullptr)},
                       {"bytes", e.bytes},
                       {"host", e.creator.host},
                       {"pid", e.creator.pid},
                       {"creator", creator_word(e)},
                       {"persist", e.persist},
                       {"reason", creator_reason(e)},
                       {"pid_namespace", e.creator.pid_namespace},
                       {"boot_id", e.creator.boot_id},
                       {"problem", e.problem}});
    std::printf("%s\n", nlohmann::json{{"command", "shm list"}, {"dir", dir}, {"files", files}}.dump().c_str());
    return 0;
  }
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
                e.creator.host.c_str(), e.creator.pid, creator_word(e).c_str(), e.persist ? "yes" : "no");
    if (!e.problem.empty()) std::printf("    problem: %s\n", e.problem.c_str());
    else if (!creator_reason(e).empty()) std::printf("    %s: %s\n", creator_word(e).c_str(), creator_reason(e).c_str());
  }
  return 0;
}

int run_gc(const ShmOptions& o) {
  std::string dir = o.dir.empty() ? default_shared_dir() : o.dir;
  std::vector<GcFailure> failed;
  auto removed = collect_garbage(dir, {o.dry_run, o.include_persistent}, &failed);
  // Files kept because their creator cannot be seen from here (another host,
  // boot or PID namespace): said, so a gc in a container does not look empty.
  std::size_t kept_unknown = 0;
  for (const auto& e : scan_shared_dir(dir))
    kept_unknown += e.problem.empty() && e.liveness == ProcessIdentity::Liveness::unknown ? 1 : 0;
  // Open MPI's vader_segment.* files of killed jobs: named by job id, not
  // pid, so "dead" means no process on this host maps or holds them. They
  // are where Open MPI keeps them (/dev/shm unless set), which need not be
  // where Tessera's segments are (TESSERA_SHM_DIR, --dir): both are looked in.
  std::vector<std::string> mpi_dirs = {dir};
  {
    std::error_code ec;
    const std::string vader = mpi_shared_memory_dir();
    if (std::filesystem::is_directory(vader, ec) && !std::filesystem::equivalent(vader, dir, ec))
      mpi_dirs.push_back(vader);
  }
  std::vector<std::string> mpi;  // names in dir, paths elsewhere
  std::size_t mpi_unused = 0;
  for (const auto& d : mpi_dirs) {
    auto in = [&](const std::string& name) { return d == dir ? name : d + "/" + name; };
    if (o.include_mpi) {
      for (const auto& name : remove_mpi_leftovers(d, o.dry_run, &failed)) mpi.push_back(in(name));
    } else {
      for (const auto& f : scan_mpi_files(d)) mpi_unused += f.in_use ? 0 : 1;
    }
  }
  const char* verb = o.dry_run ? "would remove" : "removed";
  if (o.json) {
    nlohmann::json skipped = nlohmann::json::array();
    for (const auto& f : failed) skipped.push_back({{"file", f.file}, {"reason", f.reason}});
    std::printf("%s\n", nlohmann::json{{"command", "shm gc"},
                                       {"dir", dir},
                                       {"dry_run", o.dry_run},
                                       {"removed", removed},
                                       {"mpi_removed", mpi},
                                       {"mpi_unused", mpi_unused},
                                       {"kept_unknown", kept_unknown},
                                       {"skipped", skipped}}
                            .dump()
                            .c_str());
  } else {
    if (!o.quiet)
      for (const auto& f : removed) std::printf("%s %s/%s\n", verb, dir.c_str(), f.c_str());
    std::printf("%zu file(s) of dead creators %s in %s\n", removed.size(), o.dry_run ? "found" : "removed", dir.c_str());
    if (kept_unknown > 0)
      std::printf("%zu file(s) kept: their creator's liveness cannot be proven from here (see 'tessera shm list')\n",
                  kept_unknown);
    if (o.include_mpi) {
      if (!o.quiet)
        for (const auto& f : mpi)
          std::printf("%s %s\n", verb, (f.find('/') == std::string::npos ? dir + "/" + f : f).c_str());
      std::printf("%zu Open MPI shared-memory file(s) no process uses %s in %s\n", mpi.size(),
                  o.dry_run ? "found" : "removed", (mpi_dirs.size() > 1 ? dir + " and " + mpi_dirs[1] : dir).c_str());
    } else if (mpi_unused > 0 && !o.quiet) {
      std::printf("%zu Open MPI shared-memory file(s) (vader_segment.*) in %s are used by no process (left by a "
                  "killed mpirun); remove them with --include-mpi\n",
                  mpi_unused, (mpi_dirs.size() > 1 ? dir + " and " + mpi_dirs[1] : dir).c_str());
    }
    for (const auto& f : failed) std::printf("skipped %s/%s: %s\n", dir.c_str(), f.file.c_str(), f.reason.c_str());
  }
  if (!failed.empty()) {
    std::fprintf(stderr, "tessera: error: %zu file(s) of dead creators in %s could not be removed (see %s)\n",
                 failed.size(), dir.c_str(), o.json ? "\"skipped\"" : "above");
    return 1;
  }
  return 0;
}
}  // namespace

void add_shm(CLI::App& app, Action& selected) {
  auto o = std::make_shared<ShmOptions>();
  auto* shm = app.add_subcommand("shm", "Inspect or clean Tessera's shared-memory segments");
  shm->require_subcommand(1);
  shm->add_flag("--json", o->json, "Print one JSON document on stdout (nothing else there)");
  shm->add_flag("-q,--quiet", o->quiet, "gc: print only the summary, not every file");
  shm->fallthrough();
  auto* list = shm->add_subcommand("list", "List segments and metadata with their creators and liveness");
  list->add_option("--dir", o->dir, "Directory (default $TESSERA_SHM_DIR or /dev/shm)");
  list->callback([o, &selected] { selected = [o] { return run_list(*o); }; });
  auto* gc = shm->add_subcommand("gc", "Remove segments and metadata whose creating process is proven dead (never those of another host, boot or PID namespace it cannot see)");
  gc->add_option("--dir", o->dir, "Directory (default $TESSERA_SHM_DIR or /dev/shm)");
  gc->add_flag("--dry-run", o->dry_run, "Only say what would be removed");
  gc->add_flag("--include-persistent", o->include_persistent, "Also remove persistent arrays of dead creators");
  gc->add_flag("--include-mpi", o->include_mpi,
               "Also remove Open MPI's vader_segment.* files that no process on this host uses");
  gc->callback([o, &selected] { selected = [o] { return run_gc(*o); }; });
}

}  // namespace tessera::cli
