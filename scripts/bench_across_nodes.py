#!/usr/bin/env python3
"""indexgather, histogram, RA and ISx at 4 ranks on one node and at 2 nodes x
2 ranks on the emulated cluster (scripts/cluster.py), each benchmark run on
one node and then across nodes right after, so both see the same machine
load; prints a Markdown table (rate on one node, across nodes, their ratio,
verified or the skip reason) and the multi-hop summaries, stamped with the
machine and the command.

    scripts/bench_across_nodes.py BUILD_DIR [--reps 3] [--sizes small|bale] [-o docs/results/across-nodes.md]

Needs namespaces (root): exit 77 otherwise, as cluster.py up."""
import argparse
import datetime
import json
import os
import platform
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
SIZES = {
    # Quick: every benchmark, small enough for a test.
    "small": [
        ("indexgather", ["--table", "65536", "--requests", "100000", "--fine-requests", "2000"]),
        ("histogram", ["--counts", "65536", "--updates", "100000", "--fine-updates", "2000"]),
        ("ra", ["--log-table", "16", "--fine-updates", "2000"]),
        ("isx", ["--keys", "100000", "--max-key", "1000003"]),
    ],
    # Bale's sizes, as scripts/bench_vs_bale.py runs them on one node: 2^22
    # requests per rank, tables of 100,000 (indexgather) and 1,000 (histogram)
    # entries per rank; RA at the CLI's default table.
    "bale": [
        ("indexgather", ["--table", "100000", "--requests", "4194304", "--fine-requests", "2000"]),
        ("histogram", ["--counts", "1000", "--updates", "4194304", "--fine-updates", "2000"]),
        ("ra", ["--fine-updates", "2000"]),
    ],
}


def records(text):
    return [json.loads(line) for line in text.splitlines() if line.startswith("{")]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("build")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("-o", "--output")
    ap.add_argument("--sizes", choices=sorted(SIZES), default="small",
                    help="small (default, quick) or bale (the sizes of scripts/bench_vs_bale.py)")
    a = ap.parse_args()
    benches = SIZES[a.sizes]
    tessera = os.path.join(os.path.abspath(a.build), "tessera")
    cluster = [sys.executable, os.environ.get("TESSERA_CLUSTER_PY") or os.path.join(HERE, "cluster.py")]
    work = tempfile.mkdtemp(prefix="tessera-across-")
    d = os.path.join(work, "cluster")
    up = subprocess.run(cluster + ["up", "--dir", d, "--nodes", "2", "--owner", str(os.getpid())],
                        capture_output=True, text=True)
    if up.returncode != 0:
        sys.stderr.write(up.stderr)
        return up.returncode
    one, two = [], []
    try:
        for bench, args in benches:
            argv = [tessera, "bench", bench, "-n", "4", "--reps", str(a.reps), "--json", "-q", *args]
            for where, cmd in ((one, argv), (two, cluster + ["exec", "--dir", d, "node0", "--", *argv])):
                p = subprocess.run(cmd, capture_output=True, text=True, timeout=900)
                if p.returncode != 0:
                    sys.exit(f"bench_across_nodes: {' '.join(cmd)} failed ({p.returncode}): {p.stderr.strip()[-800:]}")
                where += records(p.stdout)
    finally:
        subprocess.run(cluster + ["down", "--dir", d])
        subprocess.run(["rm", "-rf", work])

    def key(r):
        return (r["bench"], r.get("group", ""), r["variant"], r["storage"])

    across = {key(r): r for r in two if "summary" not in r}
    lines = [f"- date: {datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M:%S} UTC",
             f"- machine: nproc {len(os.sched_getaffinity(0))}, kernel {platform.system()} {platform.release()}, "
             f"load average {' '.join(f'{x:.2f}' for x in os.getloadavg())} when tabulated",
             f"- command: `scripts/bench_across_nodes.py {a.build} --reps {a.reps} --sizes {a.sizes}`; each benchmark: "
             f"`tessera bench B -n 4 --reps {a.reps} --json -q ARGS` on one node, then the same inside node0 of a "
             "2-node emulated cluster (2 ranks per node, vader inside a node, TCP over lo between nodes)",
             "- arguments: " + "; ".join(f"{b} `{' '.join(args)}`" for b, args in benches),
             "",
             "| bench | variant | storage | 1 node x 4 | 2 nodes x 2 | unit | 2 nodes / 1 node | verified (2 nodes) |",
             "|---|---|---|---|---|---|---|---|"]
    for r in one:
        if "summary" in r:
            continue
        t = across.get(key(r))
        if t is None:
            continue
        rate = (lambda x: "skipped" if x.get("skipped") else f"{x['rate']:.4g}")
        ratio = f"{t['rate'] / r['rate']:.2f}" if not t.get("skipped") and not r.get("skipped") and r["rate"] > 0 else "-"
        verified = f"skipped: {t['skipped']}" if t.get("skipped") else ("yes" if t["verified"] else f"NO: {t['check']}")
        lines.append(f"| {r['bench']} | {r['variant']} | {r['storage']} | {rate(r)} | {rate(t)} | {r['unit']} | "
                     f"{ratio} | {verified} |")
    lines.append("")
    for name, recs in (("1 node x 4", one), ("2 nodes x 2", two)):
        for s in recs:
            if "grid_over_direct_rate" in s:
                lines.append(f"- {name}: {s['bench']}: multi-hop (grid) rate / direct rate = {s['grid_over_direct_rate']:.2f}")
    text = "\n".join(lines) + "\n"
    if a.output:
        with open(a.output, "w") as f:
            f.write(text)
    sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
