#!/usr/bin/python3
"""The ids a user types and reads are the FILE's ids, at 1-4 ranks, checked
against scipy (csgraph components, spsolve hitting times) computed from the
file text here:

* hitting --relabel on a DIRECTED graph with sparse ids (issue 8 item 1:
  values landed on the wrong vertices, or the heap broke, at 2+ ranks);
* 1-based files (item 3): --base 1 --relabel --targets 10, --targets 1 on a
  .mtx, lcc --ids and cc's largest_label;
* cc -o LABELS (item 15): "vertex component" lines in file ids;
* pipeline on a directed sparse-id graph: its LCC, target and times in file ids.

Usage: test_cli_ids.py BUILD_DIR
"""
import json
import os
import sys
import tempfile

import numpy as np
import scipy.sparse as sp
import scipy.sparse.csgraph as csgraph

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from harness import Harness  # noqa: E402
from scipy_reference import read_vertex_values, reference_hitting  # noqa: E402

TESSERA = os.path.join(sys.argv[1], "tessera")
RANKS = [1, 2, 3, 4]


harness = Harness(TESSERA, timeout=300, fatal=False)
check, tessera, failures = harness.check, harness.tessera, harness.failures


def undirected(edges):
    """Adjacency over the distinct file ids (sorted), undirected, no loops or duplicates."""
    ids = sorted({u for e in edges for u in e})
    index = {v: i for i, v in enumerate(ids)}
    n = len(ids)
    r = [index[u] for u, _ in edges]
    c = [index[v] for _, v in edges]
    a = sp.coo_matrix((np.ones(len(edges)), (r, c)), shape=(n, n)).tocsr()
    a = ((a + a.T) > 0).astype(float).tolil()
    a.setdiag(0)
    a = a.tocsr()
    a.eliminate_zeros()
    return ids, index, a


def same_times(got, want, rel=1e-7):
    if set(got) != set(want):
        return False, f"vertex sets differ: {sorted(set(got) ^ set(want))[:5]}"
    worst = 0.0
    for v, w in want.items():
        g = got[v]
        if np.isnan(w) != np.isnan(g):
            return False, f"vertex {v}: {g} vs {w}"
        if not np.isnan(w):
            worst = max(worst, abs(g - w) / max(1.0, abs(w)))
    return worst <= rel, f"max relative error {worst:.2e}"


def write(path, text):
    with open(path, "w") as f:
        f.write(text)
    return path


with tempfile.TemporaryDirectory() as tmp:
    # A directed graph with sparse ids: a path with chords over ids 1000+7i,
    # a few small ids hanging off it, a second component, and arcs listed in
    # one direction only (so the symmetrized copy is twice as large and gets
    # other vertex ranges).
    rng = np.random.default_rng(8)
    big = [1000 + 7 * i for i in range(120)]
    edges = [(big[i], big[i + 1]) for i in range(len(big) - 1)]
    edges += [(big[int(a)], big[int(b)]) for a, b in rng.integers(0, len(big), size=(60, 2)) if a != b]
    edges += [(3, big[5]), (big[90], 11), (5_000_000_000, 5_000_000_003), (5_000_000_003, 5_000_000_009)]
    directed = write(os.path.join(tmp, "directed.el"), "".join(f"{u} {v}\n" for u, v in edges))
    ids, index, a = undirected(edges)
    targets = [big[0], big[77]]
    h = reference_hitting(a, [index[t] for t in targets])
    want = {ids[i]: h[i] for i in range(len(ids))}
    def hitting_relabel_at(k):
        out = os.path.join(tmp, f"h{k}.txt")
        p = tessera("hitting", directed, "--relabel", "--targets", ",".join(map(str, targets)), "--tolerance", "1e-13",
                    "-o", out, "--json", ranks=k)
        if p.returncode != 0:
            return
        ok, how = same_times(read_vertex_values(out), want)
        check(ok, f"hitting --relabel on a directed sparse-id graph at {k} ranks vs spsolve ({how})")
        r = json.loads(p.stdout)["hitting"]
        far = max((v for v in want if not np.isnan(want[v])), key=lambda v: (want[v], -v))
        check(r["farthest_vertex"] == far and r.get("target_file_ids") == targets and r["unreachable"] == 3,
              f"hitting JSON at {k} ranks names file ids (farthest {r['farthest_vertex']} vs {far})")
    harness.each(RANKS, hitting_relabel_at)

    # The same file with every id + 1, read with --base 1: the same answers, ids + 1.
    shifted = write(os.path.join(tmp, "shifted.el"), "".join(f"{u + 1} {v + 1}\n" for u, v in edges))
    def hitting_base1_at(k):
        out = os.path.join(tmp, f"s{k}.txt")
        p = tessera("hitting", shifted, "--base", "1", "--relabel", "--targets", ",".join(str(t + 1) for t in targets),
                    "--tolerance", "1e-13", "-o", out, ranks=k)
        if p.returncode == 0:
            ok, how = same_times(read_vertex_values(out), {v + 1: t for v, t in want.items()})
            check(ok, f"hitting --base 1 --relabel at {k} ranks: file ids + 1 ({how})")
    harness.each([1, 3], hitting_base1_at)

    # Issue 8 item 3 as reported.
    r_el = write(os.path.join(tmp, "r.el"), "10 20\n20 30\n")
    def hitting_r_el_at(k):
        out = os.path.join(tmp, f"r{k}.txt")
        p = tessera("hitting", r_el, "--base", "1", "--relabel", "--targets", "10", "-o", out, ranks=k)
        check(p.returncode == 0 and read_vertex_values(out) == {10: 0.0, 20: 3.0, 30: 4.0},
              f"hitting r.el --base 1 --relabel --targets 10 at {k} ranks")
    harness.each(RANKS, hitting_r_el_at)
    mtx = write(os.path.join(tmp, "p.mtx"), "%%MatrixMarket matrix coordinate pattern general\n3 3 2\n1 2\n2 3\n")
    def hitting_mtx_at(k):
        out = os.path.join(tmp, f"m{k}.txt")
        p = tessera("hitting", mtx, "--targets", "1", "-o", out, ranks=k)
        check(p.returncode == 0 and read_vertex_values(out) == {1: 0.0, 2: 3.0, 3: 4.0},
              f"hitting --targets 1 on a 3-vertex .mtx path targets file vertex 1 at {k} ranks")
    harness.each(RANKS, hitting_mtx_at)
    p = tessera("hitting", mtx, "--targets", "0", ranks=2, expect_ok=False)
    check(p.returncode != 0 and "target vertex 0 is outside" in p.stderr and "1..3" in p.stderr,
          "hitting --targets 0 on a .mtx names the file's id range")

    # cc and lcc on a 1-based .mtx with two components: largest_label, -o
    # labels and --ids in file ids.
    mm_edges = [(1, 2), (2, 3), (5, 6), (6, 7), (7, 8), (4, 4)]
    mm = write(os.path.join(tmp, "two.mtx"), "%%MatrixMarket matrix coordinate pattern general\n8 8 6\n" +
               "".join(f"{u} {v}\n" for u, v in mm_edges))
    adj = sp.coo_matrix((np.ones(len(mm_edges)), ([u - 1 for u, _ in mm_edges], [v - 1 for _, v in mm_edges])),
                        shape=(8, 8))
    _, labels = csgraph.connected_components(adj, directed=True, connection="weak")
    smallest = {}
    for v, l in enumerate(labels):
        smallest.setdefault(l, v + 1)
    want_labels = {v + 1: smallest[l] for v, l in enumerate(labels)}
    def cc_lcc_mtx_at(k):
        out = os.path.join(tmp, f"labels{k}.txt")
        p = tessera("cc", mm, "--algorithm", "both", "-o", out, "--json", ranks=k)
        if p.returncode != 0:
            return
        got = read_vertex_values(out, int)
        check(got == want_labels, f"cc -o on a .mtx at {k} ranks: 'vertex component' lines in file ids")
        res = json.loads(p.stdout)["results"]
        check(all(r["largest_label"] == 5 and r["largest_size"] == 4 and r["components"] == 3 for r in res),
              f"cc largest_label is file id 5 at {k} ranks (got {[r['largest_label'] for r in res]})")
        lcc_out, ids_out = os.path.join(tmp, f"lcc{k}.mtx"), os.path.join(tmp, f"lcc{k}.ids")
        p = tessera("lcc", mm, "-o", lcc_out, "--ids", ids_out, "--json", ranks=k)
        if p.returncode == 0:
            check(read_vertex_values(ids_out, int) == {1: 5, 2: 6, 3: 7, 4: 8},
                  f"lcc --ids at {k} ranks: ids in OUT (1-based .mtx) -> file ids")
            check(json.loads(p.stdout)["components"]["largest_label"] == 5, f"lcc largest_label in file ids at {k} ranks")
    harness.each(RANKS, cc_lcc_mtx_at)

    # The pipeline on the directed sparse-id graph: the LCC is the big part.
    lcc_ids = [v for v in ids if v < 5_000_000_000]
    lcc_index = {v: i for i, v in enumerate(lcc_ids)}
    sub = a[[index[v] for v in lcc_ids]][:, [index[v] for v in lcc_ids]]
    hl = reference_hitting(sub.tocsr(), [lcc_index[big[77]]])
    want_lcc = {lcc_ids[i]: hl[i] for i in range(len(lcc_ids))}
    deg = np.asarray(sub.sum(axis=1)).ravel()
    default_target = lcc_ids[int(np.argmax(deg))]
    def pipeline_at(k):
        out = os.path.join(tmp, f"p{k}.txt")
        p = tessera("pipeline", directed, "--relabel", "--targets", str(big[77]), "--tolerance", "1e-13", "-o", out,
                    "--json", ranks=k)
        if p.returncode == 0:
            ok, how = same_times(read_vertex_values(out), want_lcc)
            check(ok, f"pipeline --relabel on a directed sparse-id graph at {k} ranks vs spsolve ({how})")
        p = tessera("pipeline", directed, "--relabel", "--json", "--algorithm", "lp", ranks=k)
        if p.returncode == 0:
            j = json.loads(p.stdout)
            check(j["hitting"].get("target_file_ids") == [default_target] and j["components"]["algorithm"] == "lp",
                  f"pipeline default target is the highest-degree vertex {default_target} in file ids at {k} ranks "
                  f"(got {j['hitting'].get('target_file_ids')})")
    harness.each(RANKS, pipeline_at)
    p = tessera("pipeline", directed, "--relabel", "--targets", "5000000003", ranks=2, expect_ok=False)
    check(p.returncode != 0 and "5000000003" in p.stderr and "largest component" in p.stderr,
          "pipeline names a target outside the largest component")

    # cc --strong on the directed sparse-id graph (its chords close many
    # cycles) vs scipy's strong components, labels = smallest file id.
    n = len(ids)
    arcs = sp.coo_matrix((np.ones(len(edges)), ([index[u] for u, _ in edges], [index[v] for _, v in edges])),
                         shape=(n, n)).tocsr()
    count, comp = csgraph.connected_components(arcs, directed=True, connection="strong")
    smallest = {}
    for i, c in enumerate(comp):
        smallest[c] = min(smallest.get(c, ids[i]), ids[i])
    want_strong = {ids[i]: smallest[comp[i]] for i in range(n)}
    check(1 < count < n - 3, f"the directed test graph has nontrivial strong components ({count} of {n} vertices)")
    def strong_at(k):
        out = os.path.join(tmp, f"scc{k}.txt")
        p = tessera("cc", directed, "--relabel", "--strong", "-o", out, "--json", ranks=k)
        if p.returncode == 0:
            check(read_vertex_values(out, int) == want_strong, f"cc --strong -o at {k} ranks: scipy's strong components")
            r = json.loads(p.stdout)["results"][0]
            check(r["components"] == count and r["algorithm"] == "scc", f"cc --strong --json at {k} ranks: {count} components")
    harness.each(RANKS, strong_at)

harness.finish()
