#!/usr/bin/env python3
"""scripts/bench_vs_gapbs.py.

  test_bench_vs_gapbs.py usage            (always)
    Without --gapbs it prints how to get a GAPBS tree and exits 2, nothing on
    stdout; a missing directory, a tree that is not GAPBS's and bad options
    are refused with exit 2 and a message naming what is wrong, before any
    build.

  test_bench_vs_gapbs.py gapbs BUILD      (needs TESSERA_GAPBS_SRC, else exit 77)
    Builds GAPBS from $TESSERA_GAPBS_SRC (in a temporary directory), makes
    its kron graph at scale 10 in both formats and runs the script end to
    end, one round: a row per kernel and pair, every row verified by both
    sides' verifiers, the ratios recomputed from the rows' times, the graph
    the same on both sides (the script refuses otherwise)."""
import json
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
SCRIPT = os.path.join(HERE, "..", "..", "scripts", "bench_vs_gapbs.py")
SKIP = 77


def script(*args):
    return subprocess.run([sys.executable, SCRIPT, *args], capture_output=True, text=True, timeout=3600)


def test_usage():
    run = script()
    assert run.returncode == 2 and run.stdout == "", (run.returncode, run.stdout)
    assert "--gapbs DIR" in run.stderr and "github.com/sbeamer/gapbs" in run.stderr, run.stderr

    run = script("--gapbs", "/nonexistent/gapbs-tree")
    assert run.returncode == 2 and "/nonexistent/gapbs-tree: no such directory" in run.stderr, run.stderr

    with tempfile.TemporaryDirectory(prefix="tessera-not-gapbs-") as tree:
        run = script("--gapbs", tree)
        assert run.returncode == 2 and "is not a GAPBS source tree" in run.stderr and "src/pr.cc" in run.stderr, \
            run.stderr
        # The files GAPBS has, empty: options are checked before anything is built.
        os.makedirs(os.path.join(tree, "src"))
        for p in ("Makefile", "src/pr.cc", "src/bfs.cc", "src/converter.cc", "src/benchmark.h"):
            open(os.path.join(tree, p), "w").close()
        for args, message in ((["--kernels", "pr,tc"], "--kernels: tc"),
                              (["--pairs", "1:1,2"], "'2' is not THREADS:RANKS"),
                              (["--pairs", "0:1"], "'0:1' is not THREADS:RANKS"),
                              (["--scale", "40"], "--scale is 1..30"),
                              (["--rounds", "0"], "--rounds at least 1"),
                              (["--tessera", tree], "no tessera executable")):
            run = script("--gapbs", tree, *args)
            assert run.returncode == 2 and message in run.stderr and run.stdout == "", (args, run.stderr)
        assert sorted(os.listdir(tree)) == ["Makefile", "src"], "the tree given is never written"


def test_gapbs(build):
    src = os.environ.get("TESSERA_GAPBS_SRC")
    if not src:
        print("skipped: set TESSERA_GAPBS_SRC to a GAPBS source tree")
        sys.exit(SKIP)
    with tempfile.TemporaryDirectory(prefix="tessera-gapbs-") as tmp:
        run = script("--gapbs", src, "--build-dir", os.path.join(tmp, "build"), "--graph-dir",
                     os.path.join(tmp, "graphs"), "--tessera", build, "--scale", "10", "--rounds", "1", "--json")
        assert run.returncode == 0, (run.returncode, run.stderr[-1000:])
        lines = [json.loads(line) for line in run.stdout.splitlines()]
        rows = [r for r in lines if not r.get("summary")]
        summary = [r for r in lines if r.get("summary")]
        assert len(summary) == 1 and summary[0]["all_verified"] is True, summary
        assert sorted((r["kernel"], r["gapbs_threads"], r["tessera_ranks"]) for r in rows) == \
            [("bfs", 1, 1), ("bfs", 2, 2), ("pr", 1, 1), ("pr", 2, 2)], rows
        for r in rows:
            assert r["verified"] is True and r["gapbs_seconds"] > 0 and r["tessera_seconds"] > 0, r
            assert abs(r["ratio"] - r["tessera_seconds"] / r["gapbs_seconds"]) < 1e-9, r
            assert r["meets_target"] == (r["ratio"] <= r["target"]), r
            assert r["tessera_read_seconds"] > 0 and r["gapbs_read_seconds"] is not None, r
        assert summary[0]["ratios"] == {f"{r['kernel']}@{r['gapbs_threads']}:{r['tessera_ranks']}": r["ratio"]
                                        for r in rows}
        assert os.path.isdir(os.path.join(tmp, "graphs", "kron-10-16.tsg"))


if __name__ == "__main__":
    if sys.argv[1] == "usage":
        test_usage()
    else:
        test_gapbs(sys.argv[2])
    print("PASS")
