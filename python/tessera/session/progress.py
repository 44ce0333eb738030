"""How a verbose command's progress reaches the analyst.

In a Jupyter notebook: one block under the cell, updated in place (a bar,
the step the command is in, its latest detail, the seconds so far) rather
than a stream of lines. Elsewhere: the lines on stderr, as the command line
prints them. The bar is determinate where the progress can be measured: an
iterative solve's residual (or PageRank's change) on a log scale from its
first value to the tolerance asked for; otherwise it shows activity only.
The session's live page (dashboard.py) reads the same lines with ``Progress``.
"""
import html
import math
import re
import sys
import time

# "[  12.34 s] text" (a step) or "[  12.34 s]   text" (a detail), the form of
# pipeline::stderr_sink.
_LINE = re.compile(r"^\[\s*([0-9.]+) s\] (\s*)(.*)$")
# Details that measure distance to convergence: CG's relative residual,
# PageRank's L1 change.
_MEASURE = re.compile(r"(?:relative residual|L1 change) ([0-9.eE+-]+)")


def in_notebook():
    """Whether this process is a Jupyter kernel (a display can be updated)."""
    if "ipykernel" not in sys.modules:
        return False
    try:
        from IPython import get_ipython
    except ImportError:
        return False
    shell = get_ipython()
    return shell is not None and getattr(shell, "kernel", None) is not None


def print_line(line):
    print(line, file=sys.stderr, flush=True)


def default_tolerance(op, args):
    """The tolerance a command's measured progress runs down to: the one
    asked for, else the command's default (None: not measurable)."""
    tolerance = args.get("tolerance")
    if tolerance is None:
        tolerance = {"hitting_times": 1e-10, "pagerank": 1e-4}.get(args.get("name") or op)
    return tolerance


class Progress:
    """One command's progress lines, read: the step it is in, its latest
    detail, the seconds so far and, where measurable, the fraction done."""

    def __init__(self, op, tolerance=None):
        self.op = op
        self.tolerance = tolerance
        self.step = ""
        self.detail = ""
        self.seconds = 0.0
        self.fraction = None
        self._first = None

    def line(self, text):
        m = _LINE.match(text)
        if m:
            self.seconds = float(m.group(1))
            if m.group(2):
                self.detail = m.group(3)
                self._measure(m.group(3))
            else:
                self.step, self.detail, self.fraction, self._first = m.group(3), "", None, None
        else:
            self.detail = text

    def _measure(self, detail):
        m = _MEASURE.search(detail)
        if not m or not self.tolerance or self.tolerance <= 0:
            return
        value = float(m.group(1))
        if not (value > 0):
            self.fraction = 1.0
            return
        if self._first is None:
            self._first = max(value, self.tolerance * 10)
        span = math.log(self._first / self.tolerance)
        self.fraction = min(1.0, max(0.0, math.log(self._first / value) / span)) if span > 0 else None


class NotebookProgress(Progress):
    """One command's progress as a block a notebook updates in place."""

    def __init__(self, op, tolerance=None):
        from IPython.display import HTML, display
        super().__init__(op, tolerance)
        self._html = HTML
        self._shown = 0.0
        self._handle = display(HTML(self.render()), display_id=True)

    def line(self, text):
        super().line(text)
        now = time.monotonic()
        if now - self._shown > 0.1:  # at most ten updates a second
            self._shown = now
            self._handle.update(self._html(self.render()))

    def finish(self, outcome):
        self.detail = outcome
        if outcome == "done":
            self.fraction = 1.0
        self._handle.update(self._html(self.render()))

    def render(self):
        value = "" if self.fraction is None else f' value="{self.fraction:.4f}" max="1"'
        percent = "" if self.fraction is None else f" {100 * self.fraction:.0f}%"
        return (f'<div style="font-family:monospace">'
                f'<b>{html.escape(self.op)}</b> {self.seconds:.1f} s{percent} '
                f'<progress style="width:40%;vertical-align:middle"{value}></progress><br>'
                f'{html.escape(self.step)}<br><span style="color:#666">{html.escape(self.detail)}</span></div>')
