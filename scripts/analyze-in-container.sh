#!/usr/bin/env bash
# Runs one command (normally tessera-analyze) in a container that shares with
# the caller nothing but the Shared storage directory: the canonical command
# line for `tessera pipeline --analysis container` and for the tests.
#
# Usage:
#   scripts/analyze-in-container.sh [--engine bwrap|podman|docker] [--image IMAGE]
#                                   SHARED_DIR -- COMMAND [ARG...]
#
#   SHARED_DIR  the directory holding the segments, the metadata and the control
#               segment (TESSERA_SHM_DIR). It is bind-mounted read-write at the
#               SAME path inside, so metadata paths mean the same on both sides.
#               Use a directory other than /dev/shm to keep /dev/shm private.
#   COMMAND     run inside; with bwrap the host's file system is visible
#               read-only, so a path to the built tessera-analyze works as is.
#               With podman/docker COMMAND is a path inside IMAGE
#               (default image: tessera-analyze, see containers/analyze/).
#
# bwrap (default; Debian package bubblewrap, no daemon, ~10 ms to start): new
# user, PID, IPC, network, UTS, cgroup and mount namespaces, the host's file
# system read-only, a private /dev (so a private /dev/shm: named POSIX
# semaphores do not cross), a private /tmp, and SHARED_DIR writable. The
# container dies with its caller (--die-with-parent). The environment is
# passed through (TESSERA_* variables reach the analysis).
#
# podman (4.3 in Debian 12): run with runc (crun fails on this kernel's
# hybrid cgroups) and explicit open-file and process limits (our hard ones); network and IPC
# private, SHARED_DIR bind-mounted at the same path, TESSERA_* variables
# passed on.
#
# Exit status: COMMAND's, or 125 when the container cannot be started (the
# engine is missing or refuses; the reason is on stderr).
set -euo pipefail

engine=${TESSERA_CONTAINER_ENGINE:-bwrap}
image=${TESSERA_CONTAINER_IMAGE:-tessera-analyze}
usage() { sed -n '5,17p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 125; }
while [ $# -gt 0 ]; do
  case $1 in
    --engine) engine=${2:?--engine needs bwrap, podman or docker}; shift 2 ;;
    --image) image=${2:?--image needs an image name}; shift 2 ;;
    -h|--help) usage ;;
    --) usage ;;
    *) break ;;
  esac
done
[ $# -ge 3 ] && [ "$2" = "--" ] || usage
shared_dir=$(cd "$1" 2>/dev/null && pwd -P) || {
  echo "tessera: error: shared directory '$1' does not exist" >&2; exit 125; }
shift 2

case $engine in
  bwrap)
    command -v bwrap >/dev/null || {
      echo "tessera: error: bwrap not found; install it with 'apt-get install bubblewrap'" >&2; exit 125; }
    # Order matters: the private /dev and /tmp first, then, read-only, the
    # top directory under /tmp of every file COMMAND names there (a checkout
    # built in /tmp: the program and its libraries), the shared directory on
    # top (it may lie under /tmp).
    programs=()
    for arg in "$@"; do
      case $arg in
        /tmp/?*) rest=${arg#/tmp/}; [ -f "$arg" ] && programs+=(--ro-bind "/tmp/${rest%%/*}" "/tmp/${rest%%/*}") ;;
      esac
    done
    exec bwrap --unshare-all --die-with-parent \
      --ro-bind / / --proc /proc --dev /dev --tmpfs /tmp "${programs[@]}" \
      --bind "$shared_dir" "$shared_dir" \
      --chdir "$shared_dir" \
      -- "$@"
    ;;
  podman|docker)
    command -v "$engine" >/dev/null || {
      echo "tessera: error: $engine not found" >&2; exit 125; }
    # Explicit limits: podman's defaults (and even our own hard process limit)
    # exceed what runc may set for a caller without CAP_SYS_RESOURCE, and
    # runc then fails with EPERM ("error setting rlimits"). Measured here: 16384
    # processes works, 65536 does not.
    nofile=$(ulimit -Hn); nproc=$(ulimit -Hu)
    [ "$nofile" = unlimited ] || [ "$nofile" -gt 1048576 ] && nofile=1048576
    [ "$nproc" = unlimited ] || [ "$nproc" -gt 16384 ] && nproc=16384
    opts=(run --rm -i --network none --ipc private --security-opt label=disable
          -v "$shared_dir:$shared_dir" -w "$shared_dir"
          --ulimit "nofile=$nofile:$nofile" --ulimit "nproc=$nproc:$nproc")
    [ "$engine" = podman ] && opts+=(--runtime runc)
    while IFS='=' read -r key _; do opts+=(-e "$key"); done < <(env | grep '^TESSERA_' || true)
    exec "$engine" "${opts[@]}" "$image" "$@"
    ;;
  *) echo "tessera: error: unknown container engine '$engine' (bwrap, podman or docker)" >&2; exit 125 ;;
esac
