"""Tessera's error categories as Python exceptions.

Every error the library raises is a ``tessera.Error`` carrying the library's
own message. Each category also derives from the built-in exception a Python
user would expect (an out-of-range index is an ``IndexError``, a wrong dtype
or length a ``ValueError``), so existing ``except`` clauses keep working.
"""


class Error(Exception):
    """Base class of every error raised by Tessera.

    The message is the library's own. Collective calls raise on every rank
    together: the failing rank its own error, the others the same class with
    "on rank k: " before the message. ``category`` names the library's
    error category ("format", "range", ...).

    Examples
    --------
    >>> try:
    ...     tessera.read_graph("missing.el")
    ... except tessera.Error as e:
    ...     print(type(e).__name__, e.category)
    SystemError system
    """

    category = "generic"


class MpiError(Error):
    """An MPI call failed (MPI could not start, a communicator is wrong).

    Examples
    --------
    >>> issubclass(tessera.MpiError, tessera.Error)
    True
    """

    category = "mpi"


class SystemError(Error, OSError):  # noqa: A001 (tessera.SystemError, as in the C++ library)
    """An operating-system call failed (a full disk, a missing file); also
    an ``OSError``.

    Examples
    --------
    >>> try:
    ...     tessera.attach("/nonexistent.json")
    ... except OSError as e:                  # tessera.SystemError is one
    ...     print(e)
    cannot open shared-array metadata /nonexistent.json: No such file or directory
    """

    category = "system"


class FormatError(Error, ValueError):
    """A file or metadata document is malformed or inconsistent (the
    message names the file and the line or field); also a ``ValueError``.

    Examples
    --------
    >>> tessera.read_graph("bad.el")          # a line "1 x"
    Traceback (most recent call last):
    tessera.FormatError: bad.el:1: ...
    """

    category = "format"


class MismatchError(Error, ValueError):
    """Two things that must agree do not (dtype, length, element type, rank
    count); also a ``ValueError``.

    Examples
    --------
    >>> a = tessera.zeros(rt, 4, dtype=np.int32)
    >>> a.scatter([0], [2.5])
    Traceback (most recent call last):
    tessera.MismatchError: scatter: values of dtype float64 cannot be stored in a int32 array without loss ...
    """

    category = "mismatch"


class RangeError(Error, IndexError):
    """A global index or vertex id lies outside its valid range; also an
    ``IndexError``.

    Examples
    --------
    >>> tessera.zeros(rt, 3).gather([5])
    Traceback (most recent call last):
    tessera.RangeError: gather: index 5 (position 0 of this rank's indices) is out of range [0, 3)
    """

    category = "range"


class ConfigError(Error, ValueError):
    """An option or argument value is invalid (an unknown method, a value
    out of range, a missing optional dependency); also a ``ValueError``.

    Examples
    --------
    >>> tessera.components(g, "quick")
    Traceback (most recent call last):
    tessera.ConfigError: unknown components algorithm 'quick' (afforest, fastsv or lp)
    """

    category = "config"


class PeerError(Error):
    """A peer process is gone or stopped answering (an analysis process, a
    session's ranks: ``tessera.SessionLost`` is one).

    Examples
    --------
    >>> issubclass(tessera.SessionLost, tessera.PeerError)
    True
    """

    category = "peer"


class Cancelled(Error):
    """A session's command stopped because its client asked (``s.cancel()``,
    a keyboard interrupt); the session and its objects are unchanged
    otherwise.

    Examples
    --------
    >>> f = s.submit("pagerank", g, max_iterations=10**6, tolerance=0)
    >>> s.cancel()
    'pagerank'
    >>> f.exception()
    Cancelled('on rank 0: ...')
    """

    category = "cancelled"


CLASSES = {
    c.category: c
    for c in (Error, MpiError, SystemError, FormatError, MismatchError, RangeError, ConfigError, PeerError, Cancelled)
}
# The C++ ErrorCategory numbering (runtime/error.hpp), for errors raised in Python.
CATEGORY_NUMBER = {"generic": 0, "mpi": 1, "system": 2, "format": 3, "mismatch": 4, "range": 5, "config": 6, "peer": 7,
                   "cancelled": 8}
