#!/usr/bin/env python3
"""Tessera's PageRank and BFS beside GAPBS's `pr` and `bfs`, measured in the
same run on the same graph: GAPBS with 1 thread against Tessera at 1 rank,
2 threads against 2 ranks (--pairs).

  scripts/bench_vs_gapbs.py --gapbs DIR [--build-dir DIR] [--tessera BUILD] [--scale 20]
                            [--degree 16] [--rounds 3] [--pairs 1:1,2:2] [--kernels pr,bfs]
                            [--graph-dir DIR] [--json]

--gapbs is a GAPBS source tree (a clone of https://github.com/sbeamer/gapbs).
GAPBS is built once (its Makefile: g++ -O3 -fopenmp) into --build-dir
(default ~/.cache/tessera/gapbs-<commit>, outside any checkout; the tree
given is never written) and reused.

The graph is GAPBS's own Kronecker graph (-g SCALE -k DEGREE, its generator
and seed), serialized once by GAPBS's converter (.sg, what GAPBS reads) and
turned into Tessera's binary format (.tsg: GAPBS's edge list -> a symmetric
Matrix Market file with every vertex -> `tessera convert`), so both read the
same vertices and edges from a binary file; kept in --graph-dir (default
~/.cache/tessera/gapbs-graphs).

Each round runs, per kernel and pair: GAPBS (OMP_NUM_THREADS=T, one trial,
-v: its own verifier) and `tessera pagerank|bfs GRAPH --json --verify -n R`.
PageRank: GAPBS's rules on both sides (damping 0.85, L1 change < 1e-4, at
most 20 iterations). BFS: both from the same source, the vertex PageRank
ranks first (nonzero degree, in the giant component). Times: GAPBS's "Trial
Time" against Tessera's kernel `seconds` (slowest rank); beside them the
times a user waits for: GAPBS's Read and Build Time, Tessera's read and
build steps (build: a directed graph's transpose, PageRank's index; as
GAPBS's CSR build, outside the kernel time).

The table: per kernel and pair the median over the rounds and the ratio
Tessera / GAPBS (below 1: Tessera faster), with the issue's targets. Then
one JSON line per row and a summary line. --json prints only the JSON.
Do not trust times taken while the machine is busy.

  scripts/bench_vs_gapbs.py --gapbs DIR --peer GRAPH.el --kernels pr|bfs --threads T [--rounds R]
                            [--source S] [--symmetric]

--peer: GAPBS alone on a graph someone else wrote (`tessera bench pagerank|bfs
--peer-gapbs DIR` writes its graph and runs this): converted to GAPBS's .sg
in a temporary directory (with -s when --symmetric), then the kernel --rounds
times with T threads and -v; one JSON line per kernel on stdout: the trial
times, read and build times, the graph GAPBS read, its verdict. --how-to
KERNEL prints how to get a GAPBS tree for `tessera bench KERNEL`.

Exit status: 0 when every run verified, 1 when one did not, 2 on a usage
error (no --gapbs tree: how to get one) or when a build or a run fails."""
import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import peer_tree  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
GAPBS_URL = "https://github.com/sbeamer/gapbs"
GAPBS_COMMIT = "b5e3e19"  # the commit the script was written against
KERNELS = {"pr": "pagerank", "bfs": "bfs"}
# The targets: Tessera's kernel time / GAPBS's, by (kernel, threads); BFS's
# tightened by issue 41 (1.2x at 1 rank, 1.5x at 2).
TARGETS = {("pr", 1): 1.0, ("pr", 2): 1.3, ("bfs", 1): 1.2, ("bfs", 2): 1.5}
HOW_TO = f"""bench_vs_gapbs.py needs a GAPBS source tree: --gapbs DIR.
Get one with
  git clone {GAPBS_URL} ~/src/gapbs && git -C ~/src/gapbs checkout {GAPBS_COMMIT}
then run
  scripts/bench_vs_gapbs.py --gapbs ~/src/gapbs --tessera build
GAPBS is built with its own Makefile (g++ with OpenMP)."""




def how_to_bench(kernel):
    """How to get a GAPBS tree for `tessera bench pagerank|bfs`."""
    return (f"the GAPBS peer needs a GAPBS source tree: git clone {GAPBS_URL} ~/src/gapbs && "
            f"git -C ~/src/gapbs checkout {GAPBS_COMMIT}\n"
            f"then: tessera bench {kernel} --peer-gapbs ~/src/gapbs (GAPBS is built once, with its own Makefile, "
            f"in ~/.cache/tessera)\n")


class GapbsError(Exception):
    """A usage, build or run failure: the message says what to do."""


# --- GAPBS: locate, build, run, parse ----------------------------------------

def check_tree(tree):
    if not os.path.isdir(tree):
        raise GapbsError(f"--gapbs {tree}: no such directory\n\n{HOW_TO}")
    missing = [p for p in ("Makefile", "src/pr.cc", "src/bfs.cc", "src/converter.cc", "src/benchmark.h")
               if not os.path.isfile(os.path.join(tree, p))]
    if missing:
        raise GapbsError(f"{tree} is not a GAPBS source tree: no {', '.join(missing)} (clone {GAPBS_URL})")


def tree_id(tree):
    """The tree's git commit (short), or a digest of its sources when it is no git checkout."""
    return peer_tree.tree_id(tree, os.path.join(tree, "src"))


def cache_dir(name):
    cache = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(cache, "tessera", name)


def build_gapbs(tree, build_dir, log=sys.stderr):
    """pr, bfs and converter in build_dir, built once; returns build_dir."""
    apps = ("pr", "bfs", "converter")
    if all(os.access(os.path.join(build_dir, a), os.X_OK) for a in apps):
        return build_dir
    if shutil.which(os.environ.get("CXX", "g++")) is None:
        raise GapbsError("building GAPBS needs a C++ compiler with OpenMP: apt-get install g++")
    os.makedirs(build_dir, exist_ok=True)
    src = os.path.join(build_dir, "src")
    if os.path.isdir(src):
        shutil.rmtree(src)
    shutil.copytree(os.path.join(tree, "src"), src)
    shutil.copy(os.path.join(tree, "Makefile"), build_dir)
    for mk in ("test/test.mk", "benchmark/bench.mk"):  # the Makefile includes them
        if os.path.isfile(os.path.join(tree, mk)):
            os.makedirs(os.path.join(build_dir, os.path.dirname(mk)), exist_ok=True)
            shutil.copy(os.path.join(tree, mk), os.path.join(build_dir, mk))
    log_path = os.path.join(build_dir, "build.log")
    print(f"bench_vs_gapbs: building GAPBS from {tree} in {build_dir} (once; log: {log_path})", file=log, flush=True)
    with open(log_path, "w") as out:
        if subprocess.run(["make", *apps], cwd=build_dir, stdout=out, stderr=subprocess.STDOUT).returncode != 0:
            with open(log_path) as f:
                tail = "".join(f.readlines()[-15:])
            raise GapbsError(f"building GAPBS failed (full log: {log_path}):\n{tail}")
    return build_dir


def parse_gapbs(text):
    """GAPBS's output: {read, build, trial (average), nodes, edges, verified}."""
    def time_of(label):
        m = re.search(rf"^{label}:\s+([0-9.]+)\s*$", text, re.MULTILINE)
        return float(m.group(1)) if m else None
    stats = re.search(r"Graph has (\d+) nodes and (\d+) (un)?directed edges", text)
    trial = time_of("Average Time")
    if trial is None or stats is None:
        tail = " | ".join(text.strip().splitlines()[-3:]) or "no output"
        raise GapbsError(f"GAPBS printed no Average Time or graph size: {tail}")
    verdicts = re.findall(r"^Verification:\s+(\w+)", text, re.MULTILINE)
    return {"read": time_of("Read Time"), "build": time_of("Build Time"), "trial": trial,
            "nodes": int(stats.group(1)), "edges": int(stats.group(2)),
            "verified": bool(verdicts) and all(v == "PASS" for v in verdicts)}


def run_gapbs(bin_dir, kernel, graph, threads, source=None):
    command = [os.path.join(bin_dir, kernel), "-f", graph, "-n", "1", "-v"]
    if kernel == "pr":
        command += ["-i", "20", "-t", "1e-4"]
    else:
        command += ["-r", str(source)]
    run = subprocess.run(command, capture_output=True, text=True, timeout=3600,
                         env=dict(os.environ, OMP_NUM_THREADS=str(threads), OMP_PROC_BIND="false"))
    if run.returncode != 0:
        raise GapbsError(f"{' '.join(command)} exited {run.returncode}: {run.stderr.strip()[-400:]}")
    return parse_gapbs(run.stdout)


# --- The graph: GAPBS's kron, in both formats -----------------------------------

def make_graph(bin_dir, tessera, graph_dir, scale, degree, log=sys.stderr):
    """(GAPBS's .sg, Tessera's .tsg, vertices) of GAPBS's kron graph, made once."""
    os.makedirs(graph_dir, exist_ok=True)
    stem = os.path.join(graph_dir, f"kron-{scale}-{degree}")
    sg, tsg, info = stem + ".sg", stem + ".tsg", stem + ".json"
    if os.path.isfile(sg) and os.path.isdir(tsg) and os.path.isfile(info):
        with open(info) as f:
            return sg, tsg, json.load(f)["vertices"]
    print(f"bench_vs_gapbs: making GAPBS's kron graph (scale {scale}, degree {degree}) in {graph_dir} (once)",
          file=log, flush=True)
    conv = os.path.join(bin_dir, "converter")
    made = subprocess.run([conv, "-g", str(scale), "-k", str(degree), "-b", sg], capture_output=True, text=True)
    if made.returncode != 0:
        raise GapbsError(f"GAPBS's converter failed: {made.stderr.strip()[-400:]}")
    n = int(re.search(r"Graph has (\d+) nodes", made.stdout).group(1))
    el, mtx = stem + ".el", stem + ".mtx"
    made = subprocess.run([conv, "-f", sg, "-e", el], capture_output=True, text=True)
    if made.returncode != 0:
        raise GapbsError(f"GAPBS's converter (-e) failed: {made.stderr.strip()[-400:]}")
    # GAPBS lists both directions of every edge; the Matrix Market file keeps
    # one (u >= v) and the vertex count, so isolated vertices stay.
    lower = 0
    with open(el) as f, open(mtx + ".body", "w") as out:
        for line in f:
            u, v = line.split()[:2]
            if int(u) >= int(v):
                out.write(f"{int(u) + 1} {int(v) + 1}\n")
                lower += 1
    with open(mtx, "w") as out, open(mtx + ".body") as body:
        out.write(f"%%MatrixMarket matrix coordinate pattern symmetric\n{n} {n} {lower}\n")
        shutil.copyfileobj(body, out)
    os.remove(mtx + ".body")
    os.remove(el)
    run = subprocess.run([tessera, "convert", mtx, "-o", tsg, "-q", "--json"], capture_output=True, text=True)
    os.remove(mtx)
    if run.returncode != 0:
        raise GapbsError(f"tessera convert failed: {run.stderr.strip()[-400:]}")
    stats = json.loads(run.stdout)["stats"]
    if stats["vertices"] != n or stats["directed"]:
        raise GapbsError(f"the converted graph has {stats['vertices']} vertices (directed: {stats['directed']}); "
                         f"GAPBS's has {n}, undirected")
    with open(info, "w") as f:
        json.dump({"vertices": n, "edges": stats["edges"]}, f)
    return sg, tsg, n


# --- Tessera -------------------------------------------------------------------

def tessera_binary(build):
    path = os.path.join(build, "tessera")
    if not (os.path.isfile(path) and os.access(path, os.X_OK)):
        raise GapbsError(f"--tessera {build}: no tessera executable there (build it with `make build`, "
                         "or give the build directory)")
    return path


def run_tessera(binary, kernel, graph, ranks, source=None):
    """{read, trial, edges, verified, top_vertex} of one `tessera pagerank|bfs` run."""
    command = [binary, KERNELS[kernel], graph, "-n", str(ranks), "--json", "--verify", "-q"]
    if kernel == "bfs":
        command += ["--source", str(source)]
    run = subprocess.run(command, capture_output=True, text=True, timeout=3600)
    if run.returncode not in (0, 3):  # 3: the answer failed verification (reported, not fatal)
        raise GapbsError(f"{' '.join(command)} exited {run.returncode}: {run.stderr.strip()[-400:]}")
    doc = json.loads(run.stdout)
    result = doc[KERNELS[kernel]]
    return {"read": doc["step_seconds"]["read"], "build": doc["step_seconds"].get("build", 0.0),
            "trial": result["seconds"], "edges": doc["stats"]["edges"], "verified": bool(result.get("verified")),
            "top_vertex": result.get("top_vertex"), "iterations": result.get("iterations")}


# --- GAPBS alone, on another's graph (tessera bench pagerank|bfs) -----------------

def peer(args, kernels):
    """One JSON line per kernel: GAPBS's --rounds trials on args.peer."""
    import tempfile
    if not os.path.isfile(args.peer):
        raise GapbsError(f"--peer {args.peer}: no such file")
    if args.threads < 1 or ("bfs" in kernels and args.source is None):
        raise GapbsError("--peer needs --threads of at least 1, and --source for bfs")
    bin_dir = build_gapbs(args.gapbs, args.build_dir or cache_dir(f"gapbs-{tree_id(args.gapbs)}"))
    with tempfile.TemporaryDirectory(prefix="tessera-gapbs-peer-") as d:
        sg, el = os.path.join(d, "graph.sg"), os.path.join(d, "graph.el")
        # GAPBS's reader stops at the first line that is no edge: comments go.
        with open(args.peer) as f, open(el, "w") as out:
            for line in f:
                if not line.startswith(("#", "%")):
                    out.write(line)
        convert = [os.path.join(bin_dir, "converter"), "-f", el, *(["-s"] if args.symmetric else []), "-b", sg]
        made = subprocess.run(convert, capture_output=True, text=True)
        if made.returncode != 0:
            raise GapbsError(f"GAPBS's converter failed on {args.peer}: {made.stderr.strip()[-400:]}")
        for kernel in kernels:
            runs = [run_gapbs(bin_dir, kernel, sg, args.threads, args.source) for _ in range(args.rounds)]
            print(json.dumps({"peer": "GAPBS", "kernel": kernel, "threads": args.threads, "tree": tree_id(args.gapbs),
                              "trials": [r["trial"] for r in runs], "read": min(r["read"] or 0.0 for r in runs),
                              "build": min(r["build"] or 0.0 for r in runs), "nodes": runs[0]["nodes"],
                              "edges": runs[0]["edges"], "verified": all(r["verified"] for r in runs)}), flush=True)
    return 0


# --- The comparison ---------------------------------------------------------------

def parse_pairs(text):
    pairs = []
    for item in text.split(","):
        m = re.fullmatch(r"(\d+):(\d+)", item.strip())
        if not m or int(m.group(1)) < 1 or int(m.group(2)) < 1:
            raise GapbsError(f"--pairs: '{item}' is not THREADS:RANKS (e.g. 1:1,2:2)")
        pairs.append((int(m.group(1)), int(m.group(2))))
    return pairs


def rows_of(runs):
    """The table's rows from every run: per kernel and pair, medians and the ratio."""
    rows = []
    for (kernel, threads, ranks), rounds in runs.items():
        med = lambda side, key: statistics.median(r[side][key] or 0.0 for r in rounds)  # noqa: E731
        g_trial, t_trial = med("gapbs", "trial"), med("tessera", "trial")
        ratio = t_trial / g_trial if g_trial > 0 else None
        target = TARGETS.get((kernel, threads))
        rows.append({"kernel": kernel, "gapbs_threads": threads, "tessera_ranks": ranks, "rounds": len(rounds),
                     "gapbs_seconds": g_trial, "tessera_seconds": t_trial, "ratio": ratio, "target": target,
                     "meets_target": None if ratio is None or target is None else ratio <= target,
                     "gapbs_read_seconds": med("gapbs", "read"), "gapbs_build_seconds": med("gapbs", "build"),
                     "tessera_read_seconds": med("tessera", "read"), "tessera_build_seconds": med("tessera", "build"),
                     "tessera_iterations": rounds[-1]["tessera"].get("iterations"),
                     "verified": all(r["gapbs"]["verified"] and r["tessera"]["verified"] for r in rounds)})
    return rows


def print_table(rows, graph, out=sys.stdout):
    print(f"GAPBS vs Tessera on {graph} (medians; ratio = Tessera / GAPBS kernel time)", file=out)
    head = f"{'kernel':6} {'GAPBS':>9} {'Tessera':>9} {'GAPBS s':>9} {'Tessera s':>10} {'ratio':>7} {'target':>7} " \
           f"{'G read':>8} {'G build':>8} {'T read':>8} {'T build':>8} verified"
    print(head, file=out)
    for r in rows:
        ratio = f"{r['ratio']:.2f}" if r["ratio"] is not None else "-"
        target = f"<={r['target']}" if r["target"] is not None else "-"
        print(f"{r['kernel']:6} {str(r['gapbs_threads']) + ' thr':>9} {str(r['tessera_ranks']) + ' rk':>9} "
              f"{r['gapbs_seconds']:9.4f} {r['tessera_seconds']:10.4f} {ratio:>7} {target:>7} "
              f"{r['gapbs_read_seconds']:8.3f} {r['gapbs_build_seconds']:8.3f} {r['tessera_read_seconds']:8.3f} "
              f"{r['tessera_build_seconds']:8.3f} "
              f"{'yes' if r['verified'] else 'NO'}", file=out)


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--gapbs", help="a GAPBS source tree (git clone " + GAPBS_URL + ")")
    ap.add_argument("--build-dir", help="where GAPBS is built (default ~/.cache/tessera/gapbs-<commit>)")
    ap.add_argument("--tessera", default=os.path.join(REPO, "build"), help="Tessera's build directory")
    ap.add_argument("--scale", type=int, default=20, help="GAPBS's -g: 2^scale vertices (default 20)")
    ap.add_argument("--degree", type=int, default=16, help="GAPBS's -k (default 16)")
    ap.add_argument("--rounds", type=int, default=3, help="rounds; medians are reported (default 3)")
    ap.add_argument("--pairs", default="1:1,2:2", help="GAPBS threads : Tessera ranks (default 1:1,2:2)")
    ap.add_argument("--kernels", default="pr,bfs", help="pr, bfs or both (default pr,bfs)")
    ap.add_argument("--graph-dir", help="where the graph files are kept (default ~/.cache/tessera/gapbs-graphs)")
    ap.add_argument("--json", action="store_true", help="only the JSON lines")
    ap.add_argument("--peer", help="GAPBS alone on this edge list (written by tessera bench pagerank|bfs)")
    ap.add_argument("--threads", type=int, default=1, help="--peer: GAPBS's OMP_NUM_THREADS")
    ap.add_argument("--source", type=int, help="--peer: the BFS source")
    ap.add_argument("--symmetric", action="store_true", help="--peer: the file lists an undirected graph (-s)")
    ap.add_argument("--how-to", choices=("pagerank", "bfs"), help="print how to get a GAPBS tree for tessera bench")
    args = ap.parse_args(argv)
    if args.how_to:
        print(how_to_bench(args.how_to), end="")
        return 0
    if args.peer:
        try:
            if not args.gapbs:
                raise GapbsError(HOW_TO)
            check_tree(args.gapbs)
            kernels = [k.strip() for k in args.kernels.split(",") if k.strip()]
            if not kernels or any(k not in KERNELS for k in kernels) or args.rounds < 1:
                raise GapbsError("--kernels is pr, bfs or both; --rounds at least 1")
            return peer(args, kernels)
        except GapbsError as e:
            print(f"bench_vs_gapbs: {e}", file=sys.stderr)
            return 2
    try:
        if not args.gapbs:
            raise GapbsError(HOW_TO)
        check_tree(args.gapbs)
        kernels = [k.strip() for k in args.kernels.split(",") if k.strip()]
        bad = [k for k in kernels if k not in KERNELS]
        if bad or not kernels:
            raise GapbsError(f"--kernels: {', '.join(bad) or 'none'} (choose from pr, bfs)")
        if not 1 <= args.scale <= 30 or not 1 <= args.degree <= 1024 or args.rounds < 1:
            raise GapbsError("--scale is 1..30, --degree 1..1024, --rounds at least 1")
        pairs = parse_pairs(args.pairs)
        tessera = tessera_binary(args.tessera)
        log = sys.stderr
        bin_dir = build_gapbs(args.gapbs, args.build_dir or cache_dir(f"gapbs-{tree_id(args.gapbs)}"), log)
        sg, tsg, n = make_graph(bin_dir, tessera, args.graph_dir or cache_dir("gapbs-graphs"), args.scale,
                                args.degree, log)
    except GapbsError as e:
        print(f"bench_vs_gapbs: {e}", file=sys.stderr)
        return 2
    try:
        # The BFS source: PageRank's top vertex (nonzero degree, in the giant component).
        source = run_tessera(tessera, "pr", tsg, 1)["top_vertex"]
        runs = {}
        for rnd in range(args.rounds):
            for kernel in kernels:
                for threads, ranks in pairs:
                    g = run_gapbs(bin_dir, kernel, sg, threads, source)
                    t = run_tessera(tessera, kernel, tsg, ranks, source)
                    if g["nodes"] != n or g["edges"] != t["edges"]:
                        raise GapbsError(f"GAPBS read {g['nodes']} nodes, {g['edges']} undirected edges; Tessera "
                                         f"{n} vertices, {t['edges']} undirected edges: not the same graph")
                    runs.setdefault((kernel, threads, ranks), []).append({"gapbs": g, "tessera": t})
                    if not args.json:
                        print(f"round {rnd + 1}: {kernel} GAPBS {threads} thr {g['trial']:.4f} s, Tessera {ranks} rk "
                              f"{t['trial']:.4f} s", file=sys.stderr, flush=True)
    except GapbsError as e:
        print(f"bench_vs_gapbs: {e}", file=sys.stderr)
        return 2
    rows = rows_of(runs)
    graph = f"GAPBS kron -g {args.scale} -k {args.degree} ({n} vertices), BFS from {source}"
    if not args.json:
        print_table(rows, graph)
    for r in rows:
        print(json.dumps({"benchmark": "vs_gapbs", "graph": graph, **r}))
    print(json.dumps({"benchmark": "vs_gapbs", "summary": True, "graph": graph, "bfs_source": source,
                      "ratios": {f"{r['kernel']}@{r['gapbs_threads']}:{r['tessera_ranks']}": r["ratio"] for r in rows},
                      "all_verified": all(r["verified"] for r in rows)}))
    return 0 if all(r["verified"] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
