"""The process's Tessera runtime, and errors that every rank raises together."""
import atexit

from . import _tessera
from ._errors import CATEGORY_NUMBER, Error


class Runtime:
    """This process's place in the Tessera job (one per process).

    ``Runtime()`` initialises MPI unless it already runs (mpi4py imported
    first, for instance) and then only borrows it. ``Runtime(comm)`` takes an
    mpi4py communicator: it must hold every rank of ``MPI.COMM_WORLD`` in
    order (``MPI.COMM_WORLD`` or a duplicate), and mpi4py must use the MPI
    library Tessera was built with. Calling ``Runtime()`` again returns the
    same runtime. MPI ends (when Tessera started it) at interpreter exit.
    Collective on first use.
    """

    _instance = None

    def __new__(cls, comm=None):
        handle, library = 0, ""
        if comm is not None:
            from mpi4py import MPI
            handle = comm.handle if hasattr(comm, "handle") else MPI._handleof(comm)
            library = MPI.Get_library_version()
        first = not _tessera._running()
        rank, size, job_id, node_size, nodes = _tessera._start(handle, library)
        if first:
            # Registered after mpi4py's own exit hook (when mpi4py started
            # MPI), so it runs first: Tessera frees its communicators while
            # MPI still runs.
            atexit.register(_tessera._shutdown)
        if cls._instance is None:
            self = super().__new__(cls)
            self.rank, self.size, self.job_id = rank, size, job_id
            self.node_size, self.nodes = node_size, nodes
            cls._instance = self
        return cls._instance

    def barrier(self):
        """Collective: waits (yielding the core) until every rank arrives."""
        _tessera._barrier()

    def allreduce(self, value, op="sum"):
        """Collective: the sum (or "min", "max") of one number per rank."""
        if isinstance(value, int):
            return _tessera._allreduce_int(value, op)
        return _tessera._allreduce_float(float(value), op)

    def allgather(self, value):
        """Collective: one int from every rank, as a list in rank order."""
        return list(_tessera._allgather_int(int(value)))

    def __repr__(self):
        return f"tessera.Runtime(rank={self.rank}, size={self.size}, nodes={self.nodes})"


def current():
    """The runtime, created on first use."""
    return Runtime()


def agreed(step):
    """Runs ``step()`` on every rank (collective). When it raises on any rank,
    every rank raises: the lowest failing rank's error, as the same
    ``tessera.Error`` subclass with the same message (other ranks' messages
    start "on rank k: "). Rank-local argument checks go through here so that
    a bad index on one rank never leaves the others waiting."""
    current()
    failure = None
    try:
        result = step()
    except Error as e:
        failure, category, message = e, CATEGORY_NUMBER[e.category], str(e)
    except (TypeError, ValueError, OverflowError) as e:
        failure, category, message = e, CATEGORY_NUMBER["mismatch"], f"{type(e).__name__}: {e}"
    except Exception as e:  # noqa: BLE001 - any local failure must reach every rank
        failure, category, message = e, CATEGORY_NUMBER["generic"], f"{type(e).__name__}: {e}"
    if failure is None:
        _tessera._agree(-1, "")
        return result
    try:
        _tessera._agree(category, message)
    except Error as agreed_error:
        if isinstance(failure, Error):
            raise failure from None
        raise agreed_error from failure
    raise AssertionError("unreachable: _agree returned after a failure")
