"""The process's Tessera runtime, and errors that every rank raises together."""
import atexit

from . import _tessera
from ._errors import CATEGORY_NUMBER, Error


class Runtime:
    """This process's place in the Tessera job (one per process).

    ``Runtime()`` initialises MPI unless it already runs (mpi4py imported
    first, for instance) and then only borrows it. Calling it again returns
    the same runtime. MPI ends (when Tessera started it) at interpreter
    exit. Collective on first use.

    Parameters
    ----------
    comm : mpi4py.MPI.Comm, optional
        A communicator holding every rank of ``MPI.COMM_WORLD`` in order
        (``MPI.COMM_WORLD`` or a duplicate); mpi4py must use the MPI library
        Tessera was built with.

    Attributes
    ----------
    rank, size : int
        This process's rank and the number of ranks.
    job_id : str
        The job's id (names its shared-memory segments).
    node_size : int
        Ranks on this node.
    nodes : int
        Nodes of the job.

    Raises
    ------
    tessera.MismatchError
        ``comm`` is not all of ``MPI.COMM_WORLD`` in order, or mpi4py's MPI
        library is not Tessera's.
    tessera.MpiError
        MPI failed to start.

    Examples
    --------
    >>> rt = tessera.Runtime()
    >>> rt.rank, rt.size                  # run by `mpirun -n 2 python3 script.py`: (0, 2) and (1, 2)
    (0, 1)
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
        """Waits (yielding the core) until every rank arrives. Collective.

        Examples
        --------
        >>> rt.barrier()
        """
        _tessera._barrier()

    def allreduce(self, value, op="sum"):
        """One number per rank reduced over the ranks. Collective.

        Parameters
        ----------
        value : int or float
            This rank's number (an int reduces as a 64-bit integer, else as
            a float64).
        op : {"sum", "min", "max"}, default "sum"
            The reduction.

        Returns
        -------
        int or float
            The result, on every rank.

        Examples
        --------
        >>> rt.allreduce(rt.rank, "max") == rt.size - 1
        True
        """
        if isinstance(value, int):
            return _tessera._allreduce_int(value, op)
        return _tessera._allreduce_float(float(value), op)

    def allgather(self, value):
        """One int from every rank, as a list in rank order. Collective.

        Parameters
        ----------
        value : int
            This rank's number (64-bit).

        Returns
        -------
        list of int
            Every rank's value, on every rank.

        Examples
        --------
        >>> rt.allgather(rt.rank * 10)          # at 3 ranks
        [0, 10, 20]
        """
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
