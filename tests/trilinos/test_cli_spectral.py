#!/usr/bin/env python3
"""`tessera spectral` (Anasazi LOBPCG and Krylov-Schur on the edge arrays) against
numpy's dense eigh of the same graph at 1-4 ranks: λ₂ of the Laplacian and
the largest eigenvalue of the adjacency to 1e-8 relative, vectors to 1e-6
(unit norm, up to sign; checked as lying in the reference eigenspace, so a
degenerate eigenvalue is judged by its subspace), the same vector at every
rank count, the reported residual small and true, the bisection's sizes and
cut recomputed from its parts file; on a grid, a Kronecker graph's largest
component, a weighted graph and a CrsMatrix copy; and on a real graph
(SNAP's Oregon-1, from TESSERA_DATA_DIR) against scipy's sparse eigsh. A disconnected graph gives
the clear error; nothing is left in the job's shared-memory directory.
Usage: test_cli_spectral.py BUILD_DIR"""
import atexit, json, os, shutil, subprocess, sys, tempfile
from concurrent.futures import ThreadPoolExecutor

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from scipy_reference import read_vertex_values  # noqa: E402
from harness import check, finish  # noqa: E402

build = sys.argv[1]
tessera = os.path.join(build, "tessera")
mpirun = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "scripts", "mpirun.sh")
# The job's segments go to a directory of this test's own, so "nothing left
# behind" is about these runs only.
SHM = tempfile.mkdtemp(prefix="tessera-test-spectral-", dir="/dev/shm")
os.environ["TESSERA_SHM_DIR"] = SHM
atexit.register(shutil.rmtree, SHM, True)


def run(ranks, *args, expect_ok=True):
    cmd = [mpirun, "-n", str(ranks), tessera, *args, "-q"]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    if expect_ok and out.returncode != 0:
        sys.exit(f"FAIL: {' '.join(cmd)} exited {out.returncode}\n{out.stderr}")
    return out


def adjacency(path, n=None):
    """The symmetric adjacency of an edge-list text file listing both directions."""
    rows = np.loadtxt(path, comments="#", ndmin=2)
    u, v = rows[:, 0].astype(np.int64), rows[:, 1].astype(np.int64)
    w = rows[:, 2] if rows.shape[1] > 2 else np.ones(len(u))
    n = n or int(max(u.max(), v.max())) + 1
    a = np.zeros((n, n))
    np.add.at(a, (u, v), w)
    assert np.allclose(a, a.T), path
    return a


def eigenspace(values, vectors, k):
    """The columns of `vectors` whose eigenvalue equals values[k] to 1e-9 relative."""
    close = np.abs(values - values[k]) <= 1e-9 * max(1.0, abs(values[k]))
    return vectors[:, close]


cases = []  # (job, its check): every job runs first, a few at a time


def compare(name, a, what, path_args, lam_key, ranks_list=(1, 2, 3, 4), extra=()):
    """`tessera spectral` at each rank count, every answer checked against eigh's."""
    cases.append((name, a, what, path_args, lam_key, ranks_list, extra))


def check_case(name, a, what, path_args, lam_key, ranks_list, extra, results):
    n = a.shape[0]
    lap = np.diag(a.sum(axis=1)) - a
    m = lap if what == "fiedler" else a
    values, vectors = np.linalg.eigh(m)
    k = 1 if what == "fiedler" else n - 1
    want, space = values[k], eigenspace(values, vectors, k)

    first = None
    for ranks, vec, parts, j in (r for r in results if r[0] in ranks_list):
        tag = f"{name} {what} at {ranks} rank(s)"
        got = j[lam_key]
        check(j["converged"] and (j["iterations"] > 0 or n <= 4),
              f"{tag}: converged in {j['iterations']} iterations ({j['solver']})")
        dim = n - 1 if what == "fiedler" else n
        check(j["solver"] == ("dense (LAPACK)" if dim <= 3 else
                              # on the star LOBPCG breaks down and Krylov-Schur takes over
                              "krylov-schur" if "krylov-schur" in extra or dim <= 12 or name == "star" else "lobpcg"),
              f"{tag}: solved by {j['solver']}")
        check(abs(got - want) <= 1e-8 * abs(want), f"{tag}: {lam_key} {got!r} = eigh's {want!r} to 1e-8")
        values_read = read_vertex_values(vec)
        x = np.array([values_read[i] for i in range(n)])
        check(abs(np.linalg.norm(x) - 1) <= 1e-9, f"{tag}: unit norm")
        off = np.linalg.norm(x - space @ (space.T @ x))
        check(off <= 1e-6, f"{tag}: vector in eigh's eigenspace (dim {space.shape[1]}), off by {off:.2e}")
        true_res = np.linalg.norm(m @ x - got * x) / abs(got)
        check(j["residual"] <= 1e-8 and abs(j["residual"] - true_res) <= 1e-8,
              f"{tag}: residual {j['residual']:.2e} small and true ({true_res:.2e}; text rounding aside)")
        if first is None:
            first = x
        elif space.shape[1] == 1:  # a degenerate eigenvalue's vector is any of its eigenspace's
            check(np.linalg.norm(x - first) <= 1e-8, f"{tag}: the same vector as at {ranks_list[0]} rank(s)")
        if what == "centrality":
            check(x.min() >= -1e-9, f"{tag}: centrality nonnegative")
        if what == "fiedler":
            p = read_vertex_values(parts, int)
            part = np.array([p[i] for i in range(n)])
            b = j["bisection"]
            cut = int(sum(1 for u, v in zip(*np.nonzero(np.triu(a, 1))) if part[u] != part[v]))
            check(b["sizes"] == [int((part == 0).sum()), int((part == 1).sum())] and b["cut_edges"] == cut,
                  f"{tag}: bisection sizes {b['sizes']} and cut {b['cut_edges']} match the parts file ({cut})")
            check(abs(b["sizes"][0] - b["sizes"][1]) <= 1 or b["split"] != "median",
                  f"{tag}: the median split halves the graph")
            check(all(part[i] == (x[i] > b["threshold"]) for i in range(n) if abs(x[i] - b["threshold"]) > 1e-12),
                  f"{tag}: parts = vector above the split")


def job(name, what, path_args, extra, ranks):
    vec = os.path.join(d, f"{name}-{what}-{ranks}.txt")
    parts = os.path.join(d, f"{name}-{what}-{ranks}-parts.txt")
    args = ["spectral", *path_args, "--what", what, "-o", vec, "--json", *extra]
    if what == "fiedler":
        args += ["--parts", parts]
    return ranks, vec, parts, json.loads(run(ranks, *args).stdout)


d = tempfile.mkdtemp(prefix="tessera-spectral-")
atexit.register(shutil.rmtree, d, True)

# A 7x5 grid: λ₂ simple (not a square), bipartite (±λ_max: centrality must take the positive one).
grid = os.path.join(d, "grid.el")
run(1, "gen", "grid", "--dims", "7x5", "-o", grid)
a = adjacency(grid)
compare("grid", a, "fiedler", [grid, "--symmetric"], "lambda2")
compare("grid", a, "centrality", [grid, "--symmetric"], "lambda", ranks_list=(2,))

# A Kronecker graph's largest component (hubs, pendant vertices: degenerate eigenvalues likely).
kron, lcc = os.path.join(d, "kron.el"), os.path.join(d, "lcc.el")
run(1, "gen", "kron", "--scale", "8", "--edge-factor", "4", "-o", kron)
run(2, "lcc", kron, "--symmetric", "-o", lcc)
a = adjacency(lcc)
compare("kron-lcc", a, "fiedler", [lcc, "--symmetric"], "lambda2")
compare("kron-lcc", a, "centrality", [lcc, "--symmetric"], "lambda", ranks_list=(3,))

# A weighted graph: a 6x4 grid plus chords, positive weights, both directions listed.
rng = np.random.default_rng(7)
g = np.zeros((24, 24))
for i in range(6):
    for j in range(4):
        v = i * 4 + j
        if j + 1 < 4:
            g[v, v + 1] = 1
        if i + 1 < 6:
            g[v, v + 4] = 1
g[0, 23] = g[5, 17] = 1
g = np.triu(g + g.T, 1)
g[g > 0] = rng.uniform(0.5, 3.0, int((g > 0).sum()))
g = g + g.T
weighted = os.path.join(d, "weighted.wel")
with open(weighted, "w") as f:
    for u, v in zip(*np.nonzero(g)):
        f.write(f"{u} {v} {g[u, v]!r}\n")
compare("weighted", adjacency(weighted), "fiedler", [weighted, "--symmetric"], "lambda2", ranks_list=(1, 3))
compare("weighted", adjacency(weighted), "centrality", [weighted, "--symmetric"], "lambda", ranks_list=(4,))

# A star: L has three distinct eigenvalues (λ₂ = 1 eleven times), so the
# Krylov space is exhausted after two steps.
star = os.path.join(d, "star.el")
with open(star, "w") as f:
    for v in range(1, 13):
        f.write(f"0 {v}\n{v} 0\n")
compare("star", adjacency(star), "fiedler", [star, "--symmetric"], "lambda2", ranks_list=(1, 3))
compare("star", adjacency(star), "centrality", [star, "--symmetric"], "lambda", ranks_list=(2,))

# The conventional path: Anasazi on a CrsMatrix copy gives the same answer.
compare("grid-crs", adjacency(grid), "fiedler", [grid, "--symmetric"], "lambda2", ranks_list=(3,),
        extra=("--matrix", "crs"))
compare("weighted-crs", adjacency(weighted), "centrality", [weighted, "--symmetric"], "lambda", ranks_list=(2,),
        extra=("--matrix", "crs"))

# Krylov-Schur instead of LOBPCG: the same answers.
ks = ("--solver", "krylov-schur")
compare("kron-lcc-ks", adjacency(lcc), "fiedler", [lcc, "--symmetric"], "lambda2", ranks_list=(1, 4), extra=ks)
compare("kron-lcc-ks", adjacency(lcc), "centrality", [lcc, "--symmetric"], "lambda", ranks_list=(2,), extra=ks)
compare("weighted-ks", adjacency(weighted), "fiedler", [weighted, "--symmetric"], "lambda2", ranks_list=(3,), extra=ks)
compare("grid-ks", adjacency(grid), "fiedler", [grid, "--symmetric"], "lambda2", ranks_list=(2,), extra=ks)

# A 3-vertex path at 4 ranks (ranks without vertices) and a 2-vertex graph.
path3 = os.path.join(d, "path3.el")
with open(path3, "w") as f:
    f.write("0 1\n1 0\n1 2\n2 1\n")
compare("path3", adjacency(path3), "fiedler", [path3, "--symmetric"], "lambda2", ranks_list=(4,))
compare("path3", adjacency(path3), "centrality", [path3, "--symmetric"], "lambda", ranks_list=(4,))
pair = os.path.join(d, "pair.el")
with open(pair, "w") as f:
    f.write("0 1\n1 0\n")
compare("pair", adjacency(pair), "fiedler", [pair, "--symmetric"], "lambda2", ranks_list=(2,))

# Disconnected: two triangles and an isolated vertex -> the clear error, at 1 and 3 ranks.
two = os.path.join(d, "two.el")
with open(two, "w") as f:
    for u, v in ((0, 1), (1, 2), (2, 0), (3, 4), (4, 5), (5, 3)):
        f.write(f"{u} {v}\n{v} {u}\n")
    f.write("6 6\n")
refusals = [(f"disconnected graph at {r} rank(s): clear error", "3 connected components",
             (r, "spectral", two, "--symmetric", "--what", "fiedler")) for r in (1, 3)]
refusals.append(("--parts with centrality refused", "--parts",
                 (1, "spectral", grid, "--symmetric", "--what", "centrality", "--parts", os.path.join(d, "p.txt"))))

with ThreadPoolExecutor(max_workers=4) as pool:
    runs = {(c[0], c[2], r): pool.submit(job, c[0], c[2], c[3], c[6], r) for c in cases for r in c[5]}
    refused = [pool.submit(run, *argv, expect_ok=False) for _, _, argv in refusals]
    for c in cases:
        check_case(*c, [runs[(c[0], c[2], r)].result() for r in c[5]])
    for (what, needle, _), f in zip(refusals, refused):
        out = f.result()
        check(out.returncode != 0 and needle in out.stderr and ("tessera lcc" in out.stderr or needle == "--parts"),
              f"{what} ({out.stderr.strip().splitlines()[-1:]})")

# A real graph (SNAP's Oregon-1, 10,670 vertices: too big for a dense eigh)
# against scipy's sparse eigsh: shift-invert near 0 for the Laplacian's
# smallest, Lanczos for the adjacency's largest.
data = os.environ.get("TESSERA_DATA_DIR", "")
oregon_raw = os.path.join(data, "oregon1_010331.el")
if os.path.exists(oregon_raw):
    import scipy.sparse as sp
    import scipy.sparse.linalg as sla
    oregon = os.path.join(d, "oregon.el")
    with open(oregon_raw) as f, open(oregon, "w") as g:  # the file's last line is a stray "-1"
        g.write("".join(line for line in f if line.strip() != "-1"))
    rows = np.loadtxt(oregon, comments="%", ndmin=2).astype(np.int64)
    n = int(rows.max()) + 1
    a = sp.coo_matrix((np.ones(len(rows)), (rows[:, 0], rows[:, 1])), shape=(n, n)).tocsr()
    a.data[:] = 1.0
    lap = (sp.diags(np.asarray(a.sum(axis=1)).ravel()) - a).tocsc()
    for what, key, ranks, (values, vectors) in (
            ("fiedler", "lambda2", 2, sla.eigsh(lap, k=4, sigma=-1e-3, which="LM", tol=1e-14)),
            ("centrality", "lambda", 3, sla.eigsh(a, k=2, which="LA", tol=1e-14))):
        k = 1 if what == "fiedler" else int(np.argmax(values))
        check(abs(values[k] - values[k + 1 if what == "fiedler" else 1 - k]) > 1e-6, f"oregon {what}: a simple eigenvalue")
        vec = os.path.join(d, f"oregon-{what}.txt")
        got = json.loads(run(ranks, "spectral", oregon, "--symmetric", "--what", what, "-o", vec, "--json").stdout)
        tag = f"oregon {what} at {ranks} ranks"
        check(abs(got[key] - values[k]) <= 1e-8 * abs(values[k]), f"{tag}: {key} {got[key]!r} = eigsh's {values[k]!r} to 1e-8")
        x = np.zeros(n)
        for v, t in read_vertex_values(vec).items():
            x[v] = t
        x /= np.linalg.norm(x)
        y = vectors[:, k] / np.linalg.norm(vectors[:, k])
        off = min(np.linalg.norm(x - y), np.linalg.norm(x + y))
        check(off <= 1e-6, f"{tag}: the vector is eigsh's up to sign, off by {off:.1e}")
else:
    print(f"note: no {oregon_raw}: the real-graph case did not run")

left = os.listdir(SHM)
check(not left, f"nothing left in the job's shared-memory directory ({left})")
finish()
