#!/usr/bin/env bash
# Issue 9: an analysis under another uid (a rootless container maps uids)
# cannot open 0600 segments; with TESSERA_SHM_GROUP=G the creator makes them
# 0660 and gives them to group G, and a reader in G attaches. Checks: without
# the option the other user gets "Permission denied"; with it a member reads
# every element, a non-member still cannot. Needs root (creates the group
# tessera-shm-test and the user tessera-analyst, removed afterwards);
# otherwise skipped (exit 77) with a message.
set -uo pipefail
bin=$1; src=$2
if [ "$(id -u)" -ne 0 ] || ! command -v groupadd >/dev/null || ! command -v useradd >/dev/null ||
   ! command -v setpriv >/dev/null; then
  echo "SKIP: needs root with groupadd, useradd and setpriv to create a second user"; exit 77
fi
group=tessera-shm-test user=tessera-analyst
made=()
getent group $group >/dev/null || { groupadd $group && made+=(group); }
id $user >/dev/null 2>&1 || { useradd -M -N -g nogroup -s /usr/sbin/nologin $user && made+=(user); }
work=$(mktemp -d /tmp/tessera-group.XXXXXX)
chmod 0711 "$work"
shm=$work/shm; mkdir "$shm"; chmod 1777 "$shm"
failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill -KILL "$p" 2>/dev/null; done
  wait 2>/dev/null
  rm -rf "$work"
  for m in "${made[@]}"; do [ "$m" = user ] && userdel $user; done
  for m in "${made[@]}"; do [ "$m" = group ] && groupdel $group; done
}
trap cleanup EXIT
gid=$(getent group $group | cut -d: -f3)
# The other user runs a copy of ns_probe: it may not be able to enter the checkout.
"$src/tests/readable_copy.sh" "$work/bin" "$bin/tests/ns_probe"
probe=$work/bin/ns_probe
as_member() { HOME=/tmp LD_LIBRARY_PATH=$work/bin setpriv --reuid=$user --regid=nogroup --groups="$gid" "$@"; }
as_stranger() { HOME=/tmp LD_LIBRARY_PATH=$work/bin setpriv --reuid=$user --regid=nogroup --clear-groups "$@"; }
hold() {  # hold NAME [ENV...]: a 1-rank job holding a Shared array of 65536 ones
  local name=$1; shift
  env TESSERA_SHM_DIR="$shm" "$@" "$bin/tests/shm_holder" "$name" "$work/$name.ready" >"$work/$name.log" 2>&1 &
  pids+=($!)
  for _ in $(seq 1 300); do [ -f "$work/$name.ready" ] && return 0; sleep 0.1; done
  fail "holder $name never became ready: $(cat "$work/$name.log")"; return 1
}
mode_group() { stat -c '%a %G' "$1"; }

hold private && {
  [ "$(mode_group "$shm/private.r0.seg")" = "600 root" ] || fail "default segment is $(mode_group "$shm/private.r0.seg"), want 600 root"
  as_member "$probe" attach "$shm/private.json" >"$work/out" 2>&1 &&
    fail "another uid attached to 0600 segments: $(cat "$work/out")"
  grep -q "Permission denied" "$work/out" || fail "no 'Permission denied' for another uid: $(cat "$work/out")"
}
hold grouped TESSERA_SHM_GROUP=$group && {
  for f in grouped.json grouped.r0.seg; do
    [ "$(mode_group "$shm/$f")" = "660 $group" ] || fail "$f is $(mode_group "$shm/$f"), want 660 $group"
  done
  as_member "$probe" attach "$shm/grouped.json" >"$work/out" 2>&1 ||
    fail "a member of $group cannot attach: $(cat "$work/out")"
  grep -q "attached 65536 elements, sum 65536.0" "$work/out" || fail "member read wrong values: $(cat "$work/out")"
  as_stranger "$probe" attach "$shm/grouped.json" >"$work/out" 2>&1 &&
    fail "a non-member attached to group segments"
  grep -q "Permission denied" "$work/out" || fail "no 'Permission denied' for a non-member: $(cat "$work/out")"
}
# An unknown group is a clear error, not files nobody can read.
TESSERA_SHM_DIR=$shm TESSERA_SHM_GROUP=no-such-group-$$ timeout 60 "$bin/tessera" pipeline --scale 6 >/dev/null 2>"$work/err"
rc=$?
[ $rc -ne 0 ] && grep -q "group 'no-such-group-$$' .* does not exist" "$work/err" ||
  fail "unknown group: exit $rc, $(cat "$work/err")"

if [ $failures -ne 0 ]; then echo "$failures failure(s)"; exit 1; fi
echo "PASS: TESSERA_SHM_GROUP makes segments 0660 for the group; members of it attach, others cannot"
