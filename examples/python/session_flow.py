# An analyst's session from a notebook's kernel (a plain interpreter, no mpirun);
# examples/session.ipynb does it step by step, checked against SciPy.
# Run: PYTHONPATH=build/python python3 examples/python/session_flow.py
import os
import tessera

grid = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "grid.el")   # a 5 x 5 grid and a triangle
with tessera.start(ranks=2) as s:                        # two resident ranks (mpirun); stopped at the end
    g = s.read_graph(grid, undirected=True)
    c = s.components(g)
    assert not c.labels.flags.owndata                    # a read-only view of the ranks' memory, not a copy
    lcc = s.largest_component(g, c)
    h = s.hitting_times(lcc, targets=[0])                # expected random-walk steps to vertex 0
    print(f"{c.count} components; the largest: {lcc.vertices} vertices; hitting times to 0: max {h.max:.1f}")
