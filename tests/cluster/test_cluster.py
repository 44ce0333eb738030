"""The cross-node suite: Tessera on an emulated cluster of 2 nodes
(scripts/cluster.py: each node its own hostname, /proc and /dev/shm; TCP over
lo between nodes, vader inside one), at 2 nodes x 2 ranks and 2 nodes x 1 rank,
every answer compared with the one-node answer computed here.

Covers: tessera info / map --topology machine showing the node layout; gen,
convert (.mtx, .tsg), cc (also --colocales core), lcc, hitting, pipeline
--analysis inprocess; pagerank --method jacobi, bfs --verify and spectral
against 1 rank on one node (scores to 1e-9, the same parents, lambda2 to
1e-8 and the Fiedler vector up to sign to 1e-6); every bench's rows
verified (a one-sided baseline skipped with its reason where TCP cannot carry it); the aggregator tests
with direct and node-first routing (rings inside a node, MPI between); the
Python SPMD quickstart; shm list / gc per node (a node sees only its own
/dev/shm; gc in a directory shared by the nodes never removes another
node's segments); a lost node (scripts/cluster.py kill mid-run): the job ends
within 10 s naming the node, gc on the survivor leaves no segment. Ends with
no namespace, process or segment of the cluster left.

pipeline --analysis process|container across nodes: test_analysis_nodes.py;
Slurm: test_slurm.py.

Usage: test_cluster.py BUILD_DIR SOURCE_DIR. Exit 77 (skipped) where
namespaces are not permitted."""
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

BUILD, SOURCE = (os.path.abspath(a) for a in sys.argv[1:3])
TESSERA = os.path.join(BUILD, "tessera")
TIMEOUT = 120

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from harness import check, finish, numbers, same_numbers  # noqa: E402
from harness import run as run_unchecked  # noqa: E402
from emulated_cluster import Cluster  # noqa: E402


def run(argv, env=None, timeout=TIMEOUT, ok=True):
    p = run_unchecked(argv, env=env, timeout=timeout)
    if ok and p.returncode != 0:
        check(False, f"{' '.join(argv)} exited {p.returncode}: {p.stderr.strip()[-600:]}")
    return p


# (name, ranks, by_node): 2 nodes x 2 ranks and 2 nodes x 1 rank.
LAYOUTS = [("2x2", 4, False), ("2x1", 2, True)]


def tessera_args(args, ranks):
    return [TESSERA, *args, "-n", str(ranks), "--quiet"]


def sorted_lines(path):
    with open(path) as f:
        return sorted(line.strip() for line in f if line.strip() and not line.startswith("%"))


def commands_agree(cl, work):
    """Every command that writes results: same output across nodes as on one node."""
    ref = os.path.join(work, "one")
    os.makedirs(ref)
    g = os.path.join(work, "g.el")
    run(tessera_args(["gen", "kron", "--scale", "11", "-o", g], 1))
    # One node (this machine, no namespaces) first.
    cases = {
        "gen": (["gen", "urand", "--scale", "10", "--seed", "7", "-o", "{d}/u.el"], [("u.el", "lines")]),
        "convert.mtx": (["convert", g, "-o", "{d}/g.mtx"], [("g.mtx", "lines")]),
        "convert.tsg": (["convert", g, "-o", "{d}/g.tsg"], []),
        "cc": (["cc", g, "-o", "{d}/cc.txt"], [("cc.txt", "lines")]),
        "cc.colocales": (["cc", g, "--colocales", "core", "-o", "{d}/ccc.txt"], [("ccc.txt", "lines")]),
        "lcc": (["lcc", g, "-o", "{d}/lcc.el", "--ids", "{d}/lcc.ids"], [("lcc.el", "lines"), ("lcc.ids", "lines")]),
        "hitting": (["hitting", g, "--targets", "0", "-o", "{d}/h.txt"], [("h.txt", "numbers")]),
        "pipeline": (["pipeline", "--scale", "10", "--analysis", "inprocess", "-o", "{d}/p.txt"], [("p.txt", "numbers")]),
    }
    for name, (args, _) in cases.items():
        run(tessera_args([a.format(d=ref) for a in args], 1))
    # The binary directory written across nodes reads back as the same graph.
    run(tessera_args(["convert", os.path.join(ref, "g.tsg"), "-o", os.path.join(ref, "tsg.el")], 1))
    for layout, ranks, by_node in LAYOUTS:
        d = os.path.join(work, layout)
        os.makedirs(d)
        for name, (args, outputs) in cases.items():
            p = cl.exec("node0", tessera_args([a.format(d=d) for a in args], ranks), by_node=by_node)
            if p.returncode != 0:
                continue
            for out, how in outputs:
                a, b = os.path.join(ref, out), os.path.join(d, out)
                same = sorted_lines(a) == sorted_lines(b) if how == "lines" else same_numbers(numbers(a), numbers(b))
                check(same, f"{layout}: {name} writes {out} as on one node")
        run(tessera_args(["convert", os.path.join(d, "g.tsg"), "-o", os.path.join(d, "tsg.el")], 1))
        check(sorted_lines(os.path.join(ref, "tsg.el")) == sorted_lines(os.path.join(d, "tsg.el")),
              f"{layout}: convert -o .tsg across nodes holds the one-node graph")


def layout_shown(cl):
    """tessera info and map --topology machine show the nodes; ranks land by the hostfile."""
    for layout, ranks, by_node in LAYOUTS:
        p = cl.exec("node0", [TESSERA, "info", "-n", str(ranks)], by_node=by_node)
        check(f"{ranks} on 2 node(s)" in p.stdout, f"{layout}: tessera info reports {ranks} ranks on 2 nodes")
        hosts = [line.split()[1] for line in p.stdout.splitlines()
                 if line.split() and line.split()[0].isdigit() and len(line.split()) > 2]
        want = [cl.hosts[0], cl.hosts[0], cl.hosts[1], cl.hosts[1]] if ranks == 4 else cl.hosts
        check(hosts == want, f"{layout}: ranks placed {hosts}, expected {want}")
        p = cl.exec("node0", tessera_args(["map", "--chunks", "4x4x4", "--topology", "machine", "--json"], ranks),
                    by_node=by_node)
        topo = json.loads(p.stdout)["topology"] if p.returncode == 0 else ""
        check(topo == f"machine:2 nodes, {ranks} ranks", f"{layout}: map --topology machine says {topo!r}")
    p = run(tessera_args(["map", "--chunks", "4x4x4", "--topology", "machine", "--json"], 2))
    check(json.loads(p.stdout)["topology"] == "machine:1 node, 2 ranks", "one node: map --topology machine says 1 node")
    # Co-locales are per node: with --colocales core each node's 2 ranks form theirs.
    p = cl.exec("node0", [TESSERA, "info", "-n", "4", "--colocales", "core"])
    check("co-locales per node: 2 2" in p.stdout, "2x2: --colocales core: 2 co-locales on each node")
    mpirun = cl.exec("node0", ["mpirun", "-n", "4", "hostname"])
    check(sorted(mpirun.stdout.split()) == sorted(cl.hosts * 2), "mpirun -n 4 hostname: 2 ranks per node")


def benches(cl):
    """Benchmark rows verified across nodes; a baseline the transport cannot
    carry (MPI one-sided over TCP) is skipped with its reason, not fatal."""
    for bench, args in [("stream", ["--elements", "200000"]), ("isx", ["--keys", "20000"]),
                        ("argsort", ["--keys", "20000"]), ("jacobi3d", ["--n", "16", "--iterations", "5"]),
                        ("indexgather", ["--table", "1000", "--requests", "5000", "--fine-requests", "500"]),
                        ("histogram", ["--counts", "1000", "--updates", "5000", "--fine-updates", "500"]),
                        ("ra", ["--log-table", "12", "--fine-updates", "500"])]:
        for layout, ranks, by_node in LAYOUTS:
            p = cl.exec("node0", tessera_args(["bench", bench, "--reps", "1", "--json", *args], ranks), by_node=by_node)
            rows = [json.loads(line) for line in p.stdout.splitlines() if line.startswith("{")]
            skipped = [r for r in rows if r.get("skipped")]
            bad = [r for r in rows if r.get("verified") is False and not r.get("skipped")]
            reasons_ok = all("MPI one-sided" in r["skipped"] for r in skipped)
            check(p.returncode == 0 and len(rows) > len(skipped) and not bad and reasons_ok,
                  f"{layout}: bench {bench}: {len(rows) - len(skipped)} rows verified, {len(skipped)} skipped"
                  + (f" ({skipped[0]['skipped'][:60]})" if skipped else "")
                  + (f"; failed: {bad[:2]}" if bad else "") + (f"; {p.stderr.strip()[-300:]}" if p.returncode else ""))
            if bench in ("indexgather", "histogram") and p.returncode == 0:
                traffic_between_nodes(layout, bench, rows, ranks // 2)


def traffic_between_nodes(layout, bench, rows, per_node):
    """The aggregated rows' traffic counters: batches between nodes always
    travel as messages; the same-node path (shared+direct, co-locale
    segments) serves the node's other ranks with no batch, never a rank on
    the other node; without it, a node's own ranks get batches."""
    by_storage = {r["storage"]: (r.get("extra") or {}).get("traffic") for r in rows if r.get("variant") == "aggregated"}
    # histogram also keeps the general update aggregator's row beside its counting rows
    rows_expected = 8 if bench == "histogram" else 7
    check(all(t is not None for t in by_storage.values()) and len(by_storage) == rows_expected,
          f"{layout}: bench {bench}: every aggregated row reports its traffic ({sorted(by_storage)})")
    for storage, t in by_storage.items():
        if not t:
            continue
        direct = storage in ("shared+direct", "colocale+direct")
        ok = t["batches_between_nodes"] > 0
        if direct:
            ok = ok and t["batches_same_node"] == 0 and (t["records_direct"] > 0) == (per_node > 1)
        else:
            ok = ok and t["records_direct"] == 0 and (t["batches_same_node"] > 0) == (per_node > 1)
        check(ok, f"{layout}: bench {bench} {storage}: traffic between nodes as messages, same-node path only "
                  f"inside a node: {t}")


def aggregation_suite(cl):
    """The aggregator tests across nodes: rings between co-locales, MPI
    between nodes, and node-first routing, whose test checks that a rank
    sends off-node only to the ranks with its own index on their node."""
    binary = os.path.join(BUILD, "tests", "test_comm")
    if not os.path.exists(binary):
        print("skip aggregation suite: test_comm not built")
        return
    tests = ("Setups/AggregatorTest.*HeapDefault:Setups/AggregatorTest.*HeapMpiTransport:"
             "Aggregation.NodeFirstCrossesNodesOnlyBetweenForwarders:"
             "Aggregation.SameNodeBatchesGoThroughTheRingsUnlessSwitchedOff")
    for layout, ranks, by_node in LAYOUTS:
        for routing in ("direct", "node-first"):
            p = cl.exec("node0", ["env", "TESSERA_AGG_ROUTING=" + routing, "mpirun", "-x", "TESSERA_AGG_ROUTING",
                                  "-n", str(ranks), binary, "--gtest_filter=" + tests], by_node=by_node, ok=False)
            passed = p.stdout.count("[       OK ]")
            check(p.returncode == 0 and passed > 0,
                  f"{layout}: aggregator tests with {routing} routing across nodes: {passed} passed"
                  + (f"; {(p.stdout + p.stderr).strip()[-600:]}" if p.returncode else ""))


def python_example(cl, work):
    example = os.path.join(SOURCE, "examples", "python", "quickstart.py")
    if not os.path.isdir(os.path.join(BUILD, "python", "tessera")):
        print("skip python example: no Python package built")
        return
    env = dict(os.environ, PYTHONPATH=os.path.join(BUILD, "python"))
    one = run([os.path.join(SOURCE, "scripts", "mpirun.sh"), "-n", "4", sys.executable, example], env=env)
    many = cl.exec("node0", ["env", "PYTHONPATH=" + env["PYTHONPATH"], "mpirun", "-x", "PYTHONPATH", "-n", "4",
                             sys.executable, example])
    check(one.returncode == 0 and many.stdout == one.stdout and "counts:" in one.stdout,
          f"python quickstart across nodes prints {many.stdout.strip()!r} as on one node")


def shm_listing(cl, node, shm_dir=None):
    args = [TESSERA, "shm", "list", "--json"] + (["--dir", shm_dir] if shm_dir else [])
    p = cl.exec(node, args)
    return json.loads(p.stdout)["files"] if p.returncode == 0 else None


def lost_node(cl, work):
    """A node dies mid-run: the job ends within 10 s naming it; segments in a
    directory both nodes share survive gc on node0 while their creator's
    node is out of sight; gc on the survivor's /dev/shm leaves nothing."""
    shared = os.path.join(work, "shared-shm")
    os.makedirs(shared)
    os.chmod(shared, 0o1777)
    # A long pipeline whose Shared arrays live in /dev/shm of each node.
    job = ["pipeline", "--kind", "grid", "--dims", "700x700", "--tolerance", "1e-14", "--analysis", "inprocess"]
    argv = cl.argv("node0", tessera_args(job, 4))
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    # Wait until both nodes hold segments of the job.
    deadline = time.time() + 60
    seen = [[], []]
    while time.time() < deadline and proc.poll() is None:
        seen = [shm_listing(cl, n) or [] for n in ("node0", "node1")]
        if all(any(f["kind"] == "segment" for f in s) for s in seen):
            break
        time.sleep(0.3)
    check(all(seen), "both nodes hold segments of the running job")
    for i, s in enumerate(seen):
        hosts = {f["host"] for f in s}
        check(hosts <= {cl.hosts[i]}, f"shm list on node{i} sees only node{i}'s segments ({hosts})")
    # gc while the job runs removes nothing on either node (creators alive).
    for n in ("node0", "node1"):
        p = cl.exec(n, [TESSERA, "shm", "gc", "--json"])
        removed = json.loads(p.stdout)["removed"] if p.returncode == 0 else None
        check(removed == [], f"shm gc on {n} during the run removes no live segment ({removed})")
    check(proc.poll() is None, "the job was still running when node1 was killed (else make it longer)")
    t0 = time.time()
    cl.kill("node1")
    try:
        out, err = proc.communicate(timeout=30)
    except subprocess.TimeoutExpired:
        proc.kill()
        out, err = proc.communicate()
    took = time.time() - t0
    check(proc.returncode != 0, f"the job failed after the node was lost (exit {proc.returncode})")
    check(took < 10, f"the job ended {took:.1f} s after the node was lost")
    check(cl.hosts[1] in err, f"the error names the lost node {cl.hosts[1]}: {err.strip()[-300:]!r}")
    p = cl.exec("node0", [TESSERA, "shm", "gc", "--quiet"])
    left = shm_listing(cl, "node0")
    check(left == [], f"after shm gc on the surviving node no Tessera file is left: {left}")


def shared_dir_gc(cl, work):
    """In one directory both nodes see (TESSERA_SHM_DIR), gc on one node never
    removes a segment another node created, alive or dead."""
    shared = os.path.join(work, "shm-both")
    os.makedirs(shared)
    job = ["pipeline", "--kind", "grid", "--dims", "500x500", "--tolerance", "1e-14", "--analysis", "inprocess"]
    argv = cl.argv("node0", ["env", "TESSERA_SHM_DIR=" + shared,
                             "mpirun", "-x", "TESSERA_SHM_DIR", "-n", "4", TESSERA, *job, "--quiet"])
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.time() + 60
    hosts = set()
    while time.time() < deadline and proc.poll() is None:
        files = shm_listing(cl, "node0", shared) or []
        hosts = {f["host"] for f in files if f["kind"] == "segment"}
        if len(hosts) == 2:
            break
        time.sleep(0.3)
    check(hosts == set(cl.hosts), f"both nodes' segments in the shared directory ({hosts})")
    cl.kill("node1")
    proc.communicate(timeout=30)
    cl.exec("node0", [TESSERA, "shm", "gc", "--dir", shared, "--quiet"])
    left = {f["host"] for f in (shm_listing(cl, "node0", shared) or [])}
    check(left == {cl.hosts[1]}, f"gc on node0 removed its own dead segments and kept node1's ({left})")
    # From the machine itself (every PID namespace visible) node1's are provably dead.
    run([TESSERA, "shm", "gc", "--dir", shared, "--quiet"])
    check(os.listdir(shared) == [], f"gc outside the nodes removes the lost node's: {os.listdir(shared)}")


def nothing_left(cl):
    info = cl.info
    mnts = {n["mnt"] for n in info["nodes"]}
    procs = [p for p in os.listdir("/proc") if p.isdigit() and _ns(p) in mnts]
    check(procs == [], f"no process left in the cluster's namespaces ({procs})")
    check(not os.path.exists(os.path.join(cl.dir, "nodes.json")), "cluster.py down removed its state")
    host_shm = [f for f in os.listdir("/dev/shm") if any(h in f for h in cl.hosts)]
    check(host_shm == [], f"no segment of the nodes in the machine's /dev/shm ({host_shm})")
    # A killed node's Open MPI session directory (ompi.HOST.UID) stays where
    # its orted made it: in the cluster's D/tmp, removed with the cluster.
    tmps = {"/tmp", tempfile.gettempdir()}
    host_tmp = [f for t in tmps for f in os.listdir(t) if f.startswith("ompi.") and any(h in f for h in cl.hosts)]
    check(host_tmp == [], f"no Open MPI session directory of the nodes in the machine's /tmp ({host_tmp})")
    check(not os.path.exists(os.path.join(cl.dir, "tmp")), "cluster.py down removed the nodes' tmp directory")


def _ns(pid):
    try:
        return os.readlink(f"/proc/{pid}/ns/mnt")
    except OSError:
        return None


def analyses_agree(cl, work):
    """pagerank --method jacobi (to 1e-9), bfs --verify (the same parents) and
    spectral (lambda2 to 1e-8, the vector up to sign to 1e-6) across nodes as
    on one node at 1 rank."""
    g, grid = os.path.join(work, "g.el"), os.path.join(work, "grid.el")
    run(tessera_args(["gen", "grid", "--dims", "24x40", "-o", grid], 1))  # connected, lambda2 simple
    with open(g) as f:
        source = next(line.split()[0] for line in f if line.strip() and not line.startswith(("#", "%")))
    cases = {
        "pagerank": ["pagerank", g, "--method", "jacobi", "-o", "{d}/pr.txt"],
        "bfs": ["bfs", g, "--source", source, "--verify", "-o", "{d}/bfs.txt"],
        "spectral": ["spectral", grid, "--json", "-o", "{d}/fiedler.txt"],
    }
    results = {}
    for layout, ranks, by_node in [("one", 1, False)] + LAYOUTS:
        d = os.path.join(work, "analyses-" + layout)
        os.makedirs(d)
        for name, args in cases.items():
            argv = tessera_args([a.format(d=d) for a in args], ranks)
            p = run(argv) if layout == "one" else cl.exec("node0", argv, by_node=by_node)
            if p.returncode != 0:
                results[layout, name] = None
                continue
            if name == "spectral":
                results[layout, name] = (json.loads(p.stdout)["lambda2"], numbers(os.path.join(d, "fiedler.txt")))
            elif name == "pagerank":
                results[layout, name] = numbers(os.path.join(d, "pr.txt"))
            else:
                results[layout, name] = sorted_lines(os.path.join(d, "bfs.txt"))
    for layout, _, _ in LAYOUTS:
        ref, got = results["one", "pagerank"], results[layout, "pagerank"]
        check(ref is not None and got is not None and ref.keys() == got.keys() and
              all(abs(got[k] - ref[k]) <= 1e-9 * max(abs(ref[k]), 1e-300) for k in ref),
              f"{layout}: pagerank --method jacobi gives the one-rank scores to 1e-9")
        ref, got = results["one", "bfs"], results[layout, "bfs"]
        check(ref is not None and ref == got, f"{layout}: bfs --verify passes and gives the one-rank parents")
        ref, got = results["one", "spectral"], results[layout, "spectral"]
        ok = ref is not None and got is not None and abs(got[0] - ref[0]) <= 1e-8 * ref[0]
        if ok:
            a, b = ref[1], got[1]
            ok = a.keys() == b.keys() and min(max(abs(a[k] - s * b[k]) for k in a) for s in (1, -1)) <= 1e-6
        check(ok, f"{layout}: spectral gives the one-rank lambda2 (1e-8) and Fiedler vector up to sign (1e-6)")


def main():
    t0 = time.time()
    work = tempfile.mkdtemp(prefix="tessera-cluster-")
    os.chmod(work, 0o755)
    cl = Cluster(SOURCE, work, 2, checked=True)
    try:
        layout_shown(cl)
        commands_agree(cl, work)
        analyses_agree(cl, work)
        benches(cl)
        aggregation_suite(cl)
        python_example(cl, work)
        lost_node(cl, work)
        cl.down()
        nothing_left(cl)
        cl = Cluster(SOURCE, work, 2, checked=True)  # a fresh one: node1 is gone
        shared_dir_gc(cl, work)
    finally:
        cl.down()
        nothing_left(cl)
        shutil.rmtree(work, ignore_errors=True)
    print(f"{time.time() - t0:.0f} s")
    finish()


if __name__ == "__main__":
    main()
