"""The emulated cluster (scripts/cluster.py: each node its own hostname,
/proc and /dev/shm) as the cluster tests drive it. Starting one exits the
test with 77 (skipped, reason printed) where namespaces are not permitted."""
import json
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from harness import check, run  # noqa: E402


class Cluster:
    def __init__(self, source, work, nodes=2, checked=False, shm_size=None):
        """checked: a command run in a node that exits non-zero is a failed
        check naming it (unless exec is told ok=False); shm_size: each
        node's /dev/shm (cluster.py's default otherwise)."""
        self.script = [sys.executable, os.path.join(source, "scripts", "cluster.py")]
        self.dir = os.path.join(work, "cluster")
        self.checked = checked
        p = run(self.script + ["up", "--dir", self.dir, "--nodes", str(nodes)] +
                (["--shm-size", shm_size] if shm_size else []))
        if p.returncode == 77:
            print(f"SKIPPED: {p.stderr.strip()}")
            sys.exit(77)
        if p.returncode != 0:
            sys.exit(f"cluster.py up failed: {p.stderr}")
        with open(os.path.join(self.dir, "nodes.json")) as f:
            self.info = json.load(f)
        self.hosts = [n["hostname"] for n in self.info["nodes"]]

    def argv(self, node, cmd):
        return self.script + ["exec", "--dir", self.dir, node, "--"] + cmd

    def exec(self, node, cmd, by_node=False, env=None, ok=True, **kw):
        """cmd inside `node`; by_node: mpirun places ranks round-robin over
        the nodes (2 ranks: one per node) instead of filling node0 first."""
        env = dict(env if env is not None else os.environ)
        if by_node:
            env["OMPI_MCA_rmaps_base_mapping_policy"] = "node"
        p = run(self.argv(node, cmd), env=env, **kw)
        if self.checked and ok and p.returncode != 0:
            check(False, f"{' '.join(cmd)} on {node} exited {p.returncode}: {p.stderr.strip()[-600:]}")
        return p

    def shm_files(self, node):
        """Tessera's files in the node's /dev/shm (segments, metadata, control)."""
        p = self.exec(node, ["ls", "-A", "/dev/shm"], ok=False)
        return [f for f in p.stdout.split() if f.startswith("tessera") or f.endswith((".seg", ".json"))]

    def shm_left(self, nodes, within=10.0):
        """Each node's Tessera files once none is left, or after ``within``
        seconds (a rank's exit may still be removing its own)."""
        deadline = time.monotonic() + within
        while True:
            files = {n: self.shm_files(n) for n in nodes}
            if not any(files.values()) or time.monotonic() > deadline:
                return files
            time.sleep(0.2)

    def kill(self, node):
        """The whole node at once: its processes and its /dev/shm."""
        return run(self.script + ["kill", "--dir", self.dir, node])

    def down(self):
        run(self.script + ["down", "--dir", self.dir])
