#!/usr/bin/env bash
# Runs examples/walkthrough.sh as docs/cli.md shows it: from a checkout's top
# (here a scratch directory with examples/ and build/ linked in).
set -uo pipefail
build=$1 src=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
ln -s "$src/examples" "$tmp/examples"
ln -s "$build" "$tmp/build"
cd "$tmp"
out=$(bash examples/walkthrough.sh 2>&1); rc=$?
fail=0
check() { if eval "$2"; then echo "ok   $1"; else echo "FAIL $1"; fail=1; fi; }
check "the walkthrough runs to the end" '[ $rc -eq 0 ] || { echo "$out"; false; }'
check "cc finds the grid and the triangle" 'grep -q "2 components" <<<"$out"'
check "hitting times are written" 'grep -q "^1 39" times.txt'
check "g.tsg holds the arrays the README names" '[ -f g.tsg/offsets.json ] && [ -f g.tsg/dst.json ] && [ -f g.tsg/edgelist.json ]'
[ $fail -eq 0 ] && echo "PASS" || echo "FAILED"
exit $fail
