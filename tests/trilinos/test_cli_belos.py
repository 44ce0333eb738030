#!/usr/bin/env python3
"""`tessera hitting|pipeline --solver belos` against `--solver tessera` at
1-4 ranks (same times to 1e-8 relative) and scipy's spsolve (1e-6), --matrix crs and --preconditioner relaxation
too, and JSON naming the solver and preconditioner. Usage: test_cli_belos.py BUILD_DIR"""
import json, math, os, subprocess, sys, tempfile

import numpy as np
import scipy.sparse as sp

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from scipy_reference import reference_hitting  # noqa: E402

build = sys.argv[1]
tessera = os.path.join(build, "tessera")
mpirun = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "scripts", "mpirun.sh")


def run(ranks, *args):
    cmd = [mpirun, "-n", str(ranks), tessera, *args, "-q"]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    if out.returncode != 0:
        sys.exit(f"FAIL: {' '.join(cmd)} exited {out.returncode}\n{out.stderr}")
    return out.stdout


def times(path):
    with open(path) as f:
        return {int(v): (math.nan if t == "unreachable" else float(t)) for v, t in (l.split() for l in f if not l.startswith("#"))}


with tempfile.TemporaryDirectory() as d:
    graph = os.path.join(d, "grid.el")
    run(1, "gen", "grid", "--dims", "12x9", "-o", graph)
    ref = os.path.join(d, "ref.txt")
    run(1, "hitting", graph, "--targets", "0,50", "--tolerance", "1e-12", "-o", ref)
    want = times(ref)
    # The independent reference: scipy's direct solve on the same edges.
    edges = np.loadtxt(graph, comments="#", dtype=np.int64, ndmin=2)
    n = int(edges.max()) + 1
    a = sp.coo_matrix((np.ones(len(edges)), (edges[:, 0], edges[:, 1])), shape=(n, n))
    a = ((a + a.T) > 0).astype(float).tocsr()
    direct = reference_hitting(a, [0, 50])
    assert len(direct) == len(want)
    for ranks in (1, 2, 3, 4):
        for matrix, pre in (("edgelist", "diagonal"), ("edgelist", "relaxation"), ("crs", "diagonal")):
            out = os.path.join(d, f"belos-{ranks}-{matrix}-{pre}.txt")
            j = json.loads(run(ranks, "hitting", graph, "--targets", "0,50", "--tolerance", "1e-12", "--solver", "belos",
                               "--matrix", matrix, "--preconditioner", pre, "-o", out, "--json"))
            assert j["hitting"]["solver"] == "belos" and j["hitting"]["converged"], j
            assert j["hitting"]["preconditioner"] == pre, j
            got = times(out)
            assert got.keys() == want.keys()
            for v, t in want.items():
                assert abs(got[v] - t) <= 1e-8 * max(1.0, abs(t)), (ranks, matrix, pre, v, got[v], t)
                assert abs(got[v] - direct[v]) <= 1e-6 * max(1.0, abs(direct[v])), (ranks, matrix, pre, v, got[v], direct[v])
    for ranks in (1, 3):
        a = json.loads(run(ranks, "pipeline", "--scale", "9", "--solver", "tessera", "--json"))["hitting"]
        b = json.loads(run(ranks, "pipeline", "--scale", "9", "--solver", "belos", "--json"))["hitting"]
        assert b["solver"] == "belos" and b["converged"]
        for k in ("mean", "max", "min", "reachable"):
            assert abs(a[k] - b[k]) <= 1e-8 * max(1.0, abs(a[k])), (k, a[k], b[k])
print("ok: --solver belos matches --solver tessera and scipy's spsolve at 1-4 ranks")
