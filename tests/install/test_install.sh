#!/usr/bin/env bash
# Installs Tessera into a temporary prefix and builds the README's examples
# (examples/) from outside the build tree: with find_package(Tessera) and with
# plain -ltessera; then runs them on the shipped example graph.
set -uo pipefail
build=$1 src=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
export TESSERA_SHM_DIR=$tmp/shm  # our segments only, not the other tests'
mkdir -p "$TESSERA_SHM_DIR"
fail=0
check() { if eval "$2"; then echo "ok   $1"; else echo "FAIL $1"; fail=1; fi; }
prefix=$tmp/prefix

cmake --install "$build" --prefix "$prefix" >"$tmp/install.log" 2>&1
check "cmake --install succeeds" '[ $? -eq 0 ] || { cat "$tmp/install.log"; false; }'
check "installs the library, headers, program and package config" \
  '[ -e "$prefix/lib/libtessera.so" ] && [ -f "$prefix/include/tessera.h" ] &&
   [ -f "$prefix/include/tessera/graph/io.hpp" ] && [ -x "$prefix/bin/tessera" ] &&
   [ -f "$prefix/lib/cmake/Tessera/TesseraConfig.cmake" ] && [ ! -e "$prefix/include/tessera/bench" ]'

# 1. find_package(Tessera) from a separate project: examples/CMakeLists.txt.
cmake -S "$src/examples" -B "$tmp/ex" -DCMAKE_PREFIX_PATH="$prefix" >"$tmp/ex.log" 2>&1 &&
  cmake --build "$tmp/ex" >>"$tmp/ex.log" 2>&1
check "the examples build with find_package(Tessera)" '[ $? -eq 0 ] || { cat "$tmp/ex.log"; false; }'

# 2. Plain compiler lines, as the README says: -ltessera.
flags=(-I"$prefix/include" -L"$prefix/lib" -Wl,-rpath,"$prefix/lib" -ltessera)
mpicc -Wall -Werror -o "$tmp/attach_plain" "$src/examples/attach.c" "${flags[@]}" 2>"$tmp/cc.log"
check "attach.c builds with cc ... -ltessera" '[ $? -eq 0 ] || { cat "$tmp/cc.log"; false; }'
mpicxx -std=c++20 -Wall -Werror -o "$tmp/hitting_plain" "$src/examples/hitting.cpp" "${flags[@]}" 2>"$tmp/cxx.log"
check "hitting.cpp builds with c++ ... -ltessera" '[ $? -eq 0 ] || { cat "$tmp/cxx.log"; false; }'

# 3. Run them. The installed program writes a persistent array (.tsg) for attach.
cd "$tmp"
"$prefix/bin/tessera" convert "$src/examples/grid.el" -o g.tsg -q >/dev/null 2>&1 ||
  "$prefix/bin/tessera" convert "$src/examples/grid.el" g.tsg >/dev/null 2>&1  # positional OUT until the -o change lands
check "the installed tessera writes g.tsg" '[ -f g.tsg/offsets.json ]'
out=$("$tmp/ex/attach" g.tsg/offsets.json)
check "attach reads g.tsg/offsets.json in place" 'grep -q "^segment 0: elements 0\.\.29, 43 arcs$" <<<"$out" || { echo "$out"; false; }'
out=$("$tmp/attach_plain" missing.json 2>&1); rc=$?
check "attach names a missing file" '[ $rc -ne 0 ] && grep -q "missing.json" <<<"$out"'
for ranks in 1 2; do
  out=$("$src/scripts/mpirun.sh" -n $ranks "$tmp/ex/hitting" "$src/examples/grid.el" 2>&1)
  check "hitting example at $ranks ranks" 'grep -q "^largest component: 25 vertices" <<<"$out" || { echo "$out"; false; }'
  out=$("$src/scripts/mpirun.sh" -n $ranks "$tmp/hitting_plain" "$src/examples/grid.el" 2>&1)
  check "hitting example (plain -ltessera) at $ranks ranks" 'grep -q "^largest component: 25 vertices" <<<"$out"'
  out=$("$src/scripts/mpirun.sh" -n $ranks "$tmp/ex/histogram" 2>&1)
  check "histogram example at $ranks ranks" 'grep -q "^$((100000 * ranks)) updates counted$" <<<"$out" || { echo "$out"; false; }'
done
# checkpoint: stopped after 5 steps at 2 ranks, resumed to 10 at 3 (sum = 10 * 999 * 1000 / 2)
out=$("$src/scripts/mpirun.sh" -n 2 "$tmp/ex/checkpoint" "$tmp/ck" 5 2>&1)
check "checkpoint example runs 5 steps at 2 ranks" 'grep -q "^step 5: sum 2497500$" <<<"$out" || { echo "$out"; false; }'
out=$("$src/scripts/mpirun.sh" -n 3 "$tmp/ex/checkpoint" "$tmp/ck" 10 2>&1)
check "checkpoint example resumes at 3 ranks" 'grep -q "^resumed at step 5$" <<<"$out" && grep -q "^step 10: sum 4995000$" <<<"$out" || { echo "$out"; false; }'
check "the examples leave no segments behind" '[ -z "$(ls -A "$TESSERA_SHM_DIR")" ] || { ls "$TESSERA_SHM_DIR"; false; }'
[ $fail -eq 0 ] && echo "PASS" || echo "FAILED"
exit $fail
