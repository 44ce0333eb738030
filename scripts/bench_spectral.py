#!/usr/bin/env python3
"""Anasazi Krylov-Schur on the edge arrays (EdgeListRowMatrix, no copy)
against Anasazi on a Tpetra CrsMatrix copy, in the same run: time per
iteration and the memory each operator adds (accounted and measured from
/proc), as a share of the edge arrays. Prints a table, then one JSON document.

  scripts/bench_spectral.py BUILD_DIR [--ranks 2] [--scale 14] [--what fiedler|centrality] [--graph PATH]

`tessera bench spectral` measures the Fiedler case in one job (the same
memory figure, from trilinos::spectral), verifies both answers and adds the
time per operator product; this script also covers centrality.

Without --graph: the largest component of a Kronecker graph of the given
scale (written to a temporary directory). Time only on a quiet machine."""
import argparse, json, os, subprocess, sys, tempfile

here = os.path.dirname(os.path.abspath(__file__))
p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
p.add_argument("build")
p.add_argument("--ranks", type=int, default=2)
p.add_argument("--scale", type=int, default=14)
p.add_argument("--what", choices=("fiedler", "centrality"), default="fiedler")
p.add_argument("--graph", help="an undirected graph file listing both directions (read with --symmetric)")
a = p.parse_args()
tessera = os.path.join(a.build, "tessera")
mpirun = os.path.join(here, "mpirun.sh")


def run(ranks, *args):
    cmd = [mpirun, "-n", str(ranks), tessera, *args, "-q"]
    out = subprocess.run(cmd, capture_output=True, text=True)
    if out.returncode != 0:
        sys.exit(f"{' '.join(cmd)} exited {out.returncode}\n{out.stderr}")
    return out.stdout


with tempfile.TemporaryDirectory() as d:
    graph = a.graph
    if not graph:
        kron, graph = os.path.join(d, "kron.tsg"), os.path.join(d, "lcc.tsg")
        run(a.ranks, "gen", "kron", "--scale", str(a.scale), "-o", kron)
        run(a.ranks, "lcc", kron, "-o", graph)
    rows = []
    for matrix in ("edgelist", "crs"):
        args = ["spectral", graph, "--what", a.what, "--matrix", matrix, "--json"]
        if graph.endswith((".el", ".wel", ".mtx")):
            args.append("--symmetric")
        j = json.loads(run(a.ranks, *args))
        edges = j["edge_array_bytes"]
        rows.append({
            "matrix": matrix, "ranks": a.ranks, "what": a.what,
            "lambda": j.get("lambda2", j.get("lambda")), "residual": j["residual"], "iterations": j["iterations"],
            "seconds": j["seconds"], "seconds_per_iteration": j["seconds"] / max(1, j["iterations"]),
            "matrix_extra_bytes": j["matrix_extra_bytes"], "matrix_measured_bytes": j["matrix_measured_bytes"],
            "edge_array_bytes": edges,
            "extra_share_of_edges": j["matrix_extra_bytes"] / edges,
            "measured_share_of_edges": j["matrix_measured_bytes"] / edges,
        })
    e, c = rows
    ratio = e["seconds_per_iteration"] / c["seconds_per_iteration"] if c["seconds_per_iteration"] else float("nan")
    print(f"{'matrix':9} {'iters':>6} {'s/iter':>10} {'extra MiB':>10} {'measured MiB':>13} {'extra/edges':>12}")
    for r in rows:
        print(f"{r['matrix']:9} {r['iterations']:6d} {r['seconds_per_iteration']:10.3e} "
              f"{r['matrix_extra_bytes'] / 2**20:10.2f} {r['matrix_measured_bytes'] / 2**20:13.2f} "
              f"{r['extra_share_of_edges']:12.3f}")
    print(f"edge list / CrsMatrix time per iteration: {ratio:.2f}; same lambda: "
          f"{abs(e['lambda'] - c['lambda']) <= 1e-8 * abs(c['lambda'])}")
    print(json.dumps({"benchmark": "spectral", "results": rows, "edgelist_over_crs_per_iteration": ratio}))
