"""The whole workflow from Python: ``tessera.pipeline()`` runs what
``tessera pipeline`` runs (load or generate a graph into Shared storage,
connected components, the largest component, an analysis of it (hitting
times, the Fiedler vector or eigenvector centrality) in this job, in a
separate tessera-analyze process or in a container) through the same library call, with the same defaults, and
returns the same JSON document the command prints with ``--json``."""
import json
import os

from . import _display, _tessera
from ._errors import ConfigError
from .arrays import DistArray
from .runtime import current

# Keywords of pipeline() that are library options (None: the library's default).
_OPTIONS = ("kind", "scale", "edge_factor", "dims", "seed", "delete_fraction", "permute", "base", "relabel",
            "undirected", "symmetric", "pattern", "algorithm", "targets", "output", "analysis_kind", "analysis", "solver",
            "preconditioner", "matrix", "tolerance", "max_iterations", "analysis_program", "launcher", "control",
            "attach_timeout", "timeout", "packed")


def pipeline_defaults():
    """The defaults of ``pipeline()`` (and of ``tessera pipeline``), as the
    library defines them: what each None argument means.

    Returns
    -------
    dict
        Option name -> default value; ``"solver"`` is this build's default
        solver ("belos" when Tessera was built with Trilinos, else "tessera").

    Examples
    --------
    >>> d = tessera.pipeline_defaults()
    >>> d["algorithm"], d["analysis"]
    ('afforest', 'inprocess')
    """
    return dict(_tessera._pipeline_defaults())


def default_solver():
    """The solver ``hitting_times()``, ``pipeline()`` and ``tessera
    hitting|pipeline`` use when none is named.

    Returns
    -------
    str
        "belos" when Tessera was built with Trilinos, else "tessera".

    Examples
    --------
    >>> tessera.default_solver()
    'belos'
    """
    return _tessera._default_solver()


def _analysis_program():
    """tessera-analyze for analysis="process"|"container": $TESSERA_ANALYZE
    (read by the library), else the package's own (tessera/bin: linked to
    build/tessera-analyze in a build tree, installed there by pip), else
    the library looks on PATH."""
    if os.environ.get("TESSERA_ANALYZE"):
        return None
    here = os.path.dirname(os.path.abspath(__file__))
    for candidate in (os.path.join(here, "bin", "tessera-analyze"), os.path.join(here, "..", "..", "tessera-analyze")):
        if os.access(candidate, os.X_OK) and os.path.isfile(candidate):
            return os.path.normpath(candidate)
    return None


def _given(options):
    out = {k: v for k, v in options.items() if v is not None}
    if "targets" in out:
        t = out["targets"]
        t = [t] if isinstance(t, int) or getattr(t, "ndim", 1) == 0 else list(t)
        for v in t:
            if int(v) < 0:
                from ._errors import RangeError
                raise RangeError(f"target vertex {int(v)} does not occur in the graph (vertex ids are non-negative)")
        out["targets"] = [int(v) for v in t]
    if "output" in out:
        out["output"] = os.fspath(out["output"])
    if out.get("analysis") in ("process", "container") and "analysis_program" not in out:
        program = _analysis_program()
        if program:
            out["analysis_program"] = program
    return out


class PipelineResult(dict):
    """The result document of the pipeline: a dict equal to what ``tessera
    pipeline --json`` prints for the same input and options, plus the
    analysis' values.

    Made by :func:`pipeline`, not by hand.

    Parameters
    ----------
    document : dict
        The command's JSON document.
    values : DistArray or None
        The analysis' vector on the largest component.
    file_ids : numpy.ndarray
        The input graph's id of each entry of ``values.local``.
    exit_code : int
        What the command would exit with.

    Attributes
    ----------
    values : DistArray
        The analysis' vector on the largest component, float64
        (``values.local`` is this rank's part as a NumPy view, no copy).
    times : DistArray or None
        ``values`` for hitting times; None for another kind.
    vector : DistArray or None
        ``values`` for "fiedler" or "centrality" (the unit-norm vector);
        None for hitting.
    file_ids : numpy.ndarray
        The input graph's id of each entry of ``values.local``.
    exit_code : int
        What the command would exit with (0; 3: the solve did not converge).

    Examples
    --------
    >>> r = tessera.pipeline(scale=12)
    >>> r["hitting"]["converged"], r.exit_code
    (True, 0)
    >>> r.times.local[:3]
    """

    def __init__(self, document, values, file_ids, exit_code):
        super().__init__(document)
        self.values = values
        hitting = document.get("analysis_kind", "hitting") == "hitting"
        self.times = values if hitting else None
        self.vector = None if hitting else values
        self.file_ids = file_ids
        self.exit_code = exit_code

    def to_pandas(self):
        """This rank's vertices of the largest component with the analysis'
        values, as a ``pandas.DataFrame`` (pandas imported here; a copy).

        Columns: ``file_id`` (``file_ids``: the input graph's ids) and
        ``times`` (hitting) or ``vector`` (fiedler, centrality): the values
        of ``values.local``. At one rank, every vertex of the component;
        under ``mpirun``, this rank's part.

        Returns
        -------
        pandas.DataFrame
            One row per vertex of this rank.

        Raises
        ------
        tessera.ConfigError
            pandas is not installed, or the result holds no values.

        Examples
        --------
        >>> r = tessera.pipeline(scale=12)
        >>> r.to_pandas().nlargest(5, "times")
        """
        if self.values is None:
            raise ConfigError("PipelineResult.to_pandas(): this result holds no values")
        name = "times" if self.times is not None else "vector"
        return _display.data_frame("tessera.PipelineResult", {"file_id": self.file_ids, name: self.values.local})


def _run(call, *args):
    document, times, file_ids, exit_code = call(*args)
    return (json.loads(document), None if times is None else DistArray(None, 0, _impl=times), file_ids, exit_code)


def pipeline(graph=None, *, kind=None, scale=None, edge_factor=None, dims=None, seed=None, delete_fraction=None,
             permute=None, base=None, relabel=None, undirected=None, symmetric=None, pattern=None, targets=None,
             algorithm=None, analysis_kind=None, analysis=None, solver=None, preconditioner=None, matrix=None, tolerance=None,
             max_iterations=None, output=None, analysis_program=None, launcher=None, control=None,
             attach_timeout=None, timeout=None, packed=None, verbose=False):
    """The pipeline of ``tessera pipeline``: a graph into Shared storage,
    its connected components, the largest component, and an analysis of it
    (hitting times, the Fiedler vector or eigenvector centrality) in this
    job, in a separate tessera-analyze process or in a container. The same
    library call as the command, with the same defaults. Collective.

    Every None is the library's default (``pipeline_defaults()``).

    Parameters
    ----------
    graph : None, str, os.PathLike or Graph, optional
        None: generate one (``kind``, ``scale``, ``edge_factor``, ``dims``,
        ``seed``, ``delete_fraction``, ``permute``); a path: read it as the
        command does (``base``, ``relabel``, ``undirected``, ``symmetric``,
        ``pattern``); a ``tessera.Graph`` already in memory.
    kind : {"kron", "urand", "grid"}, optional
        The generator (default "kron").
    scale : int, optional
        kron, urand: 2**scale vertices (default 16).
    edge_factor : int, optional
        kron, urand: edges per vertex (default 16).
    dims : str, optional
        grid: "RxC" or "XxYxZ" (default "100x100").
    seed : int, optional
        The generator's seed (default 1).
    delete_fraction : float, optional
        The fraction of edges deleted at random (default 0).
    permute : bool, optional
        Permute the generated vertex ids (default False).
    base : int, optional
        The file's first vertex id (default 1 for .mtx, else 0).
    relabel : bool, optional
        Number sparse file ids densely (default False).
    undirected : bool, optional
        Add the reverse of every arc read (default False).
    symmetric : bool, optional
        The file lists both directions (verified; default False).
    pattern : bool, optional
        Ignore the file's weights (default False).
    targets : int or sequence of int, optional
        Hitting times only: target file ids (default: the largest
        component's highest-degree vertex, the smallest id among equals).
    algorithm : {"afforest", "fastsv", "lp"}, optional
        The components algorithm (default "afforest").
    analysis_kind : {"hitting", "fiedler", "centrality"}, optional
        What the analysis computes (default "hitting"); "fiedler" and
        "centrality" run Anasazi LOBPCG on the edge arrays (``tolerance``,
        ``max_iterations`` and ``matrix`` apply; the document's
        ``"fiedler"`` / ``"centrality"`` object holds ``lambda2`` /
        ``lambda``).
    analysis : {"inprocess", "process", "container"}, optional
        Where it runs: in this job, in tessera-analyze on the Shared arrays,
        or the same in bwrap (default "inprocess").
    solver : {"belos", "tessera"}, optional
        Hitting times' solver (default: ``default_solver()``).
    preconditioner : {"diagonal", "relaxation"}, optional
        Belos' preconditioner (default "diagonal").
    matrix : {"edgelist", "crs"}, optional
        The operator: the edge arrays in place, or a CrsMatrix copy
        (default "edgelist").
    tolerance : float, optional
        The solve's relative residual to stop at (default 1e-10).
    max_iterations : int, optional
        The solver's iterations at most (default 20000).
    output : str or os.PathLike, optional
        Also write "vertex value" lines (times or the vector) to this file.
    analysis_program : str, optional
        The tessera-analyze program (default: ``$TESSERA_ANALYZE``, the one
        beside this package, else PATH's).
    launcher : str, optional
        "container": the launcher command (default bwrap, or
        ``$TESSERA_ANALYZE_LAUNCHER``).
    control : str, optional
        A control segment path: start nothing and wait for a tessera-analyze
        started by hand (``--analysis-control``).
    attach_timeout : float, optional
        Seconds to wait for the analysis to attach (default 60).
    timeout : float, optional
        Seconds the whole analysis may take (default 3600).
    packed : bool, optional
        Pack the graph once loaded (``tessera pipeline --packed``: rows in
        byte codes, about 3-4 bytes an undirected edge against the
        EdgeList's 8) and run components (Afforest), the largest component
        and the analysis (Belos or Anasazi, in process) on the packed rows
        (default False). The same document and outputs, in the file's ids;
        the document's ``"graph"`` holds the packed sizes (``"form":
        "packed"``) and a ``"packed"`` object. A graph given is copied into
        the packed form. Unweighted graphs only; refused with another
        ``algorithm``, ``solver="tessera"`` or ``analysis`` out of process.
    verbose : bool, default False
        Progress lines on rank 0's stderr, as the command prints them.

    Returns
    -------
    PipelineResult
        A dict equal to the command's ``--json`` document, with ``values``
        (``times`` or ``vector``), ``file_ids`` and ``exit_code``.

    Raises
    ------
    tessera.ConfigError
        An unknown option value; no bwrap for "container"; no Trilinos for
        the spectral kinds.
    tessera.RangeError
        A target that does not occur in the graph.
    tessera.FormatError, tessera.SystemError
        A graph file that is malformed or cannot be read.
    tessera.PeerError
        The analysis process died or did not answer in time.
    TypeError
        ``graph`` is none of None, a path or a Graph.

    Examples
    --------
    >>> r = tessera.pipeline("examples/grid.el", targets=[0], undirected=True)
    >>> r["hitting"]["converged"], r.times.size
    (True, 25)
    >>> tessera.pipeline(scale=12, analysis_kind="fiedler").vector
    """
    current()
    options = _given({k: v for k, v in locals().items() if k in _OPTIONS})
    if graph is None or isinstance(graph, (str, os.PathLike)):
        path = "" if graph is None else os.fspath(graph)
        return PipelineResult(*_run(_tessera._pipeline, None, path, options, bool(verbose)))
    if not hasattr(graph, "_impl"):
        raise TypeError("pipeline(graph): graph must be None, a path or a tessera.Graph")
    return PipelineResult(*_run(_tessera._pipeline, graph._impl, "", options, bool(verbose)))
