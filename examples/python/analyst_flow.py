"""The analyst's flow on Tessera from Python: a graph (read or generated),
its largest connected component, random-walk hitting times to its
best-connected vertex, and a NumPy summary with a histogram saved as a PNG
(matplotlib, when installed; a text histogram otherwise).

The largest component and the hitting times live in shared memory while the
job runs: attach_peer.py, started from any other Python process, maps them.

Run: PYTHONPATH=build/python mpirun -n 2 python3 examples/python/analyst_flow.py [GRAPH]
       [--scale 14] [--png hitting.png] [--hold-until FILE] [--ready FILE]
"""
import argparse
import os
import time

import numpy as np

import tessera

parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
parser.add_argument("graph", nargs="?", help="graph file (.el, .mtx, .tsg); default: a generated Kronecker graph")
parser.add_argument("--scale", type=int, default=14, help="generated graph: 2^scale vertices")
parser.add_argument("--png", default="hitting_times.png", help="histogram output")
parser.add_argument("--bins", type=int, default=40)
parser.add_argument("--ready", help="write the shared arrays' metadata paths to this file once they exist")
parser.add_argument("--hold-until", help="keep the shared arrays until this file exists (for attach_peer.py)")
args = parser.parse_args()

rt = tessera.Runtime()
say = print if rt.rank == 0 else (lambda *a, **k: None)
start = time.perf_counter()

# 1. The graph, every rank reading its own byte range (or generating its share).
g = tessera.read_graph(args.graph, undirected=True) if args.graph else tessera.kron(scale=args.scale)
say(f"[{time.perf_counter() - start:6.2f} s] {g}")

# 2. Components, then the largest one, into shared memory (no copy of its edges after that).
c = tessera.components(g)
name = f"analyst-{rt.job_id}"
lcc = tessera.largest_component(g, c, storage="shared", name=name)
say(f"[{time.perf_counter() - start:6.2f} s] {c.count} components; the largest has {lcc.vertices} vertices, "
    f"{lcc.edges} edges ({lcc.dst.dtype} ids): {lcc.metadata_paths['dst']}")

# 3. Hitting times to the highest-degree vertex (Tessera's CG on the edge arrays).
h = tessera.hitting_times(lcc)
say(f"[{time.perf_counter() - start:6.2f} s] hitting times to vertex {h.targets[0]}: {h.iterations} CG iterations, "
    f"mean {h.mean:.2f}, max {h.max:.2f} (vertex {h.farthest})")

# 4. The summary: a histogram over every rank's times, counted with an
#    aggregated update (np.add.at across the job), read back on rank 0.
times = h.times.local                                    # this rank's times: a view, no copy
edges = np.linspace(0.0, h.max, args.bins + 1)
bins = np.clip(np.searchsorted(edges, times, side="right") - 1, 0, args.bins - 1)
counts = tessera.zeros(rt, args.bins, dtype=np.int64)
counts.update(bins, 1)
histogram = counts.gather(np.arange(args.bins) if rt.rank == 0 else [])
shared_times = tessera.from_local(rt, times, storage="shared", name=f"{name}-times")

if rt.rank == 0:
    assert histogram.sum() == lcc.vertices
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        fig, ax = plt.subplots(figsize=(7, 4))
        ax.bar(edges[:-1], histogram, width=np.diff(edges), align="edge")
        ax.set_xlabel(f"expected steps to reach vertex {h.targets[0]}")
        ax.set_ylabel("vertices")
        ax.set_title(f"Hitting times on the largest component ({lcc.vertices} vertices)")
        fig.tight_layout()
        fig.savefig(args.png, dpi=100)
        print(f"histogram saved to {args.png}")
    except ImportError:
        print("matplotlib is not installed; the histogram as text:")
        for lo, n in zip(edges[:-1], histogram):
            print(f"{lo:10.1f} {'#' * int(60 * n / histogram.max())} {n}")

    if args.ready:
        with open(args.ready + ".tmp", "w") as f:
            f.write(f"{lcc.metadata_paths['offsets']}\n{shared_times.metadata_path}\n")
        os.rename(args.ready + ".tmp", args.ready)
    say(f"attach from any Python process: python3 examples/python/attach_peer.py {shared_times.metadata_path}")
if args.hold_until:
    while rt.rank == 0 and not os.path.exists(args.hold_until):
        time.sleep(0.05)
    rt.barrier()
