#!/usr/bin/env python3
"""Slurm on the emulated cluster (scripts/slurm_cluster.py): slurmctld and one
slurmd per node, 2 nodes x 2 CPUs. `srun -N 2 -n 4` (PMIx) runs tessera info
(4 ranks, 2 per node) and the pipeline, whose hitting times must equal the
one-node answer computed here; an sbatch script runs `bench isx` under srun
and `bench ra -n 4` (mpirun inside the allocation), every row verified except
RA's MPI one-sided baseline, skipped with its reason (no one-sided over TCP).
Ends with no process of the cluster, no Slurm directory and no PMIx
directory in /tmp left.

Usage: test_slurm.py BUILD_DIR SOURCE_DIR. Exit 77 (skipped, reason printed)
without Slurm, without scripts/cluster.py, or where namespaces are not
permitted."""
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

BUILD, SOURCE = (os.path.abspath(a) for a in sys.argv[1:3])
TESSERA = os.path.join(BUILD, "tessera")
SLURM = [sys.executable, os.path.join(SOURCE, "scripts", "slurm_cluster.py")]
TIMEOUT = 120
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from harness import check, failures, numbers, run, same_numbers  # noqa: E402


def pmix_dirs():
    return {n for n in os.listdir("/tmp") if n.startswith("spmix_appdir")}


# A client of a session under srun (on node0, where rank 0 serves): the
# pipeline's steps on the resident graph, its hitting times printed as the
# pipeline's -o lines; then it stops the session.
SESSION_CLIENT = """
import sys, tessera
s = tessera.connect(sys.argv[1], timeout=60)
assert s.ranks == 4, s.ranks
g = s.kron(scale=10)
lcc = s.largest_component(g, s.components(g))
h = s.hitting_times(lcc)
assert h.converged
for v, t in sorted(zip(h.file_ids.tolist(), h.times.tolist())):
    print(v, repr(t))
s.stop()
"""


def session_under_srun(work, d, ref):
    """`srun -N 2 -n 4 tessera serve`: a session whose ranks Slurm placed on
    both nodes (each rank runs the session's server itself) answers as the
    one-node pipeline."""
    sockets = os.path.join(work, "session")
    os.mkdir(sockets, 0o700)
    sock = os.path.join(sockets, "s.sock")
    env = dict(os.environ, PYTHONPATH=os.path.join(BUILD, "python"))
    server = subprocess.Popen(SLURM + ["exec", "--dir", d, "node0", "--", "srun", "-N", "2", "-n", "4",
                                       TESSERA, "serve", "--socket", sock],
                              env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        out = os.path.join(work, "session.txt")
        client = run(SLURM + ["exec", "--dir", d, "node0", "--", sys.executable, "-c", SESSION_CLIENT, sock],
                     timeout=TIMEOUT, env=env)
        with open(out, "w") as f:
            f.write(client.stdout)
        check(client.returncode == 0 and same_numbers(numbers(ref), numbers(out)),
              f"a session under srun -N 2 -n 4: hitting times as the one-node pipeline's ({client.stderr.strip()[-400:]})")
        code = server.wait(timeout=60)
        check(code == 0, f"the srun session ends when its client stops it (exit {code}: {server.stdout.read()[-400:]})")
    finally:
        if server.poll() is None:
            server.kill()
            server.wait()


def main():
    work = tempfile.mkdtemp(prefix="tessera-slurm-")
    d = os.path.join(work, "cluster")
    pmix_before = pmix_dirs()
    try:
        ref = os.path.join(work, "one.txt")
        one = run([TESSERA, "pipeline", "-n", "4", "--scale", "10", "--analysis", "inprocess", "-o", ref, "--quiet"])
        check(one.returncode == 0, f"one node: pipeline -n 4 ({one.stderr.strip()[-300:]})")

        up = run(SLURM + ["up", "--dir", d, "--nodes", "2", "--owner", str(os.getpid())])
        if up.returncode == 77:
            print(f"SKIPPED: {up.stderr.strip()}")
            return 77
        if up.returncode != 0:
            check(False, f"slurm_cluster.py up: {up.stderr.strip()}")
            return 1
        with open(os.path.join(d, "nodes.json")) as f:
            hosts = [n["hostname"] for n in json.load(f)["nodes"]]

        def node0(*argv, timeout=TIMEOUT):
            return run(SLURM + ["exec", "--dir", d, "node0", "--", *argv], timeout=timeout)

        p = node0("srun", "--mpi=list")
        check("pmix" in p.stdout + p.stderr, "srun --mpi=list offers pmix")
        p = node0("srun", "-N", "2", "-n", "4", TESSERA, "info")
        placed = [line.split()[1] for line in p.stdout.splitlines() if line.split()[:1] and line.split()[0].isdigit()
                  and len(line.split()) > 2]
        check(p.returncode == 0 and "4 on 2 node(s)" in p.stdout and sorted(placed) == sorted(hosts * 2),
              f"srun -N 2 -n 4 tessera info: 4 ranks, 2 on each node ({placed}; {p.stderr.strip()[-300:]})")

        out = os.path.join(work, "srun.txt")
        p = node0("srun", "-N", "2", "-n", "4", TESSERA, "pipeline", "--scale", "10", "--analysis", "inprocess",
                  "-o", out, "--quiet")
        check(p.returncode == 0 and os.path.exists(ref) and os.path.exists(out) and same_numbers(numbers(ref), numbers(out)),
              f"srun -N 2 -n 4 tessera pipeline: hitting times as on one node ({p.stderr.strip()[-300:]})")

        session_under_srun(work, d, ref)

        job = os.path.join(work, "job.sh")
        log = os.path.join(work, "job.out")
        with open(job, "w") as f:
            f.write(f"""#!/bin/bash
#SBATCH -N 2
#SBATCH -n 4
#SBATCH -o {log}
srun {TESSERA} bench isx --keys 20000 --max-key 1000003 --reps 1 --json -q || exit 1
{TESSERA} bench ra -n 4 --log-table 10 --fine-updates 100 --reps 1 --json -q || exit 2
""")
        p = node0("sbatch", "--parsable", job)
        job_id = p.stdout.strip().split(";")[0]
        check(p.returncode == 0 and job_id.isdigit(), f"sbatch accepted the job ({p.stderr.strip()})")
        deadline = time.time() + 90
        state = ""
        while job_id.isdigit() and time.time() < deadline:
            # No accounting database: scontrol knows a finished job for MinJobAge (300 s).
            s = node0("scontrol", "-o", "show", "job", job_id)
            state = next((w.split("=", 1)[1] for w in s.stdout.split() if w.startswith("JobState=")), "")
            if state and state not in ("PENDING", "RUNNING", "CONFIGURING", "COMPLETING"):
                break
            time.sleep(0.5)
        rows = []
        if os.path.exists(log):
            with open(log) as f:
                rows = [json.loads(line) for line in f if line.startswith("{")]
        results = [r for r in rows if "summary" not in r]
        check(state == "COMPLETED", f"the sbatch job completed (state {state!r})")
        isx = [r for r in results if r["bench"] == "isx"]
        ra = [r for r in results if r["bench"] == "ra"]
        check(len(isx) == 3 and all(r["verified"] and r["ranks"] == 4 for r in isx), f"sbatch: srun bench isx: {len(isx)} rows verified at 4 ranks" + ("" if len(isx) == 3 else f": {isx}"))
        skipped = [r for r in ra if r.get("skipped")]
        ran = [r for r in ra if not r.get("skipped")]
        check(len(skipped) == 1 and skipped[0]["variant"].startswith("fine-grained")
              and "MPI_Win_allocate" in skipped[0]["skipped"] and "MPI_ERR_WIN" in skipped[0]["skipped"],
              "sbatch: bench ra across nodes skips the one-sided baseline with its reason: "
              + (skipped[0]["skipped"] if len(skipped) == 1 else f"{ra}"))
        check(len(ran) == 2 and all(r["verified"] and r["ranks"] == 4 for r in ran), f"sbatch: bench ra: the other {len(ran)} rows verified" + ("" if len(ran) == 2 else f": {ran}"))
    finally:
        down = run(SLURM + ["down", "--dir", d]) if os.path.exists(os.path.join(d, "nodes.json")) else None
        if down is not None:
            check(down.returncode == 0, f"slurm_cluster.py down leaves no process ({down.stderr.strip()})")
            check(not os.path.exists(os.path.join(d, "slurm")), "down removes the Slurm directory")
        check(pmix_dirs() <= pmix_before, f"no PMIx directory left in /tmp: {sorted(pmix_dirs() - pmix_before)}")
        shutil.rmtree(work, ignore_errors=True)
    if failures:
        print(f"{len(failures)} failed", file=sys.stderr)
        return 1
    print("slurm on the emulated cluster: ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())
