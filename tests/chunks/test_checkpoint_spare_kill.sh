#!/usr/bin/env bash
# A rank killed halfway through a node-level commit into the reused spare
# (tests/chunks/test_checkpoint.cpp, SpareKill.*): the writer runs under the
# supervisor (`tessera -n 2 run --fault 1:1:spare:1`), so step 3's commit,
# the first to take over a spare, is torn; then readers at 3 and 2 ranks find
# step 2 and restore it bit for bit, the last one commits again and removes
# the checkpoints, and the job's shm directory must be empty.
# Usage: MPIRUN PROGRAM
set -euo pipefail
mpirun=$1 program=$2
tessera=${TESSERA_BINARY_DIR:?}/tessera
dir=$(mktemp -d /dev/shm/tessera-test-spare-kill-XXXXXX)
tmp=$(mktemp -d /tmp/tessera-test-spare-kill-XXXXXX)
trap 'rm -rf "$dir" "$tmp"' EXIT
# Every file of the job (Tessera's and Open MPI's) in the one directory.
export TESSERA_SHM_DIR=$dir OMPI_MCA_btl_vader_backing_directory=$dir TMPDIR=$tmp TESSERA_CKPT_SPARE_DIR=$dir
fail() { echo "FAIL: $*"; exit 1; }

set +e
out=$("$tessera" -n 2 run --fault 1:1:spare:1 "$program" --gtest_filter=SpareKill.Write --gtest_brief=1 2>&1)
rc=$?
set -e
[ "$rc" != 0 ] || fail "the writer was not killed: $out"
grep -q "rank died: rank 1 (SIGKILL injected halfway through writing the checkpoint of step 3 into the reused spare" <<<"$out" ||
  fail "the supervisor does not name the kill in the spare: $out"
echo "writer: rank 1 killed halfway through step 3's commit into the spare"

export TESSERA_CKPT_SPARE_WRITERS=2
"$mpirun" -n 3 "$program" --gtest_filter=SpareKill.Read --gtest_brief=1
TESSERA_CKPT_SPARE_FINISH=1 "$mpirun" -n 2 "$program" --gtest_filter=SpareKill.Read --gtest_brief=1
echo "readers at 3 and 2 ranks: step 2 restored bit for bit; a new commit, then removed"

segments=$("$tessera" shm list --json --dir "$dir")
grep -q '"files":\[\]' <<<"$segments" || fail "segments left in the job's shm directory: $segments"
left=$(find "$dir" -mindepth 1)
[ -z "$left" ] || fail "left in the job's shm directory: $left"
echo "nothing left in the job's shm directory"
