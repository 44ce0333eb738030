"""DistArray at 1-4 ranks (run through run_pytest.py under mpirun): zero-copy
local views, and gather / scatter / update against NumPy fancy indexing and
np.add.at / np.minimum.at / np.maximum.at / np.bitwise_xor.at on the whole
array, which every rank recomputes from every rank's (seeded) indices."""
import gc
import glob
import os

import numpy as np
import pytest

import tessera

N = 10_007


def rank_indices(r, n, count, seed=0):
    return np.random.default_rng(1000 * seed + r).integers(0, n, count)


def test_acceptance_example(rt):
    a = tessera.DistArray(rt, 100_003, dtype=np.int64)
    lo, hi = a.local_range
    a.local[:] = np.arange(lo, hi) * 3
    idx = np.random.default_rng(rt.rank).integers(0, 100_003, 20_000)
    assert np.array_equal(a.gather(idx), idx * 3)


def test_shape_and_distribution(rt):
    a = tessera.zeros(rt, N, dtype=np.float32)
    assert len(a) == a.size == N and a.dtype == np.float32 and a.shape == (N,)
    ranges = a.owner_ranges
    assert len(ranges) == rt.size and ranges[0][0] == 0 and ranges[-1][1] == N
    assert ranges[rt.rank] == a.local_range
    assert all(ranges[r][1] == ranges[r + 1][0] for r in range(rt.size - 1))
    sizes = [hi - lo for lo, hi in ranges]
    assert max(sizes) - min(sizes) <= 1  # block distribution
    assert a.local.shape == (sizes[rt.rank],) and not a.local.any()
    idx = np.arange(N)
    owners = a.owners(idx)
    assert all(a.owner(int(i)) == owners[i] for i in (0, N // 2, N - 1))
    lo, hi = a.local_range
    assert np.all(owners[lo:hi] == rt.rank)


def test_local_view_is_the_arrays_memory(rt):
    a = tessera.DistArray(rt, N, dtype=np.int64)
    view = a.local
    assert view.flags.writeable and view.flags.c_contiguous
    assert view.__array_interface__["data"][0] == a._impl.local_address   # the C++ span's address
    assert np.shares_memory(view, a.local)
    lo, hi = a.local_range
    view[:] = np.arange(lo, hi) + 7          # written through the view ...
    assert np.array_equal(a.gather(np.arange(N)), np.arange(N) + 7)  # ... read by the C++ aggregator


def test_local_view_outlives_the_python_array(rt):
    a = tessera.arange(rt, N, dtype=np.int64)
    view = a.local
    lo, hi = a.local_range
    del a
    gc.collect()
    assert np.array_equal(view, np.arange(lo, hi))  # the view keeps the storage alive
    view[:] = 1


@pytest.mark.parametrize("dtype", [np.int8, np.uint16, np.int32, np.uint64, np.float32, np.float64])
def test_gather_matches_fancy_indexing(rt, dtype):
    reference = (np.arange(N) * 7 % 101).astype(dtype)
    a = tessera.DistArray(rt, N, dtype=dtype)
    lo, hi = a.local_range
    a.local[:] = reference[lo:hi]
    idx = rank_indices(rt.rank, N, 3000 + 500 * rt.rank)
    got = a.gather(idx)
    assert got.dtype == np.dtype(dtype)
    assert np.array_equal(got, reference[idx])
    assert a.gather(np.array([], dtype=np.int64)).size == 0
    assert a.gather(idx.astype(np.uint32)).tolist() == reference[idx].tolist()


def test_scatter_matches_fancy_assignment(rt):
    a = tessera.DistArray(rt, N, dtype=np.float64)
    # distinct indices over the whole job: each rank writes its slice of a permutation
    perm = np.random.default_rng(5).permutation(N)[: N // 2]
    mine = np.array_split(perm, rt.size)[rt.rank]
    a.scatter(mine, mine * 0.5)
    reference = np.zeros(N)
    reference[perm] = perm * 0.5
    assert np.array_equal(a.gather(np.arange(N)), reference)
    a.scatter(mine, 2.0)                      # one scalar for every index
    reference[perm] = 2.0
    assert np.array_equal(a.gather(np.arange(N)), reference)


@pytest.mark.parametrize("op,dtype,reference_at", [
    ("add", np.int64, np.add.at),
    ("add", np.float64, np.add.at),
    ("add", np.uint8, np.add.at),
    ("min", np.int32, np.minimum.at),
    ("min", np.float64, np.minimum.at),
    ("max", np.uint64, np.maximum.at),
    ("xor", np.int64, np.bitwise_xor.at),
])
def test_update_matches_numpy_at(rt, op, dtype, reference_at):
    start = (np.arange(N) % 50 + 20).astype(dtype)
    a = tessera.DistArray(rt, N, dtype=dtype)
    lo, hi = a.local_range
    a.local[:] = start[lo:hi]
    reference = start.copy()
    for r in range(rt.size):                 # every rank's updates, duplicates included
        idx = rank_indices(r, N // 10, 4000, seed=1)
        vals = (np.random.default_rng(r).integers(0, 40, idx.size)).astype(dtype)
        reference_at(reference, idx, vals)
        if r == rt.rank:
            mine_idx, mine_vals = idx, vals
    a.update(mine_idx, mine_vals, op=op)
    got = a.gather(np.arange(N))
    if np.dtype(dtype).kind == "f":
        assert np.allclose(got, reference, rtol=1e-12)
    else:
        assert np.array_equal(got, reference)


def test_histogram_with_scalar_increment(rt):
    counts = tessera.zeros(rt, 100, dtype=np.int64)
    idx = rank_indices(rt.rank, 100, 5000, seed=2)
    counts.update(idx, 1)
    reference = np.zeros(100, dtype=np.int64)
    for r in range(rt.size):
        np.add.at(reference, rank_indices(r, 100, 5000, seed=2), 1)
    assert np.array_equal(counts.gather(np.arange(100)), reference)


def test_from_local_and_arange(rt):
    block = np.full(rt.rank + 2, rt.rank, dtype=np.int16)   # unequal blocks
    a = tessera.from_local(rt, block)
    sizes = [r + 2 for r in range(rt.size)]
    assert a.size == sum(sizes) and a.dtype == np.int16
    assert a.offsets.tolist() == np.concatenate([[0], np.cumsum(sizes)]).tolist()
    assert np.array_equal(a.gather(np.arange(a.size)), np.repeat(np.arange(rt.size), sizes).astype(np.int16))
    b = tessera.arange(rt, 1234, dtype=np.uint32)
    assert np.array_equal(b.gather(np.arange(1234)[::-1]), np.arange(1234)[::-1])


# -- bad input: a clear exception on every rank, nothing half done -----------

def test_out_of_range_index_on_one_rank_raises_everywhere(rt):
    a = tessera.arange(rt, N, dtype=np.int64)
    idx = np.arange(10)
    if rt.rank == rt.size - 1:
        idx[3] = N + 5
    with pytest.raises(tessera.RangeError, match=f"index {N + 5} .*position 3.*out of range"):
        a.gather(idx)
    with pytest.raises(IndexError):          # RangeError is an IndexError too
        a.scatter(idx, np.zeros(10, dtype=np.int64))
    assert np.array_equal(a.gather(np.arange(N)), np.arange(N))  # nothing was written


def test_negative_index_raises_everywhere(rt):
    a = tessera.arange(rt, N, dtype=np.int64)
    idx = np.array([1, 2, -4]) if rt.rank == 0 else np.array([1])
    with pytest.raises(tessera.RangeError, match="index -4 .*position 2"):
        a.update(idx, 1)
    assert np.array_equal(a.gather(np.arange(N)), np.arange(N))


def test_wrong_dtype_raises_everywhere(rt):
    a = tessera.zeros(rt, N, dtype=np.int64)
    vals = np.ones(4) * 0.5 if rt.rank == 0 else np.ones(4, dtype=np.int64)
    with pytest.raises(tessera.MismatchError, match="float64 cannot be stored in a int64 array"):
        a.scatter(np.arange(4), vals)
    with pytest.raises(tessera.MismatchError, match="indices must be integers"):
        a.gather(np.arange(4) * 1.0)
    with pytest.raises(tessera.MismatchError, match="not an element type"):
        tessera.DistArray(rt, 10, dtype=np.complex128)
    with pytest.raises(tessera.MismatchError, match="needs an integer array"):
        tessera.zeros(rt, 10).update(np.arange(3), 1.0, op="xor")
    with pytest.raises(tessera.MismatchError, match="op must be one of"):
        a.update(np.arange(3), 1, op="mul")
    assert not a.gather(np.arange(N)).any()


def test_mismatched_lengths_raise_everywhere(rt):
    a = tessera.zeros(rt, N, dtype=np.float64)
    vals = np.ones(3) if rt.rank == rt.size - 1 else np.ones(5)
    with pytest.raises(tessera.MismatchError, match="5 indices but 3 values"):
        a.update(np.arange(5), vals)
    assert not a.gather(np.arange(N)).any()


def test_shared_array_and_no_segment_left_behind(rt):
    shm = os.environ.get("TESSERA_SHM_DIR", "/dev/shm")
    name = f"pytest-{rt.job_id}-shared"
    a = tessera.DistArray(rt, N, dtype=np.float64, storage="shared", name=name)
    assert a.storage == "shared" and a.metadata_path == f"{shm}/{name}.json"
    lo, hi = a.local_range
    a.local[:] = np.arange(lo, hi) / 2
    views = tessera.attach(a.metadata_path, "rw")   # the same bytes, mapped again, in this process
    assert len(views) == rt.size and views.begins == [r[0] for r in a.owner_ranges]
    assert np.array_equal(views[rt.rank], a.local)
    views[rt.rank][0] = -1.0                        # written through the attachment ...
    assert a.local[0] == -1.0                        # ... seen in the array's own view
    rt.barrier()
    with pytest.raises(tessera.ConfigError, match="already exists"):
        tessera.DistArray(rt, 10, storage="shared", name=name)
    with pytest.raises(tessera.RangeError):
        a.gather([N])
    with pytest.raises(tessera.MismatchError):
        a.scatter([0, 1], np.ones(3))
    del views, a
    gc.collect()
    rt.barrier()
    assert glob.glob(f"{shm}/{name}*") == []


def test_bad_storage_arguments(rt):
    with pytest.raises(tessera.ConfigError, match="storage must be"):
        tessera.DistArray(rt, 10, storage="disk")
    with pytest.raises(tessera.ConfigError, match="needs storage=\"shared\""):
        tessera.DistArray(rt, 10, name="x")
    with pytest.raises(tessera.ConfigError, match="not a plain file name"):
        tessera.DistArray(rt, 10, storage="shared", name="../escape")


def whole_array(rt, n, dtype, seed):
    """The same array on every rank (each computes all of it), and its DistArray."""
    rng = np.random.default_rng(seed)
    if np.dtype(dtype).kind == "f":
        values = rng.normal(size=n).astype(dtype)
        values[::97] = values[1]  # ties
        values[5] = np.nan
        values[7] = -0.0
    else:
        info = np.iinfo(dtype)
        values = rng.integers(info.min, info.max, n, dtype=dtype, endpoint=True)
        values[::13] = values[2]  # ties
    a = tessera.DistArray(rt, n, dtype=dtype)
    lo, hi = a.local_range
    a.local[:] = values[lo:hi]
    return values, a


@pytest.mark.parametrize("dtype", [np.uint64, np.int64, np.int32, np.uint8, np.float64, np.float32])
def test_argsort_matches_numpy_stable_argsort(rt, dtype):
    values, a = whole_array(rt, N, dtype, seed=7)
    perm = tessera.argsort(a)
    assert perm.dtype == np.uint64 and perm.size == N and perm.local_range == a.local_range
    lo, hi = perm.local_range
    want = np.argsort(values, kind="stable")
    assert np.array_equal(perm.local, want[lo:hi])
    # The sorted array itself, through the aggregated gather a[perm].
    got = a.gather(perm.local)
    assert np.array_equal(got, values[want[lo:hi]], equal_nan=np.dtype(dtype).kind == "f")


def test_argsort_bad_arguments(rt):
    a = tessera.arange(rt, 100)
    with pytest.raises(tessera.MismatchError, match="digit_bits"):
        tessera.argsort(a, digit_bits=0)
    with pytest.raises(TypeError):
        tessera.argsort(np.arange(4))
