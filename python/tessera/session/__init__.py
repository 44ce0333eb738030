"""An analyst's session: K resident ranks driven from one plain Python
process (a notebook), graphs kept loaded between commands, results as
read-only NumPy views of the ranks' memory. ``tessera.start(ranks=K)``
starts one, ``tessera.connect(path)`` joins one (``tessera serve``)."""
from .client import Remote, Session, SessionLost, connect, start

__all__ = ["Remote", "Session", "SessionLost", "connect", "start"]
