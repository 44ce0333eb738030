#!/usr/bin/env bash
# Issue 9, part 3: what crosses the boundary of the container that
# scripts/analyze-in-container.sh makes (bwrap: new user, PID, IPC, network,
# UTS and mount namespaces, private /dev/shm, only the Shared directory bound):
#  (a) a named POSIX semaphore does NOT (opens on the host, not inside);
#  (b) a futex word in a mapped file of the Shared directory DOES: a ping-pong
#      through it, with the round trip and the container's start time printed
#      next to the same ping-pong between two host processes;
#  (c) the real handshake and result with no copy: test_container_analysis.py
#      (tessera pipeline --analysis container through the same script).
# Skipped (exit 77) with a message when bwrap is missing or cannot create
# namespaces here.
set -uo pipefail
bin=$1; src=$2
probe=$bin/tests/ns_probe
box=$src/scripts/analyze-in-container.sh
work=$(mktemp -d /tmp/tessera-bwrap.XXXXXX)
shm=$work/shared; mkdir "$shm"
sem=/tessera-probe-$$
trap '"$probe" sem-unlink $sem 2>/dev/null; rm -rf "$work"' EXIT
if ! command -v bwrap >/dev/null; then echo "SKIP: bwrap not installed (apt-get install bubblewrap)"; exit 77; fi
if ! "$box" "$shm" -- true 2>"$work/err"; then echo "SKIP: bwrap cannot create namespaces here: $(cat "$work/err")"; exit 77; fi
failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }

# The container really is another PID namespace with its own /dev/shm.
[ "$("$box" "$shm" -- readlink /proc/self/ns/pid)" != "$(readlink /proc/self/ns/pid)" ] || fail "same PID namespace inside"

# (a) named POSIX semaphore
"$probe" sem-create $sem || fail "cannot create semaphore $sem on the host"
"$probe" sem-open $sem >/dev/null || fail "the host cannot open its own semaphore"
if "$box" "$shm" -- "$probe" sem-open $sem >"$work/out" 2>&1; then
  fail "the semaphore crossed into the container: $(cat "$work/out")"
else
  echo "ok (a): named semaphore inside the container: $(cat "$work/out")"
fi

# (b) futex word in a file of the Shared directory
rounds=2000
"$probe" futex-ping "$shm/host-word" $rounds "$probe" futex-pong "$shm/host-word" >"$work/host" ||
  fail "futex ping-pong between two host processes failed"
"$probe" futex-ping "$shm/box-word" $rounds "$box" "$shm" -- "$probe" futex-pong "$shm/box-word" >"$work/box" ||
  fail "futex ping-pong across the container boundary failed"
echo "ok (b): futex word, host <-> host:      $(cat "$work/host")"
echo "ok (b): futex word, host <-> container: $(cat "$work/box")"

# (d) the image's root file system (containers/analyze/make-rootfs.sh) holds
# all a program needs: run from it as / (no host file system) under bwrap.
programs=("$probe")
[ -x "$bin/tessera-analyze" ] && programs+=("$bin/tessera-analyze")
if "$src/containers/analyze/make-rootfs.sh" "$bin" "$work/rootfs" "${programs[@]}" >"$work/rootfs.log" 2>&1; then
  scratch=(bwrap --unshare-all --die-with-parent --bind "$work/rootfs" / --ro-bind /sys /sys --proc /proc --dev /dev
           --tmpfs /tmp --bind "$shm" "$shm" --setenv OMPI_MCA_plm isolated)
  "$probe" futex-ping "$shm/image-word" 200 "${scratch[@]}" /usr/local/bin/ns_probe futex-pong "$shm/image-word" \
    >"$work/image" || fail "ns_probe from the image's root file system"
  if [ -x "$bin/tessera-analyze" ]; then
    "${scratch[@]}" /usr/local/bin/tessera-analyze --help >"$work/help" 2>&1 ||
      fail "tessera-analyze does not start from the image's root file system: $(tail -3 "$work/help")"
  fi
  echo "ok (d): $(cat "$work/rootfs.log"); runs alone there: $(cat "$work/image")"
else
  fail "make-rootfs.sh: $(cat "$work/rootfs.log")"
fi

if [ $failures -ne 0 ]; then echo "$failures failure(s)"; exit 1; fi
echo "PASS: a named semaphore stays on its side; a futex word in the Shared directory crosses"
