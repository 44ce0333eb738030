#!/usr/bin/env python3
"""`tessera bench isx` and `tessera bench argsort` end to end at 1 and 2 ranks
on small sizes (issue 13): every result line verified, the summary line
present, check_targets.py and plot_bench.py accept the output, and bad
options are refused with a message naming them."""
import json
import os
import subprocess
import sys
import tempfile

BUILD = sys.argv[1]
SOURCE = os.environ.get("TESSERA_SOURCE_DIR") or os.path.join(os.path.dirname(__file__), "..", "..")
TESSERA = os.path.join(BUILD, "tessera")


def bench(*args):
    run = subprocess.run([TESSERA, "bench", *args, "--json", "-q", "--reps", "1"], capture_output=True, text=True,
                         timeout=300)
    assert run.returncode == 0, (args, run.returncode, run.stderr)
    return run.stdout


def main():
    output = ""
    for ranks in ("1", "2"):
        output += bench("isx", "-n", ranks, "--keys", "30000", "--max-key", "1000003")
        output += bench("argsort", "-n", ranks, "--keys", "30000", "--key-bits", "64", "--digit-bits", "11")
    records = [json.loads(line) for line in output.splitlines()]
    results = [r for r in records if "summary" not in r]
    summaries = [r for r in records if "summary" in r]
    assert len(results) == 2 * (3 + 5), len(results)
    assert all(r["verified"] for r in results), [r for r in results if not r["verified"]]
    assert {(s["bench"], s["ranks"]) for s in summaries} == {("isx", 1), ("isx", 2), ("argsort", 1), ("argsort", 2)}
    argsort_rows = [r for r in results if r["bench"] == "argsort" and r["variant"] == "radix argsort"]
    assert all(r["extra"]["digits_sorted"] == 6 for r in argsort_rows), argsort_rows  # 64 bits / 11

    checker = subprocess.run([sys.executable, os.path.join(SOURCE, "tests", "bench", "check_targets.py")],
                             input=output, capture_output=True, text=True)
    assert checker.returncode == 0, checker.stderr  # small sizes: no target figure, every row verified
    try:
        import matplotlib  # noqa: F401
        with tempfile.TemporaryDirectory() as tmp:
            png = os.path.join(tmp, "sort.png")
            data = os.path.join(tmp, "sort.jsonl")
            with open(data, "w") as f:
                f.write(output)
            plot = subprocess.run([sys.executable, os.path.join(SOURCE, "scripts", "plot_bench.py"), data, "-o", png],
                                  capture_output=True, text=True)
            assert plot.returncode == 0 and os.path.getsize(png) > 0, plot.stderr
    except ImportError:
        pass

    bad = subprocess.run([TESSERA, "bench", "isx", "--max-key", "0", "--keys", "10"], capture_output=True, text=True)
    assert bad.returncode != 0 and "--max-key 0" in bad.stderr, bad.stderr
    bad = subprocess.run([TESSERA, "bench", "argsort", "--digit-bits", "0"], capture_output=True, text=True)
    assert bad.returncode != 0 and "--digit-bits" in bad.stderr, bad.stderr
    print("sorting benchmarks end to end: ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())
