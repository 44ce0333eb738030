#!/usr/bin/env python3
"""scripts/bench_vs_commit.py refuses what it cannot compare, before building
anything: a revision that is not a commit, an unknown benchmark, zero rounds
(exit 2, naming what is wrong). A full comparison builds another commit, too
long for make test; it is run by hand (docs/benchmarks.md)."""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from harness import check, finish, run  # noqa: E402

SCRIPT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "scripts", "bench_vs_commit.py")

for args, what in ((["--base", "no-such-revision-x"], "'no-such-revision-x' is not a commit"),
                   (["--base", "HEAD", "--bench", "isx,nosuch"], "unknown benchmark(s) ['nosuch']"),
                   (["--base", "HEAD", "--rounds", "0"], "--rounds and --ranks must be at least 1"),
                   (["--base", "HEAD", "--tessera", "/nonexistent-build"], "no tessera in /nonexistent-build")):
    p = run([sys.executable, SCRIPT, *args], timeout=60)
    check(p.returncode == 2 and what in p.stderr, f"{' '.join(args)}: exit 2 naming it ({p.returncode}: {p.stderr.strip()[-200:]})")
finish()
