#!/usr/bin/python3
"""`tessera pagerank` and `tessera bfs` end to end against scipy, at 1, 2, 3
and 4 ranks: PageRank against a sparse direct solve of its linear system
(exact, far tighter than any iteration), BFS depths against
scipy.sparse.csgraph.shortest_path, parents checked here (the source its
own parent, every parent arc in the file, one level up). Graphs: a directed
one with isolated vertices, self loops, duplicate arcs and dangling
vertices, read with --multigraph (every line an arc) and, once, as the simple
graph read by default (loops and repeats dropped); a Kronecker graph; a
3-vertex path (at 4 ranks a rank owns nothing). Every rank count gives the
same answer; a source outside the graph fails naming the vertex and the
range; no segment is left behind.

Usage: test_kernels_reference.py BUILD_DIR
"""
import atexit
import json
import os
import shutil
import sys
import tempfile

import numpy as np
import scipy.sparse as sp
import scipy.sparse.csgraph as csgraph
import scipy.sparse.linalg as spla

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from harness import Harness  # noqa: E402

BUILD = sys.argv[1]
RANKS = [1, 2, 3, 4]
SHM = tempfile.mkdtemp(prefix="tessera-test-kernels-", dir="/dev/shm")
os.environ["TESSERA_SHM_DIR"] = SHM
atexit.register(shutil.rmtree, SHM, True)
h = Harness(os.path.join(BUILD, "tessera"), timeout=300)
check = h.check
DAMPING = 0.85


def read_arcs(path):
    arcs = [tuple(int(x) for x in line.split()[:2]) for line in open(path) if line.strip() and line[0] != "#"]
    return np.array(arcs, dtype=np.int64).reshape(-1, 2)


def adjacency(arcs, n):
    """Arc multiplicities: a duplicate arc counts twice, a self loop is an arc."""
    return sp.coo_matrix((np.ones(len(arcs)), (arcs[:, 0], arcs[:, 1])), shape=(n, n)).tocsr()


def simple(arcs):
    """The arcs of the simple graph Tessera reads by default: each once, no self loops."""
    arcs = np.unique(arcs, axis=0)
    return arcs[arcs[:, 0] != arcs[:, 1]]


def reference_pagerank(a, personal=None):
    """x = (1 - d) p + d A^T D^-1 x, dangling vertices passing nothing on
    (GAPBS's rule), solved directly."""
    n = a.shape[0]
    deg = np.asarray(a.sum(axis=1)).ravel()
    inv = np.divide(1.0, deg, out=np.zeros(n), where=deg > 0)
    p = np.full(n, 1.0 / n)
    if personal:
        p = np.zeros(n)
        p[list(set(personal))] = 1.0 / len(set(personal))
    m = sp.identity(n, format="csc") - DAMPING * (a.T @ sp.diags(inv)).tocsc()
    return spla.spsolve(m, (1 - DAMPING) * p)


def read_values(path, columns):
    out = {}
    for line in open(path):
        if line.startswith("#"):
            continue
        f = line.split()
        out[int(f[0])] = tuple(float(x) if columns == 1 else int(x) for x in f[1:1 + columns])
    return out


def document(p, what):
    try:
        return json.loads(p.stdout)
    except ValueError:
        check(False, f"{what}: stdout is one JSON document ({p.stderr[-300:]})")
        return {}


tmp = tempfile.mkdtemp(prefix="tessera-kernels-")
atexit.register(shutil.rmtree, tmp, True)

# Directed, 60 ids: 50..59 never occur (isolated), 7 and 40 have no out-arc
# (dangling), self loops at 3 and 11, the arc 4 -> 9 twice, 41..45 reach the
# rest but nothing reaches them.
arcs = []
for v in range(40):
    if v != 7:
        arcs += [(v, (v * 7 + 3) % 40), (v, (v + 1) % 40)]
arcs += [(3, 3), (11, 11), (4, 9), (4, 9), (12, 40), (41, 42), (42, 43), (43, 41), (44, 45), (45, 5)]
awkward = os.path.join(tmp, "awkward.el")
with open(awkward, "w") as f:
    f.write("# directed\n" + "".join(f"{u} {v}\n" for u, v in arcs) + "59 59\n")  # 59: a self loop alone
kron = os.path.join(tmp, "kron.el")
h.tessera("gen", "kron", "--scale", "9", "--edge-factor", "8", "-o", kron)
path3 = os.path.join(tmp, "path3.el")
with open(path3, "w") as f:
    f.write("0 1\n1 2\n")

graphs = [  # name, file, extra read options, vertices, sources, personalization
    ("awkward", awkward, ["--multigraph"], 60, [0, 41], [5, 44, 5]),
    ("kron", kron, [], None, [0], [1, 2, 3]),
    ("path3", path3, ["--undirected"], 3, [2], [1]),
]

def check_graph(case):
    name, path, opts, n, sources, personal = case
    a_arcs = read_arcs(path)
    if opts == ["--undirected"]:
        a_arcs = np.vstack([a_arcs, a_arcs[:, ::-1]])
    if "--multigraph" not in opts:
        a_arcs = simple(a_arcs)
    n = n or int(a_arcs.max()) + 1
    a = adjacency(a_arcs, n)
    want = {"plain": reference_pagerank(a), "personal": reference_pagerank(a, personal)}
    outputs = {}  # (kind, ranks) -> text, for the across-rank comparison
    for ranks in RANKS:
        runs = [("plain", "jacobi")] + ([("plain", "gauss-seidel")] if ranks in (1, 4) else []) + \
            ([("personal", "jacobi")] if ranks in (1, 3) else [])
        for kind, method in runs:
            out = os.path.join(tmp, f"{name}-{kind}-{method}-{ranks}.txt")
            extra = ["--personalization", ",".join(map(str, personal))] if kind == "personal" else []
            p = h.tessera("pagerank", path, *opts, "--tolerance", "1e-13", "--max-iterations", "2000", "--method",
                          method, *extra, "-o", out, "--json", "--verify", ranks=ranks)
            what = f"pagerank {name} {kind} {method} at {ranks} ranks"
            if p.returncode:
                continue
            j = document(p, what)
            r = j.get("pagerank", {})
            check(r.get("converged") is True and r.get("verified") is True, f"{what}: converged and verified")
            check({"read", "pagerank", "verify", "write", "total"} <= set(j.get("step_seconds", {})),
                  f"{what}: read, kernel and write seconds ({sorted(j.get('step_seconds', {}))})")
            got = read_values(out, 1)
            x = np.array([got[v][0] for v in range(n)])
            err = np.abs(x - want[kind]).max()
            check(len(got) == n and err < 1e-9, f"{what}: scores match scipy's solve (max error {err:.2g})")
            outputs[(kind, method, ranks)] = open(out).read()
            if (kind, method) == ("plain", "gauss-seidel"):
                outputs[("gs", ranks)] = x
    # From a tolerance of 1e-6 the contributions are floats: within 1e-6 of scipy's solve beyond
    # what stopping at an L1 change c leaves (at most c d / (1 - d) in L1: a contraction by d).
    for ranks in RANKS:
        method = "gauss-seidel" if ranks % 2 else "jacobi"
        out = os.path.join(tmp, f"{name}-single-{ranks}.txt")
        what = f"pagerank {name} --tolerance 1e-6 ({method}) at {ranks} ranks"
        p = h.tessera("pagerank", path, *opts, "--tolerance", "1e-6", "--max-iterations", "2000", "--method", method,
                      "-o", out, "--json", "--verify", ranks=ranks)
        if p.returncode:
            continue
        r = document(p, what).get("pagerank", {})
        check(r.get("single_precision") is True and r.get("converged") is True and r.get("verified") is True,
              f"{what}: single precision, converged and verified")
        got = read_values(out, 1)
        err = np.abs(np.array([got[v][0] for v in range(n)]) - want["plain"]).sum() if len(got) == n else np.inf
        bound = 1e-6 + r.get("change", 1) * DAMPING / (1 - DAMPING)
        check(err < bound, f"{what}: scores within 1e-6 of scipy's solve (L1 error {err:.2g}, bound {bound:.2g})")
    # Jacobi: the same text at every rank count; Gauss-Seidel within the tolerance.
    for kind, ranks in (("plain", RANKS), ("personal", (1, 3))):
        texts = {outputs.get((kind, "jacobi", r)) for r in ranks}
        check(len(texts) == 1 and None not in texts, f"pagerank {name} {kind} jacobi: the same file at {ranks} ranks")
    gs = [outputs.get(("gs", r)) for r in (1, 4)]
    check(all(x is not None for x in gs) and np.abs(gs[1] - gs[0]).max() < 1e-11,
          f"pagerank {name} gauss-seidel: the same scores at 1 and 4 ranks")
    # GAPBS's defaults: stops at the first L1 change < 1e-4 or after 20 iterations; converged
    # scores pass the verifier at that tolerance (a bipartite path oscillates past 20 at 2+ ranks:
    # then its verdict may fail, exit status 3).
    p = h.tessera("pagerank", path, *opts, "--json", "--verify", ranks=2, expect_ok=False)
    j = document(p, f"pagerank {name} defaults").get("pagerank", {})
    check(j.get("iterations", 99) <= 20 and j.get("tolerance") == 1e-4 and j.get("damping") == 0.85 and
          (j.get("converged") is not True or j.get("verified") is True) and
          p.returncode == (0 if j.get("verified") else 3),
          f"pagerank {name} with GAPBS's defaults: <= 20 iterations, verified when converged, exit status {p.returncode}")

    # BFS: depths exact, parents one level up along a real arc, the same at every rank count.
    arcset = set(map(tuple, a_arcs.tolist()))
    for source in sources:
        depth_ref = csgraph.shortest_path(a, directed=True, unweighted=True, indices=source)
        depth_ref = np.where(np.isinf(depth_ref), -1, depth_ref).astype(int)
        texts = set()
        for ranks in RANKS:
            for direction in (["top-down", "bottom-up"] if ranks == 3 else ["optimizing"]):
                out = os.path.join(tmp, f"{name}-bfs-{source}-{direction}-{ranks}.txt")
                what = f"bfs {name} from {source} ({direction}) at {ranks} ranks"
                p = h.tessera("bfs", path, *opts, "--source", str(source), "--direction", direction, "-o", out,
                              "--json", "--verify", ranks=ranks)
                if p.returncode:
                    continue
                j = document(p, what)
                b = j.get("bfs", {})
                got = read_values(out, 2)
                parent = np.array([got[v][0] for v in range(n)])
                depth = np.array([got[v][1] for v in range(n)])
                check(b.get("verified") is True, f"{what}: verified")
                check(np.array_equal(depth, depth_ref), f"{what}: depths equal scipy's shortest paths")
                check(b.get("reached") == int((depth_ref >= 0).sum()), f"{what}: reached count")
                bad = [v for v in range(n) if (v == source and parent[v] != source) or
                       (v != source and depth_ref[v] >= 0 and
                        ((parent[v], v) not in arcset or depth_ref[parent[v]] != depth_ref[v] - 1)) or
                       (depth_ref[v] < 0 and parent[v] != -1)]
                check(not bad, f"{what}: every parent an arc one level up, -1 when unreached ({bad[:5]})")
                check({"read", "bfs", "write"} <= set(j.get("step_seconds", {})), f"{what}: step seconds")
                texts.add(open(out).read())
        check(len(texts) == 1, f"bfs {name} from {source}: the same parents at every rank count and direction")
        # The k-hop neighbourhood as a graph: the vertices within k hops, renumbered in order, the arcs among them.
        for ranks, hops in ((1, 2), (3, 1), (4, 3)):
            sub, ids = (os.path.join(tmp, f"{name}-sub-{source}-{ranks}.{x}") for x in ("el", "ids"))
            p = h.tessera("bfs", path, *opts, "--source", str(source), "--hops", str(hops), "--subgraph", sub,
                          "--ids", ids, ranks=ranks)
            what = f"bfs {name} from {source}, {hops} hops, subgraph at {ranks} ranks"
            if p.returncode:
                continue
            kept = [v for v in range(n) if 0 <= depth_ref[v] <= hops]
            new = {v: i for i, v in enumerate(kept)}
            want_arcs = sorted((new[u], new[v]) for u, v in a_arcs.tolist() if u in new and v in new)
            got_ids = read_values(ids, 1)  # "subgraph_id file_id"
            got_arcs = sorted(map(tuple, read_arcs(sub).tolist()))
            check([int(got_ids[i][0]) for i in range(len(kept))] == kept and got_arcs == want_arcs,
                  f"{what}: {len(kept)} vertices and {len(want_arcs)} arcs as scipy's depths say")


h.each(graphs, check_graph)

# The same awkward file read by default: the simple graph (its self loops and
# repeated arcs dropped and counted), PageRank and BFS against scipy on it.
all_arcs = read_arcs(awkward)
loops = int((all_arcs[:, 0] == all_arcs[:, 1]).sum())
simple_arcs = simple(all_arcs)
repeats = len(all_arcs) - loops - len(simple_arcs)
a_simple = adjacency(simple_arcs, 60)
out = os.path.join(tmp, "awkward-simple-pr.txt")
p = h.tessera("pagerank", awkward, "--tolerance", "1e-13", "--max-iterations", "2000", "-o", out, "--json",
              "--verify", ranks=2)
j = document(p, "pagerank awkward (simple)")
check(j.get("stats", {}).get("dropped") == {"duplicates": repeats, "self_loops": loops} and
      j.get("stats", {}).get("edges") == len(simple_arcs),
      f"awkward read by default: {len(simple_arcs)} arcs, {repeats} duplicates and {loops} self loops dropped "
      f"({j.get('stats')})")
got = read_values(out, 1)
err = np.abs(np.array([got[v][0] for v in range(60)]) - reference_pagerank(a_simple)).max() if len(got) == 60 else 1
check(err < 1e-9, f"pagerank on the simple awkward graph matches scipy's solve (max error {err:.2g})")
out = os.path.join(tmp, "awkward-simple-bfs.txt")
h.tessera("bfs", awkward, "--source", "0", "-o", out, "--verify", ranks=3)
depth_ref = csgraph.shortest_path(a_simple, directed=True, unweighted=True, indices=0)
depth_ref = np.where(np.isinf(depth_ref), -1, depth_ref).astype(int)
got = read_values(out, 2)
check([got[v][1] for v in range(60)] == depth_ref.tolist(), "bfs on the simple awkward graph: scipy's depths")

# Bad input: the source outside the graph, named with the range.
p = h.tessera("bfs", awkward, "--source", "60", ranks=2, expect_ok=False)
check(p.returncode != 0 and "source vertex 60 is outside the vertex ids of " + awkward + ", 0..59" in p.stderr,
      f"bfs --source 60: names the vertex and the range ({p.stderr.strip()[-200:]})")
p = h.tessera("pagerank", awkward, "--personalization", "3,61", ranks=3, expect_ok=False)
check(p.returncode != 0 and "personalization vertex 61 is outside" in p.stderr,
      f"pagerank --personalization 61: names the vertex ({p.stderr.strip()[-200:]})")
p = h.tessera("bfs", awkward, "--source", "-1", ranks=1, expect_ok=False)
check(p.returncode != 0 and "non-negative" in p.stderr, "bfs --source -1: refused by the option check")
p = h.tessera("bfs", os.path.join(tmp, "path3.el"), "--source", "0", "--relabel", ranks=1)
check(p.returncode == 0, "bfs on a relabelled graph runs")
check(not os.listdir(SHM), f"no segment left behind ({os.listdir(SHM)[:3]})")
h.finish()
