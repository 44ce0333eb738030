"""DistArray: a distributed array whose local block is a NumPy view."""
import numpy as np

from . import _tessera
from ._errors import MismatchError, RangeError
from .runtime import Runtime, agreed

DTYPES = tuple(np.dtype(t) for t in (np.int8, np.uint8, np.int16, np.uint16, np.int32, np.uint32, np.int64,
                                     np.uint64, np.float32, np.float64))
UPDATE_OPS = ("add", "min", "max", "xor")


class DistArray:
    """A distributed array of one of Tessera's dtypes (int8..int64,
    uint8..uint64, float32, float64), one contiguous block per rank.

    ``DistArray(rt, n, dtype=np.float64, storage="default")`` is collective:
    every rank passes the same arguments; elements start at zero. Block
    distribution (the first ``n % ranks`` ranks one element larger), or
    ``sizes=[...]`` (every rank's block length, the same list on every rank).
    ``storage="default"`` is the runtime's choice: the Heap, or co-locale
    segments when the job runs with ``--colocales`` (or
    ``TESSERA_COLOCALE_SEGMENTS=1``), so that co-located ranks read and write
    each other's blocks directly; ``"heap"`` and ``"colocale"`` ask for one.
    ``storage="shared", name=...`` puts each rank's block in a shared-memory
    segment (``dir``: default ``$TESSERA_SHM_DIR`` or ``/dev/shm``) that any
    process can map with ``tessera.attach(a.metadata_path)``; the segments
    go when the array does (``persist=True`` keeps them).

    ``a.local`` is this rank's block as a writable NumPy view: no copy, and
    the memory stays valid while any view of it lives.
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
        """This rank's block: a writable NumPy view of the array's own memory."""
        return self._local

    @property
    def local_range(self):
        """(lo, hi): this rank's global indices [lo, hi)."""
        return self._impl.local_range

    @property
    def size(self):
        """Global length."""
        return self._impl.size

    def __len__(self):
        return self._impl.size

    @property
    def shape(self):
        return (self._impl.size,)

    @property
    def dtype(self):
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
        """"block" or "weighted_block"."""
        return self._impl.distribution

    def owner(self, i):
        """The rank owning global index i (RangeError outside [0, size))."""
        if int(i) < 0:
            raise RangeError(f"index {int(i)} is negative; global indices are in [0, {self.size})")
        return self._impl.owner(int(i))

    def owners(self, indices):
        """The owning rank of each global index (vectorised, local)."""
        idx = _checked_indices("owners", indices, self.size)
        return np.searchsorted(self.offsets, idx, side="right").astype(np.int64) - 1

    @property
    def storage(self):
        """"heap", "shared" or "colocale"."""
        return self._impl.storage

    @property
    def metadata_path(self):
        """Shared storage: the metadata file ``tessera.attach`` takes ("" for Heap)."""
        return self._impl.metadata_path

    # -- bulk aggregated operations (collective) ---------------------------
    def gather(self, indices):
        """Collective: ``out[k] = a[indices[k]]`` for this rank's indices (any
        length, empty too), through an aggregator of remote reads. Returns a new
        ndarray of the array's dtype."""
        idx = agreed(lambda: _checked_indices("gather", indices, self.size))
        return self._impl.gather(idx)

    def scatter(self, indices, values):
        """Collective: ``a[indices[k]] = values[k]`` (remote writes; with
        duplicate indices one of the values is kept, unspecified which).
        ``values``: as many as indices, or one scalar for all."""
        idx, vals = agreed(lambda: self._checked_pair("scatter", indices, values))
        self._impl.scatter(idx, vals)

    def update(self, indices, values, op="add"):
        """Collective: ``a[indices[k]] = op(a[indices[k]], values[k])`` with op
        "add" (``np.add.at``), "min", "max" or "xor" (integers); every value is
        folded in, duplicates included. ``values``: as many as indices, or one
        scalar for all (``a.update(idx, 1)`` is a histogram)."""
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
    """Collective: the permutation that sorts ``a``, as a new uint64
    DistArray on ``a``'s distribution: ``perm[j]`` is the global index of the
    j-th smallest element, ties in index order (stable, like
    ``np.argsort(kind="stable")``; NaNs last). Arkouda's LSD radix argsort
    through the aggregators (comm/argsort.hpp); ``a.gather(perm.local)``
    then reads this rank's part of the sorted array."""
    if not isinstance(a, DistArray):
        raise TypeError("argsort(a): a must be a tessera.DistArray")
    bits = int(digit_bits)

    def check():
        if not 1 <= bits <= 20:
            raise MismatchError(f"argsort: digit_bits must be in 1..20, not {bits}")
    agreed(check)
    return DistArray(None, 0, _impl=a._impl.argsort(bits))


def zeros(rt, n, dtype=np.float64, **storage):
    """Collective: a DistArray of n zeros (``storage``: as DistArray's)."""
    return DistArray(rt, n, dtype, **storage)


def arange(rt, n, dtype=np.int64, **storage):
    """Collective: a DistArray holding 0, 1, ..., n-1."""
    a = DistArray(rt, n, dtype, **storage)
    lo, hi = a.local_range
    a.local[:] = np.arange(lo, hi, dtype=a.dtype)
    return a


def from_local(rt, block, **storage):
    """Collective: a DistArray whose rank-r block is rank r's ``block`` (a
    1-D array; lengths may differ, dtypes must agree). One copy, into the
    array's memory."""
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
    a = DistArray(rt, sum(sizes), b.dtype, sizes=sizes, **storage)
    a.local[:] = b
    return a
