"""Graphs in from SciPy, NetworkX and pandas, and out to SciPy: the edge
arrays each form gives and takes, shared by SPMD scripts
(``tessera.from_edges``) and sessions (``s.from_scipy``, ``s.from_networkx``,
``s.from_pandas``, ``g.to_scipy()``). Nothing here imports the extension,
SciPy, NetworkX or pandas before it is needed.
"""
import numpy as np

from . import _errors


def checked_edges(src, dst, weights=None):
    """``(src, dst, weights)`` as the library takes them: int64 ids (one
    copy only when the input is another dtype or not contiguous), float64
    weights or None.

    Parameters
    ----------
    src, dst : array_like of int
        Each edge's source and destination vertex ids, non-negative.
    weights : array_like of float, optional
        Each edge's weight; None for an unweighted graph.

    Returns
    -------
    tuple of numpy.ndarray
        ``(src, dst, weights)``; ``weights`` is None when none were given.

    Raises
    ------
    tessera.MismatchError
        Arrays of different lengths, or not one-dimensional.
    tessera.RangeError
        A negative id, an id that is not an integer, or a weight that is not finite.

    Examples
    --------
    >>> checked_edges([0, 1], [1, 2])[0].dtype
    dtype('int64')
    """
    arrays = [np.asarray(src), np.asarray(dst)]
    for name, a in zip(("src", "dst"), arrays):
        if a.ndim != 1:
            raise _errors.MismatchError(f"{name} must be one-dimensional, not of shape {a.shape}")
        if a.size and a.dtype.kind not in "iu":
            if a.dtype.kind == "f" and np.all(np.mod(a, 1) == 0):
                continue
            raise _errors.RangeError(f"{name} must hold integer vertex ids, not {a.dtype}")
    if arrays[0].size != arrays[1].size:
        raise _errors.MismatchError(f"{arrays[0].size} sources and {arrays[1].size} destinations: give one of each "
                                    "per edge")
    out = []
    for name, a in zip(("src", "dst"), arrays):
        if a.dtype.kind == "u" and a.size and a.max() > np.iinfo(np.int64).max:
            raise _errors.RangeError(f"{name} holds an id past 2**63 - 1")
        a = np.ascontiguousarray(a, dtype=np.int64)
        if a.size and a.min() < 0:
            raise _errors.RangeError(f"{name} holds a negative vertex id ({a.min()}): ids are 0 or more "
                                     "(relabel=True takes any non-negative ids)")
        out.append(a)
    w = None
    if weights is not None:
        w = np.ascontiguousarray(weights, dtype=np.float64)
        if w.ndim != 1 or w.size != out[0].size:
            raise _errors.MismatchError(f"{w.size} weights for {out[0].size} edges: give one per edge")
        if not np.all(np.isfinite(w)):
            raise _errors.RangeError("a weight is not a finite number (NaN or infinite)")
    return out[0], out[1], w


def edges_of_scipy(matrix):
    """A square SciPy sparse matrix (or array) as edges: entry ``(i, j)``
    with value ``v`` is the arc ``i -> j`` of weight ``v``.

    Returns
    -------
    tuple
        ``(src, dst, weights, vertices)``.

    Raises
    ------
    tessera.MismatchError
        Not a sparse matrix, or not square.
    """
    try:
        import scipy.sparse as sp
    except ImportError:
        raise _errors.ConfigError("from_scipy needs SciPy (pip install scipy)") from None
    if not sp.issparse(matrix):
        raise _errors.MismatchError(f"from_scipy takes a SciPy sparse matrix or array, not {type(matrix).__name__}")
    rows, cols = matrix.shape
    if rows != cols:
        raise _errors.MismatchError(f"a graph's adjacency matrix is square, not {rows} x {cols}")
    coo = matrix.tocoo()
    coo.sum_duplicates()  # canonical: one entry per (i, j), ordered as CSR
    return coo.row.astype(np.int64), coo.col.astype(np.int64), np.asarray(coo.data, dtype=np.float64), rows


def edges_of_networkx(graph, weight="weight"):
    """A NetworkX graph as edges over its nodes' positions: node ``k`` of
    ``list(graph.nodes)`` is vertex ``k`` (so isolated nodes stay).

    Parameters
    ----------
    graph : networkx.Graph or networkx.DiGraph
    weight : str or None, default "weight"
        The edge attribute holding weights; None (or an attribute no edge
        has) for an unweighted graph.

    Returns
    -------
    tuple
        ``(src, dst, weights or None, nodes, directed)``.
    """
    nodes = list(graph.nodes)
    index = {v: k for k, v in enumerate(nodes)}
    edges = list(graph.edges(data=True))
    src = np.fromiter((index[u] for u, _, _ in edges), dtype=np.int64, count=len(edges))
    dst = np.fromiter((index[v] for _, v, _ in edges), dtype=np.int64, count=len(edges))
    weights = None
    if weight is not None and any(weight in d for _, _, d in edges):
        weights = np.fromiter((float(d.get(weight, 1.0)) for _, _, d in edges), dtype=np.float64, count=len(edges))
    return src, dst, weights, nodes, graph.is_directed()


def edges_of_pandas(frame, source, target, weight=None):
    """Two (or three) columns of a pandas DataFrame as edges. Integer ids
    are kept as they are (relabelled: any non-negative numbers); other
    labels (strings, ...) are numbered in order of first appearance.

    Returns
    -------
    tuple
        ``(src, dst, weights or None, labels or None)``: ``labels[k]`` is
        the label of file id ``k`` when the columns were not integers.

    Raises
    ------
    tessera.ConfigError
        A column that is not in the frame.
    """
    for column in (source, target) + ((weight,) if weight is not None else ()):
        if column not in frame.columns:
            raise _errors.ConfigError(f"no column {column!r} in the frame (its columns: {list(frame.columns)})")
    s, t = frame[source].to_numpy(), frame[target].to_numpy()
    labels = None
    if s.dtype.kind not in "iu" or t.dtype.kind not in "iu":
        import pandas as pd
        codes, uniques = pd.factorize(np.concatenate([s.astype(object), t.astype(object)]))
        s, t, labels = codes[:len(s)], codes[len(s):], list(uniques)
    weights = frame[weight].to_numpy(dtype=np.float64) if weight is not None else None
    return s, t, weights, labels


def csr_of(vertices, out_degrees, dst, weights):
    """A ``scipy.sparse.csr_array`` over a graph's arrays: ``dst`` (and
    ``weights``) used as they are when their dtype allows (a view stays a
    view), the row pointer made from the out-degrees (one array of
    ``vertices + 1`` numbers), ones for an unweighted graph.

    Returns
    -------
    scipy.sparse.csr_array
    """
    import scipy.sparse as sp
    arcs = int(dst.size)
    small = arcs < 2 ** 31 and vertices < 2 ** 31
    index = np.int32 if small else np.int64
    indptr = np.zeros(vertices + 1, dtype=index)
    np.cumsum(out_degrees, out=indptr[1:], dtype=index)
    # uint32 ids below 2**31 are int32 ids bit for bit: a view, not a copy.
    if dst.dtype.itemsize == np.dtype(index).itemsize and dst.dtype.kind == "u":
        indices = dst.view(index)
    else:
        indices = dst.astype(index)
    data = weights if weights is not None else np.ones(arcs, dtype=np.float64)
    return sp.csr_array((data, indices, indptr), shape=(vertices, vertices), copy=False)


def from_edges(src, dst, weights=None, *, undirected=False, symmetric=False, relabel=False, vertices=None,
               storage="default", name=None, dir=None):
    """Collective: a graph of edges held in memory, each rank giving its
    share (any split; a rank may give none).

    Parameters
    ----------
    src, dst : array_like of int
        This rank's edges: source and destination ids, non-negative.
    weights : array_like of float, optional
        One per edge; None (on every rank) for an unweighted graph.
    undirected : bool, default False
        Add the reverse of every edge (duplicates dropped, the smallest
        weight kept), as ``read_graph(undirected=True)``.
    symmetric : bool, default False
        The edges are listed in both directions already: taken as they are
        (verified; duplicates dropped).
    relabel : bool, default False
        Ids are any non-negative numbers: the graph's vertices are the ids
        that occur, numbered in their order; ``file_ids`` gives each one's id.
    vertices : int, optional
        Without relabel: the graph's vertex count (default the largest id
        + 1), so trailing vertices without edges are kept.
    storage, name, dir
        Where the graph's arrays live, as ``read_graph``.

    Returns
    -------
    tessera.Graph

    Raises
    ------
    tessera.MismatchError
        Arrays of different lengths (on any rank).
    tessera.RangeError
        A negative id, an id past ``vertices``, or a weight that is not finite.

    Examples
    --------
    >>> g = tessera.from_edges([0, 1, 2], [1, 2, 0], undirected=True)
    >>> g.edges
    3
    """
    from . import _tessera
    from .graphs import Graph
    from .runtime import agreed
    s, d, w = agreed(lambda: checked_edges(src, dst, weights))
    return Graph(_tessera._from_edges(s, d, w, bool(undirected), bool(symmetric), bool(relabel),
                                      -1 if vertices is None else int(vertices), storage, name or "", dir or ""))
