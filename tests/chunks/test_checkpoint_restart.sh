#!/usr/bin/env bash
# Restart on another rank count: a checkpoint written at every P in WRITERS
# is read back at every Q in READERS, each compared with the serial values
# (tests/chunks/test_checkpoint.cpp, Restart.*). Usage: MPIRUN PROGRAM
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
