"""PageRank, BFS and the spectral analyses from Python at 1-4 ranks, against
independent references: PageRank against a sparse direct solve of GAPBS's
equations (scipy), BFS depths against scipy.sparse.csgraph's shortest paths
and parents against the rule recomputed from them, the Fiedler vector and
eigenvector centrality against numpy's dense eigh; results are views of the
library's arrays, and bad input is named."""
import numpy as np
import pytest

import tessera
from conftest import everyone

scipy_sparse = pytest.importorskip("scipy.sparse")
csgraph = pytest.importorskip("scipy.sparse.csgraph")
linalg = pytest.importorskip("scipy.sparse.linalg")
pytestmark = pytest.mark.scipy


def whole(rt, g):
    """Every arc of g as a scipy CSR matrix, duplicates counted."""
    src, dst = everyone(rt, g.src), everyone(rt, g.dst)
    return scipy_sparse.csr_matrix((np.ones(src.size), (src, dst)), shape=(g.vertices, g.vertices))


def mine(g, values):
    lo, hi = g.local_vertex_range
    return values[lo:hi]


@pytest.fixture(scope="module")
def kron(rt):
    """A small Kronecker graph (a few components, isolated vertices) and its adjacency."""
    g = tessera.kron(scale=7, edge_factor=4)
    return g, whole(rt, g)


def reference_pagerank(a, damping, personalization=None):
    """x = (1 - d) p + d A^T D^-1 x, a dangling vertex passing its score to nobody."""
    n = a.shape[0]
    out = np.asarray(a.sum(axis=1)).ravel()
    inv = np.divide(1.0, out, out=np.zeros(n), where=out > 0)
    p = np.full(n, 1.0 / n)
    if personalization is not None:
        p = np.zeros(n)
        p[list(set(personalization))] = 1.0 / len(set(personalization))
    system = scipy_sparse.identity(n, format="csc") - damping * (a.T @ scipy_sparse.diags(inv)).tocsc()
    return linalg.spsolve(system, (1 - damping) * p)


@pytest.mark.parametrize("method", ["jacobi", "gauss-seidel"])
def test_pagerank_equals_the_direct_solve(rt, kron, method):
    g, a = kron
    pr = tessera.pagerank(g, method=method, tolerance=1e-13, max_iterations=1000)
    assert pr.converged and pr.method == method and pr.change < 1e-13
    got = pr.scores.local
    assert not got.flags.owndata  # a view of the library's array
    assert got.size == g.local_vertex_range[1] - g.local_vertex_range[0]
    want = mine(g, reference_pagerank(a, 0.85))
    assert np.allclose(got, want, rtol=1e-9, atol=1e-12), f"max difference {np.max(np.abs(got - want))}"


def test_personalized_pagerank_and_its_defaults(rt, kron):
    g, a = kron
    pr = tessera.pagerank(g, damping=0.7, personalization=[3, 5, 5], method="jacobi", tolerance=1e-13,
                          max_iterations=1000)
    assert np.allclose(pr.scores.local, mine(g, reference_pagerank(a, 0.7, [3, 5])), rtol=1e-9, atol=1e-12)
    default = tessera.pagerank(g)  # GAPBS's: 1e-4 or 20 iterations
    assert default.iterations <= 20 and (default.converged == (default.change < 1e-4))
    with pytest.raises(tessera.RangeError, match="personalization vertex 4096 is outside the vertex ids of the graph, 0..127"):
        tessera.pagerank(g, personalization=[4096])
    with pytest.raises(tessera.ConfigError, match="gauss-seidel"):
        tessera.pagerank(g, method="newton")


@pytest.mark.parametrize("direction", ["optimizing", "top-down", "bottom-up"])
def test_bfs_equals_scipy(rt, kron, direction):
    g, a = kron
    source = int(np.argmax(np.asarray(a.sum(axis=1)).ravel()))
    b = tessera.bfs(g, source, direction=direction)
    dist = csgraph.shortest_path(a, unweighted=True, indices=source)
    depth = np.where(np.isinf(dist), -1, dist).astype(np.int64)
    parent = np.full(g.vertices, -1, dtype=np.int64)
    parent[source] = source
    at = a.tocsc()  # in-neighbours: column v
    for v in np.nonzero(depth > 0)[0]:
        ins = at.indices[at.indptr[v]:at.indptr[v + 1]]
        parent[v] = ins[depth[ins] == depth[v] - 1].min()
    assert not b.parents.local.flags.owndata and b.depths.local.dtype == np.int64
    assert np.array_equal(b.depths.local, mine(g, depth))
    assert np.array_equal(b.parents.local, mine(g, parent))
    assert b.reached == int((depth >= 0).sum()) and b.levels == depth.max() and b.source == source
    hop = tessera.bfs(g, source, hops=1)
    assert np.array_equal(hop.depths.local, mine(g, np.where(depth <= 1, depth, -1)))
    with pytest.warns(FutureWarning, match="now hops="):  # the old name, for one release
        old = tessera.bfs(g, source, max_depth=1)
    assert np.array_equal(old.depths.local, hop.depths.local)


def test_bfs_bad_source(rt, kron):
    g, _ = kron
    with pytest.raises(tessera.RangeError, match="source vertex 999 is outside the vertex ids of the graph"):
        tessera.bfs(g, 999)


needs_trilinos = pytest.mark.skipif(not tessera.trilinos_available(), reason="built without Trilinos (Anasazi)")


@needs_trilinos
@pytest.mark.parametrize("what", ["fiedler", "centrality"])
def test_spectral_equals_eigh(rt, kron, what):
    g, _ = kron
    lcc = tessera.largest_component(g)
    a = whole(rt, lcc).toarray()
    m = np.diag(a.sum(axis=1)) - a if what == "fiedler" else a
    values, vectors = np.linalg.eigh(m)
    k = 1 if what == "fiedler" else len(values) - 1
    space = vectors[:, np.abs(values - values[k]) <= 1e-9 * max(1.0, abs(values[k]))]
    s = tessera.spectral(lcc, what) if what == "fiedler" else tessera.centrality(lcc)
    assert s.converged and s.what == what and s.iterations > 0 and s.matrix == "edgelist"
    assert abs(s.lambda_ - values[k]) <= 1e-8 * abs(values[k])
    x = everyone(rt, s.vector.local)
    assert not s.vector.local.flags.owndata
    assert abs(np.linalg.norm(x) - 1) <= 1e-9
    assert np.linalg.norm(x - space @ (space.T @ x)) <= 1e-6
    if space.shape[1] == 1:
        assert min(np.linalg.norm(x - space[:, 0]), np.linalg.norm(x + space[:, 0])) <= 1e-6
    assert s.residual <= 1e-8 and abs(s.residual - np.linalg.norm(m @ x - s.lambda_ * x) / abs(s.lambda_)) <= 1e-8
    if what == "centrality":
        assert x.min() >= -1e-9


@needs_trilinos
def test_spectral_bad_input(rt, kron):
    g, _ = kron
    with pytest.raises(tessera.ConfigError, match="connected components"):
        tessera.fiedler(g)  # the whole graph: several components
    with pytest.raises(tessera.ConfigError, match="must be fiedler or centrality, not 'pagerank'"):
        tessera.spectral(g, "pagerank")


def test_results_to_pandas_hold_this_ranks_vertices(rt, kron, monkeypatch):
    """to_pandas() at any rank count: this rank's vertices, labelled by the
    graph's file ids, the values of .local (pandas stubbed: only the columns
    it is given matter); every rank shows its result as HTML."""
    import sys
    import types
    pandas = types.ModuleType("pandas")
    pandas.DataFrame = lambda columns, **options: dict(columns)
    monkeypatch.setitem(sys.modules, "pandas", pandas)
    g, _ = kron
    lo, hi = g.local_vertex_range
    for result, arrays in ((tessera.pagerank(g), ("scores",)), (tessera.bfs(g, 0), ("parents", "depths")),
                           (tessera.components(g), ("labels",)), (tessera.hitting_times(g), ("times",))):
        df = result.to_pandas()
        assert list(df) == ["file_id", *arrays]
        assert np.array_equal(df["file_id"], g.file_ids if arrays != ("times",) else result.file_ids)
        for name in arrays:
            assert len(df[name]) == (hi - lo if arrays != ("times",) else result.times.local.size)
            assert np.array_equal(df[name], getattr(result, name).local, equal_nan=True)
        assert result._repr_html_().startswith("<table")
