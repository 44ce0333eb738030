#!/usr/bin/env python3
"""cc reports the time of every step a user waits for and the job's peak
memory next to the edge arrays (issue 10), at 1 and 2 ranks; every other
graph command (gen, convert, lcc, hitting, pipeline) reports the same way
(one "time:" line, a "memory:" line only with -v, the same JSON fields); and
`bench parse` verifies its parse of a generated edge list."""
import json
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from harness import Harness  # noqa: E402

h = Harness(os.path.join(sys.argv[1], "tessera"))
with tempfile.TemporaryDirectory() as tmp:
    graph = os.path.join(tmp, "k12.el")
    h.tessera("gen", "kron", "--scale", "12", "-o", graph)
    # Without its "# tessera graph: undirected" header the file is a directed one (both arcs of each edge).
    lines = [line for line in open(graph) if not line.startswith("#")]
    with open(graph, "w") as f:
        f.writelines(lines)
    arcs = len(lines)
    # A graph this small has 32-bit ids (TESSERA_ID_BITS=64 forces 64-bit): 4 or 8 bytes an arc, no sources.
    id_bytes = 8 if os.environ.get("TESSERA_ID_BITS") == "64" else 4
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
            h.check(m.get("edge_array_bytes") == id_bytes * arcs,
                    f"{what}: edge arrays = {id_bytes} bytes x {arcs} arcs ({m.get('edge_array_bytes')})")
            h.check(m.get("ranks") == ranks, f"{what}: memory names its {ranks} ranks")
            peak_sum, peak_max = m.get("peak_rss_bytes_sum", 0), m.get("peak_rss_bytes_max_rank", 0)
            h.check(0 < peak_max <= peak_sum <= ranks * peak_max and peak_sum < 1 << 34,
                    f"{what}: peak RSS max rank <= sum <= ranks x max, under 16 GiB")
            h.check(0 < m.get("start_rss_bytes_sum", 0) <= peak_sum and
                    m.get("peak_growth_bytes") == peak_sum - m["start_rss_bytes_sum"],
                    f"{what}: growth = peak - start")
            h.check(abs(m.get("peak_to_edge_arrays", -1) - m.get("peak_growth_bytes", 0) / (id_bytes * arcs)) < 1e-9,
                    f"{what}: peak_to_edge_arrays = growth / edge arrays")
        # The same report from every graph command: steps it took, memory against its input's edge arrays.
        out = os.path.join(tmp, f"out{ranks}")
        for args, steps, arc_count in (
                (["gen", "kron", "--scale", "10", "-o", out + ".el"], {"generate", "write"}, None),
                (["convert", graph, "-o", out + ".tsg"], {"read", "write"}, arcs),
                (["lcc", graph, "-o", out + "-lcc.el"], {"read", "components", "largest component", "write"}, arcs),
                (["hitting", graph, "--targets", "0", "-o", out + "-h.txt"], {"read", "symmetrize", "hitting times", "write"},
                 arcs),
                (["pipeline", graph, "--targets", "0", "-o", out + "-p.txt"],
                 {"read", "symmetrize", "components", "largest component", "hitting times", "write"}, arcs)):
            what = f"{args[0]} at {ranks} ranks"
            cmd = [h.tessera_path, *args, "-n", str(ranks), "--json"]
            p = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
            if p.returncode != 0:
                h.check(False, f"{what}: exited {p.returncode}: {p.stderr[-400:]}")
                continue
            j = json.loads(p.stdout)
            s, m = j.get("step_seconds", {}), j.get("memory", {})
            h.check(set(s) == steps | {"total"}, f"{what}: step_seconds has {sorted(steps)} and total ({sorted(s)})")
            h.check(all(v <= s.get("total", 0) + 1e-6 for v in s.values()), f"{what}: each step fits in the total")
            h.check(arc_count is None or m.get("edge_array_bytes") == id_bytes * arc_count,
                    f"{what}: memory against the input's edge arrays ({m.get('edge_array_bytes')})")
            h.check(m.get("ranks") == ranks and 0 < m.get("peak_rss_bytes_max_rank", 0) <= m.get("peak_rss_bytes_sum", 0)
                    and m.get("peak_growth_bytes") == m["peak_rss_bytes_sum"] - m.get("start_rss_bytes_sum", 0),
                    f"{what}: memory fields as cc's")
            lines = p.stderr.splitlines()
            # The memory line only where it tells something (-v, or a large graph over its budget).
            h.check(sum("] time: " in line for line in lines) == 1 and
                    sum("] memory: " in line for line in lines) == 0,
                    f"{what}: one time line and, on this small graph without -v, no memory line on stderr")
        p = h.tessera("bench", "parse", "--scale", "12", "--reps", "1", "--json", ranks=ranks)
        rows = [json.loads(line) for line in p.stdout.splitlines() if line.startswith("{")]
        results = [r for r in rows if "variant" in r]
        h.check(len(results) == 2 and all(r.get("verified") for r in results),
                f"bench parse at {ranks} ranks: two rows, both verified ({[r.get('check') for r in results]})")
h.finish()
