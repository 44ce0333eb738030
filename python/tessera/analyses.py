"""Graph analyses: PageRank, breadth-first search and the spectral analyses
(the Fiedler vector of the Laplacian, eigenvector centrality), run by the
library's kernels on the graph's own arrays, as ``tessera pagerank``, ``tessera
bfs`` and ``tessera spectral`` run them. Each result holds DistArrays on the
graph's vertex ranges: ``.local`` is this rank's part as a NumPy view of the
library's memory, no copy."""
import json
import warnings
import weakref

from . import _display, _tessera
from ._errors import ConfigError
from .arrays import DistArray
from .runtime import current


class _Result:
    """The fields of the result's object in the command's document (``tessera
    pagerank | bfs | spectral --json``) as attributes; ``document`` is the
    whole document (graph stats, step times, memory)."""

    _arrays = ()  # the per-vertex DistArrays, by attribute name

    def __init__(self, info, document, graph=None):
        for k, v in info.items():
            setattr(self, k, v)
        self.document = document
        # Private (the session's server sends a result's public attributes
        # as its fields); weak, so that a result never keeps a graph alive.
        self._fields = tuple(info)
        self._graph = None if graph is None else weakref.ref(graph)

    def _rows(self):
        return [(k, getattr(self, k)) for k in self._fields if k not in self._arrays] + \
            [(k, getattr(self, k)) for k in self._arrays]

    def _repr_html_(self):
        return _display.html_table(f"tessera.{type(self).__name__}", self._rows())

    def __dir__(self):
        return sorted(set(object.__dir__(self)) | set(self._fields) | set(self._arrays))

    def to_pandas(self):
        """This rank's vertices as a ``pandas.DataFrame`` (pandas is imported
        here; the NumPy views stay as they are).

        Columns: ``file_id`` (the graph file's id of each of this rank's
        vertices, ``graph.file_ids``), then the result's per-vertex arrays
        under their attribute names: ``scores`` (PageRank), ``parents`` and
        ``depths`` (Bfs), ``vector`` (Spectrum). Local: at one rank, every
        vertex; under ``mpirun``, this rank's part (no communication). The
        values are copied into the frame.

        Returns
        -------
        pandas.DataFrame
            One row per vertex of this rank.

        Raises
        ------
        tessera.ConfigError
            pandas is not installed, or the graph the result was computed
            on no longer exists (the file ids are the graph's; a result does
            not keep its graph alive).

        Examples
        --------
        >>> g = tessera.grid((5, 5))
        >>> tessera.pagerank(g).to_pandas().nlargest(3, "scores")
        """
        graph = None if self._graph is None else self._graph()
        if graph is None:
            raise ConfigError(f"{type(self).__name__}.to_pandas(): the graph it was computed on is gone (its file "
                              "ids label the rows); keep the graph while you use its results")
        columns = {"file_id": graph.file_ids}
        columns.update((name, getattr(self, name).local) for name in self._arrays)
        return _display.data_frame(f"tessera.{type(self).__name__}", columns)


class PageRank(_Result):
    """The result of :func:`tessera.pagerank`: each vertex's score and how
    the iteration went (the fields of ``tessera pagerank --json``'s
    ``"pagerank"`` object as attributes).

    Made by :func:`pagerank`, not by hand.

    Parameters
    ----------
    scores : DistArray
        The scores (float64) on the graph's vertex ranges.
    document : dict
        The command's whole JSON document.
    graph : Graph, optional
        The graph the scores are of (its file ids label ``to_pandas()``'s
        rows; held weakly).

    Attributes
    ----------
    scores : DistArray
        float64 on the graph's vertex ranges; ``scores.local`` is this
        rank's part, a NumPy view of the library's array (no copy). GAPBS's
        rules: a dangling vertex passes its score to nobody, so the scores
        sum to less than 1 when there are any.
    iterations : int
        Iterations run.
    change : float
        The L1 change of the scores in the last iteration.
    converged : bool
        Whether ``change`` fell below ``tolerance``.
    seconds : float
        Time of the iterations (seconds, the slowest rank).
    method, damping, tolerance, max_iterations, personalization
        As asked (``personalization``: the file ids teleported to; empty:
        every vertex).
    score_sum : float
        The sum of the scores.
    top_vertex : int
        The file id of the highest score; ``top_score`` that score.
    document : dict
        The whole ``--json`` document (graph stats, step times, memory).

    Examples
    --------
    >>> p = tessera.pagerank(tessera.grid((5, 5)))
    >>> p.converged, p.top_vertex
    (True, 6)
    >>> p.scores.local[:3]                 # this rank's scores, no copy
    """

    _arrays = ("scores",)

    def __init__(self, scores, document, graph=None):
        super().__init__(document["pagerank"], document, graph)
        self.scores = scores

    def __repr__(self):
        return f"tessera.PageRank(iterations={self.iterations}, converged={self.converged})"


class Bfs(_Result):
    """The result of :func:`tessera.bfs`: each vertex's parent and depth in
    the breadth-first tree (the fields of ``tessera bfs --json``'s
    ``"bfs"`` object as attributes).

    Made by :func:`bfs`, not by hand.

    Parameters
    ----------
    parents, depths : DistArray
        int64 on the graph's vertex ranges.
    document : dict
        The command's whole JSON document.
    graph : Graph, optional
        The graph searched (held weakly, for ``to_pandas()``'s file ids).

    Attributes
    ----------
    parents : DistArray
        int64: each vertex's parent, an internal vertex id (the smallest-id
        in-neighbour one level closer to the source, the same at every rank
        count; the source is its own parent); -1 where not reached.
    depths : DistArray
        int64: hops from the source; -1 where not reached.
    source : int
        The source's file id.
    direction : str
        "optimizing", "top-down" or "bottom-up".
    reached : int
        Vertices reached, the source included.
    levels : int
        Levels of the search.
    top_down_steps, bottom_up_steps : int
        Levels done each way.
    seconds : float
        Time of the search (seconds).
    hops : int or None
        The depth limit asked for (None: none).
    document : dict
        The whole ``--json`` document.

    Examples
    --------
    >>> b = tessera.bfs(tessera.grid((5, 5)), 0)
    >>> b.reached, b.levels
    (25, 8)
    >>> b.depths.local[:5]
    """

    _arrays = ("parents", "depths")

    def __init__(self, parents, depths, document, graph=None):
        super().__init__(document["bfs"], document, graph)
        self.parents = parents
        self.depths = depths

    def __repr__(self):
        return f"tessera.Bfs(source={self.source}, reached={self.reached}, levels={self.levels})"


class Spectrum(_Result):
    """The result of :func:`tessera.spectral` (:func:`fiedler`,
    :func:`centrality`): an eigenvalue and its unit-norm eigenvector, with
    the fields of ``tessera spectral --json`` under its names.

    Made by :func:`spectral`, not by hand.

    Parameters
    ----------
    vector : DistArray
        float64 on the graph's vertex ranges.
    document : dict
        The command's whole JSON document.
    graph : Graph, optional
        The graph (held weakly, for ``to_pandas()``'s file ids).

    Attributes
    ----------
    vector : DistArray
        The unit-norm eigenvector, float64, the same at every rank count
        (centrality nonnegative; the Fiedler vector's first entry of
        magnitude above 1e-6 of the largest is positive).
    lambda_ : float
        The eigenvalue: λ₂ of the Laplacian (fiedler) or the largest of the
        adjacency (centrality).
    next_lambda : float
        The next eigenvalue (NaN when the graph has none).
    lambda2, lambda3 : float
        fiedler: as the document names them (``lambda`` and
        ``lambda_next`` for centrality).
    residual : float
        The true ||Mx - λx|| / |λ|.
    iterations : int
        Eigensolver iterations.
    converged : bool
        Whether the eigensolver reached ``tolerance``.
    seconds : float
        Time of the eigensolve (seconds).
    solver, what, matrix : str
        As asked.
    matrix_extra_bytes : int
        Bytes the operator added (0: the edge arrays, no copy).
    bisection : dict
        fiedler: the sign cut's sizes and cut edges.
    document : dict
        The whole ``--json`` document.

    Examples
    --------
    >>> s = tessera.fiedler(tessera.grid((4, 5)))
    >>> round(s.lambda_, 6), s.converged
    (0.381966, True)
    """

    _arrays = ("vector",)

    def __init__(self, vector, document, graph=None):
        fiedler = document["what"] == "fiedler"
        info = {k: v for k, v in document.items() if k not in ("lambda", "command", "input", "stats")}
        super().__init__(info, document, graph)
        self.lambda_ = document["lambda2" if fiedler else "lambda"]
        following = document["lambda3" if fiedler else "lambda_next"]
        self.next_lambda = float("nan") if following is None else following
        self.vector = vector
        self._fields = ("lambda_", "next_lambda") + self._fields

    def __repr__(self):
        return f"tessera.Spectrum(what={self.what!r}, lambda_={self.lambda_:.12g}, converged={self.converged})"


def _file_ids(values):
    if values is None:
        return []
    if isinstance(values, int) or getattr(values, "ndim", 1) == 0:
        values = [values]
    out = []
    for v in values:
        if int(v) < 0:
            from ._errors import RangeError
            raise RangeError(f"vertex {int(v)} does not occur in the graph (vertex ids are non-negative)")
        out.append(int(v))
    return out


def pagerank(graph, *, damping=0.85, tolerance=1e-4, max_iterations=20, method="gauss-seidel",
             personalization=None, verbose=False):
    """PageRank of ``graph``, as ``tessera pagerank`` computes it. Collective.

    Pulls over in-arcs (a directed graph's transpose is made here, a copy),
    by GAPBS's rules: a dangling vertex passes its score to nobody.

    Parameters
    ----------
    graph : Graph
        The graph (every rank passes its own handle of the same graph).
    damping : float, default 0.85
        The probability of following an arc rather than teleporting.
    tolerance : float, default 1e-4
        Stop when the L1 change of the scores in one iteration is below this.
    max_iterations : int, default 20
        Stop after this many iterations at most.
    method : {"gauss-seidel", "jacobi"}, default "gauss-seidel"
        "gauss-seidel" (GAPBS's, fewest iterations) or "jacobi" (the same
        bits at every rank count).
    personalization : int or sequence of int, optional
        File ids to teleport to (default: every vertex alike).
    verbose : bool, default False
        Progress lines (each iteration's change) on rank 0's stderr.

    Returns
    -------
    PageRank
        ``scores`` (a float64 DistArray on the graph's vertex ranges) and the
        fields of the command's ``"pagerank"`` object.

    Raises
    ------
    tessera.ConfigError
        An unknown ``method``, or a ``damping`` or ``tolerance`` out of range.
    tessera.RangeError
        A ``personalization`` id that does not occur in the graph.

    Examples
    --------
    >>> g = tessera.grid((5, 5))
    >>> p = tessera.pagerank(g, method="jacobi", tolerance=1e-8, max_iterations=100)
    >>> p.converged, p.top_vertex
    (True, 6)
    """
    current()
    scores, document = _tessera._pagerank(graph._impl, float(damping), float(tolerance), int(max_iterations), method,
                                          _file_ids(personalization), bool(verbose))
    return PageRank(DistArray(None, 0, _impl=scores), json.loads(document), graph)


def bfs(graph, source, *, direction="optimizing", hops=-1, verbose=False, max_depth=None):
    """Breadth-first search from ``source`` along the arcs, as ``tessera
    bfs`` runs it. Collective.

    Parameters
    ----------
    graph : Graph
        The graph.
    source : int
        The source vertex's file id.
    direction : {"optimizing", "top-down", "bottom-up"}, default "optimizing"
        "optimizing" switches between top-down and bottom-up steps as GAPBS
        does; the others do one kind only (the same parents either way).
    hops : int, default -1
        >= 0: stop at this depth (the k-hop neighbourhood, as ``tessera bfs
        --hops``); -1: no limit.
    verbose : bool, default False
        Progress lines (each level) on rank 0's stderr.
    max_depth : int, optional
        The old name of ``hops``: a FutureWarning; it goes in the next release.

    Returns
    -------
    Bfs
        ``parents`` and ``depths`` (int64 DistArrays on the graph's vertex
        ranges, -1 where not reached) and the fields of the command's
        ``"bfs"`` object (``reached``, ``levels``, ...).

    Raises
    ------
    tessera.RangeError
        ``source`` does not occur in the graph.
    tessera.ConfigError
        An unknown ``direction``.

    Examples
    --------
    >>> b = tessera.bfs(tessera.grid((5, 5)), 0, hops=2)
    >>> b.reached                       # vertices within 2 hops of vertex 0
    6
    """
    current()
    if max_depth is not None:
        warnings.warn("tessera.bfs(max_depth=) is now hops= (as tessera bfs --hops)", FutureWarning, stacklevel=2)
        hops = max_depth
    parents, depths, document = _tessera._bfs(graph._impl, _file_ids(source)[0], direction, int(hops),
                                              bool(verbose))
    return Bfs(DistArray(None, 0, _impl=parents), DistArray(None, 0, _impl=depths), json.loads(document), graph)


def spectral(graph, what="fiedler", *, method="lobpcg", tolerance=1e-10, max_iterations=20000, matrix="edgelist",
             verbose=False):
    """An eigenpair of the graph's Laplacian or adjacency, as ``tessera
    spectral`` computes it. Collective; needs Trilinos
    (``tessera.trilinos_available()``).

    Anasazi's eigensolver on a Tpetra RowMatrix over the graph's edge
    arrays (no copy). A directed graph is symmetrized first (a copy);
    weights must be nonnegative.

    Parameters
    ----------
    graph : Graph
        The graph; for "fiedler" it must be connected (take
        ``largest_component(graph)`` first).
    what : {"fiedler", "centrality"}, default "fiedler"
        "fiedler": λ₂ of the Laplacian L = D - A and its vector;
        "centrality": the largest eigenvalue of the adjacency and its
        nonnegative vector (eigenvector centrality).
    method : {"lobpcg", "krylov-schur"}, default "lobpcg"
        Anasazi's eigensolver.
    tolerance : float, default 1e-10
        The Ritz residual to stop at (relative).
    max_iterations : int, default 20000
        The eigensolver's iterations at most.
    matrix : {"edgelist", "crs"}, default "edgelist"
        "edgelist": the operator reads the edge arrays in place; "crs": on a
        Tpetra CrsMatrix copy (for comparison).
    verbose : bool, default False
        Progress lines on rank 0's stderr.

    Returns
    -------
    Spectrum
        ``lambda_``, ``next_lambda``, ``vector`` (unit norm, a float64
        DistArray on the vertex ranges) and the command's fields.

    Raises
    ------
    tessera.ConfigError
        An unknown ``what``, ``method`` or ``matrix``; a build without
        Trilinos; a disconnected graph for "fiedler"; negative weights.

    Examples
    --------
    >>> s = tessera.spectral(tessera.grid((4, 5)), "fiedler")
    >>> round(s.lambda_, 6)
    0.381966
    """
    current()
    vector, document = _tessera._spectral(graph._impl, what, method, float(tolerance), int(max_iterations), matrix,
                                          bool(verbose))
    return Spectrum(DistArray(None, 0, _impl=vector), json.loads(document), graph)


def fiedler(graph, *, method="lobpcg", tolerance=1e-10, max_iterations=20000, matrix="edgelist", verbose=False):
    """The Fiedler vector: ``spectral(graph, "fiedler", ...)``. Collective;
    needs Trilinos.

    λ₂ of the Laplacian L = D - A and its unit-norm vector (its signs
    bisect the graph: ``bisection``).

    Parameters
    ----------
    graph : Graph
        A connected graph (``largest_component(g)``).
    method : {"lobpcg", "krylov-schur"}, default "lobpcg"
        Anasazi's eigensolver.
    tolerance : float, default 1e-10
        The Ritz residual to stop at (relative).
    max_iterations : int, default 20000
        The eigensolver's iterations at most.
    matrix : {"edgelist", "crs"}, default "edgelist"
        The operator: the edge arrays in place, or a CrsMatrix copy.
    verbose : bool, default False
        Progress lines on rank 0's stderr.

    Returns
    -------
    Spectrum
        ``lambda_`` (λ₂), ``next_lambda`` (λ₃), ``vector``, ``bisection``.

    Raises
    ------
    tessera.ConfigError
        A disconnected graph, a build without Trilinos, an unknown option value.

    Examples
    --------
    >>> s = tessera.fiedler(tessera.grid((4, 5)))
    >>> s.bisection["sizes"]
    [10, 10]
    """
    return spectral(graph, "fiedler", method=method, tolerance=tolerance, max_iterations=max_iterations,
                    matrix=matrix, verbose=verbose)


def centrality(graph, *, method="lobpcg", tolerance=1e-10, max_iterations=20000, matrix="edgelist", verbose=False):
    """Eigenvector centrality: ``spectral(graph, "centrality", ...)``.
    Collective; needs Trilinos.

    The largest eigenvalue of the adjacency and its nonnegative unit-norm
    vector.

    Parameters
    ----------
    graph : Graph
        The graph (a directed one is symmetrized first, a copy).
    method : {"lobpcg", "krylov-schur"}, default "lobpcg"
        Anasazi's eigensolver.
    tolerance : float, default 1e-10
        The Ritz residual to stop at (relative).
    max_iterations : int, default 20000
        The eigensolver's iterations at most.
    matrix : {"edgelist", "crs"}, default "edgelist"
        The operator: the edge arrays in place, or a CrsMatrix copy.
    verbose : bool, default False
        Progress lines on rank 0's stderr.

    Returns
    -------
    Spectrum
        ``lambda_`` (the largest eigenvalue), ``next_lambda``, ``vector``.

    Raises
    ------
    tessera.ConfigError
        A build without Trilinos, an unknown option value, negative weights.

    Examples
    --------
    >>> c = tessera.centrality(tessera.grid((5, 5)))
    >>> int(c.vector.local.argmax())       # the centre of the grid (at one rank)
    12
    """
    return spectral(graph, "centrality", method=method, tolerance=tolerance, max_iterations=max_iterations,
                    matrix=matrix, verbose=verbose)
