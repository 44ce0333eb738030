#!/usr/bin/env bash
# A job killed with SIGKILL cannot remove its segments; `tessera shm gc` must.
# Runs a 2-rank job holding a Shared array in /dev/shm, SIGKILLs every rank,
# checks `shm list` reports the files as dead, runs gc, and checks /dev/shm.
set -euo pipefail
bin=$1; src=$2
name="tessera-test-sigkill-$$-$RANDOM"
ready=$(mktemp -u /tmp/tessera-ready.XXXXXX)
trap 'rm -f "$ready"; rm -f /dev/shm/"$name".*' EXIT

"$src/scripts/mpirun.sh" -n 2 "$bin/tests/shm_holder" "$name" "$ready" >/dev/null 2>&1 &
job=$!
for _ in $(seq 1 300); do [ -f "$ready" ] && break; sleep 0.1; done
[ -f "$ready" ] || { echo "FAIL: the holder job never became ready"; exit 1; }

files=$(ls /dev/shm | grep -c "^$name\." || true)
[ "$files" -eq 3 ] || { echo "FAIL: expected 2 segments + metadata, found $files"; ls /dev/shm; exit 1; }

xargs kill -KILL < "$ready"
wait "$job" 2>/dev/null || true

listing=$("$bin/tessera" shm list)
echo "$listing" | grep "$name" | grep -q dead || { echo "FAIL: shm list does not report dead files:"; echo "$listing"; exit 1; }

"$bin/tessera" shm gc
left=$(ls /dev/shm | grep -c "^$name\." || true)
[ "$left" -eq 0 ] || { echo "FAIL: $left files of $name left in /dev/shm after gc"; exit 1; }
echo "PASS: SIGKILLed job's segments found dead and removed by gc"
