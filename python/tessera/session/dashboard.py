"""A session's live page (``tessera.start(..., dashboard=True)``,
``tessera serve --dashboard``): rank 0 serves, on 127.0.0.1 only, one
HTML page that refreshes itself from ``/state.json``: the ranks (host, PID,
resident memory, state), the resident objects with their bytes, the running
command with its progress, the last commands with their seconds and outcome,
and the timeline of the last trace the session wrote.

Every request must carry the session's token (256 bits, as Jupyter's) in
its query, ``?token=...``; any other gets 403 and no data. The page needs
nothing from the internet: its script and style are inline, its timeline an
SVG drawn here from the trace file's complete ("X") events.

Threads: the HTTP server runs in daemon threads of rank 0 and never touches
the session's objects. The main thread (the one calling MPI) publishes a
JSON-able snapshot after each command (``publish``; the per-rank figures
come from ``gather_stats``, small collectives every rank joins after each
command: two allgathers and one allreduce per resident object), marks a
command's start and end (``begin``, ``end``); the stderr pump feeds progress
lines (``line``); the socket thread sets the client counts. Each takes the
dashboard's lock for the moment it writes; the HTTP threads copy under the
same lock, and read only that (and /proc, for the memory of ranks on this
host, afresh at each request).
"""
import collections
import hmac
import html
import http.server
import json
import math
import os
import secrets
import threading
import time
import urllib.parse

import numpy as np

import tessera

from . import progress as _progress
from . import protocol

HISTORY = 20            # commands kept for "Last commands"
PROGRESS_LINES = 6      # the running command's latest lines shown
MAX_TRACE_BYTES = 32 << 20    # a larger trace file is not drawn here (Perfetto, tessera trace plot)
MAX_BARS = 4000         # bars in the timeline at most (the longest kept)
DRAWN = ("phase", "round", "wait", "checkpoint", "balance", "io")


# -- what every rank measures ---------------------------------------------------
def memory(pid="self"):
    """The resident memory and its peak of a process of this host.

    Parameters
    ----------
    pid : int or str, default "self"
        The process (its /proc entry).

    Returns
    -------
    tuple
        (VmRSS, VmHWM) in bytes, each None where unknown (no such process).

    Examples
    --------
    >>> rss, peak = memory()
    >>> rss <= peak
    True
    """
    found = {}
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                key, _, value = line.partition(":")
                if key in ("VmRSS", "VmHWM"):
                    found[key] = int(value.split()[0]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return found.get("VmRSS"), found.get("VmHWM")


def allgather_text(rt, text, limit=255):
    """Every rank's ``text``, in rank order, through the runtime's int
    allgather (8 bytes a call). Collective.

    Parameters
    ----------
    rt : tessera.Runtime
        The runtime.
    text : str
        This rank's text.
    limit : int, default 255
        Bytes of it sent at most (UTF-8; a cut character is replaced).

    Returns
    -------
    list of str
        Every rank's text, on every rank.

    Examples
    --------
    >>> allgather_text(rt, socket.gethostname())       # at 2 ranks
    ['node1', 'node2']
    """
    data = text.encode()[:limit]
    lengths = rt.allgather(len(data))
    words = [rt.allgather(int.from_bytes(data[i:i + 8].ljust(8, b"\0"), "little", signed=True))
             for i in range(0, max(lengths), 8)]
    return [b"".join(w[r].to_bytes(8, "little", signed=True) for w in words)[:lengths[r]].decode(errors="replace")
            for r in range(rt.size)]


def distinct(objects):
    """The session's resident objects, each once (a named object is also
    still known by its id), in the order they were made.

    Parameters
    ----------
    objects : dict
        Id or name -> the server's ``Held`` object.

    Returns
    -------
    list of tuple
        (held, [its keys]) for each object.

    Examples
    --------
    >>> distinct({"#1": g, "web": g, "#2": c})
    [(g, ['#1', 'web']), (c, ['#2'])]
    """
    seen = collections.OrderedDict()
    for key, held in list(objects.items()):
        seen.setdefault(id(held), (held, []))[1].append(key)
    return list(seen.values())


def _local_bytes(held):
    """Bytes of the arrays one resident object holds on this rank (each
    block counted once: views of one buffer are one)."""
    blocks = {}

    def add(x):
        if isinstance(x, tessera.DistArray):
            x = x.local
        if isinstance(x, np.ndarray) and x.nbytes:
            blocks[(x.__array_interface__["data"][0], x.nbytes)] = x.nbytes

    obj = held.obj
    if isinstance(obj, tessera.Graph):
        for name in ("dst", "weight", "row_offsets", "_src", "original_ids"):
            add(getattr(obj, name, None))
    else:
        add(obj)
        for value in vars(obj).values() if hasattr(obj, "__dict__") else ():
            if not isinstance(value, tessera.Graph):  # a result's graph is an object of its own
                add(value)
    for value in held.made.values():
        add(value)
    return sum(blocks.values())


def gather_stats(rt, objects):
    """Each rank's resident memory and peak, and each object's bytes over
    all ranks. Collective: every rank after each command, with the same
    objects (two allgathers and one allreduce per object).

    Parameters
    ----------
    rt : tessera.Runtime
        The runtime.
    objects : dict
        Id or name -> the server's ``Held`` object, the same on every rank.

    Returns
    -------
    tuple
        (resident bytes per rank, peak bytes per rank (-1: unknown), bytes
        of each of ``distinct(objects)`` over all ranks).

    Examples
    --------
    >>> rss, peaks, sizes = gather_stats(rt, session.objects)
    """
    rss, hwm = memory()
    rss_all = rt.allgather(-1 if rss is None else rss)
    hwm_all = rt.allgather(-1 if hwm is None else hwm)
    sizes = []
    for held, _keys in distinct(objects):
        try:
            local = _local_bytes(held)
        except Exception:  # noqa: BLE001 - a figure missing, never a rank out of step
            local = 0
        sizes.append(rt.allreduce(int(local), "sum"))
    return rss_all, hwm_all, sizes


# -- what the page shows ------------------------------------------------------------
def _short(value):
    if isinstance(value, float):
        return f"{value:g}"
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(_short(v) for v in value[:4]) + (", ..." if len(value) > 4 else "") + "]"
    if isinstance(value, dict):
        return "{...}"
    return str(value)


def command_label(op, args):
    """A command as the page names it (at most 120 characters).

    Parameters
    ----------
    op : str
        The operation.
    args : dict
        Its arguments (None, False and payloads left out).

    Returns
    -------
    str
        E.g. ``components(graph=#1)``.

    Examples
    --------
    >>> command_label("pagerank", {"graph": "#1", "damping": 0.85, "verbose": False})
    'pagerank(graph=#1, damping=0.85)'
    """
    if op == "command":
        return f"command {args.get('name')} @{args.get('graph')}"
    shown = ", ".join(f"{k}={_short(v)}" for k, v in args.items()
                      if k not in ("payload", "options") and v is not None and v is not False)
    text = f"{op}({shown})"
    return text if len(text) <= 120 else text[:117] + "..."


def describe_object(held):
    """One line of what a resident object is.

    Parameters
    ----------
    held : object
        The server's ``Held`` object (``kind``, ``fields``).

    Returns
    -------
    str
        E.g. "25 vertices, 40 edges, undirected".

    Examples
    --------
    >>> describe_object(session.objects["#1"])
    '25 vertices, 40 edges, undirected'
    """
    f = held.fields
    if held.kind == "Graph":
        text = (f"{f.get('vertices')} vertices, {f.get('edges')} edges, "
                f"{'directed' if f.get('directed') else 'undirected'}")
        if f.get("component_of"):
            text += f", largest component of {f['component_of']}"
        return text
    if held.kind == "Components":
        return f"{f.get('count')} components, the largest of {f.get('largest_size')} vertices"
    if held.kind == "DistArray":
        return f"{f.get('size')} x {f.get('dtype')}"
    shown = [f"{k} {_short(v)}" for k, v in f.items() if isinstance(v, (int, float, str, bool)) and v is not None]
    return ", ".join(shown[:4])


class Dashboard:
    """Rank 0's page: its HTTP server and the state it shows.

    Parameters
    ----------
    port : int, default 0
        The port on 127.0.0.1 (0: any free one).

    Attributes
    ----------
    token : str
        The token every request must carry (``?token=``).
    port : int
        The port served.
    url : str
        The page's URL, token included.

    Examples
    --------
    >>> d = Dashboard()
    >>> d.publish({"session": {}, "ranks": [], "objects": []})
    >>> d.start()
    >>> d.url
    'http://127.0.0.1:40123/?token=...'
    >>> d.close()
    """

    def __init__(self, port=0):
        self.token = protocol.new_token()
        self._lock = threading.Lock()
        self._base = {}                     # the main thread's latest snapshot (replaced, never changed)
        self._running = None                # the command running: its label, client, start, Progress, lines
        self._history = collections.deque(maxlen=HISTORY)
        self._counts = {"clients": 0, "queued": 0}
        self._timeline = None               # the last trace file written, drawn
        self._timeline_path = None          # (path, when) of the last trace written (main thread)
        self._http = http.server.ThreadingHTTPServer(("127.0.0.1", int(port or 0)), _handler(self))
        self._http.daemon_threads = True
        self.port = self._http.server_address[1]
        self.url = f"http://127.0.0.1:{self.port}/?token={self.token}"
        self._thread = None

    def start(self):
        """Serves the page from a daemon thread (after the first publish).

        Examples
        --------
        >>> d.start()
        """
        self._thread = threading.Thread(target=self._http.serve_forever, kwargs={"poll_interval": 0.25},
                                        daemon=True, name="dashboard")
        self._thread.start()

    def close(self):
        """Stops serving and closes the listening socket.

        Examples
        --------
        >>> d.close()
        """
        if self._thread is not None:
            self._http.shutdown()
        self._http.server_close()

    # -- writers (main thread, stderr pump, socket thread) -----------------------
    def publish(self, snapshot):
        """The main thread's state after a command; a newly written trace is
        drawn (in a thread of its own).

        Parameters
        ----------
        snapshot : dict
            JSON-able: ``session``, ``ranks``, ``objects``, ``trace``; not
            changed after.

        Examples
        --------
        >>> d.publish({"session": {"host": "vm"}, "ranks": [], "objects": []})
        """
        with self._lock:
            self._base = snapshot
        trace = snapshot.get("trace") or {}
        written = (trace.get("last"), trace.get("last_at"))
        if written[0] and written != self._timeline_path:  # a new file (or the same path written again)
            self._timeline_path = written
            threading.Thread(target=self._draw, args=(written,), daemon=True, name="dashboard trace").start()

    def _draw(self, written):
        timeline = load_timeline(written[0])  # here, not on the main thread: a large file takes a while
        with self._lock:
            if self._timeline_path == written:
                self._timeline = timeline

    def begin(self, op, client, args):
        """A command starts: the page shows it running, with its progress.

        Parameters
        ----------
        op : str
            The operation.
        client : str
            The client that asked.
        args : dict
            Its arguments.

        Examples
        --------
        >>> d.begin("pagerank", "c1", {"graph": "#1"})
        """
        label = command_label(op, args)
        tracker = _progress.Progress(label, _progress.default_tolerance(op, args))
        with self._lock:
            self._running = {"op": op, "label": label, "client": client, "started": time.time(),
                             "clock": time.monotonic(), "progress": tracker,
                             "lines": collections.deque(maxlen=PROGRESS_LINES)}

    def line(self, text):
        """One progress line of the running command.

        Parameters
        ----------
        text : str
            The line ("[  1.00 s]   iteration 3 ...").

        Examples
        --------
        >>> d.line("[   0.20 s]   iteration 1: L1 change 0.1")
        """
        with self._lock:
            if self._running is not None:
                self._running["progress"].line(text)
                self._running["lines"].append(text)

    def end(self, outcome, result=None):
        """The running command ended: it goes to the history with its seconds.

        Parameters
        ----------
        outcome : str
            "ok", "error", "cancelled", ...
        result : str, optional
            A short description of what it made.

        Examples
        --------
        >>> d.end("ok", "#2")
        """
        with self._lock:
            r, self._running = self._running, None
            if r is not None and r["op"] != "client_gone":
                self._history.appendleft({"command": r["label"], "client": r["client"], "started": r["started"],
                                          "seconds": time.monotonic() - r["clock"], "outcome": outcome,
                                          "result": result})

    def counts(self, clients, queued):
        """The connected clients and the commands waiting their turn.

        Parameters
        ----------
        clients, queued : int
            The counts shown.

        Examples
        --------
        >>> d.counts(2, 0)
        """
        with self._lock:
            self._counts = {"clients": int(clients), "queued": int(queued)}

    # -- the reader (HTTP threads) ----------------------------------------------
    def state(self):
        """What /state.json answers: copies taken under the lock, then each
        rank's memory read afresh from /proc where it runs on this host.

        Returns
        -------
        dict
            ``session``, ``ranks``, ``objects``, ``running``, ``history``,
            ``trace`` (with its drawn ``timeline``).

        Examples
        --------
        >>> sorted(d.state())
        ['history', 'objects', 'ranks', 'running', 'session', 'trace']
        """
        with self._lock:
            base = self._base
            counts = dict(self._counts)
            history = [dict(h) for h in self._history]
            timeline = self._timeline
            r = self._running
            running = None
            if r is not None:
                p = r["progress"]
                running = {"command": r["label"], "op": r["op"], "client": r["client"], "started": r["started"],
                           "seconds": time.monotonic() - r["clock"], "step": p.step, "detail": p.detail,
                           "fraction": p.fraction, "lines": list(r["lines"])}
        here = base.get("session", {}).get("host")
        ranks = []
        for rank in base.get("ranks", []):
            rank = dict(rank)
            if rank.get("host") == here:
                rss, hwm = memory(rank["pid"])
                if rss is not None:
                    rank.update(rss=rss, peak=hwm, measured="now")
            rank["state"] = f"running {running['op']}" if running else "idle"
            ranks.append(rank)
        session = dict(base.get("session", {}))
        session.update(counts, now=time.time())
        if "started" in session:
            session["uptime"] = time.time() - session["started"]
        return {"session": session, "ranks": ranks, "objects": base.get("objects", []), "running": running,
                "history": history, "trace": dict(base.get("trace") or {}, timeline=timeline)}


def _handler(dashboard):
    token = dashboard.token.encode()

    class Handler(http.server.BaseHTTPRequestHandler):
        server_version = "tessera-session"
        sys_version = ""

        def do_GET(self):  # noqa: N802 - http.server's name
            url = urllib.parse.urlsplit(self.path)
            given = urllib.parse.parse_qs(url.query).get("token", [""])[0]
            if not hmac.compare_digest(given.encode(), token):
                self._send(403, b"403: this page needs the session's token (s.dashboard_url)\n", "text/plain")
            elif url.path == "/":
                nonce = secrets.token_urlsafe(16)
                self._send(200, PAGE.replace("__NONCE__", nonce).encode(), "text/html; charset=utf-8", nonce)
            elif url.path == "/state.json":
                self._send(200, json.dumps(dashboard.state(), default=str).encode(), "application/json")
            else:
                self._send(404, b"404: not here\n", "text/plain")

        def _send(self, code, body, kind, nonce=None):
            self.send_response(code)
            self.send_header("Content-Type", kind)
            self.send_header("Content-Length", str(len(body)))
            self.send_header("Cache-Control", "no-store")
            self.send_header("X-Content-Type-Options", "nosniff")
            self.send_header("Referrer-Policy", "no-referrer")
            self.send_header("X-Frame-Options", "DENY")
            script = f"'nonce-{nonce}'" if nonce else "'none'"
            self.send_header("Content-Security-Policy", f"default-src 'none'; script-src {script}; "
                             "style-src 'unsafe-inline'; connect-src 'self'; img-src data:; base-uri 'none'; "
                             "form-action 'none'; frame-ancestors 'none'")
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format, *args):  # noqa: A002 - http.server's signature
            pass  # no access log: a URL carries the token

    return Handler


# -- the timeline of a trace file ----------------------------------------------------
# Phases take these in order of their total time; waits alone are red.
_PALETTE = ["#1f77b4", "#2ca02c", "#9467bd", "#8c564b", "#17becf", "#bcbd22", "#e377c2", "#7f7f7f",
            "#aec7e8", "#98df8a", "#c5b0d5", "#c49c94", "#9edae5", "#dbdb8d", "#f7b6d2", "#ff7f0e"]
WAIT_COLOUR = "#d62728"


def _colours(spans):
    """A colour per span name: distinct ones for the names that took longest."""
    totals = collections.Counter()
    for e in spans:
        if e["cat"] != "wait":
            totals[str(e.get("name", ""))] += e["dur"]
    return totals, {name: _PALETTE[i % len(_PALETTE)] for i, (name, _) in enumerate(totals.most_common())}


def _union(intervals):
    total, end = 0.0, None
    for a, b in sorted(intervals):
        if end is None or a > end:
            total += b - a
            end = b
        elif b > end:
            total += b - end
            end = b
    return total


def _ticks(span_us, count=6):
    """Round tick steps (1, 2, 5 x 10^k microseconds) over [0, span]."""
    raw = max(span_us / count, 1e-3)
    base = 10 ** math.floor(math.log10(raw))
    step = next(base * m for m in (1, 2, 5, 10) if base * m >= raw)
    return [i * step for i in range(int(span_us // step) + 1)]


def _time(us):
    if us == 0:
        return "0"
    if us >= 1e6:
        return f"{us / 1e6:g} s"
    if us >= 1e3:
        return f"{us / 1e3:g} ms"
    return f"{us:g} us"


def load_timeline(path):
    """The page's picture of a trace file (format 1, docs/trace.md): an
    SVG, one row per rank, a bar per phase, round or other span of its main
    thread (nested spans one lane lower), waits in red; with what it left
    out. Never raises: a file it cannot draw gets a note.

    Parameters
    ----------
    path : str
        The trace file (at most ``MAX_TRACE_BYTES``).

    Returns
    -------
    dict
        ``path``, ``written`` (its mtime), ``svg``, ``note`` and what
        :func:`draw_timeline` returns.

    Examples
    --------
    >>> load_timeline("t.json")["svg"].startswith("<svg")
    True
    """
    out = {"path": path, "written": None, "svg": "", "note": ""}
    try:
        st = os.stat(path)
        out["written"] = st.st_mtime
        if st.st_size > MAX_TRACE_BYTES:
            out["note"] = (f"{st.st_size / 2**20:.0f} MiB: too large to draw here; open it in Perfetto "
                           "(ui.perfetto.dev) or with tessera trace plot")
            return out
        with open(path) as f:
            doc = json.load(f)
        events = doc.get("traceEvents", []) if isinstance(doc, dict) else doc
        meta = ((doc.get("otherData") or {}).get("tessera") or {}) if isinstance(doc, dict) else {}
        out.update(draw_timeline(events, meta))
    except (OSError, ValueError, TypeError, KeyError, AttributeError) as e:
        out["note"] = f"cannot draw it: {e}"
    return out


def draw_timeline(events, meta, width=960):
    """The trace's main-thread spans as an inline SVG: a row per rank, a bar
    per phase or round, waits in red; with each rank's idle share.

    Parameters
    ----------
    events : list of dict
        The trace's ``traceEvents``.
    meta : dict
        Its ``otherData.tessera`` (ranks, hosts, start_us, end_us).
    width : int, default 960
        The picture's width (pixels).

    Returns
    -------
    dict
        ``svg`` (every text escaped), ``ranks``, ``span_us``, ``events``,
        ``shown``, ``left_out``, ``idle`` (per rank), ``dropped``, ``max_skew_us``.

    Examples
    --------
    >>> doc = json.load(open("t.json"))
    >>> draw_timeline(doc["traceEvents"], doc["otherData"]["tessera"])["ranks"]
    2
    """
    spans = [e for e in events if isinstance(e, dict) and e.get("ph") == "X" and e.get("cat") in DRAWN
             and e.get("tid", 0) == 0 and isinstance(e.get("ts"), (int, float))
             and isinstance(e.get("dur"), (int, float))]
    ranks = int(meta.get("ranks") or (max((int(e.get("pid", 0)) for e in spans), default=-1) + 1))
    hosts = meta.get("hosts") or []
    starts, ends = meta.get("start_us") or [], meta.get("end_us") or []
    t0 = min(starts) if starts else min((e["ts"] for e in spans), default=0.0)
    t1 = max(ends) if ends else max((e["ts"] + e["dur"] for e in spans), default=1.0)
    span = max(t1 - t0, 1e-3)
    label_w, plot_w, lane_h = 150, width - 150 - 10, 11

    # Nesting depth of each span on its rank (events on one thread nest or are disjoint).
    per_rank = collections.defaultdict(list)
    for e in spans:
        per_rank[int(e.get("pid", 0))].append(e)
    depth_of = {}
    for r, evs in per_rank.items():
        evs.sort(key=lambda e: (e["ts"], -e["dur"]))
        stack = []
        for e in evs:
            while stack and stack[-1] <= e["ts"]:
                stack.pop()
            depth_of[id(e)] = len(stack)
            stack.append(e["ts"] + e["dur"])
    lanes = min(4, 1 + max(depth_of.values(), default=0))
    row_h = lanes * lane_h + 8

    # The bars: those at least a third of a pixel wide, the longest MAX_BARS.
    min_dur = span / plot_w / 3
    bars = sorted((e for e in spans if e["dur"] >= min_dur), key=lambda e: -e["dur"])[:MAX_BARS]
    top = 22
    height = top + max(ranks, 1) * row_h + 40
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
             f'font-family="sans-serif" font-size="11" role="img" aria-label="timeline">']
    for t in _ticks(span):
        x = label_w + t / span * plot_w
        parts.append(f'<line x1="{x:.1f}" y1="{top - 4}" x2="{x:.1f}" y2="{top + ranks * row_h}" stroke="#ddd"/>'
                     f'<text x="{x:.1f}" y="{top - 8}" text-anchor="middle" fill="#555">{_time(t)}</text>')
    idle = {}
    for r in range(ranks):
        y = top + r * row_h
        waits = [(e["ts"], e["ts"] + e["dur"]) for e in per_rank.get(r, []) if e["cat"] == "wait"]
        wall = (ends[r] - starts[r]) if r < len(starts) and r < len(ends) else span
        idle[r] = _union(waits) / wall if wall > 0 else 0.0
        host = f" ({html.escape(str(hosts[r]))})" if r < len(hosts) else ""
        parts.append(f'<rect x="0" y="{y}" width="{width}" height="{row_h}" fill="{"#f4f4f4" if r % 2 else "#fff"}"/>'
                     f'<text x="4" y="{y + row_h / 2 + 4:.1f}">rank {r}{host} &#183; idle {100 * idle[r]:.0f}%</text>')
    totals, colour = _colours(spans)
    for e in bars:
        r = int(e.get("pid", 0))
        if r >= ranks:
            continue
        d = min(depth_of[id(e)], lanes - 1)
        x = label_w + (e["ts"] - t0) / span * plot_w
        w = max(e["dur"] / span * plot_w, 0.5)
        y = top + r * row_h + 4 + d * lane_h
        name = str(e.get("name", ""))
        fill = WAIT_COLOUR if e["cat"] == "wait" else colour[name]
        tip = html.escape(f"{name} ({e['cat']}), rank {r}: {_time(e['dur'])} at {_time(e['ts'] - t0)}")
        parts.append(f'<rect x="{x:.2f}" y="{y}" width="{w:.2f}" height="{lane_h - 2}" fill="{fill}">'
                     f'<title>{tip}</title></rect>')
    # The legend: the phases that took longest, then waiting.
    y = top + ranks * row_h + 18
    x = label_w
    for name, total in totals.most_common(7) + [("waiting", None)]:
        fill = WAIT_COLOUR if total is None else colour[name]
        shown = html.escape(name if len(name) <= 28 else name[:27] + "...")
        parts.append(f'<rect x="{x}" y="{y - 9}" width="10" height="10" fill="{fill}"/>'
                     f'<text x="{x + 14}" y="{y}">{shown}</text>')
        x += 24 + 6.5 * len(shown)
        if x > width - 100:
            break
    parts.append("</svg>")
    return {"svg": "".join(parts), "ranks": ranks, "span_us": span, "events": len(spans), "shown": len(bars),
            "idle": [idle.get(r, 0.0) for r in range(ranks)], "dropped": meta.get("dropped_events"),
            "max_skew_us": (meta.get("clock") or {}).get("max_skew_us"),
            "left_out": len(spans) - len(bars)}


# -- the page -----------------------------------------------------------------------------
PAGE = r"""<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>Tessera session</title>
<meta name="viewport" content="width=device-width"><link rel="icon" href="data:,">
<style>
body{font:14px/1.4 system-ui,-apple-system,"DejaVu Sans",sans-serif;margin:1em 2em;color:#222;background:#fcfcfc}
h1{font-size:1.3em;margin:0 0 .2em}
h2{font-size:1.05em;margin:1.3em 0 .3em;border-bottom:1px solid #ddd;padding-bottom:2px}
table{border-collapse:collapse}
td,th{padding:2px 12px 2px 0;text-align:left;border-bottom:1px solid #eee;vertical-align:top}
th{font-weight:600;color:#555} td.n{text-align:right;font-variant-numeric:tabular-nums} .muted{color:#777}
.bad{color:#b00} .ok{color:#070} #history td:first-child{white-space:nowrap}
#banner{display:none;background:#fdd;padding:.4em .8em;margin:.4em 0}
progress{width:24em;vertical-align:middle} pre{margin:.3em 0;color:#555;font-size:12px;white-space:pre-wrap}
</style></head><body>
<h1>Tessera session</h1>
<div id="summary" class="muted">connecting&#8230;</div><div id="banner"></div>
<h2>Ranks</h2>
<table id="ranks"><thead><tr><th>rank</th><th>host</th><th>PID</th><th>resident memory</th><th>peak</th>
<th>state</th></tr></thead><tbody></tbody></table>
<div id="ranks-note" class="muted"></div>
<h2>Running</h2><div id="running" class="muted">nothing</div>
<h2>Resident objects</h2>
<table id="objects"><thead><tr><th>id</th><th>names</th><th>kind</th><th>bytes</th><th>what</th><th>owner</th>
</tr></thead><tbody></tbody></table>
<div id="objects-note" class="muted"></div>
<h2>Last commands</h2>
<table id="history"><thead><tr><th>at</th><th>command</th><th>client</th><th>seconds</th><th>outcome</th>
<th>result</th></tr></thead><tbody></tbody></table>
<h2>Timeline of the last trace</h2>
<div id="timeline-caption" class="muted">no trace written yet (s.trace(PATH) records the commands run inside
it)</div>
<div id="timeline"></div>
<script nonce="__NONCE__">
"use strict";
const token = new URLSearchParams(location.search).get("token") || "";
const $ = (id) => document.getElementById(id);
function human(n) {
  if (n === null || n === undefined || n < 0) return "?";
  const units = ["B", "KiB", "MiB", "GiB", "TiB"];
  let v = n, i = 0;
  while (v >= 1024 && i < units.length - 1) { v /= 1024; i++; }
  return i ? v.toFixed(1) + " " + units[i] : n + " B";
}
function secs(s) { return s < 10 ? s.toFixed(3) + " s" : s < 600 ? s.toFixed(1) + " s" : (s / 60).toFixed(1) + " min"; }
function clock(t) { return new Date(t * 1000).toLocaleTimeString(); }
function row(cells) {
  const tr = document.createElement("tr");
  for (const [text, cls] of cells) {
    const td = document.createElement("td");
    td.textContent = text === null || text === undefined ? "" : String(text);
    if (cls) td.className = cls;
    tr.appendChild(td);
  }
  return tr;
}
function fill(id, rows) { document.querySelector("#" + id + " tbody").replaceChildren(...rows); }
let timelineKey = null;
function render(s) {
  const z = s.session;
  $("summary").textContent = z.ranks + " ranks on " + z.host + ", job " + z.job_id + ", up " + secs(z.uptime) +
    ", " + z.clients + " client(s), " + z.queued + " command(s) queued" +
    (s.trace.recording ? ", recording a trace into " + s.trace.recording : "") + " - tessera " + z.tessera;
  fill("ranks", s.ranks.map(r => row([[r.rank, "n"], [r.host], [r.pid, "n"],
    [human(r.rss) + (r.rss >= 0 ? " (" + r.rss + " bytes)" : ""), "n"], [human(r.peak), "n"], [r.state]])));
  $("ranks-note").textContent = "memory: VmRSS and VmHWM of each rank's process, " +
    (s.ranks.some(r => r.measured !== "now") ? "at the end of the last command on other hosts, " : "") +
    "read now on " + z.host;
  fill("objects", s.objects.map(o => row([[o.id], [o.names.join(", ")], [o.kind],
    [human(o.bytes) + " (" + o.bytes + " bytes)", "n"], [o.what], [o.owner === null ? "named" : o.owner]])));
  $("objects-note").textContent = s.objects.length ? "bytes: the arrays each object holds, over all ranks" : "none";
  const run = $("running");
  if (s.running) {
    const r = s.running;
    const p = document.createElement("progress");
    if (r.fraction !== null) { p.max = 1; p.value = r.fraction; }
    const head = document.createElement("div");
    head.textContent = r.command + " for " + r.client + ", " + secs(r.seconds) +
      (r.fraction !== null ? ", " + Math.round(100 * r.fraction) + "%" : "") + " ";
    head.appendChild(p);
    const step = document.createElement("div");
    step.textContent = r.step ? r.step + (r.detail ? ": " + r.detail : "") : "(progress lines come with verbose=True)";
    const lines = document.createElement("pre");
    lines.textContent = r.lines.join("\n");
    run.className = "";
    run.replaceChildren(head, step, lines);
  } else {
    run.className = "muted";
    run.textContent = "nothing";
  }
  fill("history", s.history.map(h => row([[clock(h.started)], [h.command], [h.client], [h.seconds.toFixed(3), "n"],
    [h.outcome, h.outcome === "ok" ? "ok" : "bad"], [h.result]])));
  const t = s.trace.timeline;
  if (t) {
    const key = t.path + "@" + t.written;
    if (key !== timelineKey) {
      timelineKey = key;
      $("timeline").innerHTML = t.svg;   // made by the server from the trace, every text in it escaped
    }
    $("timeline-caption").textContent = t.path + ", written " + clock(t.written) +
      (t.svg ? ": " + t.ranks + " ranks over " + secs(t.span_us / 1e6) + ", " + t.shown + " of " + t.events +
               " spans drawn" + (t.left_out ? " (" + t.left_out + " shorter than a third of a pixel or past " +
               "the limit left out)" : "") + "; waits in red" +
               (t.max_skew_us !== null && t.max_skew_us !== undefined ? "; clock skew " + t.max_skew_us + " us" : "")
             : "") + (t.note ? " - " + t.note : "");
  }
}
async function refresh() {
  try {
    const r = await fetch("state.json?token=" + encodeURIComponent(token), {cache: "no-store"});
    if (!r.ok) throw new Error("HTTP " + r.status);
    render(await r.json());
    $("banner").style.display = "none";
  } catch (e) {
    $("banner").textContent = "the session does not answer (" + e.message + "): stopped?";
    $("banner").style.display = "block";
  }
}
refresh();
setInterval(refresh, 1500);
</script>
</body></html>
"""
