"""Tessera's error categories as Python exceptions.

Every error the library raises is a ``tessera.Error`` carrying the library's
own message. Each category also derives from the built-in exception a Python
user would expect (an out-of-range index is an ``IndexError``, a wrong dtype
or length a ``ValueError``), so existing ``except`` clauses keep working.
"""


class Error(Exception):
    """Base class of every error raised by Tessera."""

    category = "generic"


class MpiError(Error):
    """An MPI call failed."""

    category = "mpi"


class SystemError(Error, OSError):  # noqa: A001 (tessera.SystemError, as in the C++ library)
    """An operating-system call failed (a full disk, a missing file)."""

    category = "system"


class FormatError(Error, ValueError):
    """A file or metadata document is malformed or inconsistent."""

    category = "format"


class MismatchError(Error, ValueError):
    """Two things that must agree do not (dtype, length, element type, rank count)."""

    category = "mismatch"


class RangeError(Error, IndexError):
    """A global index or argument lies outside its valid range."""

    category = "range"


class ConfigError(Error, ValueError):
    """An option or argument value is invalid."""

    category = "config"


class PeerError(Error):
    """A peer process is gone or stopped answering."""

    category = "peer"


class Cancelled(Error):
    """A session's command stopped because its client asked (a keyboard
    interrupt); the session and its objects are unchanged otherwise."""

    category = "cancelled"


CLASSES = {
    c.category: c
    for c in (Error, MpiError, SystemError, FormatError, MismatchError, RangeError, ConfigError, PeerError, Cancelled)
}
# The C++ ErrorCategory numbering (runtime/error.hpp), for errors raised in Python.
CATEGORY_NUMBER = {"generic": 0, "mpi": 1, "system": 2, "format": 3, "mismatch": 4, "range": 5, "config": 6, "peer": 7,
                   "cancelled": 8}
