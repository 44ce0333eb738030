#!/usr/bin/env python3
"""tessera map (issue 12): hop-bytes of rr, block and of the written
placements recomputed here from the torus formula, the same JSON at 1 and 2
ranks, TO < RR < RND, 65,536 simulated ranks in seconds, bad input refused
before computing."""
import json
import os
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from harness import Harness  # noqa: E402

h = Harness(os.path.join(sys.argv[1], "tessera"))


def torus_hops(a, b, dims):
    h_ = 0
    for n in dims:
        d = abs(a % n - b % n)
        h_ += min(d, n - d)
        a //= n
        b //= n
    return h_


def stencil_hop_bytes(grid, dims, placement, face):
    di, dj, dk = grid
    total = 0
    for k in range(dk):
        for j in range(dj):
            for i in range(di):
                c = i + di * (j + dj * k)
                for (ni, nj, nk) in ((i - 1, j, k), (i + 1, j, k), (i, j - 1, k), (i, j + 1, k), (i, j, k - 1), (i, j, k + 1)):
                    if 0 <= ni < di and 0 <= nj < dj and 0 <= nk < dk:
                        total += face * torus_hops(placement[c], placement[ni + di * (nj + dj * nk)], dims)
    return total


grid, dims, face = (8, 6, 4), (4, 3, 2), 100
ranks = 4 * 3 * 2
chunks = 8 * 6 * 4
args = ["map", "--chunks", "8x6x4", "--topology", "torus:4x3x2", "--face-bytes", str(face)]
docs = []
for n in (1, 2):
    p = h.tessera(*args, "--json", ranks=n)
    try:
        docs.append(json.loads(p.stdout))
    except ValueError:
        h.check(False, f"map --json at {n} ranks prints one JSON document: {p.stdout[:200]!r}")
        h.finish()
no_time = [[{k: v for k, v in m.items() if k != "seconds"} for m in d["mappings"]] for d in docs]
h.check(no_time[0] == no_time[1], "the same mappings at 1 and 2 ranks")
by = {m["mapping"]: m for m in docs[0]["mappings"]}
h.check(list(by) == ["rnd", "rr", "block", "to"], f"--mapping all gives rnd, rr, block, to in order: {list(by)}")
h.check(by["to"]["hop_bytes"] < by["rr"]["hop_bytes"] < by["rnd"]["hop_bytes"],
        f"TO < RR < RND: {by['to']['hop_bytes']} {by['rr']['hop_bytes']} {by['rnd']['hop_bytes']}")
rr = [c % ranks for c in range(chunks)]
want = stencil_hop_bytes(grid, dims, rr, face)
h.check(by["rr"]["hop_bytes"] == want, f"rr hop-bytes {by['rr']['hop_bytes']} == recomputed {want}")
total = by["rr"]["total_bytes"]
h.check(abs(by["rr"]["hops_per_byte"] - want / total) < 1e-12, "hops per byte = hop-bytes / bytes")

with tempfile.TemporaryDirectory() as tmp:
    for mapping in ("to", "rnd", "block"):
        out = os.path.join(tmp, f"{mapping}.txt")
        p = h.tessera(*args, "--mapping", mapping, "--json", "-o", out)
        got = json.loads(p.stdout)["mappings"]
        lines = [l.split() for l in open(out) if not l.startswith("#")]
        placement = [int(r) for _, r in lines]
        ok = [int(c) for c, _ in lines] == list(range(chunks))
        counts = [placement.count(r) for r in range(ranks)]
        h.check(ok and min(counts) == max(counts) == chunks // ranks,
                f"{mapping}: -o places every chunk once, {chunks // ranks} per rank")
        want = stencil_hop_bytes(grid, dims, placement, face)
        h.check(len(got) == 1 and got[0]["hop_bytes"] == want,
                f"{mapping}: hop-bytes {got[0]['hop_bytes']} == recomputed from its placement {want}")

    # An outside placement (SCOTCH's file form: a count line first) is evaluated beside.
    mine = [(c * 7) % ranks for c in range(chunks)]
    scotch = os.path.join(tmp, "outside.map")
    with open(scotch, "w") as f:
        f.write(f"{chunks}\n" + "".join(f"{c}\t{r}\n" for c, r in enumerate(mine)))
    got = {m["mapping"]: m for m in json.loads(h.tessera(*args, "--mapping", "rr", "--placement", scotch,
                                                          "--json").stdout)["mappings"]}
    want = stencil_hop_bytes(grid, dims, mine, face)
    h.check(list(got) == ["rr", "file"] and got["file"]["hop_bytes"] == want,
            f"--placement: hop-bytes {got.get('file', {}).get('hop_bytes')} == recomputed {want}")
    with open(scotch, "a") as f:
        f.write("0 1\n")
    p = h.tessera(*args, "--placement", scotch, expect_ok=False)
    h.check(p.returncode != 0 and f"{scotch}:{chunks + 2}: chunk 0 is placed twice" in p.stderr,
            f"a placement file placing a chunk twice is refused naming the line: {p.stderr.strip()[-200:]!r}")

    p = h.tessera(*args, "--mapping", "rr")
    h.check("hop-bytes" in p.stdout and "rr" in p.stdout and "max link load" in p.stdout, "the human table")

    # Bad input: refused with a message naming it, nothing computed or written.
    for bad, says in ((["--topology", "torus:8x"], "topology 'torus:8x': dimension 2 is empty"),
                      (["--topology", "ring:8"], "unknown kind 'ring'"),
                      (["--chunks", "8xfoo"], "chunk grid '8xfoo'"),
                      (["--mapping", "greedy"], "unknown mapping 'greedy'"),
                      (["-o", os.path.join(tmp, "all.txt")], "-o writes one mapping's placement"),
                      (["--mapping", "to", "-o", "/missing/dir/p.txt"], "/missing/dir")):
        base = {"--chunks": "8x6x4", "--topology": "torus:4x3x2"}
        extra = []
        i = 0
        while i < len(bad):
            if bad[i] in base:
                base[bad[i]] = bad[i + 1]
            else:
                extra += bad[i:i + 2]
            i += 2
        cmd = ["map"] + [x for kv in base.items() for x in kv] + extra
        p = h.tessera(*cmd, expect_ok=False)
        h.check(p.returncode != 0 and says in p.stderr, f"{' '.join(bad)} refused: {p.stderr.strip()[-200:]!r}")
    h.check(not os.path.exists(os.path.join(tmp, "all.txt")), "a refused -o writes nothing")

# 65,536 simulated ranks in seconds (one chunk each: quick in the sanitizer
# build too; the README measures 8 chunks each).
start = time.time()
p = h.tessera("map", "--chunks", "32x32x64", "--topology", "torus:32x32x64", "--json")
seconds = time.time() - start
m = {x["mapping"]: x for x in json.loads(p.stdout)["mappings"]}
h.check(m["to"]["hop_bytes"] == m["to"]["total_bytes"] < m["rnd"]["hop_bytes"] and seconds < 60,
        f"65,536 ranks: TO embeds the grid (1 hop per byte), below RND, in {seconds:.1f} s")
h.finish()
