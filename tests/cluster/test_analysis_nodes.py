"""tessera pipeline --analysis process|container (and --packed) across nodes: tessera-analyze
started per node (analysis rank r on the node of caller rank r, attached to
that node's control segment) on an emulated 2-node cluster
(scripts/cluster.py), at 2 nodes x 2 ranks and 2 nodes x 1 rank.

Checks: the hitting times equal the one-node answer computed here (same rank
count and solver, the analysis in process); a user-started analysis
(--analysis-control) runs with the command the caller prints; killing one
node's analysis rank (found by its pid inside that node) ends every caller
rank on every node within a few seconds, with a message naming that node's
host; after every run no Tessera file is left in any node's /dev/shm and no
process in any node; at the end no process of the cluster is left.

Usage: test_analysis_nodes.py BUILD_DIR SOURCE_DIR. Exit 77 (skipped) where
namespaces are not permitted, or bwrap is missing (container mode)."""
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time

BUILD, SOURCE = (os.path.abspath(a) for a in sys.argv[1:3])
TESSERA = os.path.join(BUILD, "tessera")
CLUSTER = [sys.executable, os.path.join(SOURCE, "scripts", "cluster.py")]
TIMEOUT = 120
# Killed analysis -> the whole job (every rank on both nodes, and mpirun) gone.
# Detection is a few 0.1 s periods; the rest is the abort and mpirun's teardown.
END_BOUND = 8.0
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from harness import check, finish, run  # noqa: E402
from emulated_cluster import Cluster  # noqa: E402


def env_for(by_node):
    """by_node: mpirun places the caller's ranks round-robin over the nodes
    (2 ranks: one per node) instead of filling node0 first."""
    env = dict(os.environ)
    if by_node:
        env["OMPI_MCA_rmaps_base_mapping_policy"] = "node"
    return env


def times(path):
    out = {}
    with open(path) as f:
        for line in f:
            parts = line.split()
            if len(parts) == 2 and not line.startswith(("#", "%")):
                out[int(parts[0])] = float(parts[1])
    return out


def same_times(a, b, rel=1e-9):
    return a.keys() == b.keys() and len(a) > 0 and all(abs(a[k] - b[k]) <= rel * max(1.0, abs(b[k])) for k in a)


def packed_agrees(cl, work, layout, ranks, by_node, reference):
    """pipeline --packed over the nodes (its rows, Afforest's parent array
    and the solve's RowMatrix each node's own): the EdgeList's one-node
    hitting times, to the solver's tolerance."""
    out = os.path.join(work, f"{layout}-packed.txt")
    p = cl.exec("node0", pipeline_args(ranks, "belos", "inprocess", out, "--packed", "--verify", "-q"),
                env=env_for(by_node))
    what = f"{layout} --packed"
    check(p.returncode == 0, f"{what}: exited {p.returncode}: {p.stderr.strip()[-800:]}")
    if p.returncode == 0:
        check(same_times(times(out), reference, rel=1e-6), f"{what}: the one-node EdgeList answer")
    clean(cl, what)


def node_processes(cl, node):
    """Live processes in the node other than its init and this listing."""
    p = cl.exec(node, ["ps", "-eo", "pid=,stat=,comm="])
    procs = []
    for line in p.stdout.splitlines():
        pid, stat, comm = (line.split(None, 2) + ["", ""])[:3]
        if pid != "1" and "Z" not in stat and comm not in ("ps", "nsenter"):
            procs.append(f"{pid} {comm}")
    return procs


def clean(cl, what):
    # The analysis and the caller's ranks may need a moment to be reaped.
    deadline = time.monotonic() + 10
    while True:
        files = {n: cl.shm_files(n) for n in ("node0", "node1")}
        procs = {n: node_processes(cl, n) for n in ("node0", "node1")}
        if (not any(files.values()) and not any(procs.values())) or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    check(not any(files.values()), f"{what}: no Tessera file left in any node's /dev/shm ({files})")
    check(not any(procs.values()), f"{what}: no process left in any node ({procs})")


def pipeline_args(ranks, solver, analysis, out, *extra):
    return [TESSERA, "pipeline", "-n", str(ranks), "--scale", "10", "--solver", solver, "--analysis", analysis,
            "-o", out, *extra]


def agrees(cl, work, layout, ranks, by_node, analysis, solver, reference):
    out = os.path.join(work, f"{layout}-{analysis}-{solver}.txt")
    p = cl.exec("node0", pipeline_args(ranks, solver, analysis, out, "--json", "-q"), env=env_for(by_node))
    what = f"{layout} --analysis {analysis} --solver {solver}"
    if p.returncode != 0:
        check(False, f"{what}: exited {p.returncode}: {p.stderr.strip()[-800:]}")
        return
    j = json.loads(p.stdout)
    command = j["hitting"]["handshake"]["command"]
    # One app context per node, each on its node's host.
    for host in cl.hosts:
        check(f"--host {host}:{ranks // 2}" in command, f"{what}: the analysis starts {ranks // 2} rank(s) on {host}: "
              f"{command}")
    if analysis == "container":
        # The sandbox wraps each rank, not mpirun (whose daemons start the other node).
        check(command.startswith("mpirun ") and " bwrap " in command, f"{what}: bwrap inside each app context")
    check(same_times(times(out), reference), f"{what}: the one-node answer")
    clean(cl, what)


def user_started(cl, work, reference_belos):
    """--analysis-control: the caller says what to run across nodes; running it works."""
    out = os.path.join(work, "user.txt")
    control = "/dev/shm/tessera-user-analysis.control.seg"
    caller = subprocess.Popen(cl.argv("node0", pipeline_args(4, "belos", "process", out, "--analysis-control",
                                                             control, "-q")),
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    lines = []
    reader = threading.Thread(target=lambda: lines.extend(caller.stderr), daemon=True)
    reader.start()
    command = None
    deadline = time.monotonic() + 60
    while command is None and time.monotonic() < deadline and caller.poll() is None:
        for line in list(lines):
            if "waiting up to" in line and ": mpirun " in line:
                command = line.split(": ", 1)[1].split(" (one analysis rank")[0].split()
        time.sleep(0.05)
    check(command is not None and command.count("--host") == 2 and ":" in command,
          f"user-started: the caller prints one app context per node ({command})")
    if command:
        ana = cl.exec("node0", command)
        check(ana.returncode == 0, f"user-started: the printed command runs ({ana.returncode}: {ana.stderr[-600:]})")
    try:
        caller.wait(timeout=60)
    except subprocess.TimeoutExpired:
        caller.kill()
        caller.wait()
    reader.join(5)
    check(caller.returncode == 0, f"user-started: the pipeline succeeds ({''.join(lines)[-600:]})")
    if caller.returncode == 0:
        check(same_times(times(out), reference_belos), "user-started: the one-node answer")
    clean(cl, "user-started")


def killed(cl, ranks, by_node, analysis, node):
    """SIGKILL one analysis rank of `node` mid-solve: every rank ends, the node is named."""
    what = f"{ranks} ranks --analysis {analysis}, analysis rank on {node} killed"
    # A solve long enough to be killed in (about a second or more here).
    argv = [TESSERA, "pipeline", "-n", str(ranks), "--kind", "grid", "--dims", "56x56x56", "--solver", "tessera",
            "--analysis", analysis]
    caller = subprocess.Popen(cl.argv("node0", argv), env=env_for(by_node), stdout=subprocess.DEVNULL,
                              stderr=subprocess.PIPE, text=True)
    lines = []
    reader = threading.Thread(target=lambda: lines.extend(caller.stderr), daemon=True)
    reader.start()
    deadline = time.monotonic() + 60
    while not any("tessera-analyze: hitting times to" in l for l in lines) and time.monotonic() < deadline:
        if caller.poll() is not None:
            break
        time.sleep(0.02)
    victims = [p.split()[0] for p in node_processes(cl, node) if p.split()[1] == "tessera-analyze"]
    check(len(victims) == ranks // 2, f"{what}: {ranks // 2} analysis rank(s) run in {node} ({victims})")
    if victims:
        cl.exec(node, ["kill", "-KILL", victims[0]])
    killed_at = time.monotonic()
    try:
        caller.wait(timeout=60)
    except subprocess.TimeoutExpired:
        caller.kill()
        caller.wait()
    ended = time.monotonic() - killed_at
    reader.join(5)
    err = "".join(lines)
    host = cl.hosts[int(node[-1])]
    check(caller.returncode != 0, f"{what}: the job fails (exit {caller.returncode})")
    check(f"on host {host} the analysis process" in err and "died while" in err,
          f"{what}: the error names {host}: {err.strip()[-700:]}")
    check(ended < END_BOUND, f"{what}: every rank ended {ended:.1f} s after the kill (bound {END_BOUND} s)")
    clean(cl, what)


def main():
    t0 = time.time()
    if not os.path.exists(CLUSTER[1]):
        sys.exit(f"{CLUSTER[1]} is missing: the emulated cluster comes with scripts/cluster.py")
    if shutil.which("bwrap") is None:
        print("SKIPPED: bwrap (bubblewrap) is not installed: --analysis container cannot run")
        sys.exit(77)
    work = tempfile.mkdtemp(prefix="tessera-analysis-nodes-")
    os.chmod(work, 0o755)
    cl = Cluster(SOURCE, work)
    try:
        # One node (this machine, no namespaces): the analysis in process.
        refs = {}
        for ranks in (4, 2):
            for solver in ("tessera", "belos"):
                out = os.path.join(work, f"one-{ranks}-{solver}.txt")
                p = run(pipeline_args(ranks, solver, "inprocess", out, "-q"), timeout=TIMEOUT)
                check(p.returncode == 0, f"one node, {ranks} ranks, {solver}: {p.stderr.strip()[-400:]}")
                refs[ranks, solver] = times(out) if p.returncode == 0 else {}
        # Each mode with each layout, each solver once.
        agrees(cl, work, "2x2", 4, False, "process", "tessera", refs[4, "tessera"])
        agrees(cl, work, "2x2", 4, False, "container", "belos", refs[4, "belos"])
        agrees(cl, work, "2x1", 2, True, "process", "belos", refs[2, "belos"])
        agrees(cl, work, "2x1", 2, True, "container", "tessera", refs[2, "tessera"])
        packed_agrees(cl, work, "2x2", 4, False, refs[4, "belos"])
        packed_agrees(cl, work, "2x1", 2, True, refs[2, "belos"])
        user_started(cl, work, refs[4, "belos"])
        killed(cl, 4, False, "process", "node1")
        killed(cl, 2, True, "container", "node0")
    finally:
        cl.down()
        mnts = {n["mnt"] for n in cl.info["nodes"]}
        left = []
        for pid in filter(str.isdigit, os.listdir("/proc")):
            try:
                if os.readlink(f"/proc/{pid}/ns/mnt") in mnts:
                    left.append(pid)
            except OSError:
                pass
        check(left == [], f"no process left in the cluster's namespaces ({left})")
        shutil.rmtree(work, ignore_errors=True)
    print(f"{time.time() - t0:.0f} s")
    finish()


if __name__ == "__main__":
    main()
