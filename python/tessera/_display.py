"""How results show themselves: a small HTML table in a notebook
(``_repr_html_``), their fields in ``dir()``, and ``to_pandas()``.

Pure Python (no extension): the session's client uses it too. Every text
that goes into HTML is escaped with ``html.escape``.
"""
import html

import numpy as np

from ._errors import ConfigError, MismatchError

PREVIEW = 5   # the values of an array shown
WIDTH = 80    # the characters of a value shown


def _number(x):
    if isinstance(x, (float, np.floating)):
        return f"{x:.6g}"
    return str(x)


def preview(values, count=PREVIEW):
    """The first ``count`` values of a 1-D array as text, "..." when there
    are more."""
    a = np.asarray(values)
    shown = ", ".join(_number(x) for x in a[:count].tolist())
    return f"[{shown}{', ...' if a.size > count else ''}]"


def text(value, limit=WIDTH):
    """A field's value as one short line: arrays as dtype, length and their
    first values; a DistArray with its size and this rank's first values."""
    if hasattr(value, "local") and hasattr(value, "local_range"):  # a DistArray
        lo, hi = value.local_range
        return f"{value.dtype} DistArray of {value.size}; this rank's [{lo}, {hi}): {preview(value.local)}"
    if isinstance(value, np.ndarray):
        return f"{value.dtype}[{value.size}] {preview(value.ravel())}"
    if isinstance(value, (float, np.floating)):
        return _number(value)
    shown = value if isinstance(value, str) else repr(value)
    return shown if len(shown) <= limit else shown[:limit - 3] + "..."


def html_table(title, rows):
    """An HTML table: a caption ``title``, one row per (name, value), every
    text escaped."""
    out = ['<table style="border-collapse:collapse">',
           f'<caption style="text-align:left;font-weight:bold">{html.escape(title)}</caption>']
    for name, value in rows:
        out.append(f'<tr><th style="text-align:left;padding-right:1em">{html.escape(str(name))}</th>'
                   f'<td style="text-align:left;font-family:monospace">{html.escape(text(value))}</td></tr>')
    out.append("</table>")
    return "\n".join(out)


def data_frame(owner, columns):
    """A ``pandas.DataFrame`` of ``columns`` (name -> 1-D array, in order),
    pandas imported here; ConfigError without pandas, MismatchError when
    the columns' lengths differ."""
    try:
        import pandas
    except ImportError as e:
        raise ConfigError(f"{owner}.to_pandas() needs pandas, which did not import ({e}): pip install pandas "
                          "(or apt install python3-pandas); the NumPy arrays need nothing") from None
    lengths = {name: len(values) for name, values in columns.items()}
    if len(set(lengths.values())) > 1:
        raise MismatchError(f"{owner}.to_pandas(): columns of different lengths: " +
                            ", ".join(f"{k} {n}" for k, n in lengths.items()))
    return pandas.DataFrame({name: np.asarray(values) for name, values in columns.items()}, copy=False)


# -- the session's Remote (installed on it by tessera.session) -------------------------
def _remote_arrays(remote):
    """The Remote's arrays with what is known of them here. A display sends
    no request: an array not read yet stays so (reading one may wait for
    another client's command, and may make it on the session: ``file_ids``,
    ``out_degrees``)."""
    session = remote.__dict__["_session"]
    mapped = getattr(session, "same_node", False) and not getattr(session, "copy_results", True)
    how = "maps it, no copy" if mapped else "copies it here"
    return [(name, remote.__dict__[name]) if name in remote.__dict__ else (name, f"(not read yet: .{name} {how})")
            for name in remote.arrays]


def remote_repr_html(self):
    """The object as a small HTML table for a notebook: its fields, then
    its arrays with their first values, those read already (a display
    sends the session no request)."""
    rows = [(k, v) for k, v in self.fields.items()]
    return html_table(f"tessera.session.{self.kind} {self.id}", rows + _remote_arrays(self))


def remote_dir(self):
    """The attribute names: the object's fields and arrays besides the
    methods."""
    return sorted(set(object.__dir__(self)) | set(self.fields) | set(self.arrays))
