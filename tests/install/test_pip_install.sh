#!/usr/bin/env bash
# pip install ./python into a fresh venv (--system-site-packages: Debian's
# NumPy) by the fast path (python/build_backend/tessera_wheel.py reusing this
# build tree), then, from a directory outside the source and build trees and
# without PYTHONPATH, the installed package on its own: the module, its
# libtessera, the programs in tessera/bin, a 2-rank session, and the session
# tests (tests/python/test_session.py).
set -uo pipefail
build=$(cd "$1" && pwd) src=$(cd "$2" && pwd)
python=${3:-/usr/bin/python3}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
export TESSERA_SHM_DIR=$tmp/shm  # our segments only, not the other tests'
mkdir -p "$TESSERA_SHM_DIR" "$tmp/elsewhere"
export PYTHONDONTWRITEBYTECODE=1  # nothing written into python/build_backend
fail=0
check() { if eval "$2"; then echo "ok   $1"; else echo "FAIL $1"; fail=1; fi; }

"$python" -m venv --system-site-packages "$tmp/venv" >"$tmp/venv.log" 2>&1
check "a fresh venv" '[ $? -eq 0 ] || { cat "$tmp/venv.log"; false; }'
start=$SECONDS
TESSERA_BUILD_DIR=$build "$tmp/venv/bin/pip" install -v --no-cache-dir --disable-pip-version-check \
  "$src/python" >"$tmp/pip.log" 2>&1
rc=$? took=$((SECONDS - start))
check "pip install ./python succeeds" '[ $rc -eq 0 ] || { tail -40 "$tmp/pip.log"; false; }'
check "it reuses the build tree (no compiling: $took s)" \
  'grep -q "tessera_wheel: reusing the build tree $build" "$tmp/pip.log" && [ $took -le 120 ]'

cd "$tmp/elsewhere"
run() { env -u PYTHONPATH -u LD_LIBRARY_PATH "$@"; }
pkg=$(run "$tmp/venv/bin/python" -c 'import os, tessera; print(os.path.dirname(tessera.__file__))' 2>"$tmp/import.log")
check "tessera imports from the venv ($pkg)" '[[ $pkg == "$tmp/venv/"* ]] || { cat "$tmp/import.log"; false; }'
lib=$(run "$tmp/venv/bin/python" -c 'import tessera
print(next(l.split()[-1] for l in open("/proc/self/maps") if "libtessera.so" in l))' 2>&1)
check "the extension loads the package's libtessera ($lib)" '[ "$lib" = "$pkg/libtessera.so.0" ]'
check "one libtessera, under its SONAME" '[ "$(cd "$pkg" && ls libtessera.so*)" = libtessera.so.0 ]'
if [ -e "$build/libtessera-trilinos.so" ]; then
  check "the Trilinos plugin beside libtessera" '[ -f "$pkg/libtessera-trilinos.so" ]'
fi
out=$(run "$pkg/bin/tessera" --version 2>&1)
check "tessera/bin/tessera --version runs" '[[ $out == "tessera "* ]] || { echo "$out"; false; }'
out=$(run "$pkg/bin/tessera-analyze" --help 2>&1)
check "tessera/bin/tessera-analyze --help runs" '[ $? -eq 0 ] || { echo "$out"; false; }'
for f in "$pkg/bin/tessera" "$pkg/bin/tessera-analyze" "$pkg"/_tessera*.so; do
  resolved=$(run ldd "$f" | awk '$1 == "libtessera.so.0" {print $3}')
  check "$(basename "$f") finds libtessera in the package" '[ "$(realpath "$resolved")" = "$pkg/libtessera.so.0" ]'
done
check "no installed file names the build tree in its rpath" \
  '! for f in "$pkg"/bin/* "$pkg"/*.so*; do readelf -d "$f"; done | grep -i path | grep -q "$build"'

run timeout 180 "$tmp/venv/bin/python" - >"$tmp/session.log" 2>&1 <<'EOF'
import tessera
s = tessera.start(2)
g = s.kron(10)
c = s.components(g)
assert c.count >= 1 and c.largest_size <= g.vertices, (c.count, c.largest_size)
print("components:", c.count)
s.stop()
EOF
rc=$?
check "a 2-rank session from the installed package" '[ $rc -eq 0 ] || { cat "$tmp/session.log"; false; }'
check "the session leaves no segments behind" '[ -z "$(ls -A "$TESSERA_SHM_DIR")" ] || { ls "$TESSERA_SHM_DIR"; false; }'
# The session tests, on the installed package alone (its own tessera/bin programs).
run timeout 400 "$tmp/venv/bin/python" -m pytest -p no:cacheprovider -q --color=no \
  "$src/tests/python/test_session.py" >"$tmp/session-tests.log" 2>&1
rc=$?
# (77: passed, some skipped themselves, as tests/python/conftest.py reports it)
check "the session tests pass on the installed package ($(tail -1 "$tmp/session-tests.log"))" \
  '[ $rc -eq 0 ] || [ $rc -eq 77 ] || { tail -30 "$tmp/session-tests.log"; false; }'
[ $fail -eq 0 ] && echo "PASS" || echo "FAILED"
exit $fail
