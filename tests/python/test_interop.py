"""tessera.from_edges in SPMD scripts (issue 60), at every rank count: each
rank gives any share of the edges (here: rank r every size-th edge from r,
and rank 0 all weights or none), and the graph is the one SciPy builds from
all of them; bad input is refused on every rank alike."""
import numpy as np
import pytest
import scipy.sparse as sp
import scipy.sparse.csgraph as csgraph

import tessera

rt = tessera.Runtime()


def share(a):
    return a[rt.rank::rt.size]


def test_a_graph_of_every_rank_s_edges_is_scipy_s():
    rng = np.random.default_rng(11)
    n = 500
    src, dst = rng.integers(0, n, 1200), rng.integers(0, n, 1200)
    g = tessera.from_edges(share(src), share(dst), undirected=True, vertices=n + 3)
    A = sp.coo_array((np.ones(src.size), (src, dst)), shape=(n + 3, n + 3)).tocsr()
    A = ((A + A.T) != 0).astype(np.int8)
    assert g.vertices == n + 3 and g.arcs == A.nnz and not g.directed
    count, labels = csgraph.connected_components(A, directed=False)
    assert tessera.components(g).count == count


def test_relabel_keeps_any_ids_as_file_ids():
    ids = np.array([10 ** 12, 5, 77, 10 ** 12 + 1])
    src, dst = ids[[0, 1, 2]], ids[[1, 2, 3]]
    g = tessera.from_edges(share(src), share(dst), relabel=True)
    assert g.vertices == 4 and g.edges == 3
    every = tessera.from_local(rt, np.asarray(g.file_ids, dtype=np.int64))
    got = every.gather(np.arange(every.size))  # every rank asks for all
    assert list(got) == sorted(ids), "the vertices are the ids that occur, in their order"


def test_weights_and_directions_are_kept():
    src, dst, w = np.array([0, 1, 2, 2]), np.array([1, 2, 0, 0]), np.array([0.5, 1.5, 2.5, 0.25])
    g = tessera.from_edges(share(src), share(dst), share(w), vertices=3)
    assert g.directed and g.weighted and g.arcs == 4
    lo, hi = g.local_vertex_range
    mine = [(s, d, x) for s, d, x in zip(g.src, g.dst, g.weight)]
    want = sorted((s, d, x) for s, d, x in zip(src, dst, w) if lo <= s < hi)
    assert sorted(mine) == want


def test_bad_edges_are_refused_on_every_rank():
    bad = [1, 2] if rt.rank == 0 else [1]
    with pytest.raises(tessera.MismatchError):
        tessera.from_edges(bad, [1] if rt.rank == 0 else [2])
    with pytest.raises(tessera.RangeError, match="negative"):
        tessera.from_edges([-1] if rt.rank == rt.size - 1 else [], [0] if rt.rank == rt.size - 1 else [])
    with pytest.raises(tessera.RangeError, match="out of range"):
        tessera.from_edges([0], [7], vertices=5)
