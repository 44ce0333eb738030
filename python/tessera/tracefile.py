"""Reading a Tessera trace: where a parallel run spent its time.

A trace is one Chrome Trace Event JSON file per job (format 1:
docs/trace.md): a rank is a process, a thread a thread; named phases,
kernel rounds, waits (idle time), aggregation batches, checkpoints. It opens
as it is in the Perfetto UI (ui.perfetto.dev) and chrome://tracing; this
module checks it and says what it holds:

    import tessera.tracefile as tf
    t = tf.load("t.json")                    # checked: tessera.FormatError names the file and the fault
    print(tf.format_summary(tf.summary(t)))  # busy / idle / communication per rank, phases, traffic
    tf.plot(t, "t.png")                      # timeline, utilization, traffic matrix (or .svg)

From a shell (``tessera trace summary|plot`` runs the same):

    python3 -m tessera.tracefile summary t.json [--json]
    python3 -m tessera.tracefile plot t.json -o t.png

Pure Python (the standard library; matplotlib inside plot() only): it
needs neither MPI nor the compiled extension, so a trace copied from a
cluster can be read anywhere the package's source is (PYTHONPATH=python).
"""
import argparse
import collections
import json
import math
import os
import sys

from ._errors import ConfigError, FormatError, SystemError  # noqa: A004 (tessera's own SystemError)

FORMAT = 1
# What a complete ("X") event's "cat" may be (docs/trace.md).
CATEGORIES = ("phase", "round", "wait", "comm", "checkpoint", "balance", "io")
# Busy time: every category but waiting (the spec's "all other X intervals").
BUSY_CATEGORIES = ("phase", "round", "comm", "checkpoint", "balance", "io")
EVENT_TYPES = ("i", "C", "M", "X", "s", "f")  # the values of "ph" in format 1
# Two events on one thread may cross by this much (microseconds) and still
# count as nested: the recorder's ts + dur is a sum of rounded doubles.
NESTING_TOLERANCE_US = 0.01
MAIN_THREAD = 0
# A summary's times per rank, each as KIND_s seconds and KIND_share of wall (docs/trace.md).
TIME_KINDS = ("wall", "busy", "idle", "communication", "checkpoint", "untracked")


class Slice:
    """One complete ("X") event: a named interval on a rank's thread.

    Made by :func:`load`, not by hand.

    Parameters
    ----------
    name : str
        The event's name ("pagerank", "send batch", ...).
    category : str
        One of ``CATEGORIES``: "phase", "round", "wait", "comm",
        "checkpoint", "balance" or "io".
    rank, thread : int
        Where it happened (``MAIN_THREAD`` is 0).
    start_us, duration_us : float
        When it started and how long it took (microseconds, the job's clock).
    args : dict
        The event's arguments (a batch's ``dst``, ``bytes``, ``records``).
    depth : int, default 0
        How many slices of its thread enclose it.

    Examples
    --------
    >>> t = tessera.tracefile.load("t.json")       # tessera -n 2 --trace t.json pipeline ...
    >>> s = t.lane(0)[0]
    >>> s.name, s.category, s.depth
    ('tessera pipeline', 'phase', 0)
    """

    __slots__ = ("name", "category", "rank", "thread", "start_us", "duration_us", "args", "depth")

    def __init__(self, name, category, rank, thread, start_us, duration_us, args, depth=0):
        self.name, self.category, self.rank, self.thread = name, category, rank, thread
        self.start_us, self.duration_us, self.args, self.depth = start_us, duration_us, args, depth

    @property
    def end_us(self):
        """When the slice ends, microseconds on the job's clock."""
        return self.start_us + self.duration_us

    def __repr__(self):
        return (f"Slice({self.name!r}, {self.category}, rank {self.rank} thread {self.thread}, "
                f"{self.start_us}+{self.duration_us} us)")


class Trace:
    """A checked trace file. Times are microseconds on the job's clock.

    Made by :func:`load`, not by hand; the parameters are its attributes.

    Parameters
    ----------
    path : str
        The file read.
    metadata : dict
        ``otherData.tessera`` as read; ``ranks``, ``command``, ``hosts``,
        ``nodes``, ``start_us``, ``end_us``, ``dropped_events``, ``clock``
        and ``comm_stats`` are taken from it.
    slices : list of Slice
        Every X event, by (rank, thread, start); ``depth``: how many enclose it.
    instants : list of dict
        The "i" events (allocations), as read.
    counters : list of dict
        The "C" events (resident memory, aggregation bytes sent), as read.
    flows : dict
        {id: (start event, finish event or None)}: one per aggregation batch.
    thread_names : dict
        {(rank, thread): name}.

    Attributes
    ----------
    ranks : int
        Ranks of the job.
    command : str
        The command line recorded ("" when none).
    hosts, nodes : list
        Each rank's host name and node number.
    start_us, end_us : list of float
        Each rank's first and last moment recorded.
    dropped_events : list of int
        Events each rank dropped (its buffer was full).
    clock : dict
        How the ranks' clocks were aligned (``method``, ``max_skew_us``, ...).
    comm_stats : list or None
        Exact per-destination traffic counters, when recorded.

    Examples
    --------
    >>> t = tessera.tracefile.load("t.json")       # tessera -n 2 --trace t.json pipeline ...
    >>> t.ranks, t.hosts, t.threads()
    (2, ['vm', 'vm'], [(0, 0), (1, 0)])
    """

    def __init__(self, path, metadata, slices, instants, counters, flows, thread_names):
        self.path = path
        self.metadata = metadata
        self.slices = slices
        self.instants = instants
        self.counters = counters
        self.flows = flows
        self.thread_names = thread_names
        self.ranks = metadata["ranks"]
        self.command = metadata.get("command", "")
        self.hosts = list(metadata["hosts"])
        self.nodes = list(metadata["nodes"])
        self.start_us = [float(v) for v in metadata["start_us"]]
        self.end_us = [float(v) for v in metadata["end_us"]]
        self.dropped_events = list(metadata.get("dropped_events") or [0] * self.ranks)
        self.clock = metadata.get("clock") or {}
        self.comm_stats = metadata.get("comm_stats")
        self._lanes = collections.defaultdict(list)
        for s in slices:
            self._lanes[(s.rank, s.thread)].append(s)

    def lane(self, rank, thread=MAIN_THREAD):
        """The slices of one thread of a rank, by start.

        Parameters
        ----------
        rank : int
            The rank.
        thread : int, default MAIN_THREAD (0)
            The thread (``threads()`` lists those with events).

        Returns
        -------
        list of Slice
            In order of start; empty for a thread without slices.

        Examples
        --------
        >>> [s.name for s in t.lane(0) if s.depth == 1 and s.category == "phase"][:3]   # pipeline's steps
        ['read', 'symmetrize', 'components']
        """
        return self._lanes.get((rank, thread), [])

    def threads(self):
        """Every (rank, thread) with events or a name, each rank's main
        thread included.

        Returns
        -------
        list of tuple
            (rank, thread) pairs, sorted.

        Examples
        --------
        >>> t.threads()                     # 2 ranks, main threads only
        [(0, 0), (1, 0)]
        """
        found = {(s.rank, s.thread) for s in self.slices} | set(self.thread_names)
        found |= {(r, MAIN_THREAD) for r in range(self.ranks)}
        return sorted(found)

    def __repr__(self):
        return f"Trace({self.path!r}: {self.ranks} ranks, {len(self.slices)} slices)"


# ---------------------------------------------------------------------------------------------------- loading

# type() rather than isinstance(): a bool is no number here, and a million events check fast.
def _is_number(value):
    return type(value) is int or (type(value) is float and math.isfinite(value))


def _is_count(value):
    return type(value) is int and value >= 0


class _Checker:
    """Raises FormatError("PATH: WHERE: WHAT") for the first fault found."""

    def __init__(self, path):
        self.path = path

    def fail(self, where, what):
        """Raises FormatError naming the file, where in it, and what is wrong."""
        raise FormatError(f"{self.path}: {where}: {what}" if where else f"{self.path}: {what}")

    def per_rank_list(self, owner, key, ranks, item_ok, item_kind, required=True, where="otherData.tessera"):
        """owner[key] (`where` in the file) must be a list of one item_ok value per rank."""
        value = owner.get(key)
        if value is None and not required:
            return
        if value is None:
            self.fail(where, f"no \"{key}\" (one entry per rank)")
        where = f"{where}.{key}"
        if not isinstance(value, list) or len(value) != ranks:
            self.fail(where, f"not a list of {ranks} entries (one per rank): {_short(value)}")
        for rank, item in enumerate(value):
            if not item_ok(item):
                self.fail(f"{where}[{rank}]", f"not {item_kind}: {_short(item)}")


def _short(value, limit=80):
    text = json.dumps(value) if not isinstance(value, str) else repr(value)
    return text if len(text) <= limit else text[:limit - 3] + "..."


def _check_metadata(check, document):
    other = document.get("otherData")
    if not isinstance(other, dict) or not isinstance(other.get("tessera"), dict):
        check.fail("", "not a Tessera trace: no otherData.tessera object (the recorder's description of the run)")
    meta = other["tessera"]
    if meta.get("format") != FORMAT:
        check.fail("otherData.tessera.format", f"{_short(meta.get('format'))}: this reader knows format {FORMAT}")
    ranks = meta.get("ranks")
    if not (isinstance(ranks, int) and not isinstance(ranks, bool) and ranks >= 1):
        check.fail("otherData.tessera.ranks", f"not a positive integer: {_short(ranks)}")
    check.per_rank_list(meta, "hosts", ranks, lambda v: isinstance(v, str), "a host name")
    check.per_rank_list(meta, "nodes", ranks, _is_count, "a node index")
    check.per_rank_list(meta, "start_us", ranks, _is_number, "a number")
    check.per_rank_list(meta, "end_us", ranks, _is_number, "a number")
    for rank in range(ranks):
        if meta["end_us"][rank] < meta["start_us"][rank]:
            check.fail(f"otherData.tessera.end_us[{rank}]",
                       f"{meta['end_us'][rank]} is before the rank's start {meta['start_us'][rank]}")
    check.per_rank_list(meta, "pids", ranks, _is_count, "a process id", required=False)
    check.per_rank_list(meta, "dropped_events", ranks, _is_count, "a count", required=False)
    if "command" in meta and not isinstance(meta["command"], str):
        check.fail("otherData.tessera.command", f"not a string: {_short(meta['command'])}")
    clock = meta.get("clock")
    if clock is not None:
        if not isinstance(clock, dict):
            check.fail("otherData.tessera.clock", f"not an object: {_short(clock)}")
        for key in ("offset_us", "uncertainty_us", "skew_at_end_us"):
            check.per_rank_list(clock, key, ranks, _is_number, "a number", required=False,
                                where="otherData.tessera.clock")
        if "max_skew_us" in clock and not _is_number(clock["max_skew_us"]):
            check.fail("otherData.tessera.clock.max_skew_us", f"not a number: {_short(clock['max_skew_us'])}")
    stats = meta.get("comm_stats")
    if stats is not None:
        if not isinstance(stats, list) or len(stats) != ranks:
            check.fail("otherData.tessera.comm_stats", f"not a list of {ranks} objects (one per rank)")
        for rank, rank_stats in enumerate(stats):
            where = f"otherData.tessera.comm_stats[{rank}]"
            if not isinstance(rank_stats, dict):
                check.fail(where, f"not an object: {_short(rank_stats)}")
            if "rank" in rank_stats and rank_stats["rank"] != rank:
                check.fail(where, f"says rank {_short(rank_stats['rank'])}, at position {rank}")
            for direction in ("to", "from"):
                peers = rank_stats.get(direction)
                if not isinstance(peers, list) or len(peers) != ranks:
                    check.fail(where, f"\"{direction}\" is not a list of {ranks} objects (one per peer rank)")
                for peer, counts in enumerate(peers):
                    if not isinstance(counts, dict) or not all(_is_count(counts.get(k))
                                                               for k in ("records", "batches", "bytes")):
                        check.fail(f"{where}.{direction}[{peer}]",
                                   f"needs counts records, batches, bytes: {_short(counts)}")
    return meta


def _where(index, event):
    """An event's place in the file, for a message (built on failure only)."""
    return f"traceEvents[{index}] ({event.get('ph')} \"{event.get('name')}\")"


_NO_ARGS = {}


def _check_event(check, index, event, ranks):
    """The fields every event has (ph, name, pid, tid, args); returns args."""
    ph, name = event.get("ph"), event.get("name")
    if ph not in EVENT_TYPES:
        check.fail(f"traceEvents[{index}]",
                   f"\"ph\" {_short(ph)} is not in format {FORMAT} (it has {', '.join(EVENT_TYPES)})")
    if type(name) is not str:
        check.fail(f"traceEvents[{index}]", f"no \"name\" string: {_short(name)}")
    pid = event.get("pid")
    if type(pid) is not int:
        check.fail(_where(index, event), f"no integer \"pid\" (the rank): {_short(pid)}")
    if not 0 <= pid < ranks:
        check.fail(_where(index, event), f"pid {pid} is not a rank of this {ranks}-rank job (0..{ranks - 1})")
    tid = event.get("tid")
    if not (type(tid) is int and tid >= 0) and ph not in ("M", "C"):
        check.fail(_where(index, event), f"no \"tid\" (a thread index >= 0): {_short(tid)}")
    args = event.get("args", _NO_ARGS)
    if type(args) is not dict:
        check.fail(_where(index, event), f"\"args\" is not an object: {_short(args)}")
    for key, value in args.items():
        if type(value) in (dict, list):
            check.fail(_where(index, event),
                       f"args.{key} is not a number or a string (args are flat): {_short(value)}")
    return args


def _check_batch_args(check, index, event, ranks):
    args = event.get("args", _NO_ARGS)
    peer_key = "dst" if event["name"] == "send batch" else "src"
    peer = args.get(peer_key)
    if not (type(peer) is int and 0 <= peer < ranks):
        check.fail(_where(index, event), f"args.{peer_key} is not a rank of this {ranks}-rank job: {_short(peer)}")
    for key in ("records", "bytes"):
        if not _is_count(args.get(key)):
            check.fail(_where(index, event), f"args.{key} is not a count: {_short(args.get(key))}")


def _check_nesting(check, slices):
    """Sorts slices by (rank, thread, start, longest first), sets their depth,
    and fails on two events of one thread that overlap without nesting."""
    slices.sort(key=lambda s: (s.rank, s.thread, s.start_us, -s.duration_us))
    open_slices = []  # the enclosing chain of the slice at hand
    lane = None
    for s in slices:
        if (s.rank, s.thread) != lane:
            lane, open_slices = (s.rank, s.thread), []
        while open_slices and open_slices[-1].end_us <= s.start_us + NESTING_TOLERANCE_US:
            open_slices.pop()
        if open_slices and s.end_us > open_slices[-1].end_us + NESTING_TOLERANCE_US:
            other = open_slices[-1]
            check.fail(f"rank {s.rank} thread {s.thread}",
                       f"\"{other.name}\" ({other.category}, {other.start_us:.3f}..{other.end_us:.3f} us) and "
                       f"\"{s.name}\" ({s.category}, {s.start_us:.3f}..{s.end_us:.3f} us) overlap without nesting")
        s.depth = len(open_slices)
        open_slices.append(s)


def load(path):
    """Reads a trace file, checked against format 1 (docs/trace.md).

    Parameters
    ----------
    path : str or os.PathLike
        A trace written by ``tessera --trace FILE`` or ``tessera.trace``.

    Returns
    -------
    Trace
        The file's events and metadata.

    Raises
    ------
    tessera.FormatError
        Naming the file and the first fault: not JSON, no traceEvents, an
        event without a field it needs, a pid that is not a rank, two
        events of one thread that overlap without nesting, a flow that ends
        without starting, ...
    tessera.SystemError
        The file cannot be read.

    Examples
    --------
    >>> import tessera.tracefile as tf
    >>> t = tf.load("t.json")
    >>> t
    Trace('t.json': 2 ranks, 458 slices)
    """
    path = os.fspath(path)
    check = _Checker(path)
    try:
        with open(path, "rb") as f:
            text = f.read()
    except OSError as e:
        raise SystemError(f"{path}: cannot read: {e.strerror or e}") from None
    try:
        document = json.loads(text)
    except UnicodeDecodeError as e:
        check.fail("", f"not JSON text (not UTF-8 at byte {e.start})")
    except json.JSONDecodeError as e:
        check.fail("", f"not JSON (line {e.lineno} column {e.colno}: {e.msg})")
    if not isinstance(document, dict):
        check.fail("", "not a JSON object with \"traceEvents\" (the Trace Event format's object form)")
    events = document.get("traceEvents")
    if not isinstance(events, list):
        check.fail("", "no \"traceEvents\" list" if events is None else "\"traceEvents\" is not a list")
    meta = _check_metadata(check, document)
    ranks = meta["ranks"]

    slices, instants, counters, thread_names = [], [], [], {}
    flow_starts, flow_finishes = {}, []
    for index, event in enumerate(events):
        if type(event) is not dict:
            check.fail(f"traceEvents[{index}]", f"not an object: {_short(event)}")
        args = _check_event(check, index, event, ranks)
        ph = event["ph"]
        if ph == "M":
            if event["name"] == "thread_name" and _is_count(event.get("tid")) and type(args.get("name")) is str:
                thread_names[(event["pid"], event["tid"])] = args["name"]
            continue
        ts = event.get("ts")
        if not _is_number(ts):
            check.fail(_where(index, event), f"no \"ts\" number (microseconds): {_short(ts)}")
        if ph == "X":
            category, dur = event.get("cat"), event.get("dur")
            if category not in CATEGORIES:
                check.fail(_where(index, event), f"\"cat\" {_short(category)} is none of {', '.join(CATEGORIES)}")
            if dur is None:
                check.fail(_where(index, event), "a complete (X) event without \"dur\"")
            if not _is_number(dur):
                check.fail(_where(index, event), f"\"dur\" is not a number: {_short(dur)}")
            if dur < 0:
                check.fail(_where(index, event), f"negative \"dur\" {dur}")
            if category == "comm" and event["name"] in ("send batch", "handle batch"):
                _check_batch_args(check, index, event, ranks)
            slices.append(Slice(event["name"], category, event["pid"], event["tid"], float(ts), float(dur), args))
        elif ph == "i":
            instants.append(event)
        elif ph == "C":
            counters.append(event)
        else:  # a flow: "s" at a send batch, "f" at its handle batch
            flow_id = event.get("id")
            if type(flow_id) is not int:
                check.fail(_where(index, event), f"a flow event without an integer \"id\": {_short(flow_id)}")
            if ph == "s":
                if flow_id in flow_starts:
                    check.fail(_where(index, event), f"flow id {flow_id} starts twice (ids are unique in the file)")
                flow_starts[flow_id] = event
            else:
                if event.get("bp") != "e":
                    check.fail(_where(index, event), "a flow finish without \"bp\": \"e\" (binding it to its slice)")
                flow_finishes.append((index, event))
    flows = {flow_id: [start, None] for flow_id, start in flow_starts.items()}
    for index, finish in flow_finishes:
        flow = flows.get(finish["id"])
        if flow is None:
            check.fail(_where(index, finish),
                       f"flow id {finish['id']} finishes without its start (an \"s\" event with that id)")
        if flow[1] is not None:
            check.fail(_where(index, finish), f"flow id {finish['id']} finishes twice")
        flow[1] = finish
    _check_nesting(check, slices)
    return Trace(path, meta, slices, instants, counters, {k: tuple(v) for k, v in flows.items()}, thread_names)


# ---------------------------------------------------------------------------------------------------- summary

def _merged(intervals):
    """The union of (start, end) intervals as sorted disjoint intervals."""
    out = []
    for start, end in sorted(intervals):
        if out and start <= out[-1][1]:
            if end > out[-1][1]:
                out[-1][1] = end
        else:
            out.append([start, end])
    return out


def _length(intervals):
    return sum(end - start for start, end in _merged(intervals))


def _rank_intervals(trace, rank, categories, thread=MAIN_THREAD):
    """(start, end) of the rank's slices of those categories on a thread,
    clipped to the rank's recording window."""
    lo, hi = trace.start_us[rank], trace.end_us[rank]
    out = []
    for s in trace.lane(rank, thread):
        if s.category in categories:
            start, end = max(s.start_us, lo), min(s.end_us, hi)
            if end > start:
                out.append((start, end))
    return out


def rank_times(trace, rank):
    """The rank's main-thread seconds, as the summary defines them
    (docs/trace.md, "Summary definitions").

    Parameters
    ----------
    trace : Trace
        A loaded trace.
    rank : int
        The rank.

    Returns
    -------
    dict
        Seconds for each of ``TIME_KINDS`` ("wall", "busy", "idle",
        "communication", "checkpoint", "untracked") plus "computation"
        (busy outside communication and checkpoints: the plot's utilization
        panel).

    Examples
    --------
    >>> times = tf.rank_times(tf.load("t.json"), 0)
    >>> sorted(times)
    ['busy', 'checkpoint', 'communication', 'computation', 'idle', 'untracked', 'wall']
    """
    idle = _rank_intervals(trace, rank, ("wait",))
    idle_us = _length(idle)

    def outside_idle(categories):
        """Microseconds in these categories' events that are not also idle."""
        return _length(_rank_intervals(trace, rank, categories) + idle) - idle_us

    wall_us = trace.end_us[rank] - trace.start_us[rank]
    busy_us = outside_idle(BUSY_CATEGORIES)
    seconds = {
        "wall": wall_us * 1e-6,
        "busy": busy_us * 1e-6,
        "idle": idle_us * 1e-6,
        "communication": outside_idle(("comm",)) * 1e-6,
        "checkpoint": outside_idle(("checkpoint",)) * 1e-6,
        "untracked": (wall_us - busy_us - idle_us) * 1e-6,
    }
    seconds["computation"] = busy_us * 1e-6 - outside_idle(("comm", "checkpoint")) * 1e-6
    return seconds


def _phase_rows(trace):
    """Per (category, name) of phase and round slices: seconds per rank (the
    union of that name's slices on the main thread), events, imbalance."""
    per_rank = collections.defaultdict(lambda: [[] for _ in range(trace.ranks)])
    counts = collections.Counter()
    for s in trace.slices:
        if s.thread == MAIN_THREAD and s.category in ("phase", "round"):
            per_rank[(s.category, s.name)][s.rank].append((s.start_us, s.end_us))
            counts[(s.category, s.name)] += 1
    rows = []
    for (category, name), intervals in per_rank.items():
        seconds = [_length(i) * 1e-6 for i in intervals]
        mean = sum(seconds) / trace.ranks
        slowest = max(range(trace.ranks), key=lambda r: seconds[r])
        rows.append({"name": name, "category": category, "events": counts[(category, name)],
                     "per_rank_s": seconds, "mean_s": mean, "max_s": seconds[slowest], "slowest_rank": slowest,
                     "imbalance": seconds[slowest] / mean if mean > 0 else None})
    rows.sort(key=lambda row: (-row["max_s"], row["category"], row["name"]))
    return rows


def traffic(trace):
    """The rank-to-rank traffic of the aggregators.

    From comm_stats' exact counters when the file has them (``tessera
    --comm-stats``), else from the "send batch" events (all threads; short
    when events were dropped).

    Parameters
    ----------
    trace : Trace
        A loaded trace.

    Returns
    -------
    dict
        ``bytes``, ``batches`` and ``records``: matrices indexed
        [source][destination]; ``same_node``: whether each pair shares a
        node; ``totals`` per "same_node" / "other_node"; ``source``:
        "comm_stats" or "send batch events".

    Examples
    --------
    >>> m = tf.traffic(tf.load("t.json"))
    >>> m["source"], m["bytes"]                    # rank 0 sent 220 bytes to rank 1
    ('comm_stats', [[0, 220], [364, 0]])
    """
    n = trace.ranks
    matrix = {key: [[0] * n for _ in range(n)] for key in ("bytes", "batches", "records")}
    if trace.comm_stats is not None:
        source = "comm_stats"
        for src, stats in enumerate(trace.comm_stats):
            for dst, counts in enumerate(stats["to"]):
                for key in matrix:
                    matrix[key][src][dst] = counts[key]
    else:
        source = "send batch events"
        for s in trace.slices:
            if s.category == "comm" and s.name == "send batch":
                dst = s.args["dst"]
                matrix["bytes"][s.rank][dst] += s.args["bytes"]
                matrix["records"][s.rank][dst] += s.args["records"]
                matrix["batches"][s.rank][dst] += 1
    same_node = [[trace.nodes[src] == trace.nodes[dst] for dst in range(n)] for src in range(n)]
    totals = {where: {key: sum(matrix[key][src][dst] for src in range(n) for dst in range(n)
                               if same_node[src][dst] == (where == "same_node"))
                      for key in matrix}
              for where in ("same_node", "other_node")}
    return {"source": source, **matrix, "same_node": same_node, "totals": totals}


def summary(trace):
    """What the trace says, as a JSON-ready dict (docs/trace.md, "Summary
    definitions"); ``tessera trace summary --json`` prints it.

    Parameters
    ----------
    trace : Trace
        A loaded trace.

    Returns
    -------
    dict
        ``ranks``: per rank: rank, host, node, KIND_s seconds and
        KIND_share of wall for KIND in ``TIME_KINDS`` (main thread),
        events, dropped_events. ``phases``: phase and round names, slowest
        rank first: name, category, events, per_rank_s, mean_s, max_s,
        slowest_rank, imbalance (max / mean). ``traffic``: as
        :func:`traffic`. ``clock``: method, max_skew_us,
        max_uncertainty_us. And ``file``, ``command``, ``hosts``,
        ``nodes``, ``wall_s`` (the job's), ``dropped_events``, ``events``.

    Examples
    --------
    >>> s = tf.summary(tf.load("t.json"))
    >>> [p["name"] for p in s["phases"][:3]]       # the slowest first
    ['tessera pipeline', 'hitting times', 'symmetrize']
    """
    rows = []
    events = collections.Counter(s.rank for s in trace.slices)
    for rank in range(trace.ranks):
        seconds = rank_times(trace, rank)
        row = {"rank": rank, "host": trace.hosts[rank], "node": trace.nodes[rank]}
        row.update({f"{kind}_s": seconds[kind] for kind in TIME_KINDS})
        row.update({f"{kind}_share": (seconds[kind] / seconds["wall"] if seconds["wall"] > 0 else 0.0)
                    for kind in TIME_KINDS[1:]})
        row.update({"events": events[rank], "dropped_events": trace.dropped_events[rank]})
        rows.append(row)
    clock = trace.clock
    return {
        "file": trace.path,
        "command": trace.command,
        "hosts": trace.hosts,
        "nodes": trace.nodes,
        "wall_s": (max(trace.end_us) - min(trace.start_us)) * 1e-6,
        "ranks": rows,
        "phases": _phase_rows(trace),
        "traffic": traffic(trace),
        "clock": {"method": clock.get("method"), "max_skew_us": clock.get("max_skew_us"),
                  "max_uncertainty_us": max(clock["uncertainty_us"]) if clock.get("uncertainty_us") else None},
        "dropped_events": sum(trace.dropped_events),
        "events": len(trace.slices),
    }


# ---------------------------------------------------------------------------------------------------- text

def _decimals(values):
    """Milliseconds at least, three significant digits of the column's
    largest value when it is smaller, microseconds at most."""
    top = max((abs(v) for v in values), default=0.0)
    if top <= 0:
        return 3
    return min(6, max(3, 2 - math.floor(math.log10(top))))


def _bytes_text(n):
    for unit, size in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= size:
            return f"{n / size:.1f} {unit}"
    return f"{n} B"


def _bytes_short(n):
    """Bytes in at most four characters or so: 0, 512, 12K, 1.5M, 3G."""
    for unit, size in (("G", 1 << 30), ("M", 1 << 20), ("K", 1 << 10)):
        if n >= size:
            return f"{n / size:.1f}{unit}" if n < 10 * size else f"{n // size}{unit}"
    return str(n)


def _amount(counts):
    batches = f"{counts['batches']} batch{'es' * (counts['batches'] != 1)}"
    return f"{_bytes_text(counts['bytes'])} in {batches} ({counts['records']} records)"


def _table(header, rows, left=()):
    """Aligned text columns; the columns in `left` are left-aligned."""
    cells = [header] + rows
    widths = [max(len(row[i]) for row in cells) for i in range(len(header))]
    lines = []
    for row in cells:
        parts = [c.ljust(w) if i in left else c.rjust(w) for i, (c, w) in enumerate(zip(row, widths))]
        lines.append("  ".join(parts).rstrip())
    return lines


def format_summary(s, max_phases=15, max_matrix_ranks=16):
    """The summary as text tables for a terminal (what ``tessera trace
    summary`` prints).

    Parameters
    ----------
    s : dict
        A :func:`summary`.
    max_phases : int, default 15
        Phases listed at most (the slowest first).
    max_matrix_ranks : int, default 16
        Ranks up to which the traffic matrix is printed whole.

    Returns
    -------
    str
        The tables, lines joined by newlines.

    Examples
    --------
    >>> print(tf.format_summary(tf.summary(tf.load("t.json"))))
    """
    lines = []
    hosts = sorted(set(s["hosts"]))
    lines.append(f"{s['file']}: {s['command'] or '(no command recorded)'}")
    skew = s["clock"]["max_skew_us"]
    clock = f"clock skew {skew:.1f} us" if skew is not None else "clock skew not measured"
    if s["clock"]["max_uncertainty_us"] is not None:
        clock += f" (alignment uncertainty up to {s['clock']['max_uncertainty_us']:.1f} us)"
    dropped = (f"{s['dropped_events']} events dropped (the buffer was full; times may be short)"
               if s["dropped_events"] else "no events dropped")
    n = len(s["ranks"])
    lines.append(f"{n} rank{'s' * (n != 1)} on {len(hosts)} host{'s' * (len(hosts) != 1)} "
                 f"({', '.join(hosts)}), {s['wall_s']:.3f} s, {s['events']} events; {clock}; {dropped}")

    lines += ["", "Time per rank (main thread; busy includes communication and checkpoint; untracked: in no event)"]
    decimals = {k: _decimals([r[f"{k}_s"] for r in s["ranks"]]) for k in TIME_KINDS}
    header = ["rank", "host", "wall s"]
    for k in TIME_KINDS[1:]:
        header += [f"{k} s", "%"]
    rows = []
    for r in s["ranks"]:
        row = [str(r["rank"]), r["host"], f"{r['wall_s']:.{decimals['wall']}f}"]
        for k in TIME_KINDS[1:]:
            row += [f"{r[f'{k}_s']:.{decimals[k]}f}", f"{100 * r[f'{k}_share']:.1f}%"]
        rows.append(row)
    lines += _table(header, rows, left=(1,))

    phases = s["phases"]
    lines += ["", "Phases and rounds, slowest rank first (imbalance = slowest rank / mean over ranks)"]
    if phases:
        shown = phases[:max_phases]
        d = _decimals([p["max_s"] for p in shown])
        rows = [[p["name"], p["category"], str(p["events"]), f"{p['mean_s']:.{d}f}", f"{p['max_s']:.{d}f}",
                 str(p["slowest_rank"]), f"{p['imbalance']:.2f}" if p["imbalance"] is not None else "-"]
                for p in shown]
        lines += _table(["name", "kind", "events", "mean s", "max s", "slowest", "imbalance"], rows, left=(0, 1))
        if len(phases) > len(shown):
            lines.append(f"... and {len(phases) - len(shown)} more (--json has them all)")
    else:
        lines.append("(no phase or round events)")

    t = s["traffic"]
    same, other = t["totals"]["same_node"], t["totals"]["other_node"]
    source = ("comm_stats: exact counters" if t["source"] == "comm_stats"
              else "the send batch events: short if events were dropped")
    lines += ["", f"Traffic (aggregation, from {source})"]
    lines.append(f"same node: {_amount(same)}; other nodes: {_amount(other)}")
    if n <= max_matrix_ranks:
        lines.append("bytes sent, source rank (rows) to destination rank (columns); * = another node")
        header = ["src\\dst"] + [str(d) for d in range(n)]
        rows = [[str(src)] + [_bytes_text(t["bytes"][src][dst]) + ("" if t["same_node"][src][dst] else "*")
                              for dst in range(n)] for src in range(n)]
        lines += _table(header, rows)
        lines.append("batches")
        rows = [[str(src)] + [str(t["batches"][src][dst]) for dst in range(n)] for src in range(n)]
        lines += _table(header, rows)
    else:
        rows = [[str(r), _bytes_text(sum(t["bytes"][r])), str(sum(t["batches"][r])),
                 _bytes_text(sum(t["bytes"][src][r] for src in range(n))),
                 str(sum(t["batches"][src][r] for src in range(n)))] for r in range(n)]
        lines += _table(["rank", "sent", "batches", "received", "batches"], rows)
    return "\n".join(lines)


# ---------------------------------------------------------------------------------------------------- plot

# Named work drawn in colour (the rest grey) and how many names get one.
_COLOURED_CATEGORIES = ("phase", "io", "balance", "checkpoint")
_COLOURED_NAMES = 12
_WAIT_EDGE, _WAIT_FACE = "#d62728", "#f6c4c4"  # waiting: hatched red over a light face, opaque


def _coverage(intervals, span_s, bins):
    """The share of each of `bins` equal columns of [0, span_s] that the
    union of the intervals covers."""
    import numpy as np

    merged = np.array(_merged(intervals), dtype=float).reshape(-1, 2)
    starts, lengths = merged[:, 0], merged[:, 1] - merged[:, 0]
    covered_before = np.concatenate(([0.0], np.cumsum(lengths)))
    edges = np.linspace(0.0, span_s, bins + 1)
    # The time covered up to each edge: the intervals before the last one
    # starting at or before it, and what of that one lies before it.
    k = np.maximum(np.searchsorted(starts, edges, side="right") - 1, 0)
    covered = covered_before[k] + np.clip(edges - starts[k], 0.0, lengths[k])
    return np.clip(np.diff(covered) / (span_s / bins), 0.0, 1.0)


def _draw_bars(ax, intervals, y, height, span_s, pixels, zorder, face, profile=False, **style):
    """Bars for the intervals. When there are more than the pixels can show
    (a million batches, a wait every millisecond), what each pixel column
    shows is the share of its time they cover: as the opacity of a strip of
    the face colour, or (profile) as the height of a bar rising from the
    bottom of the row."""
    if len(intervals) <= pixels // 4:
        ax.broken_barh([(start, end - start) for start, end in intervals], (y, height), facecolors=face,
                       zorder=zorder, **style)
        return
    import numpy as np
    from matplotlib.colors import to_rgb

    share = _coverage(intervals, span_s, pixels)
    if profile:
        edges = np.linspace(0.0, span_s, pixels + 1)
        bottom = y + height  # rows run downwards: the bottom is the larger y
        ax.fill_between(edges, bottom, bottom - height * np.append(share, share[-1]), step="post", facecolor=face,
                        zorder=zorder, **style)
        return
    strip = np.zeros((1, pixels, 4))
    strip[0, :, :3] = to_rgb(face)
    strip[0, :, 3] = share
    ax.imshow(strip, extent=(0, span_s, y + height, y), aspect="auto", interpolation="nearest", zorder=zorder)


def _thread_label(trace, rank, thread):
    if thread == MAIN_THREAD:
        return f"rank {rank} ({trace.hosts[rank]})"
    return f"rank {rank} · {trace.thread_names.get((rank, thread), f'thread {thread}')}"


def _draw_timeline(ax, trace, lanes, colours, origin_us, span_s, pixels):
    from matplotlib.patches import Patch

    bars = collections.defaultdict(list)  # (lane, kind, colour, depth) -> [(start s, end s)]
    for s in trace.slices:
        lane = lanes[(s.rank, s.thread)]
        start, end = (s.start_us - origin_us) * 1e-6, (s.end_us - origin_us) * 1e-6
        if s.category == "wait":
            key = (lane, "wait", _WAIT_FACE, 0)
        elif s.category == "round":
            key = (lane, "round", "#4a6fa5", 0)
        elif s.category == "comm":
            key = (lane, "comm", "#222222", 0)
        else:
            key = (lane, "named", colours.get(s.name, "#b0b0b0"), min(s.depth, 4))
        bars[key].append((start, end))
    for (lane, kind, colour, depth), intervals in bars.items():
        if kind == "named":  # nested work drawn narrower, on top of what encloses it
            inset = 0.06 * depth
            _draw_bars(ax, intervals, lane - 0.38 + inset, 0.76 - 2 * inset, span_s, pixels, 2 + depth, colour,
                       edgecolor="none")
        elif kind == "wait":
            _draw_bars(ax, intervals, lane - 0.38, 0.76, span_s, pixels, 8, colour, profile=True,
                       edgecolor=_WAIT_EDGE, linewidth=0.3, hatch="////")
        elif kind == "round":
            _draw_bars(ax, intervals, lane + 0.22, 0.14, span_s, pixels, 9, colour, edgecolor="white",
                       linewidth=0.3)
        else:
            _draw_bars(ax, intervals, lane - 0.44, 0.08, span_s, pixels, 9, colour, edgecolor="none")
    # Each rank's recording window, so a rank that ended early shows it.
    for rank in range(trace.ranks):
        lane = lanes[(rank, MAIN_THREAD)]
        start, end = (trace.start_us[rank] - origin_us) * 1e-6, (trace.end_us[rank] - origin_us) * 1e-6
        ax.plot([start, end], [lane + 0.45, lane + 0.45], color="#888888", linewidth=0.6, zorder=1)
    ax.set_xlim(0, span_s)
    ax.set_ylim(len(lanes) - 0.5, -0.5)
    ordered = sorted(lanes, key=lanes.get)
    ax.set_yticks(range(len(ordered)))
    ax.set_yticklabels([_thread_label(trace, r, t) for r, t in ordered], fontsize=8)
    ax.set_xlabel("seconds since the job's start")
    ax.grid(axis="x", color="#e0e0e0", linewidth=0.5, zorder=0)
    legend = [Patch(facecolor=c, label=name) for name, c in colours.items()]
    if any(s.name not in colours and s.category in _COLOURED_CATEGORIES for s in trace.slices):
        legend.append(Patch(facecolor="#b0b0b0", label="other named work"))
    legend += [Patch(facecolor=_WAIT_FACE, edgecolor=_WAIT_EDGE, hatch="////", label="waiting (idle)"),
               Patch(facecolor="#4a6fa5", label="kernel rounds"),
               Patch(facecolor="#222222", label="aggregation batches")]
    ax.legend(handles=legend, loc="upper left", bbox_to_anchor=(1.005, 1.0), fontsize=7, frameon=False)


def _draw_utilization(ax, trace):
    parts = (("computation", "#6c8ebf", "white"), ("communication", "#222222", "white"),  # (share, face, edge)
             ("checkpoint", "#ff7f0e", "white"), ("idle", _WAIT_FACE, _WAIT_EDGE), ("untracked", "#dddddd", "white"))
    shares = []
    for rank in range(trace.ranks):
        t = rank_times(trace, rank)
        wall = t["wall"] or 1.0
        shares.append({k: max(0.0, t[k]) / wall for k, _, _ in parts})
    left = [0.0] * trace.ranks
    for key, colour, edge in parts:
        widths = [shares[r][key] * 100 for r in range(trace.ranks)]
        ax.barh(range(trace.ranks), widths, left=left, color=colour, hatch="////" if key == "idle" else None,
                edgecolor=edge, linewidth=0.3, label=key)
        left = [a + b for a, b in zip(left, widths)]
    ax.set_yticks(range(trace.ranks))
    ax.set_yticklabels([f"rank {r}" for r in range(trace.ranks)], fontsize=8)
    ax.set_ylim(trace.ranks - 0.5, -0.5)
    ax.set_xlim(0, 100)
    ax.set_xlabel("% of the rank's wall time (main thread)")
    ax.set_title("Utilization", fontsize=10, pad=20)
    ax.legend(loc="lower center", bbox_to_anchor=(0.5, 1.0), ncol=len(parts), fontsize=7, frameon=False,
              handlelength=1.2, columnspacing=1.0)


def _draw_traffic(fig, ax, trace):
    from matplotlib.ticker import FuncFormatter

    t = traffic(trace)
    n = trace.ranks
    matrix = [[float(v) for v in row] for row in t["bytes"]]
    top = max(max(row) for row in matrix)
    image = ax.imshow(matrix, cmap="Blues", vmin=0, vmax=top or 1.0, aspect="auto")
    # An inset colour bar: the layout keeps the matrix's edges in line with the timeline's.
    cbar = fig.colorbar(image, cax=ax.inset_axes([1.03, 0.0, 0.04, 1.0]))
    cbar.ax.yaxis.set_major_formatter(FuncFormatter(lambda value, _: _bytes_short(int(value))))
    cbar.set_label("bytes sent", fontsize=8)
    cbar.ax.tick_params(labelsize=7)
    if n <= 16:
        for src in range(n):
            for dst in range(n):
                value = t["bytes"][src][dst]
                label = _bytes_short(value) + ("" if t["same_node"][src][dst] else "*")
                ax.text(dst, src, label, ha="center", va="center", fontsize=7 if n <= 8 else 5,
                        color="white" if top and value > 0.6 * top else "black")
    # Lines between nodes, when ranks of one node are neighbours.
    for r in range(1, n):
        if trace.nodes[r] != trace.nodes[r - 1]:
            ax.axhline(r - 0.5, color="#555555", linewidth=0.8)
            ax.axvline(r - 0.5, color="#555555", linewidth=0.8)
    ticks = range(n) if n <= 32 else range(0, n, max(1, n // 16))
    ax.set_xticks(list(ticks))
    ax.set_yticks(list(ticks))
    ax.tick_params(labelsize=7)
    ax.set_xlabel("destination rank")
    ax.set_ylabel("source rank")
    note = "exact" if t["source"] == "comm_stats" else "from events"
    ax.set_title(f"Traffic ({note}; * other node)", fontsize=10)
    if top == 0:
        ax.text((n - 1) / 2, (n - 1) / 2, "no aggregation traffic", ha="center", va="center", fontsize=9,
                color="#555555")


def plot(trace, out_path):
    """Draws the trace into a picture: the timeline (a row per rank and per
    other thread; named work in colours, waiting hatched red, kernel rounds
    as thin bars, batches as ticks), each rank's utilization and the
    traffic matrix. Needs matplotlib (imported here).

    Parameters
    ----------
    trace : Trace, str or os.PathLike
        A loaded trace, or a trace file's path.
    out_path : str or os.PathLike
        The picture: a .png or .svg path.

    Returns
    -------
    str
        ``out_path``.

    Raises
    ------
    tessera.ConfigError
        ``out_path`` is not .png or .svg, or matplotlib is missing.
    tessera.FormatError, tessera.SystemError
        As :func:`load`, when ``trace`` is a path.

    Examples
    --------
    >>> tf.plot("t.json", "t.png")
    't.png'
    """
    out_path = os.fspath(out_path)
    extension = os.path.splitext(out_path)[1].lower()
    if extension not in (".png", ".svg"):
        raise ConfigError(f"{out_path}: a plot is written as .png or .svg")
    if not isinstance(trace, Trace):
        trace = load(trace)
    try:
        from matplotlib.figure import Figure  # no pyplot: no global backend, nothing shown
    except ImportError:
        raise ConfigError("tessera trace plot needs matplotlib (apt install python3-matplotlib, or pip install "
                          "matplotlib)") from None

    lanes = {lane: i for i, lane in enumerate(trace.threads())}
    origin_us = min(trace.start_us)
    span_s = max((max(trace.end_us) - origin_us) * 1e-6, 1e-9)
    totals = collections.Counter()
    for s in trace.slices:
        if s.category in _COLOURED_CATEGORIES and s.thread == MAIN_THREAD:
            totals[s.name] += s.duration_us
    palette = ("#1f77b4", "#2ca02c", "#9467bd", "#8c564b", "#e377c2", "#17becf", "#bcbd22", "#ff7f0e",
               "#aec7e8", "#98df8a", "#c5b0d5", "#c49c94")
    colours = {name: palette[i] for i, (name, _) in enumerate(totals.most_common(_COLOURED_NAMES))}

    width_in, dpi = 14.0, 110
    timeline_in = 1.2 + 0.38 * len(lanes)
    panels_in = max(3.2, min(7.0, 1.6 + 0.3 * trace.ranks))
    # Constrained layout makes room for the titles, legends and labels.
    fig = Figure(figsize=(width_in, timeline_in + panels_in + 1.0), dpi=dpi, layout="constrained")
    grid = fig.add_gridspec(2, 2, height_ratios=[timeline_in, panels_in], width_ratios=[1.3, 1.0])
    timeline = fig.add_subplot(grid[0, :])
    pixels = int(width_in * 0.75 * dpi)  # about the timeline's width
    _draw_timeline(timeline, trace, lanes, colours, origin_us, span_s, pixels)
    _draw_utilization(fig.add_subplot(grid[1, 0]), trace)
    _draw_traffic(fig, fig.add_subplot(grid[1, 1]), trace)
    hosts = sorted(set(trace.hosts))
    fig.suptitle(f"{trace.command or os.path.basename(trace.path)}\n{trace.ranks} rank{'s' * (trace.ranks != 1)} on "
                 f"{len(hosts)} host{'s' * (len(hosts) != 1)} ({', '.join(hosts)}), {span_s:.3f} s",
                 fontsize=11)
    fig.savefig(out_path, format=extension[1:])
    return out_path


# ---------------------------------------------------------------------------------------------------- command

def main(argv=None):
    """``python3 -m tessera.tracefile`` (what ``tessera trace`` runs):
    ``summary FILE [--json]`` or ``plot FILE -o OUT.png|.svg``.

    Parameters
    ----------
    argv : list of str, optional
        The arguments (default: ``sys.argv[1:]``).

    Returns
    -------
    int
        The exit status: 0, or 1 with a one-line message on stderr on an
        error (as the tessera program does).

    Examples
    --------
    >>> tf.main(["summary", "t.json", "--json"])
    0
    """
    parser = argparse.ArgumentParser(prog="tessera trace", description="Where a traced run spent its time.")
    commands = parser.add_subparsers(dest="command", required=True)
    summary_parser = commands.add_parser("summary", help="busy, idle, communication per rank; phases; traffic")
    summary_parser.add_argument("file", help="a trace written by tessera --trace FILE (or tessera.trace)")
    summary_parser.add_argument("--json", action="store_true", help="one JSON document on stdout")
    plot_parser = commands.add_parser("plot", help="the timeline, utilization and traffic matrix as a picture")
    plot_parser.add_argument("file", help="a trace written by tessera --trace FILE (or tessera.trace)")
    plot_parser.add_argument("-o", "--output", required=True, help="the picture: a .png or .svg path")
    options = parser.parse_args(argv)
    try:
        trace = load(options.file)
        if options.command == "summary":
            s = summary(trace)
            print(json.dumps(s) if options.json else format_summary(s))
        else:
            plot(trace, options.output)
            print(f"{options.output}: {trace.ranks} ranks, {len(trace.slices)} events drawn", file=sys.stderr)
    except (FormatError, ConfigError, SystemError) as e:
        print(f"tessera: error: {e}", file=sys.stderr)
        return 1
    except BrokenPipeError:  # summary | head: the reader has what it wanted
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # no second error at exit's flush
        return 0
    return 0


if __name__ == "__main__":
    sys.exit(main())
