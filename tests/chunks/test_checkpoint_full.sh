#!/usr/bin/env bash
# A full file system during a checkpoint: the node level on a 1 MiB tmpfs,
# mounted in a private mount namespace (needs root; skipped otherwise), at 2
# ranks (tests/chunks/test_checkpoint.cpp, FullSpace.*). Usage: MPIRUN PROGRAM
set -euo pipefail
mpirun=$1 program=$2
if [ "$(id -u)" != 0 ] || ! unshare -m true 2>/dev/null; then
  echo "skipped: a private tmpfs needs root and unshare -m"
  exit 77
fi
dir=$(mktemp -d /tmp/tessera-ckpt-full-XXXXXX)
trap 'rmdir "$dir"' EXIT
TESSERA_CKPT_SMALL_DIR=$dir unshare -m bash -c '
  set -e
  mount -t tmpfs -o size=1m tessera-ckpt-full "$TESSERA_CKPT_SMALL_DIR"
  "$0" -n 2 "$1" --gtest_filter=FullSpace.* --gtest_brief=1
  left=$(find "$TESSERA_CKPT_SMALL_DIR" -mindepth 1 | wc -l)
  if [ "$left" != 0 ]; then echo "left behind:"; find "$TESSERA_CKPT_SMALL_DIR"; exit 1; fi
' "$mpirun" "$program"
