"""Tessera for Python: distributed arrays and graphs as zero-copy NumPy views.

SPMD, like the C++ library: run a script with ``mpirun -n K python3 script.py``
(or plain ``python3 script.py`` for one rank). Every rank runs the same code;
calls documented as collective must be made by every rank.

    import numpy as np, tessera
    rt = tessera.Runtime()
    a = tessera.DistArray(rt, 1000, dtype=np.int64)
    lo, hi = a.local_range
    a.local[:] = np.arange(lo, hi)          # this rank's block, no copy
    print(a.gather(np.array([0, 999])))     # aggregated remote reads

``tessera.attach(metadata_path)`` maps a shared array from any Python process,
without MPI. ``with tessera.trace("t.json"):`` records where the enclosed code
spends its time; ``tessera.tracefile`` reads such a file (pure Python: it
works without the compiled extension, which nothing else here does).
"""
import importlib

from ._errors import (CLASSES as _CLASSES, Cancelled, ConfigError, Error, FormatError,
                      MismatchError, MpiError, PeerError, RangeError, SystemError)
from .recording import Recording, trace

__all__ = [
    "Runtime", "DistArray", "zeros", "arange", "from_local", "argsort", "attach", "AttachedViews",
    "Graph", "Components", "HittingTimes", "read_graph", "generate", "kron", "urand", "grid", "components",
    "largest_component", "hitting_times", "trilinos_available", "from_edges",
    "pagerank", "PageRank", "bfs", "Bfs", "spectral", "fiedler", "centrality", "Spectrum",
    "pipeline", "PipelineResult", "pipeline_defaults", "default_solver",
    "Error", "MpiError", "SystemError", "FormatError", "MismatchError", "RangeError", "ConfigError", "PeerError",
    "Cancelled",
    "mpi_library_version", "start", "connect", "Session", "SessionLost",
    "trace", "Recording",
]

__version__ = "0.1.0"  # as python/pyproject.toml

try:
    _tessera = importlib.import_module("tessera._tessera")  # its own error when missing, not a circular import's
except ImportError as _extension_error:
    # Reading traces (import tessera.tracefile; python3 -m tessera.tracefile)
    # is pure Python and works without the compiled extension: from a source
    # tree, or on a laptop with a trace copied from a cluster. Everything
    # else needs the extension, and says why it is missing when first used.
    _EXTENSION_ERROR = f"{type(_extension_error).__name__}: {_extension_error}"

    def __getattr__(name):
        if name in __all__:  # `from tessera import Runtime` reports this too
            raise ImportError(f"tessera.{name} needs the compiled extension tessera._tessera, which did not import "
                              f"({_EXTENSION_ERROR}); build Tessera (its build/python) or pip install ./python")
        raise AttributeError(f"module 'tessera' has no attribute {name!r}")
else:
    from .arrays import DistArray, arange, argsort, from_local, zeros
    from .analyses import Bfs, PageRank, Spectrum, bfs, centrality, fiedler, pagerank, spectral
    from .attach import AttachedViews, attach
    from .graphs import (Components, Graph, HittingTimes, components, generate, grid, hitting_times, kron,
                         largest_component, read_graph, urand)
    from .interop import from_edges
    from .pipeline import PipelineResult, default_solver, pipeline, pipeline_defaults
    from .runtime import Runtime
    from .session import Session, SessionLost, connect, start

    _tessera._set_error_classes(_CLASSES)

    def mpi_library_version():
        """The MPI library Tessera was built with (``MPI_Get_library_version``).

        Needs no Runtime. mpi4py must use the same library for
        ``Runtime(comm)``.

        Returns
        -------
        str
            The library's own version text, e.g. "Open MPI v4.1.4, ...".

        Examples
        --------
        >>> tessera.mpi_library_version().split(",")[0]
        'Open MPI v4.1.4'
        """
        return _tessera.mpi_library_version()

    def trilinos_available():
        """Whether this Tessera was built with Trilinos.

        With it, ``solver="belos"`` is the default solver of hitting times,
        and ``spectral``, ``fiedler`` and ``centrality`` work.

        Returns
        -------
        bool
            True when built with Trilinos (Tpetra, Belos, Ifpack2, Anasazi).

        Examples
        --------
        >>> tessera.trilinos_available()
        True
        """
        return _tessera._trilinos_available()
