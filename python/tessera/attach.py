"""Attaching to a shared Tessera array from any Python process (no MPI)."""
from . import _tessera
import numpy as np

from ._errors import ConfigError, MismatchError


class AttachedViews(list):
    """The segments of an attached array: a list of NumPy views, one per
    segment, in rank order (element ``begins[s] + i`` of the array is
    ``views[s][i]``). The mapping lives as long as any of the views does.

    Made by :func:`attach`, not by hand.

    Parameters
    ----------
    handle : object
        The extension's attachment.
    path : str
        The metadata file attached.

    Attributes
    ----------
    begins : list of int
        The global index of each segment's first element.
    length : int
        The array's global length.
    element_type : str
        The stored element type ("float64", "uint32", ...).
    writable : bool
        Whether the views are writable (``mode="rw"``).
    metadata_path : str
        The metadata file attached.

    Examples
    --------
    >>> a = tessera.arange(tessera.Runtime(), 10, storage="shared")     # in the job
    >>> views = tessera.attach(a.metadata_path)                         # in any process
    >>> views.length, views.element_type, len(views), views.begins      # a job of one rank
    (10, 'int64', 1, [0])
    >>> whole = np.concatenate(views)        # a copy; the views themselves are not
    """

    def __init__(self, handle, path):
        super().__init__(handle.segments())
        self.begins = handle.begins()
        self.length = handle.length
        self.element_type = handle.element_type
        self.writable = handle.writable
        self.metadata_path = path


def attach(metadata_path, mode="r", dtype=None):
    """Maps a Tessera job's shared array into this process: its segments as
    NumPy views, no copy. Needs no MPI and no Runtime (any plain Python
    process of the same user).

    Every field and segment is checked before anything is mapped, as the C
    ABI does.

    Parameters
    ----------
    metadata_path : str or os.PathLike
        The array's metadata, a ``.json`` a Tessera job wrote
        (``DistArray(..., storage="shared").metadata_path``,
        ``Graph.metadata_paths``, a ``.tsg`` directory's ``offsets.json``).
    mode : {"r", "rw"}, default "r"
        "r": read-only views; "rw": writable, seen by the job and every
        other attachment.
    dtype : numpy dtype, optional
        The element type expected (checked against the stored one).

    Returns
    -------
    AttachedViews
        A list of NumPy views, one per segment, with ``begins``, ``length``
        and ``element_type``.

    Raises
    ------
    tessera.FormatError
        Bad metadata.
    tessera.MismatchError
        A segment that disagrees with its metadata, or ``dtype`` given and
        not the stored element type.
    tessera.SystemError
        A missing or unreadable file.
    tessera.ConfigError
        A ``mode`` other than "r" or "rw".

    Examples
    --------
    >>> views = tessera.attach("g.tsg/offsets.json")
    >>> sum(v.size for v in views) == views.length
    True
    >>> views[0].flags.writeable
    False
    """
    if mode not in ("r", "rw"):
        raise ConfigError(f"attach: mode must be \"r\" or \"rw\", not {mode!r}")
    path = str(metadata_path)
    views = AttachedViews(_tessera._attach(path, mode == "rw"), path)
    if dtype is not None and np.dtype(dtype).name != views.element_type:
        raise MismatchError(f"{path} holds {views.element_type}, not {np.dtype(dtype).name}")
    return views
