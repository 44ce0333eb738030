"""Serial references the Python tests share: scipy computes them from the
graph text the test wrote, independently of Tessera."""
import numpy as np
import scipy.sparse as sp
import scipy.sparse.csgraph as csgraph
import scipy.sparse.linalg as spla


def reference_hitting(a, targets):
    """Expected steps of a random walk on the symmetric adjacency `a` to reach
    any of `targets` (indices): a sparse direct solve of the grounded
    Laplacian; NaN where no target is reachable."""
    n = a.shape[0]
    _, labels = csgraph.connected_components(a, directed=False)
    free = np.isin(labels, labels[targets])
    free[targets] = False
    idx = np.flatnonzero(free)
    deg = np.asarray(a.sum(axis=1)).ravel()
    lap = sp.diags(deg) - a
    h = np.full(n, np.nan)
    h[targets] = 0.0
    if len(idx):
        # The grounded Laplacian is symmetric: a minimum-degree ordering of
        # A^T + A keeps SuperLU's fill (and time) several times below COLAMD's.
        h[idx] = spla.spsolve(lap[idx][:, idx].tocsc(), deg[idx], permc_spec="MMD_AT_PLUS_A")
    return h


def read_vertex_values(path, value=float):
    """'vertex value' lines (comments '#') as a dict; 'unreachable' -> NaN."""
    out = {}
    with open(path) as f:
        for line in f:
            if line.startswith("#"):
                continue
            v, t = line.split()
            out[int(v)] = float("nan") if t == "unreachable" else value(t)
    return out
