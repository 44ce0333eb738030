#!/usr/bin/env python3
"""cc reports the time of every step a user waits for and the job's peak
memory next to the edge arrays (issue 10), at 1 and 2 ranks; and `bench
parse` verifies its parse of a generated edge list."""
import json
import os
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from cli_harness import Harness  # noqa: E402

h = Harness(os.path.join(sys.argv[1], "tessera"))
with tempfile.TemporaryDirectory() as tmp:
    graph = os.path.join(tmp, "k12.el")
    h.tessera("gen", "kron", "--scale", "12", "-o", graph)
    arcs = sum(1 for line in open(graph) if not line.startswith("#"))
    for ranks in (1, 2):
        for extra, steps in (([], {"read", "components", "summary"}),
                             (["--algorithm", "all", "-o", os.path.join(tmp, f"labels{ranks}.txt")],
                              # the .el reads as directed: label propagation and FastSV need the copy
                              {"read", "symmetrize", "components", "summary", "write"})):
            p = h.tessera("cc", graph, "--json", *extra, ranks=ranks)
            what = f"cc {' '.join(extra[:2])} at {ranks} ranks"
            try:
                j = json.loads(p.stdout)
            except ValueError:
                h.check(False, f"{what}: stdout is one JSON document")
                continue
            s, m = j.get("step_seconds", {}), j.get("memory", {})
            h.check(set(s) == steps | {"total"}, f"{what}: step_seconds has {sorted(steps)} and total ({sorted(s)})")
            h.check(all(isinstance(v, (int, float)) and 0 <= v < 60 for v in s.values()),
                    f"{what}: step times are seconds in [0, 60)")
            # each step is its slowest rank's, so only each one (not their sum) is bounded by the total
            h.check(all(v <= s.get("total", 0) + 1e-6 for v in s.values()), f"{what}: each step fits in the total ({s})")
            h.check(m.get("edge_array_bytes") == 16 * arcs, f"{what}: edge arrays = 16 bytes x {arcs} arcs")
            h.check(m.get("ranks") == ranks, f"{what}: memory names its {ranks} ranks")
            peak_sum, peak_max = m.get("peak_rss_bytes_sum", 0), m.get("peak_rss_bytes_max_rank", 0)
            h.check(0 < peak_max <= peak_sum <= ranks * peak_max and peak_sum < 1 << 34,
                    f"{what}: peak RSS max rank <= sum <= ranks x max, under 16 GiB")
            h.check(0 < m.get("start_rss_bytes_sum", 0) <= peak_sum and
                    m.get("peak_growth_bytes") == peak_sum - m["start_rss_bytes_sum"],
                    f"{what}: growth = peak - start")
            h.check(abs(m.get("peak_to_edge_arrays", -1) - m.get("peak_growth_bytes", 0) / (16 * arcs)) < 1e-9,
                    f"{what}: peak_to_edge_arrays = growth / edge arrays")
        p = h.tessera("bench", "parse", "--scale", "12", "--reps", "1", "--json", ranks=ranks)
        rows = [json.loads(line) for line in p.stdout.splitlines() if line.startswith("{")]
        results = [r for r in rows if "variant" in r]
        h.check(len(results) == 2 and all(r.get("verified") for r in results),
                f"bench parse at {ranks} ranks: two rows, both verified ({[r.get('check') for r in results]})")
h.finish()
