"""An analyst's session from a plain Python process (no mpirun here): a
session of resident ranks started with tessera.start, results checked
against scipy at 1-4 ranks, results as read-only views (not copies: the
client's private memory measured), bad commands, killed clients and ranks,
another OS user, TCP with a token, and nothing left in /dev/shm."""
import glob
import json
import os
import shutil
import signal
import socket
import stat
import subprocess
import sys
import tempfile
import textwrap
import time

import numpy as np
import pytest
import scipy.sparse as sp
from scipy.sparse.csgraph import connected_components
from scipy.sparse.linalg import spsolve

import tessera
from conftest import clean_env, start_serve
from tessera.session import protocol

SHM = os.environ.get("TESSERA_SHM_DIR", "/dev/shm")
PACKAGE_PARENT = os.path.dirname(os.path.dirname(os.path.abspath(tessera.__file__)))


def ours(job_id):
    return glob.glob(os.path.join(SHM, f"tessera-{job_id}-*"))


@pytest.fixture(scope="module")
def graph_file(tmp_path_factory):
    """A random undirected graph with one large component and small ones,
    vertices 0..n-1 (a few isolated), as an edge list (each edge once)."""
    rng = np.random.default_rng(7)
    n = 3000
    big = rng.integers(0, 2400, size=(9000, 2))           # the large component's part
    small = np.array([[2400 + 3 * k, 2400 + 3 * k + 1] for k in range(150)] +
                     [[2400 + 3 * k + 1, 2400 + 3 * k + 2] for k in range(100)])
    edges = np.vstack([big, small])
    edges = edges[edges[:, 0] != edges[:, 1]]
    edges = np.unique(np.sort(edges, axis=1), axis=0)
    path = tmp_path_factory.mktemp("session") / "graph.el"
    np.savetxt(path, edges, fmt="%d")
    # n - 1 occurs, so the file's vertex count is n.
    with open(path, "a") as f:
        f.write(f"{n - 2} {n - 1}\n")
    edges = np.vstack([edges, [[n - 2, n - 1]]])
    return str(path), n, edges


def reference(n, edges):
    a = sp.coo_matrix((np.ones(len(edges)), (edges[:, 0], edges[:, 1])), shape=(n, n)).tocsr()
    a = ((a + a.T) > 0).astype(np.float64)
    count, labels = connected_components(a, directed=False)
    sizes = np.bincount(labels)
    big = np.flatnonzero(labels == np.argmax(sizes))
    return a, count, labels, big


def scipy_hitting(a, vertices, target):
    """Expected steps to ``target`` on the subgraph of ``vertices``: the
    grounded Laplacian's system L h = d."""
    sub = a[vertices][:, vertices]
    d = np.asarray(sub.sum(axis=1)).ravel()
    lap = sp.diags(d) - sub
    t = int(np.flatnonzero(vertices == target)[0])
    keep = np.arange(len(vertices)) != t
    h = np.zeros(len(vertices))
    h[keep] = spsolve(lap[keep][:, keep].tocsc(), d[keep])
    return dict(zip(vertices.tolist(), h.tolist()))


@pytest.fixture(scope="module")
def session():
    with tessera.start(ranks=2) as s:
        yield s
    assert not ours(s.job_id), f"segments left: {ours(s.job_id)}"


def check_against_scipy(s, graph_file):
    path, n, edges = graph_file
    a, count, labels, big = reference(n, edges)
    g = s.read_graph(path, undirected=True)
    assert (g.vertices, g.edges) == (n, len(edges))
    c = s.components(g)
    assert c.count == count and c.largest_size == len(big)
    # labels: the smallest vertex of each vertex's component
    smallest = np.array([np.flatnonzero(labels == labels[v])[0] for v in range(n)])
    assert np.array_equal(c.labels, smallest)
    lcc = s.largest_component(g, c)
    assert np.array_equal(np.sort(lcc.file_ids), big)
    target = int(big[len(big) // 2])
    h = s.hitting_times(lcc, targets=[target])
    assert h.converged
    want = scipy_hitting(a, big, target)
    got = dict(zip(h.file_ids.tolist(), h.times.tolist()))
    assert set(got) == set(want)
    worst = max(abs(got[v] - want[v]) / max(1.0, abs(want[v])) for v in want)
    assert worst < 1e-6, worst
    return c, lcc, h


def test_results_equal_scipy_and_are_views(session, graph_file):
    c, lcc, h = check_against_scipy(session, graph_file)
    for obj, name in ((c, "labels"), (lcc, "file_ids"), (h, "times"), (h, "file_ids")):
        view = getattr(obj, name)
        assert obj.is_view(name), f"{obj.kind}.{name} was copied"
        assert not view.flags.owndata and not view.flags.writeable
        with pytest.raises(ValueError):
            view[0] = 1


@pytest.mark.parametrize("ranks", [1, 3, 4])
def test_every_rank_count_gives_the_same_answers(graph_file, ranks):
    with tessera.start(ranks=ranks) as s:
        check_against_scipy(s, graph_file)
    assert not ours(s.job_id)


def private_bytes():
    """Private anonymous memory of this process (where any copy goes); the
    session's pages mapped here are shared memory (RssShmem), not a copy."""
    with open("/proc/self/status") as f:
        fields = dict(line.split(":", 1) for line in f)
    return int(fields["RssAnon"].split()[0]) * 1024


def test_a_large_result_is_a_view_not_a_copy(session):
    n = 20_000_000  # 160 MB of float64
    a = session.arange(n, dtype=np.float64)
    before = private_bytes()
    view = a.values
    total = float(view.sum())  # touches every page
    grown = private_bytes() - before
    assert total == n * (n - 1) / 2
    assert a.is_view("values") and not view.flags.owndata
    assert grown < 0.05 * view.nbytes, f"the client's private memory grew by {grown} bytes"
    copied = a.array("values", copy=True)
    assert copied.flags.owndata and np.array_equal(copied, view)
    del view, copied
    session.drop(a)


def test_a_copy_past_the_limit_names_the_setting(session):
    a = session.zeros(100_000)
    old = session.max_transfer_bytes
    session.max_transfer_bytes = 1000
    try:
        with pytest.raises(tessera.ConfigError, match="max_transfer_bytes"):
            a.array("values", copy=True)
    finally:
        session.max_transfer_bytes = old
    assert a.array("values", copy=True).sum() == 0


def test_bad_commands_raise_and_the_session_keeps_its_objects(session, graph_file):
    g = session.read_graph(graph_file[0], undirected=True)
    before = {o["id"] for o in session.list()}
    with pytest.raises(tessera.SystemError, match="nonexistent.el"):
        session.read_graph("/nonexistent.el")
    with pytest.raises(tessera.ConfigError, match="no object"):
        session.components("#999999")
    with pytest.raises(tessera.RangeError):
        session.hitting_times(g, targets=[10 ** 9])
    with pytest.raises(tessera.Error) as e:
        session.bfs(g, -1)
    assert "rank" in str(e.value)
    assert {o["id"] for o in session.list()} >= before
    assert session.components(g).count > 0  # and the next command works


def test_a_dropped_object_leaves_held_views_valid(session, graph_file):
    g = session.read_graph(graph_file[0], undirected=True)
    c = session.components(g)
    labels = c.labels
    expected = labels.copy()
    session.drop(c)
    session.drop(g)
    session.kron(scale=10)  # new objects may reuse the memory; ours stays
    assert np.array_equal(labels, expected)


def test_names_outlive_the_client_and_others_cannot_drop_mine(session, graph_file):
    g = session.read_graph(graph_file[0], undirected=True)
    session.persist(g, "web")
    mine = session.zeros(10)
    other = tessera.connect(session.socket_path)
    try:
        web = other.get("web")
        assert web.vertices == g.vertices
        assert other.components("web").count == session.components(g).count
        with pytest.raises(tessera.PeerError, match="another client"):
            other.drop(mine.id)
    finally:
        other.close()
    # a client that ends: its unnamed objects go, named ones stay
    code = textwrap.dedent(f"""
        import os, tessera
        s = tessera.connect({session.socket_path!r})
        s.zeros(1000); s.kron(scale=8)
        print(len(s.list()), flush=True)
        os.kill(os.getpid(), 9)
    """)
    p = subprocess.run([sys.executable, "-c", code], env={**clean_env(), "PYTHONPATH": PACKAGE_PARENT},
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == -9, p.stderr
    deadline = time.monotonic() + 10
    while len(session.list()) >= int(p.stdout.split()[0]) and time.monotonic() < deadline:
        time.sleep(0.05)
    ids = {o["id"] for o in session.list()}
    assert "web" in ids and mine.id in ids
    assert all(o["owner"] in (None, session.client_id) for o in session.list())
    session.drop("web")


def test_submit_returns_a_future_and_status_answers(session):
    future = session.submit("kron", scale=11)
    g = future.result(timeout=120)
    assert g.vertices == 2048
    st = session.status()
    assert st["ranks"] == 2 and st["running"] is None
    assert session.get(g.id).vertices == 2048


def test_versions_must_match(session):
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.connect(session.socket_path)
    protocol.send(sock, {"op": "hello", "args": {}, "version": protocol.PROTOCOL_VERSION + 1})
    reply, _ = protocol.receive(sock)
    sock.close()
    assert not reply["ok"] and "protocol" in reply["error"]["message"]
    session.ping()


def test_the_socket_is_private(session):
    d = os.path.dirname(session.socket_path)
    assert os.stat(d).st_mode & 0o777 == 0o700
    assert os.stat(session.socket_path).st_mode & 0o077 == 0


@pytest.mark.skipif(os.getuid() != 0 or not shutil.which("setpriv"), reason="needs root to act as nobody")
def test_nobody_cannot_connect_or_read_segments(session, tmp_path):
    g = session.kron(scale=8)
    meta = session._request("view", {"ref": g.id, "field": "file_ids"})["metadata"]
    code = textwrap.dedent("""
        import socket, sys, os
        kind, target = sys.argv[1], sys.argv[2]
        try:
            if kind == "socket":
                s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM); s.connect(target)
                print("reply:", s.recv(4096)); s.close()
            else:
                open(target, "rb").read(1); print("read it")
        except OSError as e:
            print("refused:", e.__class__.__name__)
    """)
    as_nobody = ["setpriv", "--reuid", "nobody", "--regid", "nogroup", "--clear-groups", sys.executable, "-c", code]
    out = subprocess.run(as_nobody + ["socket", session.socket_path], capture_output=True, text=True, timeout=30)
    assert "refused: PermissionError" in out.stdout, out
    out = subprocess.run(as_nobody + ["file", meta], capture_output=True, text=True, timeout=30)
    assert "refused: PermissionError" in out.stdout, out
    # Even with the directory and socket opened up (a mistake), the session
    # checks the peer's uid and refuses.
    d = os.path.dirname(session.socket_path)
    os.chmod(d, 0o711)
    os.chmod(session.socket_path, 0o666)
    try:
        out = subprocess.run(as_nobody + ["socket", session.socket_path], capture_output=True, text=True, timeout=30)
    finally:
        os.chmod(session.socket_path, 0o600)
        os.chmod(d, 0o700)
    assert "reply:" in out.stdout and b"uid" in eval(out.stdout.split("reply:", 1)[1].strip()), out
    session.ping()


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def test_tcp_needs_the_token(tmp_path):
    d = tmp_path / "sock"
    d.mkdir(mode=0o700)
    port = free_port()
    with tessera.start(ranks=1, socket=str(d / "s.sock"), tcp=f"127.0.0.1:{port}") as s:
        token_file = s.socket_path + ".token"
        assert os.stat(token_file).st_mode & 0o777 == 0o600
        token = open(token_file).read().strip()
        assert len(bytes.fromhex(token)) * 8 >= 128
        with pytest.raises(tessera.PeerError, match="token") as e:
            tessera.connect(tcp=f"127.0.0.1:{port}", token="0" * 64)
        assert token not in str(e.value)
        t = tessera.connect(tcp=f"127.0.0.1:{port}", token_file=token_file)
        assert t.arange(10).array("values").sum() == 45
        t.close()
        listening = subprocess.run(["ss", "-ltn"], capture_output=True, text=True).stdout if shutil.which("ss") else ""
        assert f"0.0.0.0:{port}" not in listening
        log = open(s._launched.log).read()  # (removed when the session ends cleanly)
        assert token not in log


def test_a_dead_rank_raises_promptly_and_leaves_nothing(graph_file):
    s = tessera.start(ranks=2)
    g = s.read_graph(graph_file[0], undirected=True)
    s.components(g).labels  # noqa: B018 - segments exist now
    assert ours(s.job_id)
    os.kill(s._pids[1], signal.SIGKILL)
    start = time.monotonic()
    with pytest.raises(tessera.SessionLost):
        for _ in range(100):
            s.noop()
            time.sleep(0.1)
    assert time.monotonic() - start < 60
    assert s._process.poll() is not None
    assert not ours(s.job_id), ours(s.job_id)


def test_a_session_has_its_own_mpi_session_directory_removed_at_stop(tmp_path):
    # Open MPI's shared top directory, removed by whichever job ends and
    # finds it empty, once failed a job starting beside it: a session on
    # one node gets a base of its own from the library's launch (tessera
    # mpirun), beside every other launch's, gone with the session, and its
    # log too when it ends cleanly; a base the user chose stands; a dead
    # mpirun's base goes at the next start.
    bases = os.path.join(tempfile.gettempdir(), f"tessera-mpirun.{os.getuid()}.{os.stat('/proc/self/ns/pid').st_ino}")
    with tessera.start(ranks=2) as s:
        with open(f"/proc/{s._process.pid}/environ", "rb") as f:
            env = dict(v.split(b"=", 1) for v in f.read().split(b"\0") if b"=" in v)
        base = env[b"OMPI_MCA_orte_tmpdir_base"].decode()
        assert base == s._launched.mpi_base and base == os.path.join(bases, str(s._process.pid))
        assert glob.glob(os.path.join(base, "ompi.*")), "mpirun's session directory is under the base"
        assert s.kron(scale=6).vertices == 64
        log = s._launched.log
        assert os.path.exists(log)
    assert not os.path.exists(base), "the base is removed when the session stops"
    assert not os.path.exists(log), "a session that ended cleanly leaves no log"
    chosen = tmp_path / "mine"
    chosen.mkdir()
    with tessera.start(ranks=1, env={"OMPI_MCA_orte_tmpdir_base": str(chosen)}) as s:
        assert s._launched.mpi_base is None and glob.glob(str(chosen / "ompi.*")), "a base the user chose stands"
    dead = os.path.join(bases, str(2 ** 22 + 1))  # above the largest pid_max: no such process
    os.makedirs(dead)
    with tessera.start(ranks=1) as s:
        assert not os.path.exists(dead), "a start removes the base of an ended mpirun"


def test_shm_gc_cleans_up_after_a_whole_session_is_killed(graph_file):
    # A crash that takes the session's mpirun and ranks at once (the client
    # never learns of it): `tessera shm gc --include-mpi` proves them dead,
    # the ranks by their segments' records and mpirun through its PMIx store
    # under the session's own Open MPI base, and removes the session's
    # segments and Open MPI's shared-memory files.
    program = os.path.join(PACKAGE_PARENT, "tessera", "bin", "tessera")
    if not os.path.exists(program):
        pytest.skip(f"no {program}")
    s = tessera.start(ranks=2)
    try:
        g = s.read_graph(graph_file[0], undirected=True)
        s.components(g).labels  # noqa: B018 - segments exist now
        assert ours(s.job_id)
        vader = set()
        for pid in s._pids:
            with open(f"/proc/{pid}/maps") as f:
                vader |= {line.split()[-1] for line in f if "vader_segment." in line}
        assert vader, "the ranks map Open MPI's shared-memory files"
        for pid in [s._process.pid, *s._pids]:
            os.kill(pid, signal.SIGKILL)
        s._process.wait()
        assert s._ranks_gone(10.0)
        gc = subprocess.run([program, "shm", "gc", "--include-mpi"], env=clean_env(), capture_output=True, text=True,
                            timeout=60)
        assert gc.returncode == 0, gc.stderr
        assert not ours(s.job_id), (ours(s.job_id), gc.stdout, gc.stderr)
        assert not [v for v in vader if os.path.exists(v)], (gc.stdout, gc.stderr)
    finally:
        s._keep = False
        s.close()


def run_example(name):
    """examples/python/NAME run as a user runs it; (its stdout, and scipy's
    answers on examples/grid.el: the component count, the largest
    component's vertices, its longest hitting time to vertex 0)."""
    source = os.environ.get("TESSERA_SOURCE_DIR", os.path.join(PACKAGE_PARENT, "..", ".."))
    example = os.path.join(source, "examples", "python", name)
    edges = np.loadtxt(os.path.join(source, "examples", "grid.el"), dtype=np.int64, comments="#")
    a, count, _, big = reference(int(edges.max()) + 1, edges)
    longest = max(scipy_hitting(a, big, 0).values())
    out = subprocess.run([sys.executable, example], env=clean_env(), capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    return out.stdout, count, big, longest


def test_the_readme_flow_example_runs():
    """examples/python/session_flow.py, the README's lines: its printed
    answers against scipy on the same file."""
    out, count, big, longest = run_example("session_flow.py")
    assert out == f"{count} components; the largest: {len(big)} vertices; hitting times to 0: max {longest:.1f}\n"


def test_the_interop_example_runs():
    """examples/python/interop.py (docs/python.md): SciPy in and out, NetworkX
    and pandas in, a result as a frame; its answers against scipy."""
    out, count, big, longest = run_example("interop.py")
    assert out == f"{count} components; {min(big) + 100}..{max(big) + 100}: max {longest:.1f} steps\n"


def test_a_session_ends_with_the_client_that_started_it_unless_kept(tmp_path):
    code = textwrap.dedent("""
        import os, sys, time, tessera
        s = tessera.start(ranks=2, keep=sys.argv[1] == "keep")
        g = s.kron(scale=8)
        s.submit("pagerank", g, method="jacobi", tolerance=0.0, max_iterations=10**8)  # runs for hours
        time.sleep(0.5)
        print(s.socket_path, s.job_id, *s._pids, flush=True)
        os.kill(os.getpid(), 9)
    """)
    # Unkept first: how long its ranks took to stop bounds the wait that
    # shows a kept session's ranks do not (twice that, at least 3 s; not
    # the 20 s allowed for stopping, which the kept case spent idle).
    stopped_after = 20.0
    for keep in ("", "keep"):
        p = subprocess.run([sys.executable, "-c", code, keep], env={**clean_env(), "PYTHONPATH": PACKAGE_PARENT},
                           capture_output=True, text=True, timeout=120)
        path, job, *pids = p.stdout.split()
        start = time.monotonic()
        deadline = start + (max(3.0, 2 * stopped_after) if keep else 20)
        while any(os.path.exists(f"/proc/{q}") for q in pids) and time.monotonic() < deadline:
            time.sleep(0.1)
        stopped_after = time.monotonic() - start
        if keep:
            assert all(os.path.exists(f"/proc/{q}") for q in pids), "a kept session stopped with its client"
            s = tessera.connect(path)
            assert s.list() == []  # the killed client's unnamed objects were reclaimed
            assert s.status()["running"] is None  # and its running command cancelled
            s.stop()
        else:
            assert not any(os.path.exists(f"/proc/{q}") for q in pids), "the session outlived its starter"
        deadline = time.monotonic() + 10
        while ours(job) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not ours(job), ours(job)


def test_a_command_stuck_when_its_owner_ends_ends_the_session_and_leaves_nothing():
    # A collective that some rank never joins cannot be cancelled: once the
    # owner has ended, the ranks end after TESSERA_SESSION_STUCK_AFTER
    # seconds instead of holding their memory and files for good.
    code = textwrap.dedent("""
        import os, threading, time, tessera
        s = tessera.start(ranks=2, env={"TESSERA_SESSION_TESTING": "1", "TESSERA_SESSION_STUCK_AFTER": "2"})
        g = s.kron(scale=8)
        s.submit("_request", "stuck", {"graph": g.id})
        time.sleep(1.0)
        assert s.status()["running"]["op"] == "stuck"
        print(s.job_id, s._launched.log, *s._pids, flush=True)
        os.kill(os.getpid(), 9)
    """)
    p = subprocess.run([sys.executable, "-c", code], env={**clean_env(), "PYTHONPATH": PACKAGE_PARENT},
                       capture_output=True, text=True, timeout=120)
    job, log, *pids = p.stdout.split()
    assert ours(job), "the stuck command's graph holds files while it runs"
    deadline = time.monotonic() + 60
    while any(os.path.exists(f"/proc/{q}") for q in pids) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not any(os.path.exists(f"/proc/{q}") for q in pids), "a stuck session outlived its owner"
    with open(log, errors="replace") as f:
        text = f.read()
    assert "ended during stuck; cancelling it" in text and "did not stop within 2 s" in text, text[-2000:]
    deadline = time.monotonic() + 10
    while ours(job) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not ours(job), ours(job)


def test_tessera_serve_keeps_a_session_until_stopped(tmp_path):
    serve, path = start_serve(tmp_path, 2)
    try:
        assert "serving " + path in serve.stdout.readline()
        s = tessera.connect(path)
        assert s.ranks == 2 and s.grid((10, 10)).edges == 180
        s.stop()
        assert serve.wait(timeout=60) == 0
    finally:
        if serve.poll() is None:
            serve.kill()
    assert not os.path.exists(path)


def test_status_answers_while_a_command_runs_and_progress_streams(session):
    g = session.kron(scale=16)
    future = session.submit("pagerank", g, method="jacobi", tolerance=1e-12, max_iterations=200)
    seen = None
    deadline = time.monotonic() + 120
    while not future.done() and time.monotonic() < deadline:
        st = session.status()  # answered by rank 0's socket thread meanwhile
        if st["running"] and st["running"]["op"] == "pagerank":
            seen = st["running"]
        time.sleep(0.01)
    p = future.result(timeout=120)
    assert seen is not None and seen["seconds"] >= 0, "status never saw the running command"
    assert p.iterations > 1
    lines = []
    session.on_progress, default = lines.append, session.on_progress
    try:
        h = session.hitting_times(g, verbose=True)
    finally:
        session.on_progress = default
    assert h.converged
    assert any("hitting times" in line for line in lines) and any("Belos" in line or "CG" in line for line in lines), \
        lines[:5]


def interrupted_after(seconds, call):
    """Runs ``call`` with a Ctrl-C (KeyboardInterrupt) ``seconds`` in, as
    a notebook's interrupt button delivers it; the seconds it took to return."""
    def interrupt(*_):
        raise KeyboardInterrupt
    old = signal.signal(signal.SIGALRM, interrupt)
    try:
        signal.setitimer(signal.ITIMER_REAL, seconds)
        start = time.monotonic()
        with pytest.raises(KeyboardInterrupt):
            call()
        return time.monotonic() - start
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)


def test_ctrl_c_cancels_the_running_command_and_the_session_stays_usable(session):
    g = session.kron(scale=16)
    before = {o["id"] for o in session.list()}
    # Each would run for hours: PageRank to a tolerance of 0, CG to 1e-300
    # (Belos on the edge arrays), a build of 2^26 vertices (between passes).
    long_commands = {
        "pagerank": lambda: session.pagerank(g, method="jacobi", tolerance=0.0, max_iterations=10**8),
        "hitting_times": lambda: session.hitting_times(g, tolerance=1e-300, max_iterations=10**8),
        "kron": lambda: session.kron(scale=26),
    }
    for name, call in long_commands.items():
        took = interrupted_after(1.0, call)
        assert took < 1.0 + 20, f"{name}: the interrupt took {took:.1f} s to return"
        st = session.status()
        assert st["running"] is None and st["queued"] == 0, (name, st)  # stopped, not left running
        start = time.monotonic()
        assert session.components(g).count > 0  # the next command does not wait for the old one
        assert time.monotonic() - start < 20, name
    after = {o["id"] for o in session.list()}
    assert before <= after and len(after - before) == len(long_commands), (before, after)  # the components only
    # A command of another client is not this client's to cancel; that
    # client can (s.cancel(), for a submitted command).
    other = tessera.connect(session.socket_path)
    try:
        future = other.submit("pagerank", g, method="jacobi", tolerance=0.0, max_iterations=10**8)
        deadline = time.monotonic() + 60
        while not (session.status()["running"] or {}).get("op") == "pagerank" and time.monotonic() < deadline:
            time.sleep(0.05)
        # This client's command waits behind it: its Ctrl-C takes it off
        # the queue and leaves the other client's running.
        took = interrupted_after(0.5, lambda: session.components(g))
        assert took < 5
        assert session.cancel() is None  # nothing of this client's runs
        assert (session.status()["running"] or {}).get("op") == "pagerank", "another client's command was cancelled"
        assert other.cancel() == "pagerank"
        with pytest.raises(tessera.Cancelled):
            future.result(timeout=30)
        st = session.status()
        assert st["queued"] == 0 and st["running"] is None, st
        assert {o["id"] for o in session.list()} == after  # neither the queued nor the cancelled command left one
    finally:
        other.close()


def test_the_command_line_runs_on_a_resident_graph_by_name(session, graph_file, tmp_path):
    """tessera CMD --session PATH @NAME: the session's ranks run the command's
    workflow on the graph they hold; the document is the command's."""
    program = os.path.join(PACKAGE_PARENT, "tessera", "bin", "tessera")
    if not os.path.exists(program):
        pytest.skip(f"no {program}")
    path = graph_file[0]
    g = session.read_graph(path, undirected=True)
    session.persist(g, "web")
    try:
        def tessera_cli(*args, ok=True):
            p = subprocess.run([program, *args], env=clean_env(), capture_output=True, text=True, timeout=120)
            assert (p.returncode == 0) == ok, p.stderr
            return p
        import json
        direct = json.loads(tessera_cli("cc", path, "--undirected", "--json", "-q").stdout)
        resident = json.loads(tessera_cli("cc", "--session", session.socket_path, "@web", "--json", "-q").stdout)
        assert resident["results"][0]["components"] == direct["results"][0]["components"] == session.components(g).count
        assert resident["stats"]["arc_hash"] == direct["stats"]["arc_hash"]
        assert resident["stats"]["edges"] == direct["stats"]["edges"]
        labels = tmp_path / "labels.txt"
        tessera_cli("cc", "--session", session.socket_path, "@web", "-o", str(labels), "-q")
        written = np.loadtxt(labels, dtype=np.int64, comments=("#", "%"))
        assert len(written) == g.vertices
        pr = json.loads(tessera_cli("pagerank", "--session", session.socket_path, "@web", "--json", "-q").stdout)
        mine = session.pagerank(g)
        assert pr["pagerank"]["iterations"] == mine.iterations and pr["pagerank"]["top_vertex"] == mine.top_vertex
        p = tessera_cli("bfs", "--session", session.socket_path, "@web", "--source", "0")
        assert "reached" in p.stderr  # the progress lines came back as the command ran
        bad = tessera_cli("cc", "--session", session.socket_path, "@nothing", ok=False)
        assert "nothing" in bad.stderr
        bad = tessera_cli("cc", "--session", session.socket_path, path, ok=False)
        assert "@NAME" in bad.stderr
    finally:
        session.drop("web")


def test_distributed_arrays_gather_scatter_update_argsort_like_numpy(session):
    n = 5000
    a = session.arange(n, dtype=np.int64)
    want = np.arange(n, dtype=np.int64)
    rng = np.random.default_rng(11)
    idx = rng.integers(0, n, size=3000)
    assert np.array_equal(session.gather(a, idx), want[idx])
    where = rng.permutation(n)[:400]
    session.scatter(a, where, -where)
    want[where] = -where
    hits = rng.integers(0, n, size=2000)
    session.update(a, hits, 3)
    np.add.at(want, hits, 3)
    assert np.array_equal(a.values, want)
    perm = session.argsort(a)
    assert np.array_equal(perm.values, np.argsort(want, kind="stable"))
    c = session.components(session.grid((20, 20)))
    assert np.array_equal(session.gather((c, "labels"), np.arange(400)), np.zeros(400))
    with pytest.raises(tessera.RangeError):
        session.gather(a, [n])


# -- graphs in and out: SciPy, NetworkX, pandas (issue 60) ------------------------------------
def test_from_scipy_and_to_scipy_round_trip_exactly(session):
    import scipy.sparse as sp
    A = sp.random(400, 400, density=0.02, format="csr", random_state=3)  # directed, weighted
    A[5, 5] = 2.5  # a self loop
    g = session.from_scipy(A)
    assert (g.vertices, g.arcs, g.directed, g.weighted) == (400, A.nnz, True, True)
    B = g.to_scipy()
    assert B.shape == A.shape and (B != A).nnz == 0 and np.array_equal(B.indptr, A.indptr)
    assert np.array_equal(B.indices, A.indices) and np.array_equal(B.data, A.data)
    S = sp.csr_array(A + A.T)  # symmetric: an undirected graph, verified
    u = session.from_scipy(S, symmetric=True)
    assert not u.directed and (u.to_scipy() != S).nnz == 0
    with pytest.raises(tessera.FormatError, match="symmetric"):
        session.from_scipy(A, symmetric=True)
    with pytest.raises(tessera.MismatchError, match="square"):
        session.from_scipy(sp.random(3, 4, density=0.5, format="csr"))
    # An unweighted graph gives ones; chunked and whole sends give one graph.
    src, dst = A.nonzero()
    whole = session.from_edges(src, dst, vertices=400).to_scipy()
    parts = session.from_edges(src, dst, vertices=400, chunk_edges=97).to_scipy()
    assert (whole != (A != 0).astype(np.float64)).nnz == 0 and (parts != whole).nnz == 0


def test_from_networkx_and_from_pandas_give_networkx_s_components(session):
    import networkx as nx
    import pandas as pd
    G = nx.gnm_random_graph(700, 500, seed=4)
    G.add_node(10 ** 6)  # an isolated node of another name
    g = session.from_networkx(G)
    assert (g.vertices, g.edges, g.directed) == (G.number_of_nodes(), G.number_of_edges(), False)
    c = session.components(g)
    want = sorted(sorted(map(str, comp)) for comp in nx.connected_components(G))
    labels = c.labels
    got = {}
    for k, node in enumerate(g.nodes):  # vertex k is node k; file id k
        got.setdefault(labels[k], []).append(str(node))
    assert c.count == nx.number_connected_components(G)
    assert sorted(sorted(v) for v in got.values()) == want
    # pandas: integer ids kept as file ids; string labels numbered, in nodes.
    edges = list(G.edges)
    df = pd.DataFrame({"a": [7 * u + 3 for u, _ in edges], "b": [7 * v + 3 for _, v in edges]})
    p = session.from_pandas(df, source="a", target="b", undirected=True)
    frame = session.components(p).to_pandas()
    assert list(frame.columns[:2]) == ["file_id", "labels"]
    assert set(frame.file_id) == set(df.a) | set(df.b)
    H = nx.Graph([(7 * u + 3, 7 * v + 3) for u, v in edges])
    assert frame.labels.nunique() == nx.number_connected_components(H)
    names = pd.DataFrame({"s": ["x", "y", "z"], "t": ["y", "x", "w"]})
    q = session.from_pandas(names, source="s", target="t")
    assert q.nodes == ["x", "y", "z", "w"] and q.vertices == 4 and q.directed
    with pytest.raises(tessera.ConfigError, match="no column"):
        session.from_pandas(names, source="nope", target="t")


def test_a_hitting_time_result_converts_to_pandas_with_file_ids(session, graph_file):
    path, n, edges = graph_file
    g = session.read_graph(path, undirected=True)
    lcc = session.largest_component(g)
    target = int(lcc.file_ids[0])
    h = session.hitting_times(lcc, targets=[target])
    frame = h.to_pandas()
    assert list(frame.columns) == ["file_id", "times"]
    assert np.array_equal(frame.file_id.to_numpy(), lcc.file_ids)
    assert np.array_equal(frame.times.to_numpy(), h.times, equal_nan=True)
    assert frame.loc[frame.file_id == target, "times"].item() == 0.0


def test_from_edges_refuses_bad_edges_and_the_session_serves_on(session):
    with pytest.raises(tessera.MismatchError, match="destinations"):
        session.from_edges([0, 1, 2], [1, 2])
    with pytest.raises(tessera.RangeError, match="negative"):
        session.from_edges([0, -1], [1, 2])
    with pytest.raises(tessera.RangeError, match="out of range"):
        session.from_edges([0, 1], [1, 9], vertices=5)
    with pytest.raises(tessera.RangeError, match="finite"):
        session.from_edges([0, 1], [1, 2], [1.0, float("nan")])
    with pytest.raises(tessera.MismatchError, match="weights"):
        session.from_edges([0, 1], [1, 2], [1.0])
    assert session.from_edges([0, 1], [1, 2], vertices=5).vertices == 5


def kill_whole_session(s):
    """Kills a session from outside: mpirun's process group and the ranks, no goodbye."""
    os.killpg(s._process.pid, signal.SIGKILL)
    for pid in s._pids:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    s._process.wait()


# -- a session found again, and nothing left behind (issue 58) ------------------------------
def test_a_session_is_found_again_and_a_killed_one_is_forgotten(tmp_path, monkeypatch):
    # A runtime directory of this test's own: sessions of tests running beside it stay out of it.
    runtime = tmp_path / "run"
    runtime.mkdir(mode=0o700)
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(runtime))
    from tessera.session import sessions
    program = os.path.join(PACKAGE_PARENT, "tessera", "bin", "tessera")
    with pytest.raises(tessera.ConfigError, match="no running session"):
        tessera.connect()
    s = tessera.start(ranks=2, keep=True)
    try:
        g = s.kron(scale=8)
        s.persist(g, "web")
        live = sessions.running()
        assert [f["socket"] for f in live] == [s.socket_path]
        facts = live[0]
        assert facts["ranks"] == 2 and facts["pids"] == s._pids and facts["job_id"] == s.job_id
        assert stat.S_IMODE(os.stat(facts["file"]).st_mode) == 0o600
        t = tessera.connect()  # the only one
        assert "web" in {o["id"] for o in t.list()}
        t.close()
        listed = json.loads(subprocess.run([program, "sessions", "--json"], env=clean_env(), capture_output=True,
                                           text=True, timeout=60, check=True).stdout)
        assert [r["socket"] for r in listed] == [s.socket_path]
        assert listed[0]["residents"] == ["web"] and listed[0]["memory_bytes"] > 0
        other = tessera.start(ranks=1)
        try:
            with pytest.raises(tessera.ConfigError, match="several running sessions") as e:
                tessera.connect()
            assert s.socket_path in str(e.value) and other.socket_path in str(e.value)
        finally:
            other.stop()
        assert not os.path.exists(other.socket_path), "a stopped session leaves no socket"
    finally:
        kill_whole_session(s)
    deadline = time.monotonic() + 10
    while any(os.path.exists(f"/proc/{p}") for p in s._pids) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert os.path.exists(facts["file"]) and os.path.exists(s.socket_path)
    assert sessions.running() == [], "a killed session is not listed"
    assert not os.path.exists(facts["file"]) and not os.path.exists(s.socket_path), "its file and socket go"
    assert os.path.exists(s._launched.log), "a failed session's log stays"
    with pytest.raises(tessera.ConfigError, match="no running session"):
        tessera.connect()
    gc = subprocess.run([program, "shm", "gc", "--include-mpi"], env=clean_env(), capture_output=True, timeout=60)
    assert gc.returncode == 0 and not ours(s.job_id), gc.stderr


def test_a_session_stopped_normally_leaves_nothing_in_its_runtime_directory(tmp_path, monkeypatch):
    runtime = tmp_path / "run"
    runtime.mkdir(mode=0o700)
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(runtime))
    with tessera.start(ranks=2, tcp=f"127.0.0.1:{free_port()}") as s:
        assert s.kron(scale=6).vertices == 64
        assert os.listdir(runtime / "tessera")
    left = [os.path.join(d, f) for d, _, files in os.walk(runtime) for f in files]
    assert left == [], f"left behind: {left}"


# -- residents that survive: saved, the session killed, restored at another rank count (issue 58) --
def partition(file_ids, labels):
    groups = {}
    for f, label in zip(file_ids.tolist(), labels.tolist()):
        groups.setdefault(label, set()).add(f)
    return sorted(sorted(v) for v in groups.values())


def test_residents_are_saved_survive_a_kill_and_come_back_at_another_rank_count(tmp_path, graph_file):
    path, n, edges = graph_file
    save = tmp_path / "save"
    s = tessera.start(ranks=2)
    try:
        g = s.read_graph(path, undirected=True)
        c = s.components(g)
        lcc = s.largest_component(g, c)
        target = int(lcc.file_ids[0])
        h = s.hitting_times(lcc, targets=[target])
        for obj, name in ((g, "web"), (c, "labels"), (lcc, "lcc"), (h, "times")):
            s.persist(obj, name)
        want = {"web": (g.vertices, g.edges, g.arcs), "lcc": (lcc.vertices, lcc.edges),
                "labels": partition(c.file_ids, c.labels), "count": c.count,
                "times": dict(zip(h.file_ids.tolist(), h.times.tolist()))}
        assert sorted(s.save_all(str(save))["names"]) == ["labels", "lcc", "times", "web"]
    finally:
        kill_whole_session(s)
    with tessera.start(ranks=3, restore=str(save)) as r:
        assert {"labels", "lcc", "times", "web"} <= {o["id"] for o in r.list()}
        web, lcc2 = r.get("web"), r.get("lcc")
        assert (web.vertices, web.edges, web.arcs) == want["web"] and (lcc2.vertices, lcc2.edges) == want["lcc"]
        labels = r.get("labels")
        assert partition(labels.file_ids, labels.labels) == want["labels"] and labels.count == want["count"]
        again = r.components(web)  # the restored graph is a graph: every command takes it
        assert again.count == want["count"] and partition(again.file_ids, again.labels) == want["labels"]
        times = r.get("times")
        assert dict(zip(times.file_ids.tolist(), times.times.tolist())) == want["times"]
        fresh = r.hitting_times(lcc2, targets=[target])
        got = dict(zip(fresh.file_ids.tolist(), fresh.times.tolist()))
        assert got.keys() == want["times"].keys()
        assert all(abs(got[k] - v) <= 1e-6 * max(1.0, abs(v)) for k, v in want["times"].items())
        with pytest.raises(tessera.ConfigError, match="already holds"):
            r.restore(str(save))
    # A flipped byte anywhere in the data: detected, named, nothing loaded.
    data = max((p for p in save.rglob("*") if p.is_file()), key=lambda p: p.stat().st_size)
    raw = bytearray(data.read_bytes())
    raw[len(raw) // 2] ^= 0x40
    data.write_bytes(bytes(raw))
    with pytest.raises(tessera.FormatError) as e:
        tessera.start(ranks=2, restore=str(save))
    assert "save" in str(e.value) and str(save) in str(e.value), str(e.value)


def test_a_lost_rank_is_named_and_the_session_restarts_with_its_residents(tmp_path, graph_file):
    save = tmp_path / "auto"
    s = tessera.start(ranks=2, autosave=str(save), restart="auto")
    try:
        g = s.read_graph(graph_file[0], undirected=True)
        s.persist(g, "web")
        count = s.components(g).count
        s.save_all(str(save))
        old_pids = list(s._pids)
        os.kill(old_pids[1], signal.SIGKILL)
        with pytest.raises(tessera.SessionLost) as e:
            for _ in range(100):
                s.noop()
                time.sleep(0.1)
        said = str(e.value)
        assert "rank 1" in said and "signal 9" in said, said
        assert "restarted" in said and "web" in said, said
        assert set(s._pids).isdisjoint(old_pids), "new ranks"
        assert s.components(s.get("web")).count == count, "usable again, its graph back"
        assert s.restart() == ["web"] and s.components(s.get("web")).count == count  # and when asked
    finally:
        s.stop()
    assert not ours(s.job_id)


def test_a_second_client_reads_residents_while_a_command_runs_and_sees_its_place(session, graph_file):
    g = session.read_graph(graph_file[0], undirected=True)
    c = session.components(g)
    session.persist(c, "shared_labels")
    first = session.get("shared_labels").labels  # mapped once: later reads need no rank
    target = int(g.file_ids[0])
    other = tessera.connect(session.socket_path)
    try:
        running = session.submit("pagerank", g, method="jacobi", tolerance=0.0, max_iterations=10 ** 8)
        deadline = time.monotonic() + 30
        while session.status()["running"] is None and time.monotonic() < deadline:
            time.sleep(0.05)
        assert session.status()["running"]["op"] == "pagerank"
        t0 = time.monotonic()
        again = other.get("shared_labels").labels
        assert time.monotonic() - t0 < 5 and np.array_equal(again, first), "a read did not wait for the command"
        lines = []
        other.on_progress = lines.append
        queued = other.submit("hitting_times", g, targets=[target], verbose=True)
        deadline = time.monotonic() + 30
        while not any("queued" in line for line in lines) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert any("queued: 1 command" in line for line in lines), lines
        assert session.cancel() == "pagerank"
        with pytest.raises(tessera.Cancelled):
            running.result(timeout=120)
        assert queued.result(timeout=300).times is not None  # then it ran
    finally:
        other.close()
        session.drop("shared_labels")
