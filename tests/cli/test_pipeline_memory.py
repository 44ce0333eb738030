#!/usr/bin/env python3
"""Issue 41: one copy of the graph. The pipeline on a Kronecker graph at 2
ranks, generated, read from a .tsg (mapped in place) and from edge-list
text (both directions listed, read --symmetric; one direction kept, as
GAPBS's converter lists a graph, read --undirected; the same with sparse
ids, read --relabel, which must not hold the edges either): the same largest
component and hitting times, 8 bytes an
undirected edge, and the job's peak data growth (peak resident memory less
library code paged in) within the issue's budget of 1.2x the edge arrays +
96 bytes a vertex. The growth must also hold the edge arrays themselves, or
the measure would prove nothing. Not run under the sanitizers (their
shadow memory is growth too)."""
import json
import os
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from harness import Harness  # noqa: E402

SCALE = "19"
h = Harness(os.path.join(sys.argv[1], "tessera"), fatal=True)
with tempfile.TemporaryDirectory() as tmp:
    tsg, el, one, sparse = (os.path.join(tmp, f) for f in ("k.tsg", "k.el", "k-one.el", "k-sparse.el"))
    h.tessera("gen", "kron", "--scale", SCALE, "-o", tsg, ranks=2)
    h.tessera("gen", "kron", "--scale", SCALE, "-o", el, ranks=2)
    with open(el) as src, open(one, "w") as dst:
        for line in src:
            f = line.split()
            if f and not f[0].startswith("#") and int(f[0]) < int(f[1]):
                dst.write(line)
    with open(one) as src, open(sparse, "w") as dst:  # ids 1000 apart, in the same order
        for line in src:
            u, v = line.split()[:2]
            dst.write(f"{int(u) * 1000 + 7} {int(v) * 1000 + 7}\n")
    runs = {
        "generated": ["pipeline", "--scale", SCALE],
        "tsg": ["pipeline", tsg],
        "text": ["pipeline", el, "--symmetric"],
        "text, one direction": ["pipeline", one, "--undirected"],
        "text, sparse ids": ["pipeline", sparse, "--undirected", "--relabel"],
    }
    docs = {}
    for name, args in runs.items():
        docs[name] = json.loads(h.tessera(*args, "--json", ranks=2).stdout)
    for name, d in docs.items():
        m, g, lcc = d["memory"], d["graph"], d["lcc"]
        h.check(g["bytes_per_edge"] == 8.0 and g["id_type"] == "uint32",
                f"{name}: {g['bytes_per_edge']} bytes an undirected edge at {g['id_type']} (GAPBS: 8 at int32)")
        h.check(m["data_growth_bytes"] == m["peak_growth_bytes"] - m["library_code_growth_bytes"],
                f"{name}: data growth is the peak growth less library code")
        h.check(m["data_growth_bytes"] >= 0.8 * lcc["edge_array_bytes"],
                f"{name}: the growth ({m['data_growth_bytes']} B) holds the component's edge arrays "
                f"({lcc['edge_array_bytes']} B): the measure sees them")
        if name == "text, sparse ids":
            # The relabelled graph drops the kron graph's isolated vertices
            # (a third of them), and with them a third of the budget's
            # per-vertex part, while the job's fixed costs stay: judged
            # instead against the same file with dense ids, plus the
            # relabelling's own maps (16 bytes a vertex: an old id and its
            # place); an edge list held while relabelling would add 16
            # bytes an arc, 30 times that at this degree. (A 3% margin
            # alone failed once by 0.03%: the maps are 3% here.)
            dense = docs["text, one direction"]["memory"]["data_growth_bytes"]
            maps = 16 * g["vertices"]
            h.check(m["data_growth_bytes"] <= dense + maps,
                    f"{name}: peak data growth {m['data_growth_bytes']} B is within the dense ids' {dense} B "
                    f"+ 16 B a vertex ({maps} B) (no edge list held while relabelling; "
                    f"{m['growth_to_budget']:.3f}x its own budget)")
            continue
        h.check(m["growth_to_budget"] <= 1.0,
                f"{name}: peak data growth {m['data_growth_bytes']} B is {m['growth_to_budget']:.3f}x the budget "
                f"{m['growth_budget_bytes']} B (1.2x the edge arrays + 96 B a vertex)")
    want = docs["generated"]
    for name in ("tsg", "text", "text, one direction", "text, sparse ids"):
        d = docs[name]
        same = (d["lcc"]["vertices"], d["lcc"]["edges"]) == (want["lcc"]["vertices"], want["lcc"]["edges"])
        h.check(same, f"{name}: the largest component of the generated graph "
                      f"({d['lcc']['vertices']} vertices, {d['lcc']['edges']} edges)")
        h.check(abs(d["hitting"]["mean"] - want["hitting"]["mean"]) <= 1e-6 * want["hitting"]["mean"],
                f"{name}: mean hitting time {d['hitting']['mean']} = {want['hitting']['mean']}")
h.finish()
