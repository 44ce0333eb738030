"""The whole workflow from Python: ``tessera.pipeline()`` runs what
``tessera pipeline`` runs (load or generate a graph into Shared storage,
connected components, the largest component, an analysis of it (hitting
times, the Fiedler vector or eigenvector centrality) in this job, in a
separate tessera-analyze process or in a container) through the same library call, with the same defaults, and
returns the same JSON document the command prints with ``--json``."""
import json
import os

from . import _tessera
from .arrays import DistArray
from .runtime import current

# Keywords of pipeline() that are library options (None: the library's default).
_OPTIONS = ("kind", "scale", "edge_factor", "dims", "seed", "delete_fraction", "permute", "base", "relabel",
            "undirected", "symmetric", "pattern", "algorithm", "targets", "output", "analysis_kind", "analysis", "solver",
            "preconditioner", "matrix", "tolerance", "max_iterations", "analysis_program", "launcher", "control",
            "attach_timeout", "timeout")


def pipeline_defaults():
    """The defaults of ``pipeline()`` (and of ``tessera pipeline``), as the
    library defines them; ``"solver"`` is the default solver of this build:
    "belos" when Tessera was built with Trilinos, else "tessera"."""
    return dict(_tessera._pipeline_defaults())


def default_solver():
    """The solver ``hitting_times()``, ``pipeline()`` and ``tessera
    hitting|pipeline`` use when none is named: "belos" with Trilinos, else "tessera"."""
    return _tessera._default_solver()


def _analysis_program():
    """tessera-analyze for analysis="process"|"container": $TESSERA_ANALYZE
    (read by the library), else the one beside this package in a build tree
    (build/python/tessera -> build/tessera-analyze) or an installed one,
    else the library looks on PATH."""
    if os.environ.get("TESSERA_ANALYZE"):
        return None
    here = os.path.dirname(os.path.abspath(__file__))
    for candidate in (os.path.join(here, "..", "..", "tessera-analyze"), os.path.join(here, "tessera-analyze")):
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
    """The result document of the pipeline (a dict equal to what ``tessera
    pipeline --json`` prints for the same input and options), plus:

    ``values``: the analysis' vector on the largest component, a float64
    DistArray (``values.local`` is this rank's part as a NumPy view, no
    copy), also named ``times`` (hitting times; None for another kind) or
    ``vector`` (the unit-norm Fiedler or centrality vector; None for hitting);
    ``file_ids``: the input graph's id of each entry of ``values.local``;
    ``exit_code``: what the command would exit with (3: the solve did not converge).
    """

    def __init__(self, document, values, file_ids, exit_code):
        super().__init__(document)
        self.values = values
        hitting = document.get("analysis_kind", "hitting") == "hitting"
        self.times = values if hitting else None
        self.vector = None if hitting else values
        self.file_ids = file_ids
        self.exit_code = exit_code


def _run(call, *args):
    document, times, file_ids, exit_code = call(*args)
    return (json.loads(document), None if times is None else DistArray(None, 0, _impl=times), file_ids, exit_code)


def pipeline(graph=None, *, kind=None, scale=None, edge_factor=None, dims=None, seed=None, delete_fraction=None,
             permute=None, base=None, relabel=None, undirected=None, symmetric=None, pattern=None, targets=None,
             algorithm=None, analysis_kind=None, analysis=None, solver=None, preconditioner=None, matrix=None, tolerance=None,
             max_iterations=None, output=None, analysis_program=None, launcher=None, control=None,
             attach_timeout=None, timeout=None, verbose=False):
    """Collective: the pipeline of ``tessera pipeline``. ``graph``: None
    (generate: ``kind``, ``scale``, ``edge_factor``, ``dims``, ``seed``,
    ``delete_fraction``, ``permute``), a path (read as the command reads it:
    ``base``, ``relabel``, ``undirected``, ``symmetric``, ``pattern``), or a
    ``tessera.Graph`` already in memory. ``targets``: file ids (default: the
    highest-degree vertex of the largest component; hitting times only).
    ``algorithm``: "afforest", "lp" or "fastsv". ``analysis_kind``:
    "hitting" (the default), "fiedler" or "centrality" (Anasazi LOBPCG on
    the edge arrays; ``tolerance``, ``max_iterations`` and ``matrix``
    apply; the document's ``"fiedler"`` / ``"centrality"`` object holds
    ``lambda2`` / ``lambda``). ``analysis``: "inprocess", "process"
    (tessera-analyze on the Shared arrays) or "container" (the same in
    bwrap; ``launcher``). ``solver``: None is the default solver (see
    ``default_solver()``), else "tessera" or "belos"; ``preconditioner``,
    ``matrix``, ``tolerance``, ``max_iterations`` as the command's options.
    ``output``: also write "vertex value" lines (times or the vector). Every None is the library's
    default (``pipeline_defaults()``). ``verbose``: progress lines on rank
    0's stderr. Returns a PipelineResult (a dict: the JSON document)."""
    current()
    options = _given({k: v for k, v in locals().items() if k in _OPTIONS})
    if graph is None or isinstance(graph, (str, os.PathLike)):
        path = "" if graph is None else os.fspath(graph)
        return PipelineResult(*_run(_tessera._pipeline, None, path, options, bool(verbose)))
    if not hasattr(graph, "_impl"):
        raise TypeError("pipeline(graph): graph must be None, a path or a tessera.Graph")
    return PipelineResult(*_run(_tessera._pipeline, graph._impl, "", options, bool(verbose)))
