"""Level 1 checkpoints across a lost node, on an emulated cluster of 2 nodes
(scripts/cluster.py: each node its own /dev/shm): a checkpoint written at
2 nodes x 2 ranks with Level::buddy; node1 killed (its ranks and its
/dev/shm gone together); node0's 2 ranks find the checkpoint complete from
their own files and the buddy copies, and read back arrays, chunks and the
span equal to the serial values (tests/chunks/test_checkpoint.cpp, Buddy.*).
Ends with no checkpoint file on node0 and the cluster torn down.

Usage: test_checkpoint_buddy.py BUILD_DIR SOURCE_DIR. Exit 77 (skipped) where
namespaces are not permitted."""
import json
import os
import subprocess
import sys
import tempfile

BUILD, SOURCE = (os.path.abspath(a) for a in sys.argv[1:3])
CLUSTER = [sys.executable, os.path.join(SOURCE, "scripts", "cluster.py")]
MPIRUN = os.path.join(SOURCE, "scripts", "mpirun.sh")
PROGRAM = os.path.join(BUILD, "tests", "test_checkpoint")
failures = []


def check(ok, what):
    print(("ok   " if ok else "FAIL ") + what, flush=True)
    if not ok:
        failures.append(what)


def run(argv, timeout=120):
    return subprocess.run(argv, capture_output=True, text=True, timeout=timeout)


def main():
    with tempfile.TemporaryDirectory(prefix="tessera-ckpt-buddy-") as work:
        d = os.path.join(work, "cluster")
        p = run(CLUSTER + ["up", "--dir", d, "--nodes", "2"])
        if p.returncode == 77:
            print(f"SKIPPED: {p.stderr.strip()}")
            sys.exit(77)
        if p.returncode != 0:
            sys.exit(f"cluster.py up failed: {p.stderr}")
        try:
            with open(os.path.join(d, "nodes.json")) as f:
                hosts = [n["hostname"] for n in json.load(f)["nodes"]]
            os.environ["TESSERA_CKPT_BUDDY"] = "4"

            def on_node0(argv):
                return run(CLUSTER + ["exec", "--dir", d, "node0", "--"] + argv)

            p = on_node0([MPIRUN, "-n", "4", "-x", "TESSERA_CKPT_BUDDY", PROGRAM, "--gtest_filter=Buddy.Write"])
            check(p.returncode == 0, "a level-1 checkpoint at 2 nodes x 2 ranks, complete on each node"
                  + ("" if p.returncode == 0 else f": {p.stdout[-1500:]}{p.stderr[-1500:]}"))
            p = run(CLUSTER + ["kill", "--dir", d, "node1"])
            check(p.returncode == 0, "node1 killed with its /dev/shm")
            p = on_node0([MPIRUN, "-n", "2", "--host", f"{hosts[0]}:2", "-x", "TESSERA_CKPT_BUDDY", PROGRAM,
                          "--gtest_filter=Buddy.ReadAfterNodeLoss"])
            check(p.returncode == 0, "node0's 2 ranks restore the 4-rank checkpoint from their files and the buddy copies"
                  + ("" if p.returncode == 0 else f": {p.stdout[-1500:]}{p.stderr[-1500:]}"))
            p = on_node0(["ls", "-A", "/dev/shm"])
            left = [f for f in p.stdout.split() if "ckpt" in f]
            check(p.returncode == 0 and not left, f"no checkpoint left in node0's /dev/shm ({left})")
        finally:
            run(CLUSTER + ["down", "--dir", d])
    if failures:
        print(f"FAILED: {len(failures)} checks")
        sys.exit(1)
    print("PASS")


main()
