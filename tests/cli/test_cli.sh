#!/usr/bin/env bash
# The tessera program end to end: info, one error message for a multi-rank
# failure, and every benchmark verifying its result at small sizes.
set -uo pipefail
tessera=$1/tessera
fail=0
# Segments go to a directory of this test's own (on /dev/shm's tmpfs): the
# check at the end is about these runs only, whatever other tests do meanwhile.
export TESSERA_SHM_DIR=$(mktemp -d /dev/shm/tessera-test-cli.XXXXXX)
scratch=$(mktemp -d); trap 'rm -rf "$scratch" "$TESSERA_SHM_DIR"' EXIT
check() { if eval "$2"; then echo "ok   $1"; else echo "FAIL $1"; fail=1; fi; }

out=$("$tessera" info -n 2 2>&1)
check "info shows ranks and co-locales" 'grep -q "2 on 1 node(s); co-locales per node: 2" <<<"$out"'
check "info shows the hwloc view" 'grep -qE "[0-9]+ cores?, [0-9]+ PUs?" <<<"$out"'
json=$("$tessera" info --json)
check "info --json parses" 'python3 -c "import json,sys; d=json.loads(sys.argv[1]); assert d[\"ranks\"]==1 and d[\"aggregation\"][\"buffer_bytes\"]>0" "$json"'

err=$(TESSERA_AGG_BUFFER_BYTES=huge "$tessera" bench histogram -n 3 --updates 1000 2>&1 >/dev/null); rc=$?
check "a bad setting fails the job" '[ $rc -ne 0 ]'
check "the error names the variable once" \
  '[ "$(grep -c "TESSERA_AGG_BUFFER_BYTES must be" <<<"$err")" -eq 1 ] || { echo "stderr was:"; echo "$err"; false; }'

# An error under -n K: one line on stderr, no Open MPI abort banner.
printf '0 1\n1 2\n' > "$scratch/p.el"
for ranks in 2 3; do
  err=$("$tessera" hitting -n $ranks "$scratch/p.el" --targets 7 -q 2>&1 >/dev/null); rc=$?
  check "an error at $ranks ranks fails the job" '[ $rc -ne 0 ]'
  check "an error at $ranks ranks prints exactly one line" \
    '[ "$(wc -l <<<"$err")" -eq 1 ] && grep -q "target vertex 7 is outside" <<<"$err" || { echo "$err"; false; }'
done

err=$("$tessera" bench ra --log-table 2 2>&1); rc=$?
check "an out-of-range option is refused" '[ $rc -ne 0 ] && grep -q "log-table" <<<"$err"'

# The benchmark matrix (bench, group, variant, storage) does not depend on the
# rank count: the rows at 3 ranks must be those of the 1-rank run (numbers in
# a variant's name, such as its thread count, aside).
first_rows=
for ranks in 1 3; do
  out=$("$tessera" bench stream -n $ranks --elements 200000 --reps 2 --json && \
        "$tessera" bench ra -n $ranks --log-table 12 --fine-updates 500 --reps 2 --json && \
        "$tessera" bench indexgather -n $ranks --table 1000 --requests 20000 --fine-requests 500 --reps 2 --json && \
        "$tessera" bench histogram -n $ranks --counts 100 --updates 20000 --fine-updates 500 --reps 2 --json)
  rc=$?
  check "every benchmark exits 0 at $ranks ranks" '[ $rc -eq 0 ]'
  check "bench --json prints only JSON lines on stdout" '! grep -qv "^{" <<<"$out"'
  rows=$(python3 -c "
import json,re,sys
rows=[json.loads(l) for l in sys.argv[1].splitlines() if l.startswith(\"{\")]
for r in rows:
    if \"summary\" not in r:  # summary lines (multi-hop memory) carry no result
        print(r[\"bench\"], r[\"group\"], re.sub(r\"[0-9]+\", \"N\", r[\"variant\"]), r[\"storage\"], sep=\"|\")
" "$out" | sort)
  [ -n "$first_rows" ] || first_rows=$rows
  check "every benchmark run printed results at $ranks ranks" \
    'missing=; for b in stream ra indexgather histogram; do grep -q "^$b|" <<<"$rows" || missing="$missing $b"; done
     [ -z "$missing" ] || { echo "no results from:$missing"; false; }'
  check "the same $(wc -l <<<"$first_rows") results at $ranks ranks as at 1 rank, no row twice" \
    '[ "$rows" = "$first_rows" ] && [ -z "$(uniq -d <<<"$rows")" ] || { diff <(echo "$first_rows") <(echo "$rows"); false; }'
  check "every result at $ranks ranks verified, with its rank count and a rate" \
    'python3 -c "
import json,sys
rows=[json.loads(l) for l in sys.argv[1].splitlines() if l.startswith(\"{\")]
rows=[r for r in rows if \"summary\" not in r]
assert rows
assert all(r[\"verified\"] for r in rows), [r for r in rows if not r[\"verified\"]]
assert all(r[\"ranks\"]==$ranks and r[\"rate\"]>0 for r in rows)
" "$out"'
done

out=$("$tessera" bench ra --log-table 10 --fine-updates 100 --reps 1 2>/dev/null); rc=$?
check "bench without --json prints a table and no JSON" '[ $rc -eq 0 ] && grep -q "verified" <<<"$out" && ! grep -q "^{" <<<"$out"'
err=$("$tessera" bench ra -q --log-table 10 --fine-updates 100 --reps 1 2>&1 >/dev/null)
check "bench -q prints nothing on stderr" '[ -z "$err" ]'

left=$("$tessera" shm list | grep -c " dead " || true)
check "no segments of dead processes left in $TESSERA_SHM_DIR" '[ "$left" -eq 0 ]'
[ $fail -eq 0 ] && echo "PASS" || echo "FAILED"
exit $fail
