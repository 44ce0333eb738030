// The Python package's programs run from the tessera program (`tessera
// serve`: the session's server; `tessera trace`: the trace file tools), in a
// Python of their own: the package found beside this program (a build tree)
// or installed.
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "commands.hpp"
#include "tessera/runtime/error.hpp"

namespace tessera::cli {

void exec_python_module(const std::string& module, const std::vector<std::string>& module_args,
                        const std::string& purpose) {
  namespace fs = std::filesystem;
  // The package: beside this program in a build tree (build/tessera and
  // build/python/tessera, the package's files linked there with the
  // extension built for this program), or around it where pip installed it
  // (SITE/tessera/bin/tessera).
  const fs::path exe = fs::read_symlink("/proc/self/exe").parent_path();
  for (const fs::path& parent : {exe / "python", exe.parent_path().parent_path()}) {
    if (!fs::exists(parent / "tessera" / "__init__.py")) continue;
    const char* old = std::getenv("PYTHONPATH");
    std::string path = parent.string() + (old && *old ? ":" + std::string(old) : "");
    ::setenv("PYTHONPATH", path.c_str(), 1);
    break;
  }
  // The Python the package was built for (its extension is for that one).
#ifdef TESSERA_PYTHON
  const char* built_for = TESSERA_PYTHON;
#else
  const char* built_for = "python3";
#endif
  const char* python = std::getenv("TESSERA_PYTHON");
  std::vector<std::string> args = {python && *python ? python : built_for, "-m", module};
  args.insert(args.end(), module_args.begin(), module_args.end());
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  ::execvp(argv[0], argv.data());
  throw SystemError("cannot start " + args[0] + " for " + purpose +
                        " (set TESSERA_PYTHON to a Python with the tessera package)",
                    errno);
}

}  // namespace tessera::cli
