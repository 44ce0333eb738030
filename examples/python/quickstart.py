# Distributed arrays as NumPy views, and aggregated remote reads and updates.
# Run: PYTHONPATH=build/python mpirun -n 2 python3 examples/python/quickstart.py
import numpy as np
import tessera

rt = tessera.Runtime()                                   # MPI up (or borrowed from mpi4py)
a = tessera.DistArray(rt, 100_003, dtype=np.int64)       # Heap storage, block distribution
lo, hi = a.local_range                                   # this rank's global index range
a.local[:] = np.arange(lo, hi) * 3                       # writes through the zero-copy view
idx = np.random.default_rng(rt.rank).integers(0, 100_003, 20_000)
assert np.array_equal(a.gather(idx), idx * 3)            # aggregated remote reads

counts = tessera.zeros(rt, 10, dtype=np.int64)           # a histogram: np.add.at over all ranks
counts.update(idx % 10, 1, op="add")
everything = counts.gather(np.arange(10))                # collective: every rank calls it
if rt.rank == 0:
    print("counts:", everything, "of", rt.size * idx.size, "reads")
