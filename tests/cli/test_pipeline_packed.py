#!/usr/bin/env python3
"""`tessera pipeline --packed` against the EdgeList's pipeline on the same
graph, at 1, 2, 3 and 4 ranks: a generated Kronecker graph, and a file with
sparse ids (1000 apart, read --relabel) listing each edge once, so it is
read directed and symmetrized:

  * the same components summary (count, largest size and label in file ids,
    isolated vertices), --verify proving the packed labels;
  * the same largest component (vertices, edges, arcs) and default target
    (the highest-degree vertex, the smallest file id among equals);
  * hitting times equal within 1e-6 (relative), written as the same lines in
    the same order (file ids);
  * the document's keys: the EdgeList's, plus the packed facts ("form",
    "edge_list_bytes_per_edge" and "id_array_bytes" in "graph" and "lcc", the
    "packed" object, the file's "pack" step; a generated graph is packed as
    it is generated, its arc hash null), the rows under 4 bytes an
    undirected edge with GAPBS's 8.0 beside them, and the packing's phases
    in the memory estimate;
  * targets given as file ids, and one outside the component refused in the
    same words;
  * fiedler and centrality: the same eigenvalue and vector (the Fiedler
    vector's sign fixed by file order, as the EdgeList's run fixes it);
  * refused before any work, naming the way out: --solver tessera,
    --algorithm lp|fastsv, --checkpoint, --analysis process, a weighted file.

Usage: test_pipeline_packed.py BUILD_DIR"""
import atexit
import json
import os
import re
import shutil
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from harness import Harness, numbers, same_numbers  # noqa: E402

h = Harness(os.path.join(sys.argv[1], "tessera"))
TMP = tempfile.mkdtemp(prefix="tessera-test-pipeline-packed-")
atexit.register(shutil.rmtree, TMP, True)
# The jobs' Shared segments in a directory of this test's own.
SHM = tempfile.mkdtemp(prefix="tessera-test-pipeline-packed-", dir="/dev/shm" if os.path.isdir("/dev/shm") else None)
atexit.register(shutil.rmtree, SHM, True)
os.environ["TESSERA_SHM_DIR"] = SHM
RANKS = (1, 2, 3, 4)
# What --packed adds to the document (key paths); everything else is the
# EdgeList's. A file is read, then packed (the "pack" step); a generated
# graph is packed as it is generated.
PACKED_KEYS = {"graph.form", "graph.edge_list_bytes_per_edge", "graph.id_array_bytes", "lcc.form",
               "lcc.id_array_bytes", "packed", "packed.array_bytes", "packed.bytes_per_edge",
               "packed.edge_array_bytes", "packed.id_array_bytes", "packed.offset_array_bytes", "packed.seconds"}


def p(name):
    return os.path.join(TMP, name)


def key_paths(d, prefix=""):
    """The document's keys as dotted paths (the memory estimate's and the
    components' verification fields left out: they depend on the options)."""
    out = set()
    for k, v in d.items():
        if k in ("memory_estimate", "verified"):
            continue
        out.add(prefix + k)
        if isinstance(v, dict):
            out |= key_paths(v, prefix + k + ".")
    return out


def lines(path):
    return [line.split() for line in open(path) if line.strip() and not line.startswith("#")]


def run_json(*args, ranks):
    r = h.tessera(*args, "--json", ranks=ranks)
    try:
        return json.loads(r.stdout)
    except ValueError:
        h.check(False, f"{' '.join(args)} at {ranks} ranks prints a JSON document", r.stdout[-400:] + r.stderr[-400:])
        return {}


def compare(name, args, generated):
    """The EdgeList's and the packed pipeline on `args`, at every rank count."""
    packed_keys = PACKED_KEYS | (set() if generated else {"step_seconds.pack"})
    def at(ranks):
        tag = f"{name} at {ranks} ranks"
        plain_out, packed_out = p(f"{name}-{ranks}.txt"), p(f"{name}-{ranks}-packed.txt")
        plain = run_json("pipeline", *args, "-o", plain_out, "--verify", ranks=ranks)
        packed = run_json("pipeline", *args, "-o", packed_out, "--packed", "--verify", ranks=ranks)
        if not plain or not packed:
            return
        pc, kc = plain["components"], packed["components"]
        fields = ("components", "largest_size", "largest_label", "isolated_vertices")
        h.check(all(pc[k] == kc[k] for k in fields) and kc.get("verified") is True,
                f"{tag}: the same components ({', '.join(f'{k} {kc[k]}' for k in fields)}), proved by --verify")
        h.check(all(plain["lcc"][k] == packed["lcc"][k] for k in ("vertices", "edges", "arcs")) and
                all(plain["graph"][k] == packed["graph"][k] for k in ("vertices", "edges", "arcs")) and
                packed["graph"]["arc_hash"] == (None if generated else plain["graph"]["arc_hash"]),
                f"{tag}: the same graph and largest component ({packed['lcc']['vertices']} vertices, "
                f"{packed['lcc']['edges']} edges)")
        h.check(plain["hitting"]["target_file_ids"] == packed["hitting"]["target_file_ids"],
                f"{tag}: the same default target {packed['hitting']['target_file_ids']}")
        a, b = numbers(plain_out), numbers(packed_out)
        h.check(same_numbers(a, b, rel=1e-6) and len(a) == packed["lcc"]["vertices"],
                f"{tag}: hitting times equal within 1e-6 ({len(b)} vertices, file ids)")
        h.check([r[0] for r in lines(plain_out)] == [r[0] for r in lines(packed_out)],
                f"{tag}: the output lists the vertices in the EdgeList's run's order")
        extra = key_paths(packed) - key_paths(plain)
        missing = key_paths(plain) - key_paths(packed)
        h.check(not missing and extra == packed_keys, f"{tag}: the EdgeList's keys, and the packed facts beside them",
                f"missing {sorted(missing)}, extra {sorted(extra ^ packed_keys)}")
        g = packed["graph"]
        h.check(g["form"] == "packed" and g["bytes_per_edge"] < 4 and g["gapbs_bytes_per_edge"] == 8.0 and
                g["edge_list_bytes_per_edge"] == 8.0 and packed["packed"]["bytes_per_edge"] == g["bytes_per_edge"],
                f"{tag}: the packed rows {g['bytes_per_edge']:.2f} < 4 bytes an edge, GAPBS and the EdgeList 8.0")
        phases = [ph["name"] for ph in packed.get("memory_estimate", {}).get("phases", [])]
        pack = "generate" if generated else "pack"
        h.check(pack in phases and pack + ": numbering by degree" in phases and "verify" in phases and
                ("read" in phases) != generated,
                f"{tag}: the memory estimate packs {'as it generates' if generated else 'the graph read'} and "
                f"verifies ({phases})")
    h.each(RANKS, at)


# A generated graph (its file ids are the generator's), packed as it is generated.
compare("kron", ["--scale", "11"], True)

# Sparse file ids, each edge listed once: read directed, symmetrized.
kron = p("kron.el")
h.tessera("gen", "kron", "--scale", "11", "-o", kron)
sparse = p("sparse.el")
with open(kron) as src, open(sparse, "w") as dst:
    for line in src:
        f = line.split()
        if f and not f[0].startswith("#") and int(f[0]) < int(f[1]):
            dst.write(f"{int(f[0]) * 1000 + 7} {int(f[1]) * 1000 + 7}\n")
compare("sparse", [sparse, "--relabel"], False)

# Targets given (file ids), and one outside the component.
lcc_ids = [int(r[0]) for r in lines(p("sparse-2.txt"))]
targets = f"{lcc_ids[-1]},{lcc_ids[len(lcc_ids) // 3]}"
runs = {}
for form in ("plain", "packed"):
    out = p(f"targets-{form}.txt")
    runs[form] = (run_json("pipeline", sparse, "--relabel", "--targets", targets, "-o", out,
                           *(["--packed"] if form == "packed" else []), ranks=3), out)
h.check(runs["plain"][0].get("hitting", {}).get("target_file_ids") ==
        runs["packed"][0].get("hitting", {}).get("target_file_ids") == [int(t) for t in targets.split(",")] and
        same_numbers(numbers(runs["plain"][1]), numbers(runs["packed"][1]), rel=1e-6),
        f"--targets {targets} (file ids) at 3 ranks: the same hitting times")
file_ids = {int(x) for r in lines(sparse) for x in r}
for outside, where in ((min(file_ids - set(lcc_ids)), "the largest component"), (max(file_ids) + 1000, sparse)):
    said = [h.tessera("pipeline", sparse, "--relabel", "--targets", str(outside), *extra, ranks=2, expect_ok=False)
            for extra in ([], ["--packed"])]
    h.check(all(r.returncode != 0 for r in said) and said[0].stderr == said[1].stderr and
            f"target vertex {outside} does not occur in {where}" in said[1].stderr,
            f"--targets {outside} (not in {os.path.basename(where)}): refused in the same words with and without "
            "--packed", said[1].stderr[-300:])

# The spectral kinds: the same eigenvalue and vector.
for kind, value in (("fiedler", "lambda2"), ("centrality", "lambda")):
    docs = {}
    for form in ("plain", "packed"):
        out = p(f"{kind}-{form}.txt")
        docs[form] = (run_json("pipeline", "--scale", "10", "--analysis-kind", kind, "-o", out,
                               *(["--packed"] if form == "packed" else []), ranks=2), out)
    x, y = docs["plain"][0].get(kind, {}).get(value), docs["packed"][0].get(kind, {}).get(value)
    a, b = numbers(docs["plain"][1]), numbers(docs["packed"][1])
    close = a.keys() == b.keys() and all(abs(a[k] - b[k]) < 1e-6 for k in a)
    h.check(x is not None and y is not None and abs(x - y) <= 1e-8 * abs(x) and close,
            f"{kind} at 2 ranks: {value} {y} and the vector (the same sign) as the EdgeList's")

# Refusals, before any output is written.
weighted = p("weighted.wel")
with open(weighted, "w") as f:
    f.write("0 1 2.5\n1 2 1\n2 0 3\n")
for args, needles in (
        (["--scale", "8", "--solver", "tessera"], ["--solver belos", "--packed"]),
        (["--scale", "8", "--algorithm", "lp"], ["Afforest", "only algorithm", "--packed"]),
        (["--scale", "8", "--algorithm", "fastsv"], ["Afforest", "only algorithm", "--packed"]),
        (["--scale", "8", "--checkpoint", p("ck")], ["--checkpoint", "EdgeList", "--packed"]),
        (["--scale", "8", "--analysis", "process"], ["--analysis inprocess", "--packed"]),
        ([weighted], ["weighted", "--pattern"])):
    out = p("never.txt")
    r = h.tessera("pipeline", *args, "--packed", "-o", out, ranks=2, expect_ok=False)
    h.check(r.returncode != 0 and all(n in r.stderr for n in needles) and not os.path.exists(out),
            f"pipeline --packed {' '.join(os.path.basename(a) for a in args)}: refused naming {needles}, nothing "
            "written", r.stderr[-400:])
h.check(not os.path.exists(p("ck")), "--checkpoint with --packed made no checkpoint directory")

# The memory estimate at kron scale 27 on 2 ranks (refused at a 1 GiB limit,
# so nothing runs; the build's window fixed at 1 GiB a rank): packed as it is
# generated it fits a 24 GiB node, the EdgeList pipeline does not.
os.environ["TESSERA_FILL_WINDOW_BYTES"] = "1G"
need = {}
for form, extra in (("packed", ["--packed"]), ("EdgeList", [])):
    r = h.tessera("pipeline", "--scale", "27", "--verify", "--memory-limit", "1G", *extra, ranks=2, expect_ok=False)
    m = re.search(r"needs (?:[0-9.]+ GiB of Shared storage .* and )?([0-9.]+) GiB of memory", r.stderr)
    need[form] = float(m.group(1)) if m and r.returncode != 0 else None
    h.check(need[form] is not None, f"kron 27 {form}: refused at a 1 GiB limit, naming what it needs", r.stderr[-400:])
del os.environ["TESSERA_FILL_WINDOW_BYTES"]
if None not in need.values():
    h.check(13 < need["packed"] < 20 < 21.2 < need["EdgeList"],
            f"kron 27 at 2 ranks: --packed needs {need['packed']} GiB (the build, 1 GiB windows), the EdgeList "
            f"pipeline {need['EdgeList']} GiB (over 90% of 24 GiB)")
h.check(not os.listdir(SHM), "no Shared segment left behind", str(os.listdir(SHM)))
h.finish()
