#!/usr/bin/env python3
"""Is anything slower than at an earlier commit? Runs Tessera's benchmarks
with this build and with the build of an earlier commit, interleaved in the
same run, and prints each row's rate in both and their ratio.

  scripts/bench_vs_commit.py --base REV [--tessera BUILD] [--ranks 2] [--rounds 3]
                             [--bench isx,argsort,cc,pagerank,bfs,ra,indexgather,histogram,python-gather]
                             [--within 0.05] [--json]

The base is built once from `git archive REV` of this checkout, in
~/.cache/tessera/base-<commit> (outside any checkout; ccache makes it cheap
when the commit was built before), Release, the `tessera` program and, for
python-gather, the Python module. This checkout is never written.

Each round runs every benchmark once with each build (`tessera bench B --reps
1 --json`), the base first in odd rounds and this build first in even ones,
so both see the same machine; the table has per row (benchmark, variant,
storage) the median rate over the rounds in each build and current/base.
python-gather times `DistArray.gather` of random indices from Python (the
aggregated path through the bindings) at the same rank count.

Rows that are not verified in either build are reported and fail. With
--within F, a row of an aggregated or Tessera-own variant slower than
(1 - F) x its base rate fails too (baseline rows such as MPI_Accumulate or
std::sort are shown, not judged). Exit status: 0 when nothing failed, 1
otherwise, 2 on a usage or build error."""
import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
SOURCE = os.path.dirname(HERE)

# Moderate sizes: a few seconds per run here, large enough that set-up is
# not what is measured.
BENCHES = {
    "isx": ["--keys", "4194304"],
    "argsort": ["--keys", "4194304"],
    "cc": ["--scale", "18"],
    "pagerank": ["--scale", "18"],
    "bfs": ["--scale", "18"],
    "ra": [],
    "indexgather": [],
    "histogram": [],
}
# Rows measured for comparison inside a benchmark, not Tessera's own code.
BASELINE_VARIANTS = ("fine-grained", "MPI_Get", "MPI_Accumulate", "alltoallv", "std::sort", "serial", "ISx-shaped",
                     "local loop", "memcpy", "plain")

GATHER = r"""
import sys, time, json
import numpy as np
import tessera
rt = tessera.Runtime()
n, m = int(sys.argv[1]), int(sys.argv[2])
a = tessera.arange(rt, n)
idx = np.random.default_rng(rt.rank).integers(0, n, m)
a.gather(idx[:1000])                    # warm: the first call builds the aggregator's buffers
t = time.perf_counter(); got = a.gather(idx); t = time.perf_counter() - t
ok = bool(np.array_equal(got, idx))
slowest = rt.allreduce(t, op="max")
if rt.rank == 0:
    print(json.dumps({"bench": "python-gather", "variant": "DistArray.gather", "storage": "default",
                      "seconds": slowest, "rate": m * rt.size / slowest / 1e6, "unit": "M reads/s",
                      "verified": ok}))
if not ok:
    sys.exit(f"rank {rt.rank}: gather returned wrong values")
"""


def fail(message):
    print(f"bench_vs_commit: {message}", file=sys.stderr)
    sys.exit(2)


def git(*args):
    return subprocess.run(["git", "-C", SOURCE, *args], capture_output=True, text=True, check=True).stdout.strip()


def build_base(rev, python):
    """The base's build directory, built when missing."""
    try:
        commit = git("rev-parse", "--verify", rev + "^{commit}")
    except subprocess.CalledProcessError:
        fail(f"{rev!r} is not a commit of {SOURCE}")
    cache = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    root = os.path.join(cache, "tessera", f"base-{commit[:12]}")
    src, build = os.path.join(root, "src"), os.path.join(root, "build")
    if not os.path.exists(os.path.join(src, "CMakeLists.txt")):
        os.makedirs(root, exist_ok=True)
        tmp = tempfile.mkdtemp(dir=root)  # extracted whole, then renamed: never a partial tree
        try:
            archive = subprocess.run(["git", "-C", SOURCE, "archive", commit], capture_output=True, check=True).stdout
            subprocess.run(["tar", "-x", "-C", tmp], input=archive, check=True)
            os.rename(tmp, src)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
    targets = ["tessera_cli"] + (["_tessera"] if python else [])
    env = dict(os.environ, CCACHE_BASEDIR=src, CCACHE_NOHASHDIR="1")
    steps = [["cmake", "--build", build, "-j", str(os.cpu_count() or 1), "--target", *targets]]
    if not os.path.exists(os.path.join(build, "CMakeCache.txt")):
        configure = ["cmake", "-S", src, "-B", build, "-DCMAKE_BUILD_TYPE=Release"]
        if shutil.which("ninja"):
            configure += ["-G", "Ninja"]
        if shutil.which("ccache"):
            configure += ["-DCMAKE_C_COMPILER_LAUNCHER=ccache", "-DCMAKE_CXX_COMPILER_LAUNCHER=ccache"]
        steps.insert(0, configure)
    log = os.path.join(root, "build.log")
    with open(log, "w") as out:
        for cmd in steps:
            if subprocess.run(cmd, stdout=out, stderr=subprocess.STDOUT, env=env).returncode != 0:
                fail(f"building {commit[:12]} failed; see {log}")
    return commit, build


def run_bench(build, bench, ranks):
    """The benchmark's result rows (JSON lines with a variant) from one run."""
    if bench == "python-gather":
        env = dict(os.environ, PYTHONPATH=os.path.join(build, "python"))
        cmd = [os.path.join(SOURCE, "scripts", "mpirun.sh"), "-n", str(ranks), sys.executable, "-c", GATHER,
               str(1 << 22), str(1 << 21)]
    else:
        env = dict(os.environ)
        cmd = [os.path.join(build, "tessera"), "bench", bench, "-n", str(ranks), *BENCHES[bench], "--reps", "1",
               "--json", "-q"]
    p = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=1800)
    rows = [json.loads(line) for line in p.stdout.splitlines() if line.startswith("{")]
    rows = [r for r in rows if "variant" in r and not r.get("skipped")]
    if p.returncode not in (0, 1) or not rows:  # 1: a row not verified, reported as such
        fail(f"{' '.join(cmd)} failed ({p.returncode}): {p.stderr.strip()[-800:]}")
    return rows


def is_baseline(variant):
    return any(b in variant for b in BASELINE_VARIANTS)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--base", required=True, help="the earlier commit (any git revision)")
    ap.add_argument("--tessera", default=os.path.join(SOURCE, "build"), help="this build's directory")
    ap.add_argument("--ranks", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--bench", default="isx,argsort,cc,ra,indexgather,histogram,python-gather")
    ap.add_argument("--within", type=float, default=None, help="fail a Tessera row slower than (1 - F) x base")
    ap.add_argument("--json", action="store_true", help="only the JSON lines")
    a = ap.parse_args()
    benches = [b for b in a.bench.split(",") if b]
    unknown = [b for b in benches if b not in BENCHES and b != "python-gather"]
    if unknown or a.rounds < 1 or a.ranks < 1:
        ap.print_usage(sys.stderr)
        print(f"bench_vs_commit: unknown benchmark(s) {unknown}; known: {', '.join([*BENCHES, 'python-gather'])}"
              if unknown else "bench_vs_commit: --rounds and --ranks must be at least 1", file=sys.stderr)
        return 2
    current = os.path.abspath(a.tessera)
    if not os.path.exists(os.path.join(current, "tessera")):
        print(f"bench_vs_commit: no tessera in {current} (make build first)", file=sys.stderr)
        return 2
    commit, base = build_base(a.base, "python-gather" in benches)
    head = git("rev-parse", "HEAD")

    samples = {}  # (bench, variant, storage) -> side -> [rows]
    for rnd in range(a.rounds):
        for bench in benches:
            order = [("base", base), ("current", current)]
            if rnd % 2:
                order.reverse()
            for side, build in order:
                if not a.json:
                    print(f"round {rnd + 1}/{a.rounds}: {bench} ({side})", file=sys.stderr, flush=True)
                for r in run_bench(build, bench, a.ranks):
                    # A benchmark may time a variant on several inputs (cc: a
                    # Kronecker graph and a grid); each input is its own row.
                    group = f" [{r['group']}]" if r.get("group") and r["group"] != bench else ""
                    key = (bench, r["variant"] + group, r.get("storage", ""))
                    samples.setdefault(key, {}).setdefault(side, []).append(r)

    results, failed = [], 0
    for (bench, variant, storage), sides in samples.items():
        if set(sides) != {"base", "current"}:
            continue  # a row one build does not have
        med = {s: statistics.median(r["rate"] for r in rows) for s, rows in sides.items()}
        verified = all(r.get("verified", False) for rows in sides.values() for r in rows)
        ratio = med["current"] / med["base"] if med["base"] > 0 else None
        judged = a.within is not None and not is_baseline(variant)
        ok = verified and (not judged or (ratio is not None and ratio >= 1 - a.within))
        failed += not ok
        results.append({"bench": bench, "variant": variant, "storage": storage, "unit": sides["current"][0]["unit"],
                        "base_rate": med["base"], "current_rate": med["current"], "ratio": ratio,
                        "samples": {s: [r["rate"] for r in rows] for s, rows in sides.items()},
                        "verified": verified, "judged": judged, "ok": ok, "ranks": a.ranks, "rounds": a.rounds,
                        "base_commit": commit, "current_commit": head})
    if not a.json:
        print(f"\n== this build ({head[:12]}) against {commit[:12]}: {a.ranks} ranks, medians of {a.rounds} "
              "interleaved rounds")
        print(f"{'bench':13} {'variant':40} {'storage':14} {'base':>10} {'current':>10} {'unit':10} {'ratio':>6}  verdict")
        for r in results:
            verdict = ("not verified" if not r["verified"] else
                       ("ok" if r["ok"] else f"slower than {1 - a.within:.2f}x") if r["judged"] else "shown")
            print(f"{r['bench']:13} {r['variant'][:40]:40} {r['storage'][:14]:14} {r['base_rate']:10.4g} "
                  f"{r['current_rate']:10.4g} {r['unit']:10} {r['ratio']:6.3f}  {verdict}")
    for r in results:
        print(json.dumps(r))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
