"""The recovery supervisor across nodes, on an emulated cluster of 2 nodes x 2
ranks (scripts/cluster.py: each node its own hostname, /proc and /dev/shm):
`tessera -n 4 run --recover ... tessera bench jacobi3d-recover --levels
node,buddy`, the hosts taken from the cluster's default hostfile.

- uninterrupted: finishes at 4 ranks, its checksum the plain sequential loop's;
- a rank on node1 killed (node1 alive): the heartbeats name each rank's host,
  the dead remote rank is reported, node1 answers the launcher's probe, and
  the job is relaunched on the same 4 ranks, bit-identical;
- node1 killed whole (Cluster.kill) while the job runs past its checkpoint of
  step 10 (rank 2 is held after step 12 by an injected hang, so the kill
  lands mid-run whatever the machine's speed): the supervisor reports node1
  lost (its detection time a bound from node1's last heartbeat), relaunches
  on node0's 2 ranks, which resume from step 10 at level 1
  (their own files and the buddy copies of node1's), bit-identical; nothing
  of the job is left in node0's /dev/shm nor in TMPDIR.
- 3 nodes x 1 rank, node1 killed the same way: node1's files live on node2
  only (each node holds its rank's file and node-before's), so node0's rank
  gets them over MPI when the job resumes on node0 and node2 from step 10 at
  level 1, bit-identical. Then the same with `--async`: step 10's buddy
  copies were not yet committed (the next commit does that), so the job
  resumes from step 5 at level 1, bit-identical.

Usage: test_recover_node_loss.py BUILD_DIR SOURCE_DIR. Exit 77 (skipped)
where namespaces are not permitted."""
import glob
import json
import os
import subprocess
import sys
import tempfile
import time

BUILD, SOURCE = (os.path.abspath(a) for a in sys.argv[1:3])
TESSERA = os.path.join(BUILD, "tessera")
JOB = ["tessera", "bench", "jacobi3d-recover", "--n", "16", "--iterations", "20", "--every", "5",
       "--levels", "node,buddy", "-q"]
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from harness import check, finish  # noqa: E402
from emulated_cluster import Cluster  # noqa: E402


def said(p_out, p_err):
    return f"\n--- stdout\n{p_out[-1500:]}\n--- stderr\n{p_err[-2500:]}"


def load(path):
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


class Runs:
    def __init__(self, cl, work):
        self.cl, self.work, self.count = cl, work, 0
        self.tmp = os.path.join(work, "tmp")
        os.makedirs(self.tmp)
        self.env = dict(os.environ, TMPDIR=self.tmp)

    def start(self, supervisor_args, job_args, ranks=4):
        """`tessera -n RANKS run` inside node0; returns (process, report path, result path)."""
        self.count += 1
        report = os.path.join(self.work, f"report{self.count}.json")
        result = os.path.join(self.work, f"result{self.count}.json")
        argv = [TESSERA, "-n", str(ranks), "run", "--report", report] + supervisor_args + JOB + job_args + ["--result", result]
        p = subprocess.Popen(self.cl.argv("node0", argv), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                             env=self.env)
        return p, report, result

    def wait(self, p, report, result, timeout=90):
        try:
            out, err = p.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            p.kill()
            out, err = p.communicate()
        return out, err, load(report), load(result)


def heartbeat_hosts(tmp):
    """Rank -> host, from the first attempt's heartbeat files."""
    hosts = {}
    for f in glob.glob(os.path.join(tmp, "tessera-run-*", "attempt1", "*.hb")):
        fields = open(f).read().split()
        if len(fields) >= 5:
            hosts[int(os.path.basename(f)[:-3])] = fields[4]
    return hosts


def main():
    with tempfile.TemporaryDirectory(prefix="tessera-recover-nodes-") as work:
        cl = Cluster(SOURCE, work)
        try:
            runs = Runs(cl, work)
            h0, h1 = cl.hosts

            p, rep_path, res_path = runs.start([], ["--plain"])
            out, err, rep, res = runs.wait(p, rep_path, res_path)
            ok = p.returncode == 0 and rep and res and len(rep["attempts"]) == 1
            check(ok, "uninterrupted at 2 nodes x 2 ranks" + ("" if ok else said(out, err)))
            reference = res["checksum"] if ok else None
            check(ok and res["checksum"] == res["plain_checksum"] and res["ranks"] == 4,
                  f"its checksum is the plain loop's ({res and res.get('checksum')} vs {res and res.get('plain_checksum')})")
            check(ok and rep["attempts"][0]["ranks"] == 4 and rep["attempts"][0]["hosts"] == f"{h0}:2,{h1}:2",
                  f"the report names the 4 ranks on both hosts ({rep and rep['attempts'][0].get('hosts')})")

            # Rank 3 (on node1) dies; node1 itself is fine: relaunch on 4.
            p, rep_path, res_path = runs.start(["--recover", "--kill-rank", "3", "--kill-at-step", "7"], [])
            out, err, rep, res = runs.wait(p, rep_path, res_path)
            ok = p.returncode == 0 and rep and res and len(rep["attempts"]) == 2
            check(ok, "a dead rank on a live remote node: recovered" + ("" if ok else said(out, err)))
            if ok:
                a1, a2 = rep["attempts"]
                check(a1["outcome"] == "rank died" and a1["rank"] == 3 and a1["lost_host"] == "",
                      f"attempt 1: rank 3 died, no node lost ({a1['outcome']}, rank {a1['rank']}, lost '{a1['lost_host']}')")
                check(a2["ranks"] == 4 and a2["outcome"] == "finished" and a2["resumed_step"] == 5,
                      f"relaunched on the same 4 ranks from step 5 ({a2['ranks']} ranks, {a2['outcome']}, "
                      f"step {a2['resumed_step']})")
                check(res["checksum"] == reference and res["ranks"] == 4, "bit-identical to the uninterrupted run")

            # node1 killed whole while rank 2 (there) is held after step 12.
            p, rep_path, res_path = runs.start(["--recover", "--heartbeat-timeout", "60", "--fault", "1:2:hang:12"], [])
            deadline = time.time() + 60
            while time.time() < deadline and p.poll() is None and \
                    not glob.glob(os.path.join(runs.tmp, "tessera-run-*", "attempt1", "hung.2")):
                time.sleep(0.05)
            hosts = heartbeat_hosts(runs.tmp)
            check(hosts == {0: h0, 1: h0, 2: h1, 3: h1}, f"the heartbeats name each rank's host ({hosts})")
            check(p.poll() is None, "the job is running (rank 2 held after step 12) when node1 is killed")
            k = cl.kill("node1")
            check(k.returncode == 0, "node1 killed with its processes and /dev/shm")
            out, err, rep, res = runs.wait(p, rep_path, res_path)
            ok = p.returncode == 0 and rep and res and len(rep["attempts"]) == 2
            check(ok, "the job finished after node1 was lost" + ("" if ok else said(out, err)))
            if ok:
                a1, a2 = rep["attempts"]
                check(a1["outcome"] == "node lost" and a1["lost_host"] == h1 and a1["ranks"] == 4
                      and a1["lost_how"].startswith("its ranks 2,3;") and a1["rank"] in (-1, 2, 3),
                      f"attempt 1 on 4 ranks: node {h1} lost ({a1['outcome']}, '{a1['lost_host']}': {a1['lost_how']})")
                # The moment node1 died is unknown to the supervisor: its detection
                # time is a bound, from node1's ranks' last heartbeat.
                check(a1["detection_is_bound"] is True and 0 <= a1["detection_seconds"] < 60 and
                      "detected in at most" in err and "(since its last heartbeat)" in err,
                      f"attempt 1: detection at most {a1['detection_seconds']:.3f} s, counted from the last heartbeat")
                check(a2["ranks"] == 2 and a2["hosts"] == f"{h0}:2" and a2["outcome"] == "finished",
                      f"attempt 2 on node0's 2 ranks ({a2['ranks']}, {a2['hosts']}, {a2['outcome']})")
                check(a2["resumed_step"] == 10 and a2["resumed_level"] == 1,
                      f"resumed from step 10 at level 1, the buddy copies ({a2['resumed_step']}, level {a2['resumed_level']})")
                check(res["checksum"] == reference and res["ranks"] == 2 and res["resumed_from"] == 10,
                      f"bit-identical to the uninterrupted run ({res['checksum']} vs {reference}, {res['ranks']} ranks)")
                check(f"node lost: {h1}" in err and f"relaunching on 2 ranks ({h0}:2) without {h1}" in err,
                      "the supervisor's lines say the node was lost and the job relaunched on 2 ranks" + said(out, err))
            left = cl.exec("node0", ["ls", "-A", "/dev/shm"])
            check(left.returncode == 0 and left.stdout.split() == [],
                  f"nothing left in node0's /dev/shm: no checkpoint, segment or Open MPI file ({left.stdout.split()})")
            # (Open MPI's session directory of the killed node's daemon,
            # ompi.HOST.UID, stays: the nodes share /tmp here, not on a cluster.)
            left = [f for f in os.listdir(runs.tmp) if not f.startswith(f"ompi.{h1}.")]
            check(left == [], f"no heartbeat directory left in TMPDIR ({left})")
        finally:
            cl.down()


def three_nodes(async_copies=False):
    """With async_copies the buddy copies of step 10 are still uncommitted
    when node1 dies (they are committed by the next commit, at step 15): step
    10 is refused, and the job resumes from step 5, kept until then."""
    extra = ["--async"] if async_copies else []
    want_step = 5 if async_copies else 10
    how = " (--async)" if async_copies else ""
    with tempfile.TemporaryDirectory(prefix="tessera-recover-3nodes-") as work:
        cl = Cluster(SOURCE, work, nodes=3)
        try:
            runs = Runs(cl, work)
            h0, h1, h2 = cl.hosts
            hosts = ["--host", f"{h0}:1,{h1}:1,{h2}:1"]
            p, rep_path, res_path = runs.start(hosts, ["--plain"] + extra, ranks=3)
            out, err, rep, res = runs.wait(p, rep_path, res_path)
            ok = p.returncode == 0 and rep and res and res["checksum"] == res["plain_checksum"]
            check(ok, f"uninterrupted at 3 nodes x 1 rank{how}, the plain loop's checksum" + ("" if ok else said(out, err)))
            reference = res["checksum"] if ok else None
            p, rep_path, res_path = runs.start(hosts + ["--recover", "--heartbeat-timeout", "60", "--fault", "1:1:hang:12"],
                                               extra, ranks=3)
            deadline = time.time() + 60
            while time.time() < deadline and p.poll() is None and \
                    not glob.glob(os.path.join(runs.tmp, "tessera-run-*", "attempt1", "hung.1")):
                time.sleep(0.05)
            check(p.poll() is None, "the job is running (rank 1 held after step 12) when node1 is killed")
            check(cl.kill("node1").returncode == 0, "node1 killed with its processes and /dev/shm")
            out, err, rep, res = runs.wait(p, rep_path, res_path)
            ok = p.returncode == 0 and rep and res and len(rep["attempts"]) == 2
            check(ok, f"the job finished after node1 of 3 was lost{how}" + ("" if ok else said(out, err)))
            if ok:
                a1, a2 = rep["attempts"]
                check(a1["outcome"] == "node lost" and a1["lost_host"] == h1,
                      f"attempt 1: node {h1} lost ({a1['outcome']}, '{a1['lost_host']}')")
                check(a2["ranks"] == 2 and a2["hosts"] == f"{h0}:1,{h2}:1" and a2["outcome"] == "finished",
                      f"attempt 2 on node0 and node2 ({a2['ranks']} ranks, {a2['hosts']}, {a2['outcome']})")
                check(a2["resumed_step"] == want_step and a2["resumed_level"] == 1,
                      f"resumed from step {want_step} at level 1 ({a2['resumed_step']}, level {a2['resumed_level']})")
                check(res["checksum"] == reference and res["ranks"] == 2,
                      f"bit-identical to the uninterrupted run ({res['checksum']} vs {reference})")
            for node in ("node0", "node2"):
                left = cl.exec(node, ["ls", "-A", "/dev/shm"])
                check(left.returncode == 0 and left.stdout.split() == [],
                      f"nothing left in {node}'s /dev/shm ({left.stdout.split()})")
        finally:
            cl.down()


main()
three_nodes()
three_nodes(async_copies=True)
finish()
