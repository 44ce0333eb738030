"""A session that loses a node (issue 58), on an emulated cluster of 2 nodes
(scripts/cluster.py: each node its own hostname, /proc and /dev/shm): the
session's 2 ranks run one per node, its client on node0.

- The client reads a graph, names it and its components, saves them
  (``s.save_all``) to a directory every node sees, and starts a PageRank
  that does not converge; node1 is killed whole mid-command.
- The client raises SessionLost within 5 s of the kill, naming the command
  and the lost rank's node.
- ``s.restart()`` finds node1 gone (it does not answer a launch), starts the
  same 2 ranks on node0 and restores the save: the same names, the graph's
  counts, its components equal scipy's partition.
- After ``s.stop()``: no Tessera file in node0's /dev/shm, no session left
  in node0's list (``tessera sessions --json``), nothing for
  ``tessera shm gc --include-mpi`` to remove.

Usage: test_session_node_loss.py BUILD_DIR SOURCE_DIR. Exit 77 (skipped)
where namespaces are not permitted."""
import json
import os
import shutil
import subprocess
import sys
import tempfile
import textwrap
import time

import numpy as np

BUILD, SOURCE = (os.path.abspath(a) for a in sys.argv[1:3])
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from harness import check, finish  # noqa: E402
from emulated_cluster import Cluster  # noqa: E402

OWNER = textwrap.dedent("""
    import json, sys, time, tessera
    graph, sock, save = sys.argv[1:4]

    def say(**facts):
        print(json.dumps(facts), flush=True)

    def partition(c):
        first = {}
        return [first.setdefault(int(l), v) for v, l in zip(c.file_ids.tolist(), c.labels.tolist())]

    s = tessera.start(ranks=2, socket=sock)
    g = s.read_graph(graph, undirected=True)
    s.persist(g, "web")
    c = s.components(g)
    s.persist(c, "labels")
    s.save_all(save)
    say(hosts=s.hosts, job=s.job_id, vertices=g.vertices, edges=g.edges, labels=partition(c))
    say(running=True)     # the test kills node1 a moment after this line
    try:
        s.pagerank(g, method="jacobi", tolerance=0.0, max_iterations=10 ** 9)
        say(lost=None)
    except tessera.SessionLost as e:
        say(lost=str(e), at=time.time())
    names = s.restart()
    web = s.get("web")
    say(restored=sorted(names), hosts=s.hosts, job=s.job_id, vertices=web.vertices, edges=web.edges,
        labels=partition(s.components(web)), kept=partition(s.get("labels")))
    s.stop()
""")


def reference_partition(n, edges):
    from scipy.sparse import coo_matrix
    from scipy.sparse.csgraph import connected_components
    a = coo_matrix((np.ones(len(edges)), (edges[:, 0], edges[:, 1])), shape=(n, n))
    _, labels = connected_components(a, directed=False)
    first = {}
    return [first.setdefault(int(lab), v) for v, lab in enumerate(labels)]


def main():
    work = tempfile.mkdtemp(prefix="tessera-session-node-loss-")
    os.chmod(work, 0o700)
    cl = Cluster(SOURCE, work, nodes=2)
    env = dict(os.environ, PYTHONPATH=os.path.join(BUILD, "python"), OMPI_MCA_rmaps_base_mapping_policy="node")
    try:
        rng = np.random.default_rng(5)
        n = 4000
        edges = rng.integers(0, n, size=(5000, 2))
        edges = edges[edges[:, 0] != edges[:, 1]]
        graph = os.path.join(work, "g.el")
        np.savetxt(graph, edges, fmt="%d")
        expected = reference_partition(n, edges)
        sock, save = os.path.join(work, "s.sock"), os.path.join(work, "save")
        owner = subprocess.Popen(cl.argv("node0", [sys.executable, "-c", OWNER, graph, sock, save]), env=env,
                                 stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            line = owner.stdout.readline()
            if not line:
                check(False, f"the session started over both nodes: {owner.stderr.read()[-2000:]}")
                return
            before = json.loads(line)
            check(sorted(set(before["hosts"])) == sorted(cl.hosts), f"one rank per node ({before['hosts']})")
            check(before["labels"] == expected, "its components equal scipy's")
            owner.stdout.readline()  # running
            time.sleep(2.0)          # the PageRank is under way on both nodes
            killed_at = time.time()
            cl.kill("node1")
            lost = json.loads(owner.stdout.readline() or "{}")
            after = json.loads(owner.stdout.readline() or "{}")
            owner.wait(timeout=120)
        finally:
            if owner.poll() is None:
                owner.kill()
        err = owner.stderr.read()
        check(bool(lost.get("lost")), "the client raised SessionLost", err[-2000:])
        said = lost.get("lost") or ""
        check("pagerank" in said and f"node {cl.hosts[1]} was lost (rank 1 ran there)" in said,
              f"it names the command, node1 and its rank ({said[:400]})")
        took = lost.get("at", killed_at + 1e9) - killed_at
        check(took < 5.0, f"within 5 s of the kill ({took:.1f} s)")
        check(after.get("restored") == ["labels", "web"], f"restart() restored the names ({after.get('restored')})",
              err[-2000:])
        check(set(after.get("hosts", [])) == {cl.hosts[0]} and len(after.get("hosts", [])) == 2,
              f"the same 2 ranks, now on node0 ({after.get('hosts')})")
        check(after.get("job") != before["job"], "a new job")
        check((after.get("vertices"), after.get("edges")) == (before["vertices"], before["edges"]),
              "the graph's counts are back")
        check(after.get("labels") == expected and after.get("kept") == expected,
              "its components, computed again and restored, equal scipy's")
        check(owner.returncode == 0, f"the client ended cleanly ({owner.returncode})", err[-2000:])
        left = cl.shm_left(["node0"])["node0"]
        check(not left, f"nothing left in node0's /dev/shm ({left})")
        tessera = os.path.join(BUILD, "tessera")
        p = cl.exec("node0", [tessera, "sessions", "--json"], env=env)
        listed = json.loads(p.stdout or "null")
        check(p.returncode == 0 and listed == [], f"no session left in node0's list ({p.stdout[:300]}{p.stderr[-300:]})")
        p = cl.exec("node0", [tessera, "shm", "gc", "--include-mpi", "--json"], env=env)
        check(p.returncode == 0, f"shm gc --include-mpi ran ({p.stderr[-300:]})")
        gc = json.loads(p.stdout or "{}") if p.returncode == 0 else {}
        check(not gc.get("removed"), f"and found nothing of the session to remove ({p.stdout[:400]})")
    finally:
        cl.down()
        shutil.rmtree(work, ignore_errors=True)
    finish()


if __name__ == "__main__":
    main()
