"""An analyst's session: K resident ranks driven from one plain Python
process (a notebook), graphs kept loaded between commands, results as
read-only NumPy views of the ranks' memory. ``tessera.start(ranks=K)``
starts one, ``tessera.connect(path)`` joins one (``tessera serve``).

    with tessera.start(ranks=2) as s:
        g = s.read_graph("graph.el", undirected=True)
        h = s.hitting_times(s.largest_component(g))
        h                           # in a notebook: a table of its fields and first values
        h.to_pandas()               # file_id, times
"""
from .. import _display
from .client import Remote, Session, SessionLost, connect
from .launch import start

__all__ = ["Remote", "Session", "SessionLost", "connect", "start"]

# How a Remote shows itself in a notebook and lists its fields and arrays
# in dir() (tessera/_display.py, as the package's own results), unless
# client.py defines its own.
for _name, _function in (("_repr_html_", _display.remote_repr_html), ("__dir__", _display.remote_dir)):
    if _name not in vars(Remote):
        setattr(Remote, _name, _function)
del _name, _function
