#!/usr/bin/env python3
"""tessera pipeline --analysis-kind fiedler|centrality: the largest
component's Fiedler vector or eigenvector centrality, in process (Anasazi),
in a tessera-analyze process and in bwrap, against numpy's dense eigh of the
same component: the eigenvalue to 1e-8 relative, the unit-norm vector to 1e-6
up to sign (checked as lying in eigh's eigenspace, so a degenerate eigenvalue
is judged by its subspace), the same vector at every rank count and in every
mode; the report true (residual recomputed), the operator no copy of the
edges. An unknown kind and targets with a spectral kind are refused with a
message naming the choices; nothing is left in the Shared directory.
Usage: test_analysis_kinds.py BUILD_DIR"""
import atexit, json, os, shutil, subprocess, sys, tempfile
from concurrent.futures import ThreadPoolExecutor

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from harness import check, finish  # noqa: E402
from scipy_reference import read_vertex_values  # noqa: E402

build = sys.argv[1]
tessera = os.path.join(build, "tessera")
SHM = tempfile.mkdtemp(prefix="tessera-test-kinds-", dir="/dev/shm")
env = dict(os.environ, TESSERA_SHM_DIR=SHM)
d = tempfile.mkdtemp(prefix="tessera-kinds-")
atexit.register(shutil.rmtree, SHM, True)
atexit.register(shutil.rmtree, d, True)
def run(*args, ranks=1, expect_ok=True):
    cmd = [tessera, *args, "-n", str(ranks), "-q"]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=180, env=env)
    if expect_ok and out.returncode != 0:
        sys.exit(f"FAIL: {' '.join(cmd)} exited {out.returncode}\n{out.stderr}")
    return out


def bwrap_usable():
    if not shutil.which("bwrap"):
        return False
    probe = subprocess.run(["bwrap", "--unshare-all", "--die-with-parent", "--ro-bind", "/", "/", "--proc", "/proc",
                            "--dev", "/dev", "true"], capture_output=True)
    return probe.returncode == 0


# One graph for every run: a Kronecker graph with a few components (hubs and
# pendant vertices: degenerate eigenvalues likely), both directions listed.
graph = os.path.join(d, "kron.el")
run("gen", "kron", "--scale", "8", "--edge-factor", "4", "-o", graph)
rows = np.loadtxt(graph, comments="#", ndmin=2).astype(np.int64)
n = int(rows.max()) + 1
a = np.zeros((n, n))
np.add.at(a, (rows[:, 0], rows[:, 1]), 1.0)
# The largest component by a plain search (ties: the one with the smallest vertex, as Tessera).
label = -np.ones(n, dtype=np.int64)
for s in range(n):
    if label[s] >= 0:
        continue
    label[s], stack = s, [s]
    while stack:
        u = stack.pop()
        for v in np.nonzero(a[u])[0]:
            if label[v] < 0:
                label[v] = s
                stack.append(v)
sizes = {c: int((label == c).sum()) for c in set(label.tolist())}
largest = min(sizes, key=lambda c: (-sizes[c], c))
lcc = np.nonzero(label == largest)[0]  # file ids, ascending
check(len(sizes) > 1 and len(lcc) < n, f"the graph has several components ({len(sizes)}) so the pipeline extracts one")
sub = a[np.ix_(lcc, lcc)]
reference = {}
for kind in ("fiedler", "centrality"):
    m = np.diag(sub.sum(axis=1)) - sub if kind == "fiedler" else sub
    values, vectors = np.linalg.eigh(m)
    k = 1 if kind == "fiedler" else len(lcc) - 1
    close = np.abs(values - values[k]) <= 1e-9 * max(1.0, abs(values[k]))
    reference[kind] = (m, values[k], vectors[:, close])

modes = [("inprocess", r) for r in (1, 2, 3, 4)]
modes += [("process", 1), ("process", 3)]
container = bwrap_usable()
if container:
    modes.append(("container", 2))
else:
    print("SKIP: --analysis container (bwrap is missing or cannot create namespaces here)")


def job(kind, analysis, ranks):
    out = os.path.join(d, f"{kind}-{analysis}-{ranks}.txt")
    p = run("pipeline", graph, "--symmetric", "--analysis-kind", kind, "--analysis", analysis, "-o", out, "--json",
            ranks=ranks)
    return json.loads(p.stdout), read_vertex_values(out)


with ThreadPoolExecutor(max_workers=3) as pool:
    jobs = {(kind, analysis, ranks): pool.submit(job, kind, analysis, ranks)
            for kind in ("fiedler", "centrality") for analysis, ranks in modes}
    refused = {
        "unknown kind": pool.submit(run, "pipeline", graph, "--symmetric", "--analysis-kind", "magic",
                                    expect_ok=False),
        "targets": pool.submit(run, "pipeline", graph, "--symmetric", "--analysis-kind", "fiedler", "--targets", "0",
                               expect_ok=False),
    }
    for kind in ("fiedler", "centrality"):
        m, want, space = reference[kind]
        lam_key = "lambda2" if kind == "fiedler" else "lambda"
        first = None
        for analysis, ranks in modes:
            tag = f"{kind} {analysis} at {ranks} rank(s)"
            doc, values = jobs[(kind, analysis, ranks)].result()
            j = doc.get(kind, {})
            check(doc.get("analysis_kind") == kind and "hitting" not in doc, f"{tag}: the document's kind")
            check(j.get("analysis") == analysis and j.get("converged") is True and j.get("iterations", 0) > 0,
                  f"{tag}: {analysis}, converged in {j.get('iterations')} iterations ({j.get('solver')})")
            check((j.get("handshake") is None) == (analysis == "inprocess"), f"{tag}: a handshake iff out of process")
            check(doc["lcc"]["vertices"] == len(lcc), f"{tag}: {doc['lcc']['vertices']} vertices, eigh's {len(lcc)}")
            got = j.get(lam_key, float("nan"))
            check(abs(got - want) <= 1e-8 * abs(want), f"{tag}: {lam_key} {got!r} = eigh's {want!r} to 1e-8")
            check(sorted(values) == lcc.tolist(), f"{tag}: the output holds exactly the largest component's vertices")
            x = np.array([values.get(int(v), np.nan) for v in lcc])
            check(abs(np.linalg.norm(x) - 1) <= 1e-9, f"{tag}: unit norm")
            off = np.linalg.norm(x - space @ (space.T @ x))
            check(off <= 1e-6, f"{tag}: vector in eigh's eigenspace (dim {space.shape[1]}), off by {off:.2e}")
            if space.shape[1] == 1:
                v = space[:, 0]
                check(min(np.linalg.norm(x - v), np.linalg.norm(x + v)) <= 1e-6, f"{tag}: eigh's vector up to sign")
            true_res = np.linalg.norm(m @ x - got * x) / abs(got)
            check(j.get("residual", 1) <= 1e-8 and abs(j["residual"] - true_res) <= 1e-8,
                  f"{tag}: residual {j.get('residual')} small and true ({true_res:.2e})")
            # No copy: the operator adds less than half of what the smallest
            # copy of the matrix would (CRS: a 64-bit column and a value an
            # arc, an offset a row); the edge arrays themselves are 4 bytes an
            # arc, below the O(vertices) structures on a graph this small.
            crs = 16 * doc["lcc"]["arcs"] + 8 * (doc["lcc"]["vertices"] + 1)
            check(0 <= j.get("matrix_extra_bytes", -1) < crs / 2,
                  f"{tag}: the operator added {j.get('matrix_extra_bytes')} bytes, less than half the {crs} of a "
                  f"CRS copy (no copy; edge arrays {doc['edge_array_bytes']})")
            if kind == "centrality":
                check(x.min() >= -1e-9, f"{tag}: centrality nonnegative")
            if first is None:
                first = x
            elif space.shape[1] == 1:  # a degenerate eigenvalue's vector is any of its eigenspace's
                check(np.linalg.norm(x - first) <= 1e-8, f"{tag}: the same vector as in process at 1 rank")
            print(f"ok {tag}: {lam_key} {got:.12g}, {j.get('iterations')} iterations, residual {j.get('residual'):.1e}")
    out = refused["unknown kind"].result()
    check(out.returncode != 0 and all(k in out.stderr for k in ("magic", "hitting", "fiedler", "centrality")),
          f"an unknown kind is refused naming the choices: {out.stderr.strip()}")
    out = refused["targets"].result()
    check(out.returncode != 0 and "the fiedler analysis takes none" in out.stderr,
          f"targets with a spectral kind are refused: {out.stderr.strip()}")

left = os.listdir(SHM)
check(not left, f"nothing left in the job's Shared directory ({left})")
finish([] if container else ["--analysis container"])
