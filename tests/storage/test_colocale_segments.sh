#!/usr/bin/env bash
# Co-locale segments end to end (issue 13): a 2-rank job with
# TESSERA_COLOCALE_SEGMENTS=1 holds a default-storage array; each rank maps
# its own memfd and its co-locale's, nothing is named in the shared-memory
# directory, and after SIGKILL no process maps the job's segments any more
# (the kernel freed them: nothing for `tessera shm gc`). Also: `tessera info`
# reports the mode, and a bad value of the variable, or ranks that disagree
# on it, are clear errors.
set -euo pipefail
bin=$1; src=$2
shm_dir=${TESSERA_SHM_DIR:-/dev/shm}
ready=$(mktemp -u /tmp/tessera-colocale-ready.XXXXXX)
job=
trap 'rm -f "$ready" "$ready.tmp"; [ -n "$job" ] && kill -KILL "$job" 2>/dev/null || true' EXIT
fail() { echo "FAIL: $*"; exit 1; }

TESSERA_COLOCALE_SEGMENTS=1 "$src/scripts/mpirun.sh" -n 2 "$bin/tests/colocale_holder" "$ready" >/dev/null 2>&1 &
job=$!
for _ in $(seq 1 300); do [ -f "$ready" ] && break; sleep 0.1; done
[ -f "$ready" ] || fail "the holder job never became ready"
job_id=$(head -n 1 "$ready")
pids=$(tail -n +2 "$ready")
tag="memfd:tessera-$job_id-c"

for pid in $pids; do
  n=$(grep -c "$tag" "/proc/$pid/maps" || true)
  [ "$n" -eq 2 ] || fail "rank pid $pid maps $n co-locale segments, expected 2 (its own and its co-locale's)"
done
left=$(ls "$shm_dir" | grep -c "$job_id" || true)
[ "$left" -eq 0 ] || fail "co-locale segments left $left files in $shm_dir"

for pid in $pids; do kill -KILL "$pid"; done
wait "$job" 2>/dev/null || true
job=
still=$(grep -l "$tag" /proc/[0-9]*/maps 2>/dev/null || true)
[ -z "$still" ] || fail "after SIGKILL the job's segments are still mapped: $still"
"$bin/tessera" shm list | grep -q "$job_id" && fail "shm list shows the killed job"
left=$(ls "$shm_dir" | grep -c "$job_id" || true)
[ "$left" -eq 0 ] || fail "the killed job left $left files in $shm_dir"

info=$("$bin/tessera" -n 2 --colocales core info)
grep -q "co-locale segments on" <<<"$info" || fail "info under --colocales does not report the segments: $info"
grep -q "co-locale parts mapped by the ranks: 2 of 2" <<<"$info" || fail "info: not every co-locale part mapped: $info"
info=$(TESSERA_COLOCALE_SEGMENTS=0 "$bin/tessera" -n 2 --colocales core info)
grep -q "co-locale segments off" <<<"$info" || fail "TESSERA_COLOCALE_SEGMENTS=0 does not win over --colocales"
if err=$(TESSERA_COLOCALE_SEGMENTS=yes "$bin/tessera" info 2>&1); then fail "a bad TESSERA_COLOCALE_SEGMENTS was accepted"; fi
grep -q "TESSERA_COLOCALE_SEGMENTS must be 0" <<<"$err" || fail "unclear error for a bad value: $err"
# Ranks must agree: array creation is collective and must pick the same storage.
if err=$("$src/scripts/mpirun.sh" -n 2 sh -c '[ "$OMPI_COMM_WORLD_RANK" = 1 ] && export TESSERA_COLOCALE_SEGMENTS=1; exec "$0" info' \
           "$bin/tessera" 2>&1); then fail "ranks with different TESSERA_COLOCALE_SEGMENTS were accepted"; fi
grep -q "TESSERA_COLOCALE_SEGMENTS differs between ranks" <<<"$err" || fail "unclear error when ranks disagree: $err"
echo "PASS: co-locale segments mapped by both ranks, never in $shm_dir, gone after SIGKILL; info and bad values"
