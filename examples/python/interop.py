# Graphs in from SciPy, NetworkX and pandas, and out to SciPy and pandas, in a session.
# Run: PYTHONPATH=build/python python3 examples/python/interop.py
import os
import networkx as nx
import numpy as np
import pandas as pd
import scipy.sparse as sp
import tessera

grid = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "grid.el")   # a 5 x 5 grid and a triangle
edges = np.loadtxt(grid, dtype=np.int64, comments="#")
with tessera.start(ranks=2) as s:
    A = sp.coo_array((np.ones(len(edges)), edges.T), shape=(edges.max() + 1,) * 2).tocsr()
    g = s.from_scipy(A)                                  # arc i -> j of weight A[i, j]
    assert (g.to_scipy() != A).nnz == 0                  # and back: the same matrix
    h = s.from_networkx(nx.Graph(edges.tolist()))        # vertex k is list(G.nodes)[k]: h.nodes
    p = s.from_pandas(pd.DataFrame(edges + 100, columns=["a", "b"]), source="a", target="b", undirected=True)
    lcc = s.largest_component(p)
    t = s.hitting_times(lcc, targets=[100]).to_pandas()  # file_id (the frame's ids), times
    print(f"{s.components(h).count} components; {t.file_id.min()}..{t.file_id.max()}: max {t.times.max():.1f} steps")
