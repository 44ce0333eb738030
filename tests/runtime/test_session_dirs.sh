#!/usr/bin/env bash
# A job on one node gets an Open MPI session directory base of its own, from
# scripts/mpirun.sh and from `tessera -n K`: Open MPI keeps every job's
# directory under one top directory per user and host and removes it when a
# job ends and finds it empty, and a job starting then failed ("ORTE_ERROR_LOG:
# ... session_dir.c") in a fresh machine's `make test`. Checked: where each
# launch's session directory is, that ended launches' bases are removed, that
# a base the user chose and launches across hosts are left alone, jobs side by
# side, singletons, and that nothing is left in TMPDIR.
# Usage: test_session_dirs.sh BUILD_DIR SOURCE_DIR
set -u
bin=$1 src=$2
mpirun_sh=$src/scripts/mpirun.sh
TMPDIR=$(mktemp -d)
export TMPDIR
trap 'rm -rf "$TMPDIR"' EXIT
bases="$TMPDIR/tessera-mpirun.$(id -u).$(stat -Lc %i /proc/self/ns/pid)"
failures=0
ok() { echo "ok   $*"; }
fail() { echo "FAIL $*"; failures=$((failures + 1)); }
check() { if eval "$1"; then ok "$2"; else fail "$2"; fi; }
top_of() { "$@" sh -c 'echo "$OMPI_MCA_orte_top_session_dir"' | sort -u; }

top=$(top_of "$mpirun_sh" -n 2)
base=${top%/ompi.*}
check '[[ "$base" == "$bases"/[0-9]* && -d "$base" ]]' "mpirun.sh: both ranks' session directory is under a base of the job's own ($top)"
check '[ ! -e "$TMPDIR/ompi.$(hostname).$(id -u)" ]' "mpirun.sh: nothing in Open MPI's shared top directory"
"$mpirun_sh" -n 1 true
check '[ ! -e "$base" ]' "mpirun.sh: the next launch removes the ended job's base"

mkdir "$TMPDIR/mine"
chosen=$(OMPI_MCA_orte_tmpdir_base="$TMPDIR/mine" top_of "$mpirun_sh" -n 2)
check '[[ "$chosen" == "$TMPDIR/mine/ompi."* ]]' "mpirun.sh: a base the user chose stands ($chosen)"
rm -rf "$TMPDIR/mine"

across=$(top_of "$mpirun_sh" --host localhost:2 -n 2)
check '[[ "$across" == "$TMPDIR/ompi."* ]]' "mpirun.sh --host: Open MPI's own base ($across)"

# Side by side: 4 x 8 two-rank MPI jobs, each launch sweeping the others' ended bases.
for j in 1 2 3 4; do
  (for i in 1 2 3 4 5 6 7 8; do
     "$mpirun_sh" -n 2 "$bin/tests/test_runtime" --gtest_filter='Runtime.*Rank*' >/dev/null 2>"$TMPDIR/err.$j" ||
       { echo "job $j.$i failed: $(tail -3 "$TMPDIR/err.$j")"; }
   done) &
done > "$TMPDIR/side-by-side" 2>&1
wait
check '[ ! -s "$TMPDIR/side-by-side" ]' "32 jobs side by side all ran $(head -2 "$TMPDIR/side-by-side")"
rm -f "$TMPDIR"/err.* "$TMPDIR/side-by-side"
"$mpirun_sh" -n 1 true
left=$(ls "$bases")
check '[ "$(echo "$left" | wc -w)" -eq 1 ]' "one launch alone leaves only its own base ($left)"

run_top=$(top_of "$bin/tessera" -n 2 run 2>/dev/null)
check '[[ "$run_top" == "$bases"/[0-9]*.attempt1/ompi.* ]]' "tessera -n 2 run: the attempt's own base, beside the others ($run_top)"
check '[ -z "$(ls "$TMPDIR" | grep -v "^tessera-mpirun\.")" ]' "tessera -n 2 run leaves nothing in TMPDIR ($(ls "$TMPDIR"))"
check '[ -z "$(ls "$bases" | grep attempt)" ]' "tessera -n 2 run removes its attempt's base ($(ls "$bases"))"

# An out-of-process analysis: its mpirun (started by the caller's rank 0) gets
# a base of its own too, removed when the analysis ends. The analysis ranks
# are this wrapper, which records where their session directory is.
cat > "$TMPDIR/analyze-wrapper" <<WRAPPER
#!/bin/sh
echo "\$OMPI_MCA_orte_top_session_dir" >> "$TMPDIR/analysis-top"
exec "$bin/tessera-analyze" "\$@"
WRAPPER
chmod +x "$TMPDIR/analyze-wrapper"
rm -rf "$TMPDIR"/tessera-mpirun.*
TESSERA_ANALYZE="$TMPDIR/analyze-wrapper" "$bin/tessera" -n 2 pipeline --scale 7 --analysis process -q > "$TMPDIR/pipeline.out" 2>&1
rc=$?
check '[ "$rc" -eq 0 ]' "tessera -n 2 pipeline --analysis process runs (exit $rc$( [ "$rc" -eq 0 ] || tail -3 "$TMPDIR/pipeline.out"))"
analysis_top=$(sort -u "$TMPDIR/analysis-top" 2>/dev/null)
check '[[ "$(echo "$analysis_top" | wc -l)" -eq 1 && "$analysis_top" == "$bases"/[0-9]*/ompi.* ]]' "the analysis' session directory is under a base of its launch's own ($analysis_top)"
check '[ -z "$(ls "$bases" 2>/dev/null)" ]' "the analysis' base is removed when it ends ($(ls "$bases" 2>/dev/null))"
rm -f "$TMPDIR/analysis-top" "$TMPDIR/pipeline.out" "$TMPDIR/analyze-wrapper"

# A singleton (no launcher): Open MPI 4.1 leaves its jf.N directory under
# TMPDIR/ompi.HOST.UID at every run, unless the process has a base of its own.
rm -rf "$TMPDIR"/tessera-mpirun.*
"$bin/tessera" info > /dev/null 2>&1
"$bin/tessera" pipeline --scale 7 -q > /dev/null 2>&1
check '[ -z "$(ls "$TMPDIR" | grep -v "^tessera-mpirun\.")" ]' "singletons leave nothing in TMPDIR ($(ls "$TMPDIR"))"
check '[ -z "$(ls "$bases" 2>/dev/null)" ]' "a singleton's own base is removed when it ends ($(ls "$bases" 2>/dev/null))"

if [ "$failures" -ne 0 ]; then echo "$failures failed"; exit 1; fi
