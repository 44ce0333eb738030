#!/usr/bin/env python3
"""scripts/plot_bench.py on a small JSON-lines file (two benchmarks at two
rank counts, an unverified row, a buffer-size sweep, summary and progress
lines to skip) writes a PNG; an input without results is refused with a
message. Exit 77 (skipped) when matplotlib is not installed."""
import json
import os
import subprocess
import sys
import tempfile

SOURCE = os.environ.get("TESSERA_SOURCE_DIR") or os.path.join(os.path.dirname(__file__), "..", "..")
SCRIPT = os.path.join(SOURCE, "scripts", "plot_bench.py")


def row(bench, variant, storage, ranks, rate, unit, group="", verified=True, **extra):
    return json.dumps({"bench": bench, "group": group, "variant": variant, "storage": storage, "ranks": ranks,
                       "rate": rate, "unit": unit, "verified": verified, "check": "ok", "extra": extra})


def main():
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        print("matplotlib missing: skipped")
        return 77
    lines = ["isx: 33554432 keys (a progress note)"]
    for ranks, scale in ((1, 1.0), (2, 1.7)):
        lines += [row("isx", "alltoallv (ParRes ISx shape)", "heap", ranks, 10 * scale, "M keys/s"),
                  row("isx", "aggregated + radix", "heap", ranks, 40 * scale, "M keys/s"),
                  row("argsort", "radix argsort", "shared+direct", ranks, 25 * scale, "M keys/s"),
                  row("argsort", "gather a[perm]", "heap", ranks, 50 * scale, "M elems/s", group="gather",
                      verified=ranks == 1)]
    for size in (1024, 4096, 65536, 1 << 20):
        lines.append(row("indexgather", "aggregated", "heap", 4, 60 + size / 1e5, "M reads/s", buffer_bytes=size))
    lines.append(json.dumps({"bench": "isx", "summary": "best 40 M keys/s", "ranks": 2, "best_rate": 40}))
    with tempfile.TemporaryDirectory() as tmp:
        data = os.path.join(tmp, "results.jsonl")
        with open(data, "w") as f:
            f.write("\n".join(lines) + "\n")
        png = os.environ.get("PLOT_TEST_KEEP") or os.path.join(tmp, "out.png")
        run = subprocess.run([sys.executable, SCRIPT, data, "-o", png, "--title", "test"], capture_output=True,
                             text=True)
        assert run.returncode == 0, run.stderr
        assert "12 results drawn" in run.stderr, run.stderr
        with open(png, "rb") as f:
            head = f.read(8)
        assert head == b"\x89PNG\r\n\x1a\n", head
        assert os.path.getsize(png) > 10000, os.path.getsize(png)

        empty = os.path.join(tmp, "empty.jsonl")
        with open(empty, "w") as f:
            f.write("only a progress note\n" + json.dumps({"bench": "isx", "summary": "x", "ranks": 1}) + "\n")
        run = subprocess.run([sys.executable, SCRIPT, empty, "-o", os.path.join(tmp, "no.png")],
                             capture_output=True, text=True)
        assert run.returncode == 2 and "no benchmark results" in run.stderr, run.stderr
        assert not os.path.exists(os.path.join(tmp, "no.png"))
        run = subprocess.run([sys.executable, SCRIPT, os.path.join(tmp, "missing.jsonl")], capture_output=True,
                             text=True)
        assert run.returncode == 2 and "cannot read" in run.stderr, run.stderr
    print("plot_bench: ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())
