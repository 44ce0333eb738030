#!/usr/bin/env python3
"""--symmetric (cc, lcc, pipeline) at 1-3 ranks: a file that lists both
directions reads as undirected without added reverses, its components equal a
union-find over its lines; a file that is not symmetric (an edge one way only,
or two weights) is refused with an error naming the file."""
import json
import os
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from harness import Harness  # noqa: E402


def components(path):
    """Union-find over the file's data lines: (vertices, components)."""
    parent = {}

    def find(x):
        parent.setdefault(x, x)
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    top = -1
    for line in open(path):
        f = line.split()
        if not f or f[0].startswith("#"):
            continue
        u, v = int(f[0]), int(f[1])
        top = max(top, u, v)
        parent[find(u)] = find(v)
    for x in range(top + 1):
        find(x)
    # A file Tessera wrote counts its vertices in its header (isolated ones at the top of the range too).
    first = open(path).readline()
    n = int(first.split("; ")[1].split()[0]) if first.startswith("# tessera graph:") else top + 1
    return n, len({find(x) for x in range(top + 1)}) + n - (top + 1)


h = Harness(os.path.join(sys.argv[1], "tessera"))
with tempfile.TemporaryDirectory() as tmp:
    def write(name, text):
        path = os.path.join(tmp, name)
        with open(path, "w") as f:
            f.write(text)
        return path

    kron = os.path.join(tmp, "kron.el")
    h.tessera("gen", "kron", "--scale", "10", "-o", kron)
    good = {
        "kron.el": kron,
        # both directions, a duplicate pair, a self-loop, an isolated vertex 6
        "small.el": write("small.el", "0 1\n1 0\n1 2\n2 1\n2 1\n1 2\n3 3\n4 5\n5 4\n6 6\n"),
        "small.wel": write("small.wel", "0 1 2.5\n1 0 2.5\n2 3 1\n3 2 1\n"),
    }
    bad = {
        "one-way.el": write("one-way.el", "0 1\n1 0\n1 2\n"),
        "weights.wel": write("weights.wel", "0 1 2.5\n1 0 3\n"),
    }
    def good_file(item):
        name, path = item
        arcs = sum(1 for line in open(path) if line.split() and not line.startswith("#"))
        lines = [tuple(map(int, line.split()[:2])) for line in open(path) if line.split() and not line.startswith("#")]
        pairs = {(u, v) for u, v in lines if u != v}                # a simple graph: self loops dropped
        distinct = len(pairs)                                       # distinct arcs
        undirected = len({(min(u, v), max(u, v)) for u, v in pairs})  # as GAPBS counts edges
        loops = sum(u == v for u, v in lines)
        vertices, count = components(path)
        for ranks in (1, 2, 3):
            p = h.tessera("cc", path, "--symmetric", "--json", ranks=ranks)
            if p.returncode != 0:
                continue
            j = json.loads(p.stdout)
            h.check(j["stats"]["directed"] is False and j["stats"]["arcs"] == distinct and
                    j["stats"]["edges"] == undirected and
                    j["stats"]["dropped"] == {"duplicates": arcs - loops - distinct, "self_loops": loops},
                    f"cc --symmetric {name} at {ranks} ranks: undirected, {distinct} arcs of {arcs} lines "
                    f"(no reverses added, duplicates and self loops dropped), {undirected} edges: {j['stats']}")
            h.check(j["stats"]["vertices"] == vertices and j["results"][0]["components"] == count,
                    f"cc --symmetric {name} at {ranks} ranks: {count} components of {vertices} vertices")
            h.check("symmetrize" not in j["step_seconds"], f"cc --symmetric {name} at {ranks} ranks: no symmetrize step")
        lcc = os.path.join(tmp, f"lcc-{name}")
        p = h.tessera("lcc", path, "--symmetric", "-o", lcc, ranks=2)
        h.check(p.returncode == 0 and os.path.exists(lcc), f"lcc --symmetric {name} at 2 ranks writes {lcc}")
    h.each(good.items(), good_file)
    p = h.tessera("pipeline", kron, "--symmetric", "--json", ranks=2)
    h.check(p.returncode == 0 and json.loads(p.stdout or "{}").get("graph", {}).get("directed") is False,
            "pipeline --symmetric kron.el at 2 ranks: the graph is undirected")
    for name, path in bad.items():
        def refused_at(ranks):
            for command in ("cc", "lcc", "pipeline"):
                extra = ["-o", os.path.join(tmp, f"never{ranks}.el")] if command == "lcc" else []
                p = h.tessera(command, path, "--symmetric", *extra, ranks=ranks, expect_ok=False)
                h.check(p.returncode != 0 and path in p.stderr and "not symmetric" in p.stderr,
                        f"{command} --symmetric {name} at {ranks} ranks: refused naming the file "
                        f"({p.stderr.strip()[-160:]})")
        h.each((1, 2, 3), refused_at)
    p = h.tessera("cc", kron, "--symmetric", "--undirected", expect_ok=False)
    h.check(p.returncode != 0 and "--symmetric" in p.stderr and "--undirected" in p.stderr,
            "cc --symmetric --undirected: refused, naming both")
    p = h.tessera("cc", os.path.join(tmp, "nothing.tsg"), "--symmetric", expect_ok=False)
    h.check(p.returncode != 0, "cc --symmetric on a binary path: refused")
h.finish()
