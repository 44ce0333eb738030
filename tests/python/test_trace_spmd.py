"""Recording from Python SPMD code at 1-4 ranks: `with tessera.trace(FILE):`
around real work writes one file (rank 0) that tessera.tracefile reads back:
every rank, the kernel's rounds, a phase named from Python, the waits; the
communication counts agree with what a gather of known indices sends; a
second recording while one runs is refused on every rank."""
import json
import os

import numpy as np
import pytest

import tessera
from tessera import _tessera, tracefile


def test_a_recording_holds_every_rank_and_the_kernels_rounds(rt):
    path = f"/tmp/tessera-pytest-{rt.job_id}-trace.json"
    g = tessera.grid((40, 40))
    try:
        with tessera.trace(path):
            with _tessera._TracePhase("python: components"):
                c = tessera.components(g)
            with pytest.raises(tessera.ConfigError, match="already being recorded"):
                with tessera.trace(path + ".second"):
                    pass
        assert c.count == 1
        rt.barrier()
        if rt.rank == 0:
            t = tracefile.load(path)
            s = tracefile.summary(t)
            assert len(s["ranks"]) == rt.size
            names = {sl.name for sl in t.slices}
            assert "python: components" in names
            assert "Afforest round" in names or rt.size == 1
            if rt.size > 1:
                assert any(sl.category == "wait" for sl in t.slices)
            assert t.ranks == rt.size
    finally:
        rt.barrier()
        if rt.rank == 0 and os.path.exists(path):
            os.remove(path)


def test_comm_stats_count_what_a_gather_asks_for(rt):
    n = 1000 * rt.size
    a = tessera.arange(rt, n)
    rng = np.random.default_rng(11 + rt.rank)
    idx = rng.integers(0, n, 3000)
    owners = idx // (n // rt.size)
    _tessera._comm_stats_clear()
    got = a.gather(idx)
    assert np.array_equal(got, idx)
    mine = json.loads(_tessera._comm_stats_local())
    assert mine["rank"] == rt.rank
    # Each index another rank owns is one request record out and one reply
    # record back, unless it was read directly in a co-locale's memory.
    travelled = int(np.count_nonzero(owners != rt.rank)) - mine["direct"]["reads"]
    sent = sum(c["records"] for c in mine["to"])
    assert rt.allreduce(sent) == 2 * rt.allreduce(travelled)
    received = sum(c["records"] for c in mine["from"])
    assert rt.allreduce(received) == rt.allreduce(sent)
    assert mine["to"][rt.rank]["records"] == 0  # its own indices never leave it
    everyone = _tessera._comm_stats()
    if rt.rank == 0:
        assert [s["rank"] for s in json.loads(everyone)] == list(range(rt.size))
    else:
        assert everyone == ""
