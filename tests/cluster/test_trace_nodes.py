"""A trace across emulated nodes (scripts/cluster.py: each node its own
hostname and /dev/shm): `tessera --trace FILE cc GRAPH -n 2` from node0 with
one rank per node writes one file whose ranks are named by their own hosts
and nodes, whose clocks were aligned (skew written), and whose traffic
(--comm-stats, and the summary's matrix) crossed between the nodes; the
same job on one node keeps its traffic on the node.

Usage: test_trace_nodes.py BUILD_DIR SOURCE_DIR. Exit 77 (skipped) where
namespaces are not permitted."""
import json
import os
import shutil
import sys
import tempfile

BUILD, SOURCE = (os.path.abspath(a) for a in sys.argv[1:3])
TESSERA = os.path.join(BUILD, "tessera")
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, ".."))
sys.path.insert(0, os.path.join(SOURCE, "python"))  # tessera.tracefile: pure Python
from harness import check, finish, run, said  # noqa: E402
from emulated_cluster import Cluster  # noqa: E402
from tessera import tracefile  # noqa: E402


def main():
    work = tempfile.mkdtemp(prefix="tessera-trace-nodes-")
    os.chmod(work, 0o755)
    cl = None
    try:
        graph = os.path.join(work, "g.el")
        p = run([TESSERA, "gen", "grid", "--dims", "80x80", "-o", graph, "-q"])
        check(p.returncode == 0, "gen grid", said(p))
        cl = Cluster(SOURCE, work, 2, checked=True)
        path = os.path.join(work, "nodes.json")
        p = cl.exec("node0", [TESSERA, "--trace", path, "--comm-stats", "cc", graph, "-n", "2", "-q"], by_node=True)
        if p.returncode != 0 or not os.path.exists(path):
            check(False, "tessera --trace cc -n 2 over two nodes", said(p))
            return finish()
        with open(path) as f:
            meta = json.load(f)["otherData"]["tessera"]
        check(sorted(meta["hosts"]) == sorted(cl.hosts), f"the ranks' hosts are the nodes' ({meta['hosts']})")
        check(meta["nodes"] == [0, 1], f"one rank on each node ({meta['nodes']})")
        check(meta["clock"]["max_skew_us"] >= 0 and len(meta["clock"]["offset_us"]) == 2,
              "the clock offsets and their skew are written", str(meta["clock"]))
        names = [e["args"]["name"] for e in json.load(open(path))["traceEvents"]
                 if e.get("ph") == "M" and e.get("name") == "process_name"]
        check(all(any(h in n for h in cl.hosts) for n in names) and len(names) == 2,
              f"Perfetto's process names carry the hosts ({names})")
        stats = meta["comm_stats"]
        other = sum(s["other_node"]["bytes_sent"] for s in stats)
        same = sum(s["same_node"]["bytes_sent"] for s in stats)
        check(other > 0 and same == 0, f"the traffic crossed between the nodes ({other} B other node, {same} B same)")
        check("communication (aggregation engine" in p.stderr, "--comm-stats printed its table", said(p))
        s = tracefile.summary(tracefile.load(path))
        t = s["traffic"]
        cells = [(a, b) for a in range(2) for b in range(2) if t["bytes"][a][b] > 0]
        check(cells and all(not t["same_node"][a][b] for a, b in cells) and t["totals"]["same_node"]["bytes"] == 0,
              "the summary's traffic matrix says: between nodes", json.dumps(t)[:800])

        # The same job on one node: its traffic stays there.
        one = os.path.join(work, "one.json")
        p = run([TESSERA, "--trace", one, "cc", graph, "-n", "2", "-q"])
        with open(one) as f:
            stats = json.load(f)["otherData"]["tessera"]["comm_stats"]
        check(p.returncode == 0 and sum(s["other_node"]["bytes_sent"] for s in stats) == 0 and
              sum(s["same_node"]["bytes_sent"] for s in stats) > 0, "on one node the traffic stays on the node",
              said(p))
        return finish()
    finally:
        if cl:
            cl.down()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
