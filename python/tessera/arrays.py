"""DistArray: a distributed array whose local block is a NumPy view."""
import numpy as np

from . import _display, _tessera
from ._errors import MismatchError, RangeError
from .runtime import Runtime, agreed

DTYPES = tuple(np.dtype(t) for t in (np.int8, np.uint8, np.int16, np.uint16, np.int32, np.uint32, np.int64,
                                     np.uint64, np.float32, np.float64))
UPDATE_OPS = ("add", "min", "max", "xor")


class DistArray:
    """A distributed array of one of Tessera's dtypes (int8..int64,
    uint8..uint64, float32, float64), one contiguous block per rank.

    Collective: every rank passes the same arguments; elements start at
    zero. ``a.local`` is this rank's block as a writable NumPy view: no
    copy, and the memory stays valid while any view of it lives.

    Parameters
    ----------
    rt : Runtime
        The runtime (``tessera.Runtime()``).
    n : int
        Global length (elements).
    dtype : numpy dtype, default numpy.float64
        int8..int64, uint8..uint64, float32 or float64.
    storage : {"default", "heap", "colocale", "shared"}, default "default"
        "default" is the runtime's choice: the Heap, or co-locale segments
        when the job runs with ``--colocales`` (or
        ``TESSERA_COLOCALE_SEGMENTS=1``), so that co-located ranks read and
        write each other's blocks directly; "heap" and "colocale" ask for
        one. "shared" puts each rank's block in a shared-memory segment that
        any process can map with ``tessera.attach(a.metadata_path)``.
    name : str, optional
        Shared storage: the segments' name (default: one made up).
    dir : str, optional
        Shared storage: their directory (default ``$TESSERA_SHM_DIR`` or
        ``/dev/shm``).
    persist : bool, default False
        Shared storage: keep the segments after the array goes (else they
        go with it).
    sizes : sequence of int, optional
        Every rank's block length (the same list on every rank; their sum
        is ``n``): a weighted block distribution. Default: block
        distribution, the first ``n % ranks`` ranks one element larger.

    Raises
    ------
    tessera.MismatchError
        A dtype that is not one of the above; ``sizes`` that do not add up
        to ``n`` or are not one per rank.
    tessera.ConfigError
        An unknown ``storage``.
    tessera.SystemError
        Shared storage: a segment cannot be made (a full ``/dev/shm``).

    Examples
    --------
    >>> rt = tessera.Runtime()
    >>> a = tessera.DistArray(rt, 1000, dtype=np.int64)
    >>> lo, hi = a.local_range
    >>> a.local[:] = np.arange(lo, hi)           # this rank's block, no copy
    >>> a.gather(np.array([0, 999]))             # collective: aggregated remote reads
    array([  0, 999])
    """

    def __init__(self, rt, n, dtype=np.float64, storage="default", name=None, dir=None, persist=False, sizes=None,
                 *, _impl=None):
        if _impl is None:
            if not isinstance(rt, Runtime):
                raise TypeError("DistArray(rt, n, ...): rt must be a tessera.Runtime")
            _impl = _tessera._DistArray(int(n), np.dtype(dtype), storage, name or "", dir or "", bool(persist),
                                        None if sizes is None else [int(s) for s in sizes])
        self._impl = _impl
        self._local = _impl.local()

    # -- shape and distribution -------------------------------------------
    @property
    def local(self):
        """This rank's block: a writable NumPy view of the array's own memory
        (``local[i]`` is global element ``local_range[0] + i``)."""
        return self._local

    @property
    def local_range(self):
        """(lo, hi): this rank's global indices [lo, hi)."""
        return self._impl.local_range

    @property
    def size(self):
        """Global length (elements over all ranks)."""
        return self._impl.size

    def __len__(self):
        return self._impl.size

    @property
    def shape(self):
        """``(size,)``: the global shape, as NumPy's."""
        return (self._impl.size,)

    @property
    def dtype(self):
        """The element type (a ``numpy.dtype``)."""
        return self._local.dtype

    @property
    def offsets(self):
        """Block boundaries: rank r owns [offsets[r], offsets[r + 1])."""
        return np.asarray(self._impl.offsets, dtype=np.uint64)

    @property
    def owner_ranges(self):
        """[(lo, hi) of every rank], in rank order."""
        o = self._impl.offsets
        return [(o[r], o[r + 1]) for r in range(len(o) - 1)]

    @property
    def distribution(self):
        """The distribution: "block", or "weighted_block" (made with ``sizes``)."""
        return self._impl.distribution

    def owner(self, i):
        """The rank owning global index ``i``. Local (no communication).

        Parameters
        ----------
        i : int
            A global index in [0, size).

        Returns
        -------
        int
            The owning rank.

        Raises
        ------
        tessera.RangeError
            ``i`` outside [0, size).

        Examples
        --------
        >>> a = tessera.zeros(rt, 10)
        >>> a.owner(9)                     # at 2 ranks
        1
        """
        if int(i) < 0:
            raise RangeError(f"index {int(i)} is negative; global indices are in [0, {self.size})")
        return self._impl.owner(int(i))

    def owners(self, indices):
        """The owning rank of each global index (vectorised). Local.

        Parameters
        ----------
        indices : array_like of int
            Global indices in [0, size), 1-D.

        Returns
        -------
        numpy.ndarray
            int64: the owner of each index.

        Raises
        ------
        tessera.RangeError
            An index outside [0, size).
        tessera.MismatchError
            Indices that are not 1-D integers.

        Examples
        --------
        >>> tessera.zeros(rt, 10).owners([0, 9])      # at 2 ranks
        array([0, 1])
        """
        idx = _checked_indices("owners", indices, self.size)
        return np.searchsorted(self.offsets, idx, side="right").astype(np.int64) - 1

    @property
    def storage(self):
        """Where the array lives: "heap", "shared" or "colocale"."""
        return self._impl.storage

    @property
    def metadata_path(self):
        """Shared storage: the metadata file ``tessera.attach`` takes ("" for Heap)."""
        return self._impl.metadata_path

    # -- bulk aggregated operations (collective) ---------------------------
    def gather(self, indices):
        """``out[k] = a[indices[k]]`` for this rank's indices, through an
        aggregator of remote reads (Arkouda's ``A[idx]``). Collective: every
        rank calls it, with its own indices (any length, empty too).

        Parameters
        ----------
        indices : array_like of int
            Global indices in [0, size), 1-D.

        Returns
        -------
        numpy.ndarray
            A new array of the array's dtype, one value per index.

        Raises
        ------
        tessera.RangeError
            An index outside [0, size) (on every rank: the lowest failing
            rank's error).
        tessera.MismatchError
            Indices that are not 1-D integers.

        Examples
        --------
        >>> a = tessera.arange(rt, 100)
        >>> a.gather([99, 0, 99])
        array([99,  0, 99])
        """
        idx = agreed(lambda: _checked_indices("gather", indices, self.size))
        return self._impl.gather(idx)

    def scatter(self, indices, values):
        """``a[indices[k]] = values[k]`` through an aggregator of remote
        writes (Arkouda's ``A[idx] = v``). Collective; complete and visible
        everywhere on return. With duplicate indices one of the values is
        kept, unspecified which.

        Parameters
        ----------
        indices : array_like of int
            Global indices in [0, size), 1-D.
        values : array_like or scalar
            As many as ``indices``, or one scalar for all; they must fit the
            array's dtype without loss.

        Raises
        ------
        tessera.RangeError
            An index outside [0, size).
        tessera.MismatchError
            Indices that are not 1-D integers, values of another length, or
            values the dtype cannot hold unchanged.

        Examples
        --------
        >>> a = tessera.zeros(rt, 10, dtype=np.int64)
        >>> a.scatter([1, 3], [10, 30])
        >>> a.gather([1, 3])
        array([10, 30])
        """
        idx, vals = agreed(lambda: self._checked_pair("scatter", indices, values))
        self._impl.scatter(idx, vals)

    def update(self, indices, values, op="add"):
        """``a[indices[k]] = op(a[indices[k]], values[k])``, every value folded
        in, duplicates included (Arkouda's ``A[idx] op= v``; "add" is
        ``np.add.at``). Collective.

        Parameters
        ----------
        indices : array_like of int
            Global indices in [0, size), 1-D.
        values : array_like or scalar
            As many as ``indices``, or one scalar for all (``a.update(idx,
            1)`` is a histogram).
        op : {"add", "min", "max", "xor"}, default "add"
            How a value folds in ("xor": integer arrays only).

        Raises
        ------
        tessera.MismatchError
            An unknown ``op``, "xor" on a float array, indices or values as
            for ``scatter``.
        tessera.RangeError
            An index outside [0, size).

        Examples
        --------
        >>> counts = tessera.zeros(rt, 10, dtype=np.int64)
        >>> counts.update(np.array([3, 3, 7]), 1)
        >>> counts.gather([3, 7])                       # at one rank
        array([2, 1])
        """
        def check():
            if op not in UPDATE_OPS:
                raise MismatchError(f"update: op must be one of {', '.join(UPDATE_OPS)}, not {op!r}")
            if op == "xor" and self.dtype.kind == "f":
                raise MismatchError(f"update(op=\"xor\") needs an integer array, not {self.dtype}")
            return self._checked_pair("update", indices, values)
        idx, vals = agreed(check)
        self._impl.update(idx, vals, op)

    def _checked_pair(self, operation, indices, values):
        idx = _checked_indices(operation, indices, self.size)
        vals = _checked_values(operation, values, self.dtype, len(idx))
        return idx, vals

    def _repr_html_(self):
        rows = [("size", self.size), ("dtype", str(self.dtype)), ("storage", self.storage),
                ("distribution", self.distribution), ("local_range", self.local_range), ("local", self.local)]
        if self.metadata_path:
            rows.append(("metadata_path", self.metadata_path))
        return _display.html_table("tessera.DistArray", rows)

    def __repr__(self):
        return (f"tessera.DistArray(size={self.size}, dtype={self.dtype}, storage={self.storage!r}, "
                f"local_range={self.local_range})")


def _checked_indices(operation, indices, size):
    """This rank's indices as a contiguous uint64 array (a view when they
    already are non-negative 64-bit integers); the range check against
    ``size`` is the library's, on every rank."""
    a = np.asarray(indices)
    if a.ndim == 0:
        a = a.reshape(1)
    if a.ndim != 1:
        raise MismatchError(f"{operation}: indices must be a 1-D array, not of shape {a.shape}")
    if a.size == 0:
        return np.empty(0, dtype=np.uint64)
    if a.dtype.kind not in "iu":
        raise MismatchError(f"{operation}: indices must be integers, not {a.dtype}")
    if a.dtype.kind == "i":
        if int(a.min()) < 0:
            k = int(np.argmax(a < 0))
            raise RangeError(f"{operation}: index {int(a[k])} (position {k} of this rank's indices) is out of "
                             f"range [0, {size})")
    a = np.ascontiguousarray(a)
    if a.dtype.itemsize == 8:
        return a.view(np.uint64)
    return a.astype(np.uint64)


def _checked_values(operation, values, dtype, count):
    v = np.asarray(values)
    if v.ndim == 0:
        if v.dtype.kind not in "biuf":
            raise MismatchError(f"{operation}: a value of dtype {v.dtype} cannot go into a {dtype} array")
        cast = np.asarray(v, dtype=dtype) if v.dtype.kind != "f" or dtype.kind == "f" else None
        if cast is None or cast != v:
            raise MismatchError(f"{operation}: value {v.item()!r} cannot be stored in a {dtype} array unchanged")
        return np.full(count, cast, dtype=dtype)
    if v.ndim != 1:
        raise MismatchError(f"{operation}: values must be a 1-D array, not of shape {v.shape}")
    if v.dtype != dtype:
        fits = np.can_cast(v.dtype, dtype, casting="safe")
        if not fits and v.dtype.kind in "iub" and dtype.kind in "iu":
            info = np.iinfo(dtype)
            fits = v.size == 0 or (int(v.min()) >= info.min and int(v.max()) <= info.max)
        if not fits:
            raise MismatchError(f"{operation}: values of dtype {v.dtype} cannot be stored in a {dtype} array "
                                f"without loss (convert them with .astype(np.{dtype}) first)")
        v = v.astype(dtype)
    return np.ascontiguousarray(v)


def argsort(a, digit_bits=16):
    """The permutation that sorts ``a``: Arkouda's LSD radix argsort
    through the aggregators (comm/argsort.hpp). Collective.

    Parameters
    ----------
    a : DistArray
        Any of Tessera's dtypes.
    digit_bits : int, default 16
        Bits per radix pass (1..20): fewer passes, larger count tables.

    Returns
    -------
    DistArray
        uint64 on ``a``'s distribution: ``perm[j]`` is the global index of
        the j-th smallest element, ties in index order (stable, like
        ``np.argsort(kind="stable")``; NaNs last).

    Raises
    ------
    TypeError
        ``a`` is not a DistArray.
    tessera.MismatchError
        ``digit_bits`` outside 1..20.

    Examples
    --------
    >>> a = tessera.from_local(rt, np.array([3.0, 1.0, 2.0]))    # at one rank
    >>> perm = tessera.argsort(a)
    >>> a.gather(perm.local)                   # this rank's part of the sorted array
    array([1., 2., 3.])
    """
    if not isinstance(a, DistArray):
        raise TypeError("argsort(a): a must be a tessera.DistArray")
    bits = int(digit_bits)

    def check():
        if not 1 <= bits <= 20:
            raise MismatchError(f"argsort: digit_bits must be in 1..20, not {bits}")
    agreed(check)
    return DistArray(None, 0, _impl=a._impl.argsort(bits))


_STORAGE_DOC = """storage : {"default", "heap", "colocale", "shared"}, default "default"
        Where the array lives (as ``DistArray``'s).
    name : str, optional
        Shared storage: the segments' name (default: one made up).
    dir : str, optional
        Shared storage: their directory (default ``$TESSERA_SHM_DIR`` or
        ``/dev/shm``).
    persist : bool, default False
        Shared storage: keep the segments after the array goes."""


def zeros(rt, n, dtype=np.float64, *, storage="default", name=None, dir=None, persist=False, sizes=None):
    """A DistArray of ``n`` zeros. Collective.

    Parameters
    ----------
    rt : Runtime
        The runtime.
    n : int
        Global length.
    dtype : numpy dtype, default numpy.float64
        One of Tessera's dtypes.
    {STORAGE}
    sizes : sequence of int, optional
        Every rank's block length (weighted block distribution).

    Returns
    -------
    DistArray
        Zeros, block-distributed (or by ``sizes``).

    Raises
    ------
    tessera.MismatchError
        A dtype Tessera arrays do not hold; bad ``sizes``.
    tessera.ConfigError
        An unknown ``storage``.

    Examples
    --------
    >>> counts = tessera.zeros(tessera.Runtime(), 10, dtype=np.int64)
    >>> counts.local.sum()
    0
    """
    return DistArray(rt, n, dtype, storage=storage, name=name, dir=dir, persist=persist, sizes=sizes)


def arange(rt, n, dtype=np.int64, *, storage="default", name=None, dir=None, persist=False, sizes=None):
    """A DistArray holding 0, 1, ..., n-1. Collective.

    Parameters
    ----------
    rt : Runtime
        The runtime.
    n : int
        Global length.
    dtype : numpy dtype, default numpy.int64
        One of Tessera's dtypes.
    {STORAGE}
    sizes : sequence of int, optional
        Every rank's block length (weighted block distribution).

    Returns
    -------
    DistArray
        ``a.local`` is ``np.arange(lo, hi)`` on every rank.

    Raises
    ------
    tessera.MismatchError
        A dtype Tessera arrays do not hold; bad ``sizes``.
    tessera.ConfigError
        An unknown ``storage``.

    Examples
    --------
    >>> a = tessera.arange(tessera.Runtime(), 5)
    >>> a.gather([4, 0])
    array([4, 0])
    """
    a = DistArray(rt, n, dtype, storage=storage, name=name, dir=dir, persist=persist, sizes=sizes)
    lo, hi = a.local_range
    a.local[:] = np.arange(lo, hi, dtype=a.dtype)
    return a


def from_local(rt, block, *, storage="default", name=None, dir=None, persist=False):
    """A DistArray whose rank-r block is rank r's ``block``. Collective;
    one copy, into the array's memory.

    Parameters
    ----------
    rt : Runtime
        The runtime.
    block : array_like
        This rank's block: 1-D; lengths may differ between ranks, dtypes
        must agree.
    {STORAGE}

    Returns
    -------
    DistArray
        Of the blocks' dtype, each rank's block where it was given
        (``sizes`` the blocks' lengths).

    Raises
    ------
    tessera.MismatchError
        A block that is not 1-D, a dtype Tessera arrays do not hold, or
        dtypes that differ between ranks (on every rank).

    Examples
    --------
    >>> rt = tessera.Runtime()
    >>> a = tessera.from_local(rt, np.full(rt.rank + 1, rt.rank))   # blocks of 1, 2, ... elements
    >>> a.size == rt.size * (rt.size + 1) // 2
    True
    """
    b = np.asarray(block)

    def check():
        if b.ndim != 1:
            raise MismatchError(f"from_local: the block must be 1-D, not of shape {b.shape}")
        if b.dtype not in DTYPES:
            raise MismatchError(f"from_local: dtype {b.dtype} is not an element type of Tessera arrays "
                                "(int8..int64, uint8..uint64, float32, float64)")
    agreed(check)
    kinds = rt.allgather(DTYPES.index(b.dtype))
    if len(set(kinds)) != 1:
        raise MismatchError("from_local: the ranks' blocks have different dtypes: " +
                            ", ".join(f"rank {r} {DTYPES[k]}" for r, k in enumerate(kinds)))
    sizes = rt.allgather(len(b))
    a = DistArray(rt, sum(sizes), b.dtype, storage=storage, name=name, dir=dir, persist=persist, sizes=sizes)
    a.local[:] = b
    return a


for _f in (zeros, arange, from_local):
    _f.__doc__ = None if _f.__doc__ is None else _f.__doc__.replace("{STORAGE}", _STORAGE_DOC)
del _f
