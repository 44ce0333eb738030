"""Graph analyses: PageRank, breadth-first search and the spectral analyses
(the Fiedler vector of the Laplacian, eigenvector centrality), run by the
library's kernels on the graph's own arrays, as ``tessera pagerank``, ``tessera
bfs`` and ``tessera spectral`` run them. Each result holds DistArrays on the
graph's vertex ranges: ``.local`` is this rank's part as a NumPy view of the
library's memory, no copy."""
import json
import warnings

from . import _tessera
from .arrays import DistArray
from .runtime import current


class _Result:
    """The fields of the result's object in the command's document (``tessera
    pagerank | bfs | spectral --json``) as attributes; ``document`` is the
    whole document (graph stats, step times, memory)."""

    def __init__(self, info, document):
        for k, v in info.items():
            setattr(self, k, v)
        self.document = document


class PageRank(_Result):
    """``scores``: a float64 DistArray (GAPBS's rules: a dangling vertex
    passes its score to nobody, so the scores sum to less than 1 when there
    are any); ``iterations``, ``change`` (the L1 change of the last
    iteration), ``converged``, ``seconds``, ``method``, ``damping``,
    ``tolerance``, ``max_iterations``, ``personalization``, ``score_sum``,
    ``top_vertex`` (a file id) and ``top_score``."""

    def __init__(self, scores, document):
        super().__init__(document["pagerank"], document)
        self.scores = scores

    def __repr__(self):
        return f"tessera.PageRank(iterations={self.iterations}, converged={self.converged})"


class Bfs(_Result):
    """``parents`` and ``depths``: int64 DistArrays; a parent is an internal
    vertex id (the smallest-id in-neighbour one level closer to the source;
    the source is its own parent), -1 where a vertex was not reached, as its
    depth. ``source`` (a file id), ``direction``, ``reached``, ``levels``,
    ``top_down_steps``, ``bottom_up_steps``, ``seconds``, ``hops``."""

    def __init__(self, parents, depths, document):
        super().__init__(document["bfs"], document)
        self.parents = parents
        self.depths = depths

    def __repr__(self):
        return f"tessera.Bfs(source={self.source}, reached={self.reached}, levels={self.levels})"


class Spectrum(_Result):
    """``vector``: the unit-norm eigenvector, a float64 DistArray (the same
    at every rank count: centrality nonnegative, the Fiedler vector's first
    entry of magnitude above 1e-6 of the largest positive); the document's
    fields as ``tessera spectral --json`` names them: ``lambda2`` and
    ``lambda3`` (fiedler: of the Laplacian) or ``lambda`` and ``lambda_next``
    (centrality: of the adjacency), ``residual`` (true ||Mx - λx|| / |λ|),
    ``iterations``, ``converged``, ``seconds``, ``solver``, ``what``,
    ``matrix``, ``matrix_extra_bytes``, and for fiedler ``bisection``. Either
    kind: ``lambda_`` is the eigenvalue and ``next_lambda`` the next one
    (NaN when the graph has none)."""

    def __init__(self, vector, document):
        fiedler = document["what"] == "fiedler"
        info = {k: v for k, v in document.items() if k not in ("lambda", "command", "input", "stats")}
        super().__init__(info, document)
        self.lambda_ = document["lambda2" if fiedler else "lambda"]
        following = document["lambda3" if fiedler else "lambda_next"]
        self.next_lambda = float("nan") if following is None else following
        self.vector = vector

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
    """Collective: PageRank of ``graph`` (``tessera pagerank``), pulling over
    in-arcs (a directed graph's transpose is made here). ``method``:
    "gauss-seidel" (GAPBS's, fewest iterations) or "jacobi" (the same bits
    at every rank count); it stops when the L1 change of an iteration is
    below ``tolerance`` or after ``max_iterations``. ``personalization``:
    file ids to teleport to (default: every vertex). ``verbose``: progress
    lines on rank 0's stderr."""
    current()
    scores, document = _tessera._pagerank(graph._impl, float(damping), float(tolerance), int(max_iterations), method,
                                          _file_ids(personalization), bool(verbose))
    return PageRank(DistArray(None, 0, _impl=scores), json.loads(document))


def bfs(graph, source, *, direction="optimizing", hops=-1, verbose=False, max_depth=None):
    """Collective: breadth-first search from ``source`` (a file id) along the
    arcs (``tessera bfs``): "optimizing" (GAPBS's top-down / bottom-up
    switch), "top-down" or "bottom-up"; ``hops`` >= 0 stops at that depth
    (the k-hop neighbourhood, as ``tessera bfs --hops``). ``verbose``:
    progress lines on rank 0's stderr. ``max_depth`` is the old name of
    ``hops`` (a warning; it goes in the next release)."""
    current()
    if max_depth is not None:
        warnings.warn("tessera.bfs(max_depth=) is now hops= (as tessera bfs --hops)", FutureWarning, stacklevel=2)
        hops = max_depth
    parents, depths, document = _tessera._bfs(graph._impl, _file_ids(source)[0], direction, int(hops),
                                              bool(verbose))
    return Bfs(DistArray(None, 0, _impl=parents), DistArray(None, 0, _impl=depths), json.loads(document))


def spectral(graph, what="fiedler", *, method="lobpcg", tolerance=1e-10, max_iterations=20000, matrix="edgelist",
             verbose=False):
    """Collective: ``what`` = "fiedler" (λ₂ of the Laplacian L = D - A and its
    vector; the graph must be connected) or "centrality" (the largest
    eigenvalue of the adjacency and its nonnegative vector), by Anasazi
    (``method`` "lobpcg" or "krylov-schur") on a Tpetra RowMatrix over the
    graph's edge arrays (``matrix="crs"``: on a CrsMatrix copy), as ``tessera
    spectral``. A directed graph is symmetrized first (a copy); weights must be
    nonnegative. Needs Trilinos (``tessera.trilinos_available()``)."""
    current()
    vector, document = _tessera._spectral(graph._impl, what, method, float(tolerance), int(max_iterations), matrix,
                                          bool(verbose))
    return Spectrum(DistArray(None, 0, _impl=vector), json.loads(document))


def fiedler(graph, **options):
    """Collective: ``spectral(graph, "fiedler", ...)``."""
    return spectral(graph, "fiedler", **options)


def centrality(graph, **options):
    """Collective: ``spectral(graph, "centrality", ...)``."""
    return spectral(graph, "centrality", **options)
