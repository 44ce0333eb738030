#!/usr/bin/env python3
"""`tessera bfs --packed` and `tessera pagerank --packed` at 1-3 ranks, on a
Kronecker graph (.el, and .mtx for 1-based ids) and on SNAP's wiki-vote
(TESSERA_DATA_DIR; read --undirected --relabel, so the file ids are sparse):

  * BFS depths equal the plain run's per file id and a plain Python BFS's;
    every parent (a file id) is a neighbour one level closer, the source
    its own; --verify proves the packed tree;
  * PageRank at a tight tolerance within 1e-4 L1 of the plain run and of
    networkx.pagerank(alpha=0.85) (GAPBS's rules: an isolated vertex keeps
    (1 - d) / n and passes nothing, so networkx runs on the vertices with
    edges and its scores are scaled by their share);
  * the outputs list the vertices in the plain run's order;
  * --json: the packed form under 4 bytes an undirected edge, GAPBS's 8.0
    beside the EdgeList's, the pack step timed, the memory estimate's pack
    phase;
  * a directed file, a weighted one and --subgraph are refused, naming why.

Usage: test_packed_cli.py BUILD_DIR"""
import atexit
import collections
import json
import os
import shutil
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from harness import Harness  # noqa: E402

try:
    import networkx as nx
except ImportError:  # the rest still runs; the test ends skipped if it passes
    nx = None

h = Harness(os.path.join(sys.argv[1], "tessera"))
skipped = []
TMP = tempfile.mkdtemp(prefix="tessera-test-packed-")
atexit.register(shutil.rmtree, TMP, True)
# The jobs' Shared segments in a directory of this test's own.
SHM = tempfile.mkdtemp(prefix="tessera-test-packed-", dir="/dev/shm" if os.path.isdir("/dev/shm") else None)
atexit.register(shutil.rmtree, SHM, True)
os.environ["TESSERA_SHM_DIR"] = SHM
RANKS = (1, 2, 3)
DAMPING = 0.85


def p(name):
    return os.path.join(TMP, name)


def edges_of(path, base=0):
    """The file's edges (u, v) as ids of the file, comments skipped (.mtx: its size line too)."""
    out = []
    size_line = path.endswith(".mtx")
    for line in open(path):
        f = line.split()
        if not f or f[0][0] in "#%":
            continue
        if size_line:
            size_line = False
            continue
        out.append((int(f[0]), int(f[1])))
    return out


def neighbours(edges):
    """Undirected and simple, as Tessera reads the file (self loops dropped)."""
    adj = collections.defaultdict(set)
    for u, v in edges:
        if u != v:
            adj[u].add(v)
            adj[v].add(u)
    return adj


def python_bfs(adj, source):
    depth = {source: 0}
    frontier = [source]
    while frontier:
        nxt = []
        for u in frontier:
            for v in adj[u]:
                if v not in depth:
                    depth[v] = depth[u] + 1
                    nxt.append(v)
        frontier = nxt
    return depth


def lines(path):
    """The data lines of an output, as lists of numbers, in file order."""
    return [line.split() for line in open(path) if line.strip() and not line.startswith("#")]


def bfs_tree(path):
    return {int(r[0]): (int(r[1]), int(r[2])) for r in lines(path)}


def scores(path):
    return {int(r[0]): float(r[1]) for r in lines(path)}


def l1(a, b):
    return sum(abs(a[k] - b.get(k, 0.0)) for k in a) + sum(abs(v) for k, v in b.items() if k not in a)


def networkx_pagerank(adj, vertices):
    """networkx on the vertices with edges, scaled to GAPBS's rules over `vertices` file ids."""
    g = nx.Graph()
    g.add_edges_from((u, v) for u in adj for v in adj[u])
    y = nx.pagerank(g, alpha=DAMPING, tol=1e-13, max_iter=1000)
    n = len(vertices)
    return {v: y[v] * len(y) / n if v in y else (1 - DAMPING) / n for v in vertices}


def run_json(*args, ranks):
    r = h.tessera(*args, "--json", ranks=ranks)
    try:
        return json.loads(r.stdout)
    except ValueError:
        h.check(False, f"{' '.join(args)} at {ranks} ranks prints a JSON document", r.stdout[-400:] + r.stderr[-400:])
        return {}


def check_graph(name, path, options, adj, source):
    """Both kernels, plain and packed, at every rank count."""
    def at(ranks):
        tag = f"{name} at {ranks} ranks"
        plain_tree, packed_tree = p(f"{name}-{ranks}-bfs.txt"), p(f"{name}-{ranks}-bfs-packed.txt")
        plain = run_json("bfs", path, *options, "--source", str(source), "-o", plain_tree, ranks=ranks)
        packed = run_json("bfs", path, *options, "--source", str(source), "-o", packed_tree, "--packed", "--verify",
                          ranks=ranks)
        want, got = bfs_tree(plain_tree), bfs_tree(packed_tree)
        h.check([r[0] for r in lines(plain_tree)] == [r[0] for r in lines(packed_tree)],
                f"{tag}: bfs --packed lists the vertices in the plain run's order")
        depth = python_bfs(adj, source)
        h.check(all(want[v][1] == got[v][1] == depth.get(v, -1) for v in want) and want.keys() == got.keys(),
                f"{tag}: bfs --packed depths = bfs's = a Python BFS's ({len(depth)} reached)")
        bad = [v for v, (parent, d) in got.items()
               if (v == source and parent != source) or
               (v != source and d >= 0 and (parent not in adj[v] or got[parent][1] != d - 1)) or
               (d < 0 and parent != -1)]
        h.check(not bad, f"{tag}: every packed parent is a neighbour one level closer (file ids)", f"bad: {bad[:10]}")
        h.check(packed.get("bfs", {}).get("verified") is True, f"{tag}: bfs --packed --verify proved its tree")
        h.check(packed.get("bfs", {}).get("reached") == plain.get("bfs", {}).get("reached") == len(depth),
                f"{tag}: the same vertices reached")
        bytes_ok = packed.get("packed", {}).get("bytes_per_edge", 99) < 4
        h.check(bytes_ok and packed["stats"]["gapbs_bytes_per_edge"] == 8.0 and packed["stats"]["bytes_per_edge"] == 8.0,
                f"{tag}: --json: packed {packed.get('packed', {}).get('bytes_per_edge')} < 4 bytes an edge, "
                f"GAPBS 8.0 and the EdgeList 8.0 beside it")
        h.check(plain.get("stats", {}).get("bytes_per_edge") == 8.0 and "packed" not in plain,
                f"{tag}: without --packed, --json says the EdgeList's 8.0 bytes an edge and nothing packed")
        h.check("pack" in packed.get("step_seconds", {}) and packed.get("packed", {}).get("seconds", -1) >= 0 and
                packed["packed"]["array_bytes"] == packed["packed"]["edge_array_bytes"] +
                packed["packed"]["offset_array_bytes"] + packed["packed"]["id_array_bytes"],
                f"{tag}: the pack step timed, the packed arrays' memory reported")
        phases = [ph["name"] for ph in packed.get("memory_estimate", {}).get("phases", [])]
        h.check("pack" in phases, f"{tag}: the memory estimate holds the pack phase ({phases})")

        tight = ("--tolerance", "1e-10", "--max-iterations", "1000")
        plain_scores, packed_scores = p(f"{name}-{ranks}-pr.txt"), p(f"{name}-{ranks}-pr-packed.txt")
        h.tessera("pagerank", path, *options, *tight, "-o", plain_scores, ranks=ranks)
        pr = run_json("pagerank", path, *options, *tight, "-o", packed_scores, "--packed", "--verify", ranks=ranks)
        a, b = scores(plain_scores), scores(packed_scores)
        h.check([r[0] for r in lines(plain_scores)] == [r[0] for r in lines(packed_scores)],
                f"{tag}: pagerank --packed lists the vertices in the plain run's order")
        h.check(a.keys() == b.keys() and l1(a, b) < 1e-4,
                f"{tag}: pagerank --packed within 1e-4 L1 of pagerank (L1 {l1(a, b):.2e})")
        h.check(pr.get("pagerank", {}).get("verified") is True and pr["pagerank"].get("converged") is True,
                f"{tag}: pagerank --packed converged and --verify proved it")
        if nx is not None:
            ref = networkx_pagerank(adj, list(a))
            h.check(l1(b, ref) < 1e-4, f"{tag}: pagerank --packed within 1e-4 L1 of networkx (L1 {l1(b, ref):.2e})")
    h.each(RANKS, at)


kron = p("kron.el")
h.tessera("gen", "kron", "--scale", "11", "-o", kron)
kron_adj = neighbours(edges_of(kron))
kron_source = max(kron_adj, key=lambda v: (len(kron_adj[v]), -v))
check_graph("kron", kron, [], kron_adj, kron_source)

# 1-based ids: the .mtx of the same graph, its depths those of the .el shifted by one.
mtx = p("kron.mtx")
h.tessera("convert", kron, "-o", mtx)
h.tessera("bfs", mtx, "--source", str(kron_source + 1), "-o", p("mtx-bfs.txt"), "--packed", ranks=2)
el_tree = bfs_tree(p("kron-2-bfs.txt"))
mtx_tree = bfs_tree(p("mtx-bfs.txt"))
h.check({v - 1: d for v, (_, d) in mtx_tree.items()} == {v: d for v, (_, d) in el_tree.items()} and
        all(parent == -1 or parent - 1 in kron_adj[v - 1] for v, (parent, _) in mtx_tree.items() if v - 1 != kron_source),
        "kron.mtx (1-based) at 2 ranks: bfs --packed depths and parents in the file's ids")

wiki = os.path.join(os.environ.get("TESSERA_DATA_DIR", ""), "wiki-vote.el")
if os.path.exists(wiki):
    wiki_adj = neighbours(edges_of(wiki))
    wiki_source = max(wiki_adj, key=lambda v: (len(wiki_adj[v]), -v))
    check_graph("wiki-vote", wiki, ["--undirected", "--relabel"], wiki_adj, wiki_source)
else:
    skipped.append(f"wiki-vote.el (not in TESSERA_DATA_DIR={os.environ.get('TESSERA_DATA_DIR', '')!r})")
if nx is None:
    skipped.append("networkx (not installed): PageRank against networkx")

# Refusals, before any output is written.
directed = p("directed.el")
with open(directed, "w") as f:
    f.write("0 1\n1 2\n2 0\n")
weighted = p("weighted.wel")
with open(weighted, "w") as f:
    f.write("0 1 2.5\n1 2 1\n")
for args, needles, what in (
        (["bfs", directed, "--source", "0"], ["directed", "transpose"], "a directed file"),
        (["pagerank", directed], ["directed", "transpose"], "a directed file"),
        (["pagerank", weighted, "--undirected"], ["weighted", "--pattern"], "a weighted file"),
        (["bfs", kron, "--source", "0", "--hops", "1", "--subgraph", p("sub.el")], ["--subgraph"], "--subgraph")):
    out = p("never.txt")
    r = h.tessera(*args, "--packed", "-o", out, ranks=2, expect_ok=False)
    h.check(r.returncode != 0 and all(n in r.stderr for n in needles) and not os.path.exists(out),
            f"{args[0]} --packed on {what}: refused naming {needles}, nothing written", r.stderr[-400:])
h.check(h.tessera("bfs", directed, "--source", "0", "--packed", "--undirected", ranks=2).returncode == 0,
        "bfs --packed --undirected on the directed file runs")
h.check(not os.listdir(SHM), "no Shared segment left behind", str(os.listdir(SHM)))
h.finish(skipped)
