"""Level 1 checkpoints across a lost node, on an emulated cluster of 2 nodes
(scripts/cluster.py: each node its own /dev/shm): a checkpoint written at
2 nodes x 2 ranks with Level::buddy; node1 killed (its ranks and its
/dev/shm gone together); node0's 2 ranks find the checkpoint complete from
their own files and the buddy copies, and read back arrays, chunks and the
span equal to the serial values (tests/chunks/test_checkpoint.cpp, Buddy.*).
Ends with no checkpoint file on node0 and the cluster torn down.

Usage: test_checkpoint_buddy.py BUILD_DIR SOURCE_DIR. Exit 77 (skipped) where
namespaces are not permitted."""
import os
import sys
import tempfile

BUILD, SOURCE = (os.path.abspath(a) for a in sys.argv[1:3])
MPIRUN = os.path.join(SOURCE, "scripts", "mpirun.sh")
PROGRAM = os.path.join(BUILD, "tests", "test_checkpoint")
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from verdict import check, finish  # noqa: E402
from emulated_cluster import Cluster  # noqa: E402


def main():
    with tempfile.TemporaryDirectory(prefix="tessera-ckpt-buddy-") as work:
        cl = Cluster(SOURCE, work)
        try:
            os.environ["TESSERA_CKPT_BUDDY"] = "4"
            p = cl.exec("node0", [MPIRUN, "-n", "4", "-x", "TESSERA_CKPT_BUDDY", PROGRAM, "--gtest_filter=Buddy.Write"])
            check(p.returncode == 0, "a level-1 checkpoint at 2 nodes x 2 ranks, complete on each node"
                  + ("" if p.returncode == 0 else f": {p.stdout[-1500:]}{p.stderr[-1500:]}"))
            p = cl.kill("node1")
            check(p.returncode == 0, "node1 killed with its /dev/shm")
            p = cl.exec("node0", [MPIRUN, "-n", "2", "--host", f"{cl.hosts[0]}:2", "-x", "TESSERA_CKPT_BUDDY",
                                  PROGRAM, "--gtest_filter=Buddy.ReadAfterNodeLoss"])
            check(p.returncode == 0, "node0's 2 ranks restore the 4-rank checkpoint from their files and the buddy copies"
                  + ("" if p.returncode == 0 else f": {p.stdout[-1500:]}{p.stderr[-1500:]}"))
            p = cl.exec("node0", ["ls", "-A", "/dev/shm"])
            left = [f for f in p.stdout.split() if "ckpt" in f]
            check(p.returncode == 0 and not left, f"no checkpoint left in node0's /dev/shm ({left})")
        finally:
            cl.down()
    finish()


main()
