"""An analyst's session across emulated nodes (scripts/cluster.py: each node
its own hostname and /dev/shm, one network): a result is a view only where
every part of it can be mapped, else a copy through the socket.

- A session of 2 ranks on node0: a client on node0 gets views of the
  components' labels; a client on node1 (another host) gets copies, equal
  to them and to scipy's; a copy past max_transfer_bytes names the setting.
- A session of 2 ranks over both nodes: the labels are copies on node0 too
  (one part lives in node1's /dev/shm), still equal.
- Afterwards no Tessera file in any node's /dev/shm, no process left.

Usage: test_session_nodes.py BUILD_DIR SOURCE_DIR. Exit 77 (skipped) where
namespaces are not permitted."""
import json
import os
import shutil
import subprocess
import sys
import tempfile
import textwrap

import numpy as np

BUILD, SOURCE = (os.path.abspath(a) for a in sys.argv[1:3])
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from harness import check, finish  # noqa: E402
from emulated_cluster import Cluster  # noqa: E402

PYTHONPATH = os.path.join(BUILD, "python")

OWNER = textwrap.dedent("""
    import json, sys, tessera
    graph, sock = sys.argv[1], sys.argv[2]
    s = tessera.start(ranks=2, socket=sock)
    g = s.read_graph(graph, undirected=True)
    c = s.components(g)
    s.persist(c, "c")
    print(json.dumps({"view": c.is_view("labels"), "owndata": bool(c.labels.flags.owndata),
                      "labels": c.labels.tolist(), "job": s.job_id}), flush=True)
    sys.stdin.read()      # until the test says stop
    s.stop()
""")

CLIENT = textwrap.dedent("""
    import json, sys, tessera
    s = tessera.connect(sys.argv[1])
    c = s.get("c")
    out = {"view": c.is_view("labels"), "owndata": bool(c.labels.flags.owndata), "labels": c.labels.tolist()}
    s.max_transfer_bytes = 16
    try:
        c.array("labels", copy=True)
        out["limit"] = "no error"
    except tessera.ConfigError as e:
        out["limit"] = str(e)
    s.close()
    print(json.dumps(out), flush=True)
""")


def reference_labels(n, edges):
    from scipy.sparse import coo_matrix
    from scipy.sparse.csgraph import connected_components
    a = coo_matrix((np.ones(len(edges)), (edges[:, 0], edges[:, 1])), shape=(n, n))
    _, labels = connected_components(a, directed=False)
    first = {}
    for v, lab in enumerate(labels):
        first.setdefault(lab, v)
    return [first[lab] for lab in labels]


def env(by_node):
    e = dict(os.environ)
    e["PYTHONPATH"] = PYTHONPATH
    if by_node:
        e["OMPI_MCA_rmaps_base_mapping_policy"] = "node"
    return e


def one_layout(cl, work, graph, expected, by_node):
    layout = "2 ranks over node0 and node1" if by_node else "2 ranks on node0"
    sock_dir = tempfile.mkdtemp(dir=work)
    os.chmod(sock_dir, 0o700)
    sock = os.path.join(sock_dir, "s.sock")
    owner = subprocess.Popen(cl.argv("node0", [sys.executable, "-c", OWNER, graph, sock]), env=env(by_node),
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        line = owner.stdout.readline()
        if not line:
            check(False, f"{layout}: the session owner failed: {owner.stderr.read()[-1500:]}")
            return
        mine = json.loads(line)
        check(mine["labels"] == expected, f"{layout}: node0's labels equal scipy's")
        if by_node:
            check(not mine["view"] and mine["owndata"], f"{layout}: on node0 a copy (a part is on node1)")
        else:
            check(mine["view"] and not mine["owndata"], f"{layout}: on node0 a view, not a copy")
        for node in ("node0", "node1"):
            p = cl.exec(node, [sys.executable, "-c", CLIENT, sock], env=env(False))
            if p.returncode != 0:
                check(False, f"{layout}: the client on {node} failed: {p.stderr[-1500:]}")
                continue
            got = json.loads(p.stdout)
            check(got["labels"] == expected, f"{layout}: {node}'s client reads the labels of scipy")
            view_here = node == "node0" and not by_node
            check(got["view"] == view_here and got["owndata"] != view_here,
                  f"{layout}: on {node} a {'view' if view_here else 'copy'} (view={got['view']})")
            check("max_transfer_bytes" in got["limit"], f"{layout}: a copy past the limit names max_transfer_bytes "
                  f"on {node} ({got['limit'][:160]})")
    finally:
        owner.stdin.close()
        try:
            owner.wait(timeout=60)
        except subprocess.TimeoutExpired:
            owner.kill()
    check(owner.returncode == 0, f"{layout}: the session stopped cleanly ({owner.stderr.read()[-800:]})")
    files = cl.shm_left(("node0", "node1"))
    check(not any(files.values()), f"{layout}: no Tessera file left in any node's /dev/shm ({files})")


def main():
    work = tempfile.mkdtemp(prefix="tessera-session-nodes-")
    cl = Cluster(SOURCE, work, nodes=2)
    try:
        rng = np.random.default_rng(3)
        n = 5000
        edges = rng.integers(0, n, size=(6000, 2))
        edges = edges[edges[:, 0] != edges[:, 1]]
        edges = np.vstack([edges, [[n - 2, n - 1]]])
        graph = os.path.join(work, "g.el")
        np.savetxt(graph, edges, fmt="%d")
        expected = reference_labels(n, edges)
        one_layout(cl, work, graph, expected, by_node=False)
        one_layout(cl, work, graph, expected, by_node=True)
    finally:
        cl.down()
        shutil.rmtree(work, ignore_errors=True)
    finish()


if __name__ == "__main__":
    main()
