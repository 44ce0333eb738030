// tessera serve: an analyst's session of K resident ranks (python/tessera/
// session), served at a Unix socket a notebook connects to. The session's
// server is the Python package's SPMD program; this command finds that
// package beside the program (a build tree) or installed, and runs it: its
// own mpirun of K ranks, or, when srun or mpirun started this process as a
// rank, this rank's part of the session.
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "commands.hpp"
#include "tessera/runtime/error.hpp"
#include "tessera/runtime/launch.hpp"

namespace tessera::cli {

namespace {
struct ServeOptions {
  std::string socket;
  std::string tcp;
  std::string host;
};

int run_serve(const ServeOptions& o, int ranks) {
  namespace fs = std::filesystem;
  const fs::path exe_dir = fs::read_symlink("/proc/self/exe").parent_path();
  const fs::path package = exe_dir / "python";
  if (fs::exists(package / "tessera" / "session" / "server.py")) {
    const char* old = std::getenv("PYTHONPATH");
    std::string path = package.string() + (old && *old ? ":" + std::string(old) : "");
    ::setenv("PYTHONPATH", path.c_str(), 1);
  }
  // The Python the package was built for (its extension is for that one).
#ifdef TESSERA_PYTHON
  const char* built_for = TESSERA_PYTHON;
#else
  const char* built_for = "python3";
#endif
  const char* python = std::getenv("TESSERA_PYTHON");
  std::vector<std::string> args = {python && *python ? python : built_for, "-m"};
  // Already one of the job's ranks (srun -n K tessera serve, mpirun ...):
  // each rank becomes the session's server; else it starts its own mpirun.
  const bool rank_of_a_job = launched_by_mpi();
  if (rank_of_a_job) {
    if (ranks > 0 || !o.host.empty())
      throw ConfigError("tessera serve under srun or mpirun: the launcher chose the ranks and hosts; drop -n and "
                        "--host");
    args.insert(args.end(), {"tessera.session.server"});
  } else {
    args.insert(args.end(), {"tessera.session", "serve", "-n", std::to_string(ranks > 0 ? ranks : 2)});
  }
  for (const auto& [flag, value] : {std::pair{"--socket", o.socket}, {"--tcp", o.tcp}, {"--host", o.host}})
    if (!value.empty()) args.insert(args.end(), {flag, value});
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  ::execvp(argv[0], argv.data());
  throw SystemError("cannot start " + args[0] + " for the session (set TESSERA_PYTHON to a Python with the "
                    "tessera package)", errno);
}
}  // namespace

void add_serve(CLI::App& app, Action& selected, const int& ranks, bool& launches_jobs) {
  auto o = std::make_shared<ServeOptions>();
  auto* serve = app.add_subcommand("serve", "Keep a session of K resident ranks (-n K) for notebooks and scripts "
                                            "(tessera.connect(PATH) in Python); Ctrl-C stops it");
  serve->add_option("--socket", o->socket, "Its Unix socket (default: a new one in a private directory, printed)");
  serve->add_option("--tcp", o->tcp, "Also serve TCP at [HOST:]PORT (default host 127.0.0.1), token in SOCKET.token");
  serve->add_option("--host", o->host, "Hosts and their slots, HOST:N,... (as mpirun's --host)");
  serve->callback([o, &selected, &ranks, &launches_jobs] {
    launches_jobs = true;  // the session starts its own mpirun
    selected = [o, &ranks] { return run_serve(*o, ranks); };
  });
}

}  // namespace tessera::cli
