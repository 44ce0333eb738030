#!/usr/bin/env python3
"""tessera bench jacobi3d / stencil3d end to end on tiny sizes (issue 12):
--imbalance prints one JSON line per (case, lb) carrying lb,
seconds_per_iteration and verified, every run verified at 1 and 2 ranks;
stencil3d reports hop-bytes RND >= RR >= TO at 2 ranks; bad options refused."""
import json
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from harness import Harness  # noqa: E402

h = Harness(os.path.join(sys.argv[1], "tessera"))


def json_lines(p):
    return [json.loads(line) for line in p.stdout.splitlines() if line.startswith("{")]


for ranks in (1, 2):
    p = h.tessera("bench", "jacobi3d", "--imbalance", "--n", "16", "--iterations", "6", "--reps", "1", "--json", ranks=ranks)
    lines = [j for j in json_lines(p) if "lb" in j and "seconds_per_iteration" in j and "summary" in j]
    seen = {(j["case"], j["lb"]) for j in lines}
    want = {(c, lb) for c in ("imbalanced", "balanced") for lb in ("none", "greedy", "refine", "comm")}
    h.check(seen == want, f"jacobi3d --imbalance at {ranks} ranks: a JSON line per case and lb ({sorted(seen)})")
    h.check(all(j["verified"] is True and j["seconds_per_iteration"] > 0 for j in lines),
            f"jacobi3d --imbalance at {ranks} ranks: every run verified")

    p = h.tessera("bench", "jacobi3d", "--n", "12", "--iterations", "4", "--reps", "1", "--chunks", "3x2x2",
                  "--mapping", "rnd", "--lb", "refine", "--json", ranks=ranks)
    rows = [j for j in json_lines(p) if "variant" in j]
    h.check(len(rows) == 3 and all(j["verified"] for j in rows) and p.returncode == 0,
            f"jacobi3d --chunks 3x2x2 --mapping rnd --lb refine at {ranks} ranks: plain + 2 rows verified")

p = h.tessera("bench", "stencil3d", "--n", "16", "--block", "4", "--iterations", "3", "--reps", "1", "--json", ranks=2)
hop = {j["mapping"]: j["hop_bytes"] for j in json_lines(p) if "summary" in j and "hop_bytes" in j}
h.check(set(hop) == {"rnd", "rr", "to"} and hop["rnd"] >= hop["rr"] >= hop["to"] > 0,
        f"stencil3d at 2 ranks: hop-bytes RND >= RR >= TO ({hop})")

for args, fragment in ((["--lb", "fastest"], "expected none, greedy, refine or comm"),
                       (["--mapping", "bogus"], "unknown mapping 'bogus'"),
                       (["--chunks", "40x1x1", "--n", "8"], "more chunks than grid points")):
    p = h.tessera("bench", "jacobi3d", *args, expect_ok=False)
    h.check(p.returncode != 0 and fragment in p.stderr, f"jacobi3d {' '.join(args)} refused: {p.stderr.strip()[-200:]}")

h.finish()
