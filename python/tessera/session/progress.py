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
    """Whether this process is a Jupyter kernel (a display can be updated).

    Returns
    -------
    bool
        True in an IPython kernel (ipykernel imported and running).

    Examples
    --------
    >>> in_notebook()                 # a plain interpreter
    False
    """
    if "ipykernel" not in sys.modules:
        return False
    try:
        from IPython import get_ipython
    except ImportError:
        return False
    shell = get_ipython()
    return shell is not None and getattr(shell, "kernel", None) is not None


def print_line(line):
    """One progress line on stderr, as the command line prints it.

    Parameters
    ----------
    line : str
        The line ("[  12.34 s] text").

    Examples
    --------
    >>> print_line("[   0.01 s] generating kron scale 18 ef 16 seed 1")
    """
    print(line, file=sys.stderr, flush=True)


def default_tolerance(op, args):
    """The tolerance a command's measured progress runs down to: the one
    asked for, else the command's default.

    Parameters
    ----------
    op : str
        The operation ("hitting_times", "pagerank", "command", ...).
    args : dict
        Its arguments (``tolerance``; ``name`` for a "command").

    Returns
    -------
    float or None
        The tolerance; None where the progress is not measurable.

    Examples
    --------
    >>> default_tolerance("pagerank", {}), default_tolerance("pagerank", {"tolerance": 1e-6})
    (0.0001, 1e-06)
    """
    tolerance = args.get("tolerance")
    if tolerance is None:
        tolerance = {"hitting_times": 1e-10, "pagerank": 1e-4}.get(args.get("name") or op)
    return tolerance


class Progress:
    """One command's progress lines, read: the step it is in, its latest
    detail, the seconds so far and, where measurable, the fraction done.

    Parameters
    ----------
    op : str
        The command's name (shown).
    tolerance : float, optional
        What a measured detail (CG's relative residual, PageRank's L1
        change) runs down to; None: the fraction is not measured.

    Attributes
    ----------
    step, detail : str
        The latest step line and detail line.
    seconds : float
        The seconds of the latest line.
    fraction : float or None
        Done so far, 0 to 1, on a log scale from the first measured value to
        ``tolerance``; None where not measurable.

    Examples
    --------
    >>> p = Progress("pagerank", 1e-4)
    >>> p.line("[   0.10 s] pagerank")
    >>> p.line("[   0.20 s]   iteration 1: L1 change 1e-1")
    >>> p.line("[   0.30 s]   iteration 2: L1 change 1e-2")
    >>> p.step, round(p.fraction, 2)
    ('pagerank', 0.33)
    """

    def __init__(self, op, tolerance=None):
        self.op = op
        self.tolerance = tolerance
        self.step = ""
        self.detail = ""
        self.seconds = 0.0
        self.fraction = None
        self._first = None

    def line(self, text):
        """Reads one progress line: a step ("[ 1.00 s] text"), a detail
        ("[ 1.00 s]   text", measured where it can be) or any other text
        (a detail).

        Parameters
        ----------
        text : str
            The line.

        Examples
        --------
        >>> p.line("[   2.50 s] hitting times")
        """
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
    """One command's progress as a block a notebook updates in place (a
    bar, the step, its latest detail, the seconds), at most ten updates a
    second. Needs IPython (a Jupyter kernel).

    Parameters
    ----------
    op : str
        The command's name (shown).
    tolerance : float, optional
        As ``Progress``'s.

    Examples
    --------
    >>> shown = NotebookProgress("hitting_times", 1e-10)      # in a notebook cell
    >>> shown.line("[   0.20 s]   Belos iteration 1: relative residual 1e-2")
    >>> shown.finish("done")
    """

    def __init__(self, op, tolerance=None):
        from IPython.display import HTML, display
        super().__init__(op, tolerance)
        self._html = HTML
        self._shown = 0.0
        self._handle = display(HTML(self.render()), display_id=True)

    def line(self, text):
        """Reads one line and updates the block (at most ten times a second).

        Parameters
        ----------
        text : str
            The line.

        Examples
        --------
        >>> shown.line("[   0.40 s]   Belos iteration 2: relative residual 1e-4")
        """
        super().line(text)
        now = time.monotonic()
        if now - self._shown > 0.1:  # at most ten updates a second
            self._shown = now
            self._handle.update(self._html(self.render()))

    def finish(self, outcome):
        """The command ended: the block shows ``outcome`` (and a full bar
        when "done").

        Parameters
        ----------
        outcome : str
            "done" or "failed".

        Examples
        --------
        >>> shown.finish("failed")
        """
        self.detail = outcome
        if outcome == "done":
            self.fraction = 1.0
        self._handle.update(self._html(self.render()))

    def render(self):
        """The block's HTML (every text escaped).

        Returns
        -------
        str
            A ``<div>`` with the name, seconds, a ``<progress>`` bar, the
            step and the detail.

        Examples
        --------
        >>> shown.render().startswith("<div")
        True
        """
        value = "" if self.fraction is None else f' value="{self.fraction:.4f}" max="1"'
        percent = "" if self.fraction is None else f" {100 * self.fraction:.0f}%"
        return (f'<div style="font-family:monospace">'
                f'<b>{html.escape(self.op)}</b> {self.seconds:.1f} s{percent} '
                f'<progress style="width:40%;vertical-align:middle"{value}></progress><br>'
                f'{html.escape(self.step)}<br><span style="color:#666">{html.escape(self.detail)}</span></div>')
