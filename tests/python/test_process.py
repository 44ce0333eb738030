"""Tessera from several processes (plain pytest, no MPI in this process):
attach from a separate Python process to a running job's arrays, zero copy
(a 512 MiB attach grows this process's private memory by < 1%), attach's
validation, Ctrl-C in a Tessera script, and MPI started by mpi4py."""
import glob
import json
import os
import signal
import subprocess
import sys
import textwrap
import time
import uuid

import numpy as np
import pytest

import tessera
from conftest import clean_env

SOURCE = os.environ.get("TESSERA_SOURCE_DIR", os.path.join(os.path.dirname(__file__), "..", ".."))
MPIRUN = os.path.join(SOURCE, "scripts", "mpirun.sh")
SHM = os.environ.get("TESSERA_SHM_DIR", "/dev/shm")



def python(code, ranks=None, extra_env=None, **kwargs):
    argv = [sys.executable, "-c", textwrap.dedent(code)]
    if ranks:
        argv = [MPIRUN, "-n", str(ranks), *argv]
    return subprocess.Popen(argv, env={**clean_env(), **(extra_env or {})}, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, **kwargs)


def finish(proc, timeout=60):
    out, err = proc.communicate(timeout=timeout)
    assert proc.returncode == 0, f"exit {proc.returncode}\nstdout:\n{out}\nstderr:\n{err}"
    return out


def wait_for(path, proc, timeout=60):
    deadline = time.monotonic() + timeout
    while not os.path.exists(path):
        if proc.poll() is not None:
            pytest.fail(f"the job ended early: {proc.communicate()}")
        if time.monotonic() > deadline:
            proc.kill()
            pytest.fail(f"{path} never appeared")
        time.sleep(0.05)


def private_bytes():
    """This process's private anonymous memory (heap, NumPy buffers: where
    any copy would go). The attached file's pages are page cache, the same
    pages as /dev/shm's (smaps counts them as Private_Dirty only while no
    other process maps them: not a copy)."""
    fields = {}
    with open("/proc/self/smaps_rollup") as f:
        for line in f:
            parts = line.split()
            if len(parts) >= 2 and parts[0].endswith(":") and parts[1].isdigit():
                fields[parts[0][:-1]] = int(parts[1]) * 1024
    return fields["Anonymous"]


@pytest.fixture
def name():
    n = f"pytest-{uuid.uuid4().hex[:12]}"
    yield n
    for leftover in glob.glob(f"{SHM}/{n}*"):
        os.remove(leftover)


def test_attach_to_a_running_job_from_another_process(name, tmp_path):
    ready, done = tmp_path / "ready", tmp_path / "done"
    job = python(f"""
        import os, time, numpy as np, tessera
        rt = tessera.Runtime()
        a = tessera.DistArray(rt, 1000, dtype=np.int64, storage="shared", name="{name}")
        lo, hi = a.local_range
        a.local[:] = np.arange(lo, hi) * 10
        rt.barrier()
        if rt.rank == 0:
            open("{ready}", "w").close()
        while not os.path.exists("{done}"):
            time.sleep(0.02)
        rt.barrier()
        assert a.gather([0, 999]).tolist() == [-5, 9990], a.gather([0, 999])   # the attacher's write
        if rt.rank == 0:
            print("job saw the write")
    """, ranks=2)
    wait_for(ready, job)
    views = tessera.attach(f"{SHM}/{name}.json", "rw")     # this process runs no MPI
    assert len(views) == 2 and views.length == 1000 and views.element_type == "int64"
    assert np.array_equal(np.concatenate(views), np.arange(1000) * 10)
    assert views.begins == [0, 500]
    views[0][0] = -5                                     # seen by the job: same bytes
    ro = tessera.attach(f"{SHM}/{name}.json", dtype=np.int64)
    assert not ro[0].flags.writeable and ro[0][0] == -5
    with pytest.raises(ValueError):
        ro[0][0] = 1
    open(done, "w").close()
    assert "job saw the write" in finish(job)
    del views, ro
    assert glob.glob(f"{SHM}/{name}*") == []              # the job removed its segments


def test_attach_512_mib_adds_under_1_percent_private_memory(name):
    n = 64 * 1024 * 1024                                  # 512 MiB of float64
    finish(python(f"""
        import numpy as np, tessera
        rt = tessera.Runtime()
        a = tessera.DistArray(rt, {n}, dtype=np.float64, storage="shared", name="{name}", persist=True)
        a.local[:] = 1.0
    """))
    before = private_bytes()
    views = tessera.attach(f"{SHM}/{name}.json")
    total = sum(float(v.sum()) for v in views)            # reads every page
    grown = private_bytes() - before
    assert total == n
    assert grown < 0.01 * n * 8, f"attach grew private memory by {grown / 2**20:.1f} MiB"
    print(f"512 MiB attach: private memory grew {grown / 2**20:.2f} MiB ({100 * grown / (n * 8):.3f}%)")


def test_attach_validation(tmp_path, name):
    bad = tmp_path / "bad.json"
    bad.write_text('{"format": "something-else"}')
    with pytest.raises(tessera.FormatError, match="not a Tessera shared-array metadata file"):
        tessera.attach(bad)
    bad.write_text("not json at all")
    with pytest.raises(tessera.FormatError):
        tessera.attach(bad)
    with pytest.raises(tessera.Error, match="cannot open"):
        tessera.attach(tmp_path / "missing.json")
    with pytest.raises(tessera.ConfigError, match="mode"):
        tessera.attach(bad, "w")
    finish(python(f"""
        import numpy as np, tessera
        rt = tessera.Runtime()
        tessera.DistArray(rt, 4096, dtype=np.int32, storage="shared", name="{name}", persist=True)
    """))
    meta = f"{SHM}/{name}.json"
    with pytest.raises(tessera.MismatchError, match="holds int32, not float64"):
        tessera.attach(meta, dtype=np.float64)
    assert tessera.attach(meta, dtype=np.int32)[0].size == 4096
    segment = [p for p in glob.glob(f"{SHM}/{name}*") if not p.endswith(".json")][0]
    os.truncate(segment, 100)                            # a damaged segment: an error, never SIGBUS
    with pytest.raises(tessera.Error, match=os.path.basename(segment)):
        tessera.attach(meta)


def test_ctrl_c_raises_keyboard_interrupt_and_removes_segments(name, tmp_path):
    ready = tmp_path / "ready"
    proc = python(f"""
        import sys, time, numpy as np, tessera
        rt = tessera.Runtime()
        a = tessera.DistArray(rt, 1000, storage="shared", name="{name}")
        open("{ready}", "w").close()
        try:
            time.sleep(60)
        except KeyboardInterrupt:
            print("KeyboardInterrupt")
            sys.exit(0)
    """)
    wait_for(ready, proc)
    assert glob.glob(f"{SHM}/{name}*")
    proc.send_signal(signal.SIGINT)
    assert "KeyboardInterrupt" in finish(proc)
    assert glob.glob(f"{SHM}/{name}*") == []


def test_sigterm_removes_segments(name, tmp_path):
    ready = tmp_path / "ready"
    proc = python(f"""
        import time, numpy as np, tessera
        rt = tessera.Runtime()
        a = tessera.DistArray(rt, 1000, storage="shared", name="{name}")
        open("{ready}", "w").close()
        time.sleep(60)
    """)
    wait_for(ready, proc)
    proc.send_signal(signal.SIGTERM)
    proc.communicate(timeout=30)
    assert proc.returncode == -signal.SIGTERM
    assert glob.glob(f"{SHM}/{name}*") == []


@pytest.mark.parametrize("order", ["mpi4py first", "tessera first"])
def test_mpi4py(order):
    pytest.importorskip("mpi4py")
    first, second = ("from mpi4py import MPI", "import tessera") if order == "mpi4py first" else (
        "import tessera; tessera.Runtime()", "from mpi4py import MPI")
    out = finish(python(f"""
        {first}
        {second}
        import numpy as np
        rt = tessera.Runtime(MPI.COMM_WORLD)
        assert rt is tessera.Runtime() and rt.rank == MPI.COMM_WORLD.Get_rank() and rt.size == 2
        a = tessera.arange(rt, 101)
        total = MPI.COMM_WORLD.allreduce(int(a.local.sum()))
        assert total == 5050
        half = MPI.COMM_WORLD.Split(rt.rank, 0)
        try:
            tessera.Runtime(half)
        except tessera.ConfigError as e:
            assert "all ranks of MPI_COMM_WORLD" in str(e)
        else:
            raise AssertionError("a sub-communicator was accepted")
        if rt.rank == 0:
            print("mpi4py ok")
    """, ranks=2), timeout=120)
    assert "mpi4py ok" in out


@pytest.mark.parametrize("mode, expected", [("1", "colocale"), ("0", "heap")])
def test_default_storage_follows_the_colocale_mode(mode, expected):
    """storage="default" is the runtime's choice (co-locale segments when the
    job runs with them, as under --colocales); "heap" stays Heap; either way
    gather reads the right values."""
    out = finish(python("""
        import numpy as np, tessera
        rt = tessera.Runtime()
        a = tessera.DistArray(rt, 1001, dtype=np.int64)
        h = tessera.DistArray(rt, 1001, dtype=np.int64, storage="heap")
        for x in (a, h):
            lo, hi = x.local_range
            x.local[:] = np.arange(lo, hi) * 7
        rt.barrier()
        idx = np.random.default_rng(rt.rank).integers(0, 1001, 5000)
        assert np.array_equal(a.gather(idx), idx * 7) and np.array_equal(h.gather(idx), idx * 7)
        if rt.rank == 0:
            print("storage", a.storage, h.storage)
    """, ranks=2, extra_env={"TESSERA_COLOCALE_SEGMENTS": mode}))
    assert f"storage {expected} heap" in out


EXAMPLES = os.path.join(SOURCE, "examples", "python")


def test_quickstart_example_runs():
    out = finish(subprocess.Popen([MPIRUN, "-n", "2", sys.executable, os.path.join(EXAMPLES, "quickstart.py")],
                                  env=clean_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True))
    assert "of 40000 reads" in out


def test_analyst_flow_and_a_peer_attaching_while_it_runs(tmp_path):
    ready, hold = tmp_path / "ready", tmp_path / "hold"
    job = subprocess.Popen([MPIRUN, "-n", "2", sys.executable, os.path.join(EXAMPLES, "analyst_flow.py"),
                            "--scale", "10", "--png", str(tmp_path / "h.png"), "--ready", str(ready),
                            "--hold-until", str(hold)],
                           env=clean_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    wait_for(ready, job)
    paths = ready.read_text().split()
    peer = subprocess.run([sys.executable, os.path.join(EXAMPLES, "attach_peer.py"), *paths], env=clean_env(),
                          capture_output=True, text=True, timeout=60)
    hold.touch()
    out = finish(job)
    assert peer.returncode == 0, peer.stderr
    assert "x uint64 in 2 segment(s)" in peer.stdout and "x float64 in 2 segment(s)" in peer.stdout
    assert "CG iterations" in out and ("histogram saved" in out or "histogram as text" in out)
    assert all(not os.path.exists(p) for p in paths)      # the job removed its shared arrays


def test_attach_to_a_tsg_written_by_the_cli(tmp_path):
    """The issue's acceptance line: tessera.attach("g.tsg/offsets.json") in a plain python3."""
    cli = os.path.join(os.environ.get("TESSERA_BINARY_DIR", os.path.join(SOURCE, "build")), "tessera")
    subprocess.run([cli, "convert", os.path.join(SOURCE, "examples", "grid.el"), "-o", str(tmp_path / "g.tsg"), "-q",
                    "-n", "2"], env=clean_env(), check=True, capture_output=True, timeout=120)
    offsets = tessera.attach(tmp_path / "g.tsg" / "offsets.json")
    dst = tessera.attach(tmp_path / "g.tsg" / "dst.json", dtype=np.uint32)   # 28 vertices: 32-bit ids
    with open(tmp_path / "g.tsg" / "edgelist.json") as f:
        first_vertex = json.load(f)["vertex_offsets"]
    arcs = []
    for rank, (rows, ends) in enumerate(zip(offsets, dst)):
        sources = np.repeat(np.arange(first_vertex[rank], first_vertex[rank] + rows.size - 1),
                            np.diff(rows.astype(np.int64)))
        arcs += zip(sources.tolist(), ends.tolist())
    arcs.sort()
    with open(os.path.join(SOURCE, "examples", "grid.el")) as f:
        expected = sorted(tuple(map(int, line.split()[:2])) for line in f if line.strip() and line[0] not in "#%")
    assert len(offsets) == 2 and arcs == expected
    with pytest.raises(tessera.FormatError):
        tessera.attach(tmp_path / "g.tsg" / "edgelist.json")   # a graph's description, not an array's
