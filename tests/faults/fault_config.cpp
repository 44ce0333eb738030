// A malformed fault-injection configuration (TESSERA_FAULTS, or
// TESSERA_KILL_RANK with TESSERA_KILL_AT_STEP), set by the test's
// registration (tests/CMakeLists.txt, faults.config_*):
//   fault_config wait TEXT...   first a Backoff wait long enough to be noted
//                               for the supervisor (FaultInjection::waiting,
//                               noexcept), with no Runtime yet: it must return
//                               (a note that read the configuration would end
//                               the process in std::terminate); then as start
//   fault_config start TEXT...  the Runtime refuses to start with a
//                               ConfigError whose message holds every TEXT
// Exits 0 when all that holds, 1 otherwise.
#include <mpi.h>

#include <cstdio>
#include <exception>
#include <string>

#include "tessera/runtime/error.hpp"
#include "tessera/runtime/runtime.hpp"
#include "tessera/runtime/wait.hpp"

int main(int argc, char** argv) {
  const std::string mode = argc > 1 ? argv[1] : "";
  if (mode != "wait" && mode != "start") {
    std::fprintf(stderr, "usage: fault_config wait|start TEXT...\n");
    return 2;
  }
  if (mode == "wait") {
    {
      tessera::Backoff backoff;
      for (int i = 0; i < 20000; ++i) backoff.idle();  // the 20000th notes a long wait
      backoff.reset();                                  // and this its end
    }
    std::printf("ok   a noted Backoff wait before any Runtime returns\n");
  }
  int failed = 0;
  try {
    tessera::Runtime rt;
    std::printf("FAIL the Runtime started\n");
    return 1;
  } catch (const tessera::ConfigError& e) {
    const std::string what = e.what();
    for (int i = 2; i < argc; ++i) {
      const bool ok = what.find(argv[i]) != std::string::npos;
      failed += ok ? 0 : 1;
      std::printf("%s the Runtime's ConfigError says \"%s\"\n", ok ? "ok  " : "FAIL", argv[i]);
    }
    std::printf("     (%s)\n", what.c_str());
  } catch (const std::exception& e) {
    failed = 1;
    std::printf("FAIL the Runtime refused with another error than ConfigError: %s\n", e.what());
  }
  // The Runtime initialised MPI before it refused; its destructor never ran.
  int initialized = 0, finalized = 0;
  MPI_Initialized(&initialized);
  MPI_Finalized(&finalized);
  if (initialized && !finalized) MPI_Finalize();
  return failed ? 1 : 0;
}
