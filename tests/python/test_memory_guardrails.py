"""Memory guardrails (issue 58; docs/memory.md): a command is estimated and
checked against the node before it allocates anything.

- A 2-rank session asked for more than the node has (kron scale 31) refuses
  at once with a RangeError naming the node, the bytes needed and
  available and the ways out; the session still serves (ping) and its
  residents are as they were (the same objects, a graph made before gives
  the same components, the Shared directory holds the same files).
- A command's own memory_limit=, tessera.start(memory_limit=), "none", a
  bad limit refused before anything runs; the parameter declared once
  (operations.py) and found on the client's methods.
- `tessera -n 2 pipeline --scale 31` refused within a second, exit status
  non-zero, with the message; a run that fits carries its estimate in
  --json.
"""
import json
import os
import re
import shutil
import subprocess
import tempfile
import time

import numpy as np
import pytest

import tessera
from tessera.session import client as session_client
from tessera.session import launch, operations, server

UNITS = r"[0-9]+(\.[0-9])? (B|KiB|MiB|GiB|TiB|PiB)"
GUARDED = ("read_graph", "generate", "from_edges", "components", "largest_component", "hitting_times", "pagerank",
           "bfs", "spectral")


def shared_files(directory):
    return sorted(f for f in os.listdir(directory) if f.startswith("tessera-"))


def check_refusal(message, shared=True):
    """The message names what is needed and what the node has, and the ways out."""
    assert re.search(r"needs " + UNITS, message), message
    assert re.search(r"on node \S+", message), message
    if shared:
        assert re.search(UNITS + r" of Shared storage on node \S+ \(" + UNITS + r" free in /", message), message
        assert "TESSERA_SHM_DIR" in message, message
    assert re.search(UNITS + r" of memory", message) and re.search(UNITS + " available", message), message
    assert "use more nodes" in message, message


@pytest.fixture(scope="module")
def session():
    # A directory of its own in the Shared directory (memory: the refusal
    # then names both the Shared space and the memory), its files watched.
    shm = tempfile.mkdtemp(prefix="tessera-guardrails-", dir=os.environ.get("TESSERA_SHM_DIR", "/dev/shm"))
    try:
        with tessera.start(ranks=2, env={"TESSERA_SHM_DIR": shm}) as s:
            yield s, shm
    finally:
        shutil.rmtree(shm, ignore_errors=True)


def test_the_session_refuses_what_the_node_cannot_hold(session):
    s, shm = session
    g = s.kron(scale=12)
    c = s.components(g)
    labels = np.array(c.labels)
    objects = [o["id"] for o in s.list()]
    files = shared_files(shm)
    t0 = time.monotonic()
    with pytest.raises(tessera.RangeError) as refused:
        s.kron(scale=31)
    seconds = time.monotonic() - t0
    message = str(refused.value)
    print(f"refused in {seconds:.2f} s: {message}")
    assert seconds < 5, seconds  # at once: an estimate, not an allocation that fails later
    assert "kron scale 31" in message
    check_refusal(message)
    # The session serves on, its residents as they were.
    s.ping()
    assert [o["id"] for o in s.list()] == objects
    assert shared_files(shm) == files
    again = s.components(g)
    assert again.count == c.count and again.largest_size == c.largest_size
    assert np.array_equal(np.array(again.labels), labels)
    assert np.array_equal(np.array(c.labels), labels)
    # An analysis on a resident graph is checked too (its graph's sizes).
    with pytest.raises(tessera.RangeError, match=r"needs " + UNITS + r" of memory on node"):
        s.hitting_times(g, memory_limit=1 << 20)
    s.ping()


def test_a_commands_own_limit(session):
    s, shm = session
    with pytest.raises(tessera.RangeError) as refused:
        s.kron(scale=16, memory_limit=1 << 20)
    message = str(refused.value)
    assert "memory limit 1.0 MiB" in message and "raise the memory limit" in message, message
    assert re.search(r"the session's ranks hold " + UNITS, message), message
    assert s.kron(scale=10, memory_limit="none").vertices == 1024
    assert s.kron(scale=10, memory_limit=0.95).vertices == 1024
    with pytest.raises(tessera.ConfigError, match="memory_limit"):
        s.kron(scale=10, memory_limit="lots")
    edges = np.arange(1000, dtype=np.int64)
    with pytest.raises(tessera.RangeError, match="from_edges needs"):
        s.from_edges(edges, (edges + 1) % 1000, undirected=True, memory_limit=1 << 10)
    assert s.from_edges(edges, (edges + 1) % 1000, undirected=True).edges == 1000


def test_start_sets_the_sessions_limit(tmp_path):
    with pytest.raises(tessera.ConfigError, match="memory_limit"):
        tessera.start(ranks=1, memory_limit="plenty")
    with tessera.start(ranks=1, memory_limit="1M") as s:
        with pytest.raises(tessera.RangeError, match=r"memory limit 1.0 MiB"):
            s.kron(scale=12)
        assert s.kron(scale=12, memory_limit="90%").vertices == 4096


def test_memory_limit_is_declared_once():
    for name in GUARDED:
        op = operations.OPERATIONS[name]
        assert "memory_limit" in op.by_name and op.by_name["memory_limit"].dispatched, name
        assert "memory_limit" in operations.docstring(op), name
    for method in ("read_graph", "generate", "components", "largest_component", "hitting_times", "pagerank", "bfs",
                   "spectral", "kron", "urand", "grid", "from_edges"):
        assert "memory_limit" in str(inspect_signature(getattr(session_client.Session, method))), method
    operations.check_handlers(server.Session)  # handlers never see it: the dispatch takes it
    assert "memory_limit" in str(inspect_signature(tessera.start))


def inspect_signature(f):
    import inspect
    return inspect.signature(f)


def test_the_cli_refuses_at_once(tmp_path):
    program = launch.program()
    env = dict(os.environ, TESSERA_SHM_DIR=str(tmp_path))
    best, p = None, None
    for _ in range(2):  # the best of two: one slow start of mpirun on a loaded machine is not the guardrail
        t0 = time.monotonic()
        p = subprocess.run([program, "-n", "2", "pipeline", "--scale", "31"], capture_output=True, text=True,
                           timeout=60, env=env)
        seconds = time.monotonic() - t0
        best = seconds if best is None else min(best, seconds)
        assert p.returncode != 0, p.stderr
        if best < 1.0:
            break
    print(f"refused in {best:.2f} s: {p.stderr.strip()}")
    assert best < 1.0, (best, p.stderr)
    assert "kron scale 31" in p.stderr
    check_refusal(p.stderr)
    assert shared_files(str(tmp_path)) == []
    # The limit of one command, and none.
    p = subprocess.run([program, "pipeline", "--scale", "14", "--memory-limit", "1M"], capture_output=True,
                       text=True, timeout=60, env=env)
    assert p.returncode != 0 and "memory limit 1.0 MiB" in p.stderr, p.stderr
    p = subprocess.run([program, "pipeline", "--scale", "31", "--memory-limit", "none"], capture_output=True,
                       text=True, timeout=60, env=env)
    assert p.returncode != 0 and "of Shared storage" in p.stderr, p.stderr
    p = subprocess.run([program, "pipeline", "--scale", "14", "--memory-limit", "lots"], capture_output=True,
                       text=True, timeout=60, env=env)
    assert p.returncode != 0 and "memory limit 'lots'" in p.stderr, p.stderr
    # A command that fits runs, its estimate in the document.
    p = subprocess.run([program, "cc", "--json", "-q", gen(program, tmp_path, env)], capture_output=True, text=True,
                       timeout=120, env=env)
    assert p.returncode == 0, p.stderr
    estimate = json.loads(p.stdout)["memory_estimate"]
    assert estimate["bytes"] > 0 and estimate["node"]["usable"] > estimate["bytes"], estimate


def gen(program, tmp_path, env):
    out = str(tmp_path / "k.el")
    subprocess.run([program, "gen", "kron", "--scale", "12", "-o", out, "-q"], check=True, timeout=120, env=env)
    return out


def test_a_restore_that_does_not_fit_is_refused_before_reading(tmp_path):
    save = tmp_path / "save"
    with tessera.start(ranks=2) as s:
        g = s.kron(scale=12)
        s.persist(g, "web")
        s.persist(s.components(g), "labels")
        s.save_all(str(save))
    with tessera.start(ranks=2) as s:
        with pytest.raises(tessera.RangeError, match="restore") as e:
            s.restore(str(save), memory_limit="64K")
        assert "64.0 KiB" in str(e.value) or "memory limit" in str(e.value), str(e.value)
        assert s.list() == [], "nothing of the save was loaded"
        checked = s.restore(str(save))
        assert checked["names"] == ["labels", "web"]
        assert s.get("web").vertices == 4096 and s.components(s.get("web")).count == s.get("labels").count
