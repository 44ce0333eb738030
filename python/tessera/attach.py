"""Attaching to a shared Tessera array from any Python process (no MPI)."""
from . import _tessera
import numpy as np

from ._errors import ConfigError, MismatchError


class AttachedViews(list):
    """The segments of an attached array: one NumPy view per segment, in
    rank order (element ``begins[s] + i`` of the array is ``views[s][i]``).
    The mapping lives as long as any of the views does."""

    def __init__(self, handle, path):
        super().__init__(handle.segments())
        self.begins = handle.begins()
        self.length = handle.length
        self.element_type = handle.element_type
        self.writable = handle.writable
        self.metadata_path = path


def attach(metadata_path, mode="r", dtype=None):
    """Maps the shared array described by ``metadata_path`` (a ``.json`` that a
    Tessera job wrote: ``DistArray(..., storage="shared")``, a ``.tsg``
    directory's ``src.json``) and returns its segments as NumPy views, no copy.

    mode "r": read-only views; "rw": writable, seen by the job and every other
    attachment. Every field and segment is checked before anything is mapped,
    as the C ABI does: bad metadata raises ``tessera.FormatError``, a segment
    that disagrees with it ``tessera.MismatchError``, a missing file
    ``tessera.SystemError``; ``dtype`` given and not the stored element type
    ``tessera.MismatchError``. Needs no MPI and no Runtime.
    """
    if mode not in ("r", "rw"):
        raise ConfigError(f"attach: mode must be \"r\" or \"rw\", not {mode!r}")
    path = str(metadata_path)
    views = AttachedViews(_tessera._attach(path, mode == "rw"), path)
    if dtype is not None and np.dtype(dtype).name != views.element_type:
        raise MismatchError(f"{path} holds {views.element_type}, not {np.dtype(dtype).name}")
    return views
