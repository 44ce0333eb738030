"""Recording a trace from Python SPMD code: ``with tessera.trace("t.json"):``.

The recorder is the C++ one (runtime/): this module only starts and stops it
through the extension, which it imports when a recording starts, so that
``import tessera`` keeps working without the extension for the trace file
tools (tessera.tracefile). Reading a trace: tessera.tracefile.
"""
import os

from ._errors import ConfigError


class Recording:
    """A trace being recorded while the ``with`` block runs (collective:
    every rank enters and leaves together); rank 0 writes ``path`` at the
    end. Made by :func:`tessera.trace`.

    Parameters
    ----------
    path : str or os.PathLike
        The trace file rank 0 writes.
    buffer_mb : int, optional
        Each thread's event buffer (MiB; default: the recorder's).

    Raises
    ------
    tessera.ConfigError
        On entering: the extension has no trace recorder.

    Examples
    --------
    >>> with tessera.trace("t.json") as recording:
    ...     tessera.pagerank(tessera.kron(scale=14))
    >>> recording.path
    't.json'
    """

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
    """A trace of the enclosed code: ``with tessera.trace("t.json"): ...``.
    Collective (every rank enters and leaves the block together).

    Rank 0 writes one file for the job (Chrome Trace Event JSON,
    docs/trace.md) when the block ends: it opens in Perfetto, and
    ``tessera.tracefile`` (``tessera trace summary|plot``) reads it.

    Parameters
    ----------
    path : str or os.PathLike
        The trace file.
    buffer_mb : int, optional
        Bounds each thread's event buffer (MiB; default: the recorder's);
        when full, the oldest events are dropped and counted.

    Returns
    -------
    Recording
        A context manager; ``path`` is the file written.

    Raises
    ------
    tessera.ConfigError
        On entering: a build of the extension without the recorder.

    Examples
    --------
    >>> with tessera.trace("t.json"):
    ...     c = tessera.components(tessera.kron(scale=16))
    >>> import tessera.tracefile as tf
    >>> print(tf.format_summary(tf.summary(tf.load("t.json"))))
    """
    return Recording(path, buffer_mb)
