#!/usr/bin/env bash
# mpirun as Tessera starts every job: `tessera mpirun ARGS` (runtime/launch.hpp:
# root allowed, idle ranks yield the core, ob1 on one node, a session
# directory base of the job's own). The program is the build's (TESSERA_BUILD,
# default build/ beside this script) or the installed one on PATH.
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
for program in "${TESSERA_BUILD:-$here/../build}/tessera" "$(command -v tessera)"; do
  [ -x "$program" ] && exec "$program" mpirun "$@"
done
echo "scripts/mpirun.sh: no tessera program (run make build, or set TESSERA_BUILD to a build directory)" >&2
exit 127
