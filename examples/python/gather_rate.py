"""Aggregated remote reads from Python: a.gather over 4 M random indices per
rank into a table of 100,000 int64 per rank (the sizes of `tessera bench
indexgather`), with and without the Python layer's argument checks; compare
with the C++ benchmark's "aggregated heap" row run just before or after.

Run: PYTHONPATH=build/python mpirun -n 2 python3 examples/python/gather_rate.py
     ./build/tessera bench indexgather -n 2
"""
import time

import numpy as np

import tessera

rt = tessera.Runtime()
n = 100_000 * rt.size
a = tessera.arange(rt, n, dtype=np.int64)
idx = np.random.default_rng(rt.rank).integers(0, n, 4_000_000)
assert np.array_equal(a.gather(idx), idx)                # verified, then timed
for label, run in (("a.gather(idx)", lambda: a.gather(idx)),
                   ("C++ bulk gather alone", lambda: a._impl.gather(idx.view(np.uint64)))):
    best = float("inf")
    for _ in range(5):
        rt.barrier()
        start = time.perf_counter()
        run()
        rt.barrier()
        best = min(best, time.perf_counter() - start)
    if rt.rank == 0:
        print(f"{label:24s} {rt.size * idx.size / best / 1e6:6.1f} M reads/s ({rt.size} ranks, best of 5)")
