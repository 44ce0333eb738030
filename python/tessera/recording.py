"""Recording a trace from Python SPMD code: ``with tessera.trace("t.json"):``.

The recorder is the C++ one (runtime/): this module only starts and stops it
through the extension, which it imports when a recording starts, so that
``import tessera`` keeps working without the extension for the trace file
tools (tessera.tracefile). Reading a trace: tessera.tracefile.
"""
import os

from ._errors import ConfigError


class Recording:
    """A trace being recorded between __enter__ and __exit__ (collective:
    every rank enters and leaves together); rank 0 writes `path` at the end."""

    def __init__(self, path, buffer_mb=None):
        self.path = os.fspath(path)
        self.buffer_mb = buffer_mb

    def __enter__(self):
        from . import _tessera
        start = getattr(_tessera, "_trace_start", None)
        if start is None:
            raise ConfigError("this build of the tessera extension has no trace recorder (_trace_start)")
        # buffer_mb None: the recorder's own default.
        start(self.path) if self.buffer_mb is None else start(self.path, self.buffer_mb)
        return self

    def __exit__(self, *exc_info):
        from . import _tessera
        _tessera._trace_stop()
        return False

    def __repr__(self):
        return f"tessera.trace({self.path!r})"


def trace(path, buffer_mb=None):
    """A trace of the enclosed code, written to `path` (Chrome Trace Event
    JSON; docs/trace.md): ``with tessera.trace("t.json"): ...``. buffer_mb
    bounds each thread's event buffer (when full, the oldest events are
    dropped and counted). Collective."""
    return Recording(path, buffer_mb)
