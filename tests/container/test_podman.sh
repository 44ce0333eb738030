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

# The real analysis in the image, started by the user against a waiting
# pipeline (--analysis process --analysis-control): the same answer as in process.
if [ -x "$bin/tessera-analyze" ]; then
  ctl=$shm/podman.control.seg
  graph=(--scale 12 --solver tessera --tolerance 1e-12 --json -q)
  TESSERA_SHM_DIR=$shm timeout 120 "$bin/tessera" pipeline "${graph[@]}" >"$work/ref.json" 2>"$work/ref.err" ||
    { echo "FAIL: in-process pipeline: $(cat "$work/ref.err")"; exit 1; }
  TESSERA_SHM_DIR=$shm timeout 120 "$bin/tessera" pipeline "${graph[@]}" --analysis process --analysis-control "$ctl" \
    >"$work/pod.json" 2>"$work/pod.err" &
  caller=$!
  "$src/scripts/analyze-in-container.sh" "$shm" -- /usr/local/bin/tessera-analyze --control "$ctl" \
    --wait-for-control 60 >"$work/analysis.err" 2>&1 || { echo "FAIL: tessera-analyze in podman: $(cat "$work/analysis.err")"; }
  wait $caller || { echo "FAIL: the pipeline waiting for the podman analysis: $(cat "$work/pod.err")"; exit 1; }
  /usr/bin/python3 - "$work/ref.json" "$work/pod.json" <<'PY' || exit 1
import json, sys
a, b = (json.load(open(p))["hitting"] for p in sys.argv[1:3])
if abs(a["mean"] - b["mean"]) > 1e-12 * abs(a["mean"]) or a["max"] != b["max"]:
    sys.exit(f"FAIL: podman analysis mean {b['mean']} differs from in-process {a['mean']}")
hs = b["handshake"]
print(f"ok: tessera-analyze in podman: same hitting times as in process (mean {b['mean']:.6f}); "
      f"request->start {hs['request_to_start_seconds'] * 1e6:.1f} us, result->resume {hs['result_to_resume_seconds'] * 1e6:.1f} us")
PY
  left=$(ls "$shm" | grep -v '\-word$' || true)
  [ -z "$left" ] || { echo "FAIL: left in the Shared directory: $left"; exit 1; }
fi
echo "PASS: the analysis image runs under podman and a futex word crosses into it"
