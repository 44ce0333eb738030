#!/usr/bin/env bash
# Optional (issue 9, part 3): the FROM-scratch image of containers/analyze
# builds with no registry and runs under Podman with only the Shared directory
# mounted; a futex ping-pong with the host crosses it (start time and round
# trip printed). Skips (exit 77) with a message when podman or runc is missing
# or a probe run fails (Podman 4.3 needs runc and an explicit nofile ulimit).
set -uo pipefail
bin=$1; src=$2
command -v podman >/dev/null && command -v runc >/dev/null ||
  { echo "SKIP: podman and runc are not installed (apt-get install podman runc)"; exit 77; }
work=$(mktemp -d /tmp/tessera-podman.XXXXXX)
image=localhost/tessera-analyze-test:$$
trap 'podman rmi -f "$image" >/dev/null 2>&1; rm -rf "$work"' EXIT
shm=$work/shared; mkdir "$shm"
programs=("$bin/tests/ns_probe")
[ -x "$bin/tessera-analyze" ] && programs+=("$bin/tessera-analyze")
"$src/containers/analyze/make-rootfs.sh" "$bin" "$work/context/rootfs" "${programs[@]}" >/dev/null ||
  { echo "FAIL: make-rootfs.sh"; exit 1; }
t0=$(date +%s.%N)
podman build -q -t "$image" -f "$src/containers/analyze/Containerfile" "$work/context" >"$work/build" 2>&1 ||
  { echo "SKIP: podman build fails here: $(tail -3 "$work/build")"; exit 77; }
t1=$(date +%s.%N)
export TESSERA_CONTAINER_ENGINE=podman TESSERA_CONTAINER_IMAGE=$image
"$src/scripts/analyze-in-container.sh" "$shm" -- /usr/local/bin/ns_probe sem-open /none >"$work/probe" 2>&1
[ $? -eq 1 ] || { echo "SKIP: podman run fails here: $(tail -3 "$work/probe")"; exit 77; }
"$bin/tests/ns_probe" futex-ping "$shm/word" 500 \
  "$src/scripts/analyze-in-container.sh" "$shm" -- /usr/local/bin/ns_probe futex-pong "$shm/word" >"$work/out" ||
  { echo "FAIL: futex ping-pong with a podman container"; exit 1; }
printf 'ok: image built in %.1f s without a registry; futex word host <-> podman: %s\n' \
  "$(echo "$t1 - $t0" | bc)" "$(cat "$work/out")"
echo "PASS: the analysis image runs under podman and a futex word crosses into it"
