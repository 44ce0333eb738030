"""Graphs at 1-4 ranks: components and the largest component against
scipy.sparse.csgraph, hitting times against spsolve on the grounded
Laplacian, views, id maps, and bad input."""
import contextlib
import os

import numpy as np
import pytest

import tessera
from conftest import everyone

scipy_sparse = pytest.importorskip("scipy.sparse")
csgraph = pytest.importorskip("scipy.sparse.csgraph")
linalg = pytest.importorskip("scipy.sparse.linalg")
pytestmark = pytest.mark.scipy


@contextlib.contextmanager
def graph_file(rt, suffix, text):
    """A file rank 0 writes and every rank reads; removed after every rank is done with it."""
    path = f"/tmp/tessera-pytest-{rt.job_id}-{suffix}"
    if rt.rank == 0:
        with open(path, "w") as f:
            f.write(text)
    rt.barrier()
    try:
        yield path
    finally:
        rt.barrier()
        if rt.rank == 0:
            os.remove(path)


def whole(rt, g):
    """Every arc of g as a scipy CSR matrix (duplicates not summed: generated graphs have none)."""
    src, dst = everyone(rt, g.src), everyone(rt, g.dst)
    w = everyone(rt, g.weight) if g.weighted else np.ones(src.size)
    return scipy_sparse.csr_matrix((w, (src, dst)), shape=(g.vertices, g.vertices))


def reference_labels(matrix):
    count, lab = csgraph.connected_components(matrix, directed=True, connection="weak")
    smallest = np.full(count, matrix.shape[0])
    np.minimum.at(smallest, lab, np.arange(matrix.shape[0]))
    return smallest[lab]


@pytest.fixture(scope="module")
def holey_grid(rt):
    return tessera.grid((24, 24), delete_fraction=0.35, seed=3)


def test_generated_graph_views(rt, holey_grid):
    g = holey_grid
    assert g.vertices == 576 and not g.directed and not g.weighted and g.weight is None
    lo, hi = g.local_vertex_range
    assert g.src.size == g.dst.size and not g.src.flags.writeable
    assert np.all((g.src >= lo) & (g.src < hi))                  # an edge lives with its source
    assert g.row_offsets.size == hi - lo + 1 and g.row_offsets[-1] == g.src.size
    assert np.array_equal(g.file_ids, np.arange(lo, hi))         # generated: file id = vertex id
    total = rt.allreduce(int(g.src.size))
    assert total == g.arcs and g.edges == (g.arcs + g.self_loops) // 2


@pytest.mark.parametrize("algorithm", ["afforest", "fastsv", "lp"])
def test_components_match_scipy(rt, holey_grid, algorithm):
    c = tessera.components(holey_grid, algorithm)
    expected = reference_labels(whole(rt, holey_grid))
    got = c.labels.gather(np.arange(holey_grid.vertices))
    assert np.array_equal(got, expected)
    assert c.count == np.unique(expected).size
    lo, hi = holey_grid.local_vertex_range
    assert np.array_equal(c.labels.local, expected[lo:hi])       # the local view is the labels


def test_largest_component_matches_scipy(rt, holey_grid):
    matrix = whole(rt, holey_grid)
    expected = reference_labels(matrix)
    labels, sizes = np.unique(expected, return_counts=True)
    biggest = labels[np.argmax(sizes)]                            # ties: the smallest label
    members = np.flatnonzero(expected == biggest)
    lcc = tessera.largest_component(holey_grid)
    assert lcc.vertices == members.size and lcc.summary["largest_size"] == members.size
    assert np.array_equal(lcc.original_ids.gather(np.arange(lcc.vertices)), members)
    assert np.array_equal(everyone(rt, lcc.file_ids), members)
    sub = matrix[members][:, members]
    assert lcc.arcs == sub.nnz and lcc.edges == (sub.nnz + sub.diagonal().astype(bool).sum()) // 2
    assert csgraph.connected_components(sub)[0] == 1


def grounded_solution(matrix, targets):
    """Hitting times by spsolve: h = 0 on the targets, L_UU h_U = d_U."""
    n = matrix.shape[0]
    degree = np.asarray(matrix.sum(axis=1)).ravel()
    laplacian = scipy_sparse.diags(degree) - matrix
    free = np.setdiff1d(np.arange(n), targets)
    h = np.zeros(n)
    h[free] = linalg.spsolve(laplacian[free][:, free].tocsc(), degree[free])
    return h


def test_hitting_times_match_spsolve(rt):
    # a Kronecker graph: low diameter, few CG iterations (each is a reduction,
    # slow on oversubscribed ranks)
    g = tessera.kron(scale=9, edge_factor=8, seed=4)
    lcc = tessera.largest_component(g)
    assert lcc.vertices < g.vertices
    target_file_id = int(lcc.original_ids.gather([0])[0])
    h = tessera.hitting_times(lcc, target_file_id, tolerance=1e-11)
    assert h.converged and h.unreachable == 0
    expected = grounded_solution(whole(rt, lcc), [0])
    got = h.times.gather(np.arange(lcc.vertices))
    assert np.allclose(got, expected, rtol=1e-7)
    assert h.max == pytest.approx(expected.max(), rel=1e-7)
    lo, hi = h.times.local_range
    assert np.array_equal(h.file_ids, lcc.original_ids.local)    # times.local's vertices, in file ids


def test_read_directed_file_ids_and_hitting(rt, source_dir):
    g = tessera.read_graph(os.path.join(source_dir, "examples", "grid.el"))
    assert g.directed and g.vertices == 28 and g.edges == 43
    c = tessera.components(g)
    assert c.count == 2 and c.largest_size == 25
    lcc = tessera.largest_component(g, c)
    h = tessera.hitting_times(lcc, 0)                            # as the README's pipeline
    assert h.converged and h.mean == pytest.approx(68.913939, abs=1e-5)
    assert h.max == pytest.approx(85.454545, abs=1e-5) and h.farthest == 24
    if tessera.trilinos_available():                             # small: Tpetra's waits spin when oversubscribed
        for _ in range(2):                                       # one Kokkos/Tpetra session for both
            b = tessera.hitting_times(lcc, 0, solver="belos", tolerance=1e-10)
            assert b.converged and b.solver == "belos"
            assert np.allclose(b.times.local, h.times.local, rtol=1e-6, atol=1e-6)


def test_relabelled_ids_are_a_numpy_array(rt):
    with graph_file(rt, "sparse.el", "100 200\n200 300\n300 100\n5000 6000\n") as path:
        g = tessera.read_graph(path, relabel=True)
        assert g.vertices == 5
        assert everyone(rt, g.file_ids).tolist() == [100, 200, 300, 5000, 6000]
        lcc = tessera.largest_component(g)
        assert everyone(rt, lcc.file_ids).tolist() == [100, 200, 300]
        h = tessera.hitting_times(lcc, 200)
        assert sorted(everyone(rt, h.times.local).tolist()) == pytest.approx([0.0, 2.0, 2.0])
        with pytest.raises(tessera.RangeError, match="target vertex 5000 does not occur"):
            tessera.hitting_times(lcc, 5000)


def test_bad_graph_file_raises_everywhere(rt):
    with graph_file(rt, "bad.el", "0 1\n1 2\n2 x\n") as path:
        with pytest.raises(tessera.FormatError, match=r"bad\.el:3"):
            tessera.read_graph(path)


def test_missing_graph_file_raises_everywhere(rt):
    # rank 0 reads the file: tessera.SystemError there, tessera.Error with
    # the same text ("on rank 0: ...") on the others
    with pytest.raises(tessera.Error, match="cannot open graph file .*missing.el"):
        tessera.read_graph(f"/tmp/tessera-pytest-{rt.job_id}-missing.el")


def test_bad_generator_and_solver_options(rt):
    with pytest.raises(tessera.ConfigError, match="unknown graph kind 'ring'"):
        tessera.generate("ring")
    small = tessera.grid((3, 3))
    with pytest.raises(tessera.ConfigError, match="solver must be"):
        tessera.hitting_times(small, 0, solver="magic")
    with pytest.raises(tessera.RangeError, match="target vertex 9 is outside the vertex ids of the graph, 0..8"):
        tessera.hitting_times(small, 9)


def test_weighted_hitting_times_match_spsolve(rt):
    n = 40
    rng = np.random.default_rng(9)
    pairs = {(i, (i + 1) % n) for i in range(n)} | {tuple(sorted(p)) for p in rng.integers(0, n, (30, 2)) if p[0] != p[1]}
    pairs = sorted({tuple(sorted(p)) for p in pairs})
    weights = rng.uniform(0.5, 3.0, len(pairs)).round(3)
    with graph_file(rt, "weighted.wel", "".join(f"{u} {v} {w}\n" for (u, v), w in zip(pairs, weights))) as path:
        g = tessera.read_graph(path, undirected=True)
        assert g.weighted and not g.directed and g.arcs == 2 * len(pairs) and g.edges == len(pairs)
        assert np.all(g.weight > 0) and not g.weight.flags.writeable
        h = tessera.hitting_times(g, [3, 17], tolerance=1e-12)
        u, v = np.array(pairs).T
        matrix = scipy_sparse.csr_matrix((np.concatenate([weights, weights]), (np.concatenate([u, v]),
                                          np.concatenate([v, u]))), shape=(n, n))
        expected = grounded_solution(matrix, [3, 17])
        assert np.allclose(h.times.gather(np.arange(n)), expected, rtol=1e-8)


def test_negative_weight_refused_by_hitting_times_everywhere(rt):
    with graph_file(rt, "negative.wel", "0 1 1.0\n1 2 -0.5\n2 3 2.0\n3 0 1.0\n") as path:
        g = tessera.read_graph(path, undirected=True)
        with pytest.raises(tessera.RangeError, match="weight -0.5"):
            tessera.hitting_times(g, 0)
