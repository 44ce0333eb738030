// tessera serve: an analyst's session of K resident ranks (python/tessera/
// session), served at a Unix socket a notebook connects to. The session's
// server is the Python package's SPMD program; this command finds that
// package beside the program (a build tree) or installed, and runs it: its
// own mpirun of K ranks, or, when srun or mpirun started this process as a
// rank, this rank's part of the session. With --dashboard the session also
// serves its live page on 127.0.0.1, and the URL (a token in it) is printed.
// tessera sessions: the user's running sessions, found by their connection files.
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
  std::vector<std::string> roots;  // --root: where requests' paths may lie (docs/security.md)
  bool dashboard = false;
  int dashboard_port = 0;
};

int run_serve(const ServeOptions& o, int ranks) {
  // Already one of the job's ranks (srun -n K tessera serve, mpirun ...):
  // each rank becomes the session's server; else it starts its own mpirun.
  const bool rank_of_a_job = launched_by_mpi();
  std::vector<std::string> args;
  if (rank_of_a_job && (ranks > 0 || !o.host.empty()))
    throw ConfigError("tessera serve under srun or mpirun: the launcher chose the ranks and hosts; drop -n and "
                      "--host");
  if (!rank_of_a_job) args = {"serve", "-n", std::to_string(ranks > 0 ? ranks : 2)};
  for (const auto& [flag, value] : {std::pair{"--socket", o.socket}, {"--tcp", o.tcp}, {"--host", o.host}})
    if (!value.empty()) args.insert(args.end(), {flag, value});
  for (const auto& root : o.roots) args.insert(args.end(), {"--root", root});
  if (o.dashboard || o.dashboard_port > 0) args.push_back("--dashboard");
  if (o.dashboard_port > 0) args.insert(args.end(), {"--dashboard-port", std::to_string(o.dashboard_port)});
  exec_python_module(rank_of_a_job ? "tessera.session.server" : "tessera.session", args, "the session");
}
}  // namespace

void add_serve(CLI::App& app, Action& selected, const int& ranks, bool& launches_jobs) {
  auto o = std::make_shared<ServeOptions>();
  auto* serve = app.add_subcommand("serve", "Keep a session of K resident ranks (-n K) for notebooks and scripts "
                                            "(tessera.connect(PATH) in Python); Ctrl-C stops it");
  serve->add_option("--socket", o->socket, "Its Unix socket (default: a new one in a private directory, printed)");
  serve->add_option("--tcp", o->tcp, "Also serve TCP at [HOST:]PORT (default host 127.0.0.1), token in SOCKET.token");
  serve->add_option("--host", o->host, "Hosts and their slots, HOST:N,... (as mpirun's --host)");
  serve->add_option("--root", o->roots,
                    "A directory the requests' paths must lie in (repeatable; bounds every client; default: this "
                    "directory, for TCP clients only; docs/security.md)")
      ->type_name("DIR");
  serve->add_flag("--dashboard", o->dashboard,
                  "Also serve a live page of the session on 127.0.0.1 (ranks, memory, objects, commands, the last "
                  "trace); its URL, with its token, is printed");
  serve->add_option("--dashboard-port", o->dashboard_port, "The live page's port (default: any free one)")
      ->check(CLI::Range(1, 65535));
  serve->callback([o, &selected, &ranks, &launches_jobs] {
    launches_jobs = true;  // the session starts its own mpirun
    selected = [o, &ranks] { return run_serve(*o, ranks); };
  });

  // tessera sessions: this user's running sessions, from their connection
  // files (python/tessera/session/sessions.py), with residents and memory.
  auto json = std::make_shared<bool>(false);
  auto* sessions = app.add_subcommand("sessions", "List your running sessions (their sockets, ranks, hosts, "
                                                  "residents and memory); tessera.connect() joins the only one");
  sessions->add_flag("--json", *json, "One JSON document (a list of sessions) instead of the table");
  sessions->callback([json, &selected] {
    selected = [json] {
      exec_python_module("tessera.session.list_sessions", *json ? std::vector<std::string>{"--json"}
                                                            : std::vector<std::string>{},
                         "the session list");
      return 1;
    };
  });
}

}  // namespace tessera::cli
