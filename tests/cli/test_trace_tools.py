#!/usr/bin/env python3
"""tessera trace summary|plot (issue 57) on a trace written by hand
(tests/python/trace_samples.py): the program finds the Python package beside
itself (build/python, no PYTHONPATH), prints the summary's tables and its
JSON, draws a PNG and an SVG; a malformed file, a picture format it cannot
write, -n, a missing file and a Python that cannot start are refused with
one line. Exit 77 (skipped) only for the pictures, when this Python has no
matplotlib.

Usage: test_trace_cli.py BUILD_DIR"""
import json
import os
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, ".."))
sys.path.insert(0, os.path.join(HERE, "..", "python"))
from harness import check, finish, run, said  # noqa: E402
from trace_samples import SAMPLE_EXPECTED, sample, variant, write  # noqa: E402

TESSERA = os.path.join(sys.argv[1], "tessera")
# The package must be found beside the program, not through the caller's path.
ENV = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "TESSERA_PYTHON")}


def tessera(*args, env=None):
    return run([TESSERA, *args], env=env or ENV)


def one_error_line(p, *parts):
    lines = p.stderr.strip().splitlines()
    return p.returncode == 1 and len(lines) == 1 and lines[0].startswith("tessera: error: ") and \
        all(part in lines[0] for part in parts)


def main():
    skipped = []
    with tempfile.TemporaryDirectory() as tmp:
        trace = write(os.path.join(tmp, "t.json"), sample())

        p = tessera("trace", "summary", trace)
        check(p.returncode == 0 and "3 ranks on 2 hosts (alpha, beta)" in p.stdout, "summary: its tables", said(p))
        rank0 = next((line.split() for line in p.stdout.splitlines() if line.startswith("   0  alpha")), [])
        check(rank0[:5] == ["0", "alpha", "1.000", "0.600", "60.0%"], "summary: rank 0 busy 0.6 s of 1 s", said(p))
        check("components" in p.stdout and "1.64" in p.stdout, "summary: the phases with their imbalance", said(p))

        p = tessera("trace", "summary", trace, "--json")
        try:
            document = json.loads(p.stdout)
        except json.JSONDecodeError:
            document = None
        check(document is not None and p.returncode == 0, "summary --json: one JSON document on stdout", said(p))
        if document:
            busy = [r["busy_s"] for r in document["ranks"]]
            check(len(busy) == 3 and all(abs(b - e["busy"]) < 1e-12 for b, e in zip(busy, SAMPLE_EXPECTED["ranks"])),
                  f"summary --json: busy seconds per rank {busy}")
            check(document["traffic"]["bytes"] == SAMPLE_EXPECTED["bytes"], "summary --json: the traffic matrix")

        bad = write(os.path.join(tmp, "bad.json"), variant(lambda d: d["traceEvents"][-5].__setitem__("pid", 7)))
        p = tessera("trace", "summary", bad)
        check(one_error_line(p, bad, "pid 7 is not a rank of this 3-rank job"), "a malformed file: one line", said(p))
        p = tessera("trace", "plot", trace, "-o", os.path.join(tmp, "t.pdf"))
        check(one_error_line(p, ".png or .svg"), "plot: only .png and .svg", said(p))
        p = tessera("-n", "2", "trace", "summary", trace)
        check(one_error_line(p, "drop -n"), "-n refused", said(p))
        p = tessera("trace", "summary", os.path.join(tmp, "missing.json"))
        check(p.returncode != 0 and "missing.json" in p.stderr, "a missing file refused by the parser", said(p))
        p = tessera("trace")
        check(p.returncode != 0 and "subcommand is required" in p.stderr, "trace alone: a subcommand asked for",
              said(p))
        p = tessera("trace", "summary", trace, env=dict(ENV, TESSERA_PYTHON=os.path.join(tmp, "no-python")))
        check(one_error_line(p, "cannot start", "no-python", "for tessera trace", "TESSERA_PYTHON"),
              "a Python that cannot start: named", said(p))

        try:
            import matplotlib  # noqa: F401 - the package's tools run in this Python (TESSERA_PYTHON's default)
        except ImportError:
            skipped.append("plot (no matplotlib)")
        else:
            for name, magic in (("t.png", b"\x89PNG\r\n\x1a\n"), ("t.svg", b"<?xml")):
                out = os.path.join(tmp, name)
                p = tessera("trace", "plot", trace, "-o", out)
                with open(out, "rb") if os.path.exists(out) else open(os.devnull, "rb") as f:
                    head = f.read(len(magic))
                check(p.returncode == 0 and head == magic and os.path.getsize(out) > 20_000,
                      f"plot -o {name}: {os.path.getsize(out) if os.path.exists(out) else 0} bytes", said(p))
    finish(skipped)


if __name__ == "__main__":
    main()
