#!/usr/bin/env bash
# Issue 9 (data loss): `tessera shm list|gc` run in another PID namespace with
# the same host name must report a live job's files `unknown` and keep them;
# a really dead job's files are still collected. Both ways round:
#  1. a 2-rank job on the host; list + gc from `unshare --pid --fork
#     --mount-proc` and from bwrap (scripts/analyze-in-container.sh): unknown,
#     nothing removed, the job still runs; SIGKILL it, gc on the host removes all.
#  2. a holder inside bwrap; the host sees it alive and keeps its files; SIGKILL
#     it, the host's gc proves it dead (its namespace is gone) and removes them.
# Parts whose tool is missing or refused are skipped with a message.
set -uo pipefail
bin=$1; src=$2
tessera=$bin/tessera
work=$(mktemp -d /tmp/tessera-ns.XXXXXX)
shm=$work/shm; mkdir "$shm"
failures=0
skipped=()  # parts this machine cannot run: the test then ends SKIPPED (77)
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }
job=
cleanup() {
  [ -f "$work/ready" ] && xargs kill -KILL < "$work/ready" 2>/dev/null
  [ -n "$job" ] && kill -KILL "$job" 2>/dev/null
  wait 2>/dev/null
  rm -rf "$work"
}
trap cleanup EXIT
count() { ls "$shm" | grep -c "^$1\." || true; }
wait_ready() { for _ in $(seq 1 300); do [ -f "$1" ] && return 0; sleep 0.1; done; return 1; }

# Every listed file of array $2 in `shm list --json` output $1 has creator $3.
all_are() {
  /usr/bin/python3 -c 'import json,sys; f=[x for x in json.load(open(sys.argv[1]))["files"] if x["array"]==sys.argv[2]]
sys.exit(0 if f and all(x["creator"]==sys.argv[3] for x in f) else 1)' "$1" "$2" "$3"
}

probe_unshare() { unshare --pid --fork --mount-proc true 2>/dev/null; }
probe_bwrap() { "$src/scripts/analyze-in-container.sh" "$shm" -- true 2>/dev/null; }

# --- 1. the job on the host, gc from inside other namespaces --------------------
name=tessera-test-ns-host-$$
TESSERA_SHM_DIR=$shm "$src/scripts/mpirun.sh" -n 2 "$bin/tests/shm_holder" "$name" "$work/ready" >/dev/null 2>&1 &
job=$!
wait_ready "$work/ready" || { fail "the holder job never became ready"; exit 1; }
[ "$(count "$name")" -eq 3 ] || fail "expected 2 segments + metadata, found $(count "$name")"
ran=0
for where in unshare bwrap; do
  if ! probe_$where; then
    echo "SKIP: $where cannot create namespaces here (needs root or user namespaces)"
    skipped+=("gc from inside $where")
    continue
  fi
  ran=$((ran + 1))
  if [ $where = unshare ]; then inside=(unshare --pid --fork --mount-proc); else inside=("$src/scripts/analyze-in-container.sh" "$shm" --); fi
  "${inside[@]}" "$tessera" shm list --json --dir "$shm" >"$work/list" 2>"$work/err" || fail "$where: shm list failed: $(cat "$work/err")"
  all_are "$work/list" "$name" unknown || { fail "$where: a live job's files are not all 'unknown'"; cat "$work/list"; }
  "${inside[@]}" "$tessera" shm gc --dir "$shm" >"$work/gc" 2>&1 || fail "$where: shm gc failed: $(cat "$work/gc")"
  [ "$(count "$name")" -eq 3 ] || { fail "$where: gc removed a live job's files ($(count "$name") of 3 left)"; cat "$work/gc"; }
  grep -q "3 file(s) kept" "$work/gc" || { fail "$where: gc does not say it kept 3 files"; cat "$work/gc"; }
done
xargs kill -0 < "$work/ready" || fail "the holder job died"
"$tessera" shm list --json --dir "$shm" >"$work/list"
all_are "$work/list" "$name" alive || { fail "host: the live job's files are not 'alive'"; cat "$work/list"; }
xargs kill -KILL < "$work/ready"; wait "$job" 2>/dev/null; job=; rm -f "$work/ready"
"$tessera" shm list --json --dir "$shm" >"$work/list"
all_are "$work/list" "$name" dead || { fail "host: the SIGKILLed job's files are not 'dead'"; cat "$work/list"; }
"$tessera" shm gc --dir "$shm" -q >/dev/null
[ "$(count "$name")" -eq 0 ] || fail "host: gc left $(count "$name") files of the SIGKILLed job"
[ $ran -gt 0 ] && echo "ok: a live job's files survive gc from $ran other PID namespace(s), reported unknown; collected once SIGKILLed"

# --- 2. the holder inside bwrap, gc on the host ----------------------------------
if probe_bwrap; then
  name=tessera-test-ns-box-$$
  TESSERA_SHM_DIR=$shm "$src/scripts/analyze-in-container.sh" "$shm" -- "$bin/tests/shm_holder" "$name" "$shm/ready" \
    >/dev/null 2>&1 &
  job=$!
  # The ready file goes in the shared directory: the container's /tmp is its own.
  if wait_ready "$shm/ready"; then
    "$tessera" shm list --json --dir "$shm" >"$work/list"
    all_are "$work/list" "$name" alive || { fail "host: the containerized holder's files are not 'alive'"; cat "$work/list"; }
    "$tessera" shm gc --dir "$shm" -q >/dev/null
    [ "$(count "$name")" -eq 2 ] || fail "host: gc removed the live containerized holder's files"
    # Its host pid: the process mapping its segment.
    holder=$(grep -l "$shm/$name.r0.seg" /proc/[0-9]*/maps 2>/dev/null | head -1 | cut -d/ -f3)
    [ -n "$holder" ] && kill -KILL "$holder"
    wait "$job" 2>/dev/null; job=
    "$tessera" shm list --json --dir "$shm" >"$work/list"
    all_are "$work/list" "$name" dead || { fail "host: the SIGKILLed containerized holder's files are not 'dead'"; cat "$work/list"; }
    "$tessera" shm gc --dir "$shm" -q >/dev/null
    [ "$(count "$name")" -eq 0 ] || fail "host: gc left $(count "$name") files of the dead containerized holder"
    echo "ok: a containerized holder is seen alive from the host, and proven dead once SIGKILLed"
  else
    fail "the containerized holder never became ready"
  fi
else
  echo "SKIP: bwrap cannot create namespaces here: the containerized holder part"
  skipped+=("a holder inside bwrap, gc on the host")
fi

if [ $failures -ne 0 ]; then echo "$failures failure(s)"; exit 1; fi
if [ ${#skipped[@]} -ne 0 ]; then printf 'SKIPPED (the other parts passed): %s\n' "${skipped[@]}"; exit 77; fi
echo "PASS: shm list/gc across PID namespaces never loses a live job's files"
