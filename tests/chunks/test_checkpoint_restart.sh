#!/usr/bin/env bash
# Restart on another rank count: a checkpoint written at every P in WRITERS
# is read back at every Q in READERS, each compared with the serial values
# (tests/chunks/test_checkpoint.cpp, Restart.*); then `tessera checkpoint
# list|rm` on them. Usage: MPIRUN PROGRAM
set -euo pipefail
mpirun=$1 program=$2
WRITERS=${WRITERS:-1 2 3 4 8}
READERS=${READERS:-1 2 3 4 8}
dir=$(mktemp -d /tmp/tessera-ckpt-restart-XXXXXX)
trap 'rm -rf "$dir"' EXIT
export TESSERA_CKPT_RESTART_DIR=$dir
for p in $WRITERS; do
  "$mpirun" -n "$p" "$program" --gtest_filter=Restart.Write --gtest_brief=1
done
export TESSERA_CKPT_RESTART_WRITERS=$(echo $WRITERS | tr ' ' ',')
for q in $READERS; do
  "$mpirun" -n "$q" "$program" --gtest_filter=Restart.Read --gtest_brief=1
done
echo "restart: every (P, Q) with P in {$WRITERS}, Q in {$READERS} read back bit-identical"

# tessera checkpoint list|rm on what the writers left: valid, then refused
# once a byte is damaged, then gone.
tessera=${TESSERA_BINARY_DIR:?}/tessera
out=$("$tessera" checkpoint list --dir "$dir" restart2 --json)
grep -q '"valid":true' <<<"$out" || { echo "FAIL: checkpoint list --json: $out"; exit 1; }
data=$(ls -d "$dir"/restart2.ckpt/s*/r000001.data)
printf '\x5a' | dd of="$data" bs=1 seek=200 conv=notrunc status=none
out=$("$tessera" checkpoint list --dir "$dir" restart2)
grep -q "refused" <<<"$out" && grep -q "fails its checksum" <<<"$out" || { echo "FAIL: damage not reported: $out"; exit 1; }
out=$("$tessera" checkpoint rm --dir "$dir" restart2)
grep -q "^removed 1 checkpoint(s) of restart2" <<<"$out" || { echo "FAIL: checkpoint rm: $out"; exit 1; }
[ ! -e "$dir/restart2.ckpt" ] || { echo "FAIL: $dir/restart2.ckpt left after rm"; exit 1; }
out=$("$tessera" checkpoint list --dir "$dir" restart2)
grep -q "^no checkpoints of restart2" <<<"$out" || { echo "FAIL: list after rm: $out"; exit 1; }
echo "checkpoint list/rm: valid, damage refused, removed"
