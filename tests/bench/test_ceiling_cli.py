#!/usr/bin/env python3
"""The per-core ceiling of `bench indexgather` and `bench histogram`, at 1 and
2 ranks: a local-loop row (the kernel with no communication) in the unit of
the aggregated rows and a memcpy row (GB/s, its own group), both verified;
every aggregated row carries fraction_of_ceiling and memcpy_bytes_per_record,
recomputed here from the rows' own rates, and one summary line says the same."""
import math
import os
import subprocess
import sys

from bench_cli import private_shm, run_bench

BUILD = sys.argv[1]
TESSERA = os.path.join(BUILD, "tessera")
BENCHES = {
    "indexgather": ["--table", "1000", "--requests", "20000", "--fine-requests", "200"],
    "histogram": ["--counts", "100", "--updates", "20000", "--fine-updates", "200"],
}
LOCAL = "local loop (no communication)"
MEMCPY = "memcpy (no communication)"


def close(a, b):
    return math.isclose(a, b, rel_tol=1e-9)


def one(rows, **fields):
    found = [r for r in rows if all(r.get(k) == v for k, v in fields.items())]
    assert len(found) == 1, (fields, [(r["group"], r["variant"], r["storage"]) for r in rows])
    return found[0]


def check(bench, ranks, rows, summaries):
    local = one(rows, variant=LOCAL)
    copy = one(rows, variant=MEMCPY)
    aggregated = [r for r in rows if r["variant"] == "aggregated"]
    assert len(aggregated) >= 5, rows
    assert local["group"] == aggregated[0]["group"] and local["unit"] == aggregated[0]["unit"], local
    assert copy["group"] == "memcpy" and copy["unit"] == "GB/s", copy
    for r in (local, copy):
        assert r["verified"] and r["rate"] > 0 and r["ranks"] == ranks, r
    # The rows' work is the whole job's: the local loop does every rank's stream, memcpy copies it once.
    assert local["work"] == aggregated[0]["work"], (local, aggregated[0])
    assert copy["work"] == 8 * local["work"], copy
    fractions = {}
    for r in aggregated:
        assert r["verified"], r
        f = r["extra"]["fraction_of_ceiling"]
        assert close(f, r["rate"] / local["rate"]), (r, local["rate"])
        assert close(r["extra"]["memcpy_bytes_per_record"], copy["rate"] * 1e9 / (r["rate"] * 1e6)), r
        fractions[r["storage"]] = f
    ceiling = [s for s in summaries if "ceiling_rate" in s]
    assert len(ceiling) == 1, summaries
    s = ceiling[0]
    assert close(s["ceiling_rate"], local["rate"]) and close(s["memcpy_gb_per_s"], copy["rate"]), s
    assert s["ceiling_unit"] == local["unit"], s
    assert s["fraction_of_ceiling"].keys() == fractions.keys(), s
    assert all(close(s["fraction_of_ceiling"][k], v) for k, v in fractions.items()), s
    for storage in fractions:
        assert f" {storage} " in s["summary"], s["summary"]
    # Rows that are not aggregated carry no fraction.
    assert all("fraction_of_ceiling" not in r["extra"] for r in rows if r["variant"] != "aggregated")


def main():
    with private_shm("tessera-ceiling-") as env:
        for ranks in (1, 2):
            for bench, args in BENCHES.items():
                run, rows, summaries = run_bench(TESSERA, [bench, "-n", str(ranks), "--reps", "2", *args], env)
                assert run.returncode == 0, (bench, ranks, run.stderr)
                check(bench, ranks, rows, summaries)
        # The human table names both rows and prints the summary.
        table = subprocess.run([TESSERA, "bench", "histogram", "-n", "2", "--reps", "1", "-q", *BENCHES["histogram"]],
                               capture_output=True, text=True, timeout=300, env=env)
        assert table.returncode == 0, table.stderr
        for text in (LOCAL, MEMCPY, "per-core ceiling (same run): local loop"):
            assert text in table.stdout, table.stdout
    print("the per-core ceiling rows run, verify and relate to every aggregated row: ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())
