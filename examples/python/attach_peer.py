"""Attach to a running Tessera job's shared arrays from a separate, plain
Python process (no MPI): the views are the job's own memory, mapped, not
copied. Give the metadata paths that analyst_flow.py prints.

Run: PYTHONPATH=build/python python3 examples/python/attach_peer.py /dev/shm/analyst-JOB-times.json [...]
"""
import sys

import numpy as np

import tessera

for path in sys.argv[1:] or ["g.tsg/offsets.json"]:
    try:
        views = tessera.attach(path)                     # read-only; "rw" to write into the job's array
    except tessera.Error as e:                           # bad metadata, missing or damaged segments
        sys.exit(f"{type(e).__name__}: {e}")
    print(f"{path}: {views.length} x {views.element_type} in {len(views)} segment(s), starting at {views.begins}")
    for begin, v in zip(views.begins, views):
        finite = v[np.isfinite(v)] if v.dtype.kind == "f" else v
        if finite.size:
            print(f"  [{begin}, {begin + v.size}): min {finite.min()}, mean {finite.mean():.4f}, max {finite.max()}"
                  f"  (mapped at 0x{v.__array_interface__['data'][0]:x}, writeable={v.flags.writeable})")
