"""Level 1 checkpoints across a lost node, on emulated clusters of 2 and of 3
nodes x 2 ranks (scripts/cluster.py: each node its own /dev/shm): a
checkpoint written with Level::buddy (and a level-2 one beside it); node1
killed (its ranks and its /dev/shm gone together); the surviving nodes' ranks
restore arrays, chunks and the span equal to the serial values
(tests/chunks/test_checkpoint.cpp, Buddy.*).

- 2 nodes: node0 holds every file already (its own and node1's buddy copies).
- 3 nodes: each node holds its own ranks' files and node-before's, so node1's
  files live on node2 only: node0 and node2 restore at 4 ranks, node0 getting
  from node2 (over MPI) the files it lacks.
- The level-2 checkpoint is refused after the loss, naming the file no node
  holds.
- A full /dev/shm where the buddy copy lands (2 nodes x 1 rank) fails the
  commit cleanly and keeps the previous checkpoint.
- With async_drain, a checkpoint whose buddy copies were still in flight
  (committed at level 2 only) is refused after the loss, and the one before
  it, kept until then, restores.
Ends with no checkpoint file on the survivors and the cluster torn down.

Usage: test_checkpoint_buddy.py BUILD_DIR SOURCE_DIR. Exit 77 (skipped) where
namespaces are not permitted."""
import os
import sys
import tempfile

BUILD, SOURCE = (os.path.abspath(a) for a in sys.argv[1:3])
MPIRUN = os.path.join(SOURCE, "scripts", "mpirun.sh")
PROGRAM = os.path.join(BUILD, "tests", "test_checkpoint")
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from harness import check, finish  # noqa: E402
from emulated_cluster import Cluster  # noqa: E402


def said(p):
    return "" if p.returncode == 0 else f": {p.stdout[-1500:]}{p.stderr[-1500:]}"


def node_loss(nodes):
    writers = 2 * nodes
    with tempfile.TemporaryDirectory(prefix="tessera-ckpt-buddy-") as work:
        cl = Cluster(SOURCE, work, nodes=nodes)
        try:
            os.environ["TESSERA_CKPT_BUDDY"] = str(writers)
            p = cl.exec("node0", [MPIRUN, "-n", str(writers), "-x", "TESSERA_CKPT_BUDDY", PROGRAM,
                                  "--gtest_color=no", "--gtest_filter=Buddy.Write*"])
            check(p.returncode == 0 and "[  PASSED  ] 2 tests" in p.stdout and "SKIPPED" not in p.stdout,
                  f"a level-1 checkpoint at {nodes} nodes x 2 ranks, each file on its node and "
                  f"its buddy's" + said(p))
            p = cl.kill("node1")
            check(p.returncode == 0, f"node1 of {nodes} killed with its /dev/shm")
            survivors = [h for i, h in enumerate(cl.hosts) if i != 1]
            p = cl.exec("node0", [MPIRUN, "-n", str(writers - 2), "--host", ",".join(f"{h}:2" for h in survivors),
                                  "-x", "TESSERA_CKPT_BUDDY", PROGRAM, "--gtest_filter=Buddy.ReadAfterNodeLoss"])
            check(p.returncode == 0, f"the {len(survivors)} surviving nodes' {writers - 2} ranks restore the "
                  f"{writers}-rank checkpoint from their files and the buddy copies; the level-2 one is refused"
                  + said(p))
            for i, h in enumerate(cl.hosts):
                if i == 1:
                    continue
                p = cl.exec(f"node{i}", ["ls", "-A", "/dev/shm"])
                left = [f for f in p.stdout.split() if "ckpt" in f]
                check(p.returncode == 0 and not left, f"no checkpoint left in node{i}'s /dev/shm ({left})")
        finally:
            cl.down()


def full_at_the_buddy():
    with tempfile.TemporaryDirectory(prefix="tessera-ckpt-buddy-") as work:
        cl = Cluster(SOURCE, work, nodes=2, shm_size="48M")  # a small filler: tmpfs pages are slow to allocate here
        try:
            env = dict(os.environ, TESSERA_CKPT_BUDDY_FULL="1")
            p = cl.exec("node0", [MPIRUN, "-n", "2", "--host", ",".join(f"{h}:1" for h in cl.hosts), "-x",
                                  "TESSERA_CKPT_BUDDY_FULL", PROGRAM, "--gtest_color=no", "--gtest_filter=Buddy.FullAtTheBuddy"], env=env)
            check(p.returncode == 0 and "[  PASSED  ] 1 test" in p.stdout and "SKIPPED" not in p.stdout,
                  "a full /dev/shm on the buddy's node fails the level-1 commit (with and without "
                  "async_drain) naming the bytes, and the previous checkpoint restores" + said(p))
            for i in range(2):
                p = cl.exec(f"node{i}", ["ls", "-A", "/dev/shm"])
                left = [f for f in p.stdout.split() if "ckpt" in f or "filler" in f]
                check(p.returncode == 0 and not left, f"nothing left in node{i}'s /dev/shm ({left})")
        finally:
            cl.down()


def main():
    node_loss(2)
    node_loss(3)
    full_at_the_buddy()
    finish()


main()
