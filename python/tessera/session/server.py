"""The ranks of an analyst's session: an SPMD program (every rank runs it,
under mpirun or srun) that keeps graphs and arrays resident and runs the
commands its clients send.

Rank 0 owns the socket: it accepts clients (same uid only, checked with
SO_PEERCRED; over TCP only with the token), reads one request at a time and
broadcasts it; every rank then runs the same call of the SPMD API
(``tessera.read_graph``, ``components``, ...), so errors are agreed and
every rank keeps the same registry of objects. Between commands the ranks
sleep in ``_session_broadcast`` (no spinning: the job may sit idle for hours
beside a notebook).

With ``--dashboard`` rank 0 also serves the session's live page on
127.0.0.1 (dashboard.py); after each command every rank joins one small
collective for its figures (memory, each object's bytes). With ``--trace
FILE`` the ranks record the whole session into FILE, written when it stops;
``trace_start``/``trace_stop`` record the commands between them (``s.trace``).
Each command recorded is a "phase" named ``session: OP``.

Every array is Shared storage (a file per rank under /dev/shm, mode 0600)
and vertex ranges fall on 1024-vertex boundaries, so a client on this node
maps any vertex array as one NumPy array at consecutive addresses, without
a copy (``AttachedArray::open_contiguous``).

    mpirun -n K python3 -m tessera.session.server --socket PATH
"""
import argparse
import contextlib
import hmac
import json
import os
import queue
import re
import selectors
import signal
import socket
import sys
import threading
import time
import traceback
import types

import numpy as np

import tessera
from tessera import _tessera
from tessera.runtime import agreed

from . import dashboard as _dashboard
from . import memory as _memory  # memory guardrails (issue 58): Session.run's hook
from . import operations
from . import protocol
from . import sessions as _sessions

ALIGNMENT = 1024  # vertices: whole 4 KiB pages of 4- and 8-byte vertex arrays per rank
# Seconds a command may run on after its owner ended and it was cancelled
# before the job is ended (it is stuck: a collective some rank never joins).
STUCK_AFTER = float(os.environ.get("TESSERA_SESSION_STUCK_AFTER", "60"))
NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_.\-]{0,63}$")


class Held:
    """A resident object: the SPMD object itself, its scalar fields (what
    the client sees as attributes) and its arrays, made on first request."""

    def __init__(self, kind, obj, fields, arrays):
        self.kind, self.obj, self.fields, self.arrays = kind, obj, fields, arrays
        self.made = {}  # array field -> DistArray, kept while the object lives
        self.views = {}  # array field -> where it lives (op_view), read again without queueing

    def array(self, field):
        if field not in self.arrays:
            raise tessera.ConfigError(f"a {self.kind} has no array {field!r}; it has: {', '.join(sorted(self.arrays))}")
        if field not in self.made:
            self.made[field] = self.arrays[field]()
        return self.made[field]


def _plain(value):
    """JSON-safe copy of a result field (NumPy scalars, NaN as None)."""
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, float) and value != value:
        return None
    return value


def _local_array(block):
    """A Shared DistArray holding each rank's ``block`` (on the ranges the
    blocks give: a graph's aligned vertex ranges)."""
    return tessera.from_local(tessera.Runtime(), np.ascontiguousarray(block))


class _ArcArray:
    """A graph's arc array (``dst`` or ``weight``) as ``view`` and ``fetch``
    read one: its metadata is the graph's own Shared storage (a client on
    the node maps it where its parts fall on page boundaries); ``fetch``
    gathers from a copy made on first use."""

    def __init__(self, g, field):
        self.g, self.field = g, field
        self.dtype = (g.dst if field == "dst" else g.weight).dtype
        self.size = g.arcs
        self._copy = None

    @property
    def metadata_path(self):
        return self.g.metadata_paths[self.field]

    def gather(self, indices):
        if self._copy is None:
            self._copy = _local_array(self.g.dst if self.field == "dst" else self.g.weight)
        return self._copy.gather(indices)


def _available_memory():
    """MemAvailable of this node (bytes), from /proc/meminfo."""
    with open("/proc/meminfo") as f:
        for line in f:
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    return 0


def _graph(g, extra=None):
    fields = dict(vertices=g.vertices, edges=g.edges, arcs=g.arcs, directed=g.directed, weighted=g.weighted,
                  self_loops=g.self_loops, edge_array_bytes=g.edge_array_bytes, id_type=g.dst.dtype.name)
    fields.update(extra or {})
    arrays = {"file_ids": lambda: _local_array(g.file_ids), "out_degrees": g.out_degrees,
              "dst": lambda: _ArcArray(g, "dst")}
    if g.weighted:
        arrays["weight"] = lambda: _ArcArray(g, "weight")
    return Held("Graph", g, fields, arrays)


def _with_file_ids(graph, arrays):
    arrays = dict(arrays)
    arrays["file_ids"] = lambda: _local_array(graph.file_ids)
    return arrays


def _recording():
    """Whether this rank records a trace now (a session's, or TESSERA_TRACE's)."""
    return _tessera._trace_active()


def _phase(name):
    """A span of category "phase" on this rank (a context manager)."""
    return _tessera._TracePhase(name)


def _idle(name):
    """Idle time on this rank (a "wait" span) while recording; else nothing."""
    if not _recording():
        return contextlib.nullcontext()
    return _tessera._TracePhase(name, wait=True)


def _phase_name(op, args):
    return "session: " + (f"command {args.get('name')}" if op == "command" else op)


def _document_fields(result, exclude=()):
    return {k: v for k, v in vars(result).items() if not k.startswith("_") and k not in exclude
            and not isinstance(v, (tessera.DistArray, tessera.Graph, np.ndarray))}


class Session:
    """The state every rank holds alike: the objects and who owns them."""

    def __init__(self):
        self.objects = {}  # id or name -> Held
        self.owner = {}    # id -> client id (unnamed objects only)
        self.staged = {}   # client id -> [(src, dst, weights)]: edges sent for its next from_edges (rank 0)
        self.counter = 0
        self.tracing = None     # while the ranks record a trace: {"path", "client", "whole"}
        self.last_trace = None  # rank 0: the trace file written last, {"path", "at"}

    # -- the registry ----------------------------------------------------
    def add(self, held, client):
        self.counter += 1
        key = f"#{self.counter}"
        self.objects[key] = held
        self.owner[key] = client
        return key

    def get(self, ref, kind=None):
        if not isinstance(ref, str) or ref not in self.objects:
            raise tessera.ConfigError(f"no object {ref!r} in this session (s.list() names the resident ones)")
        held = self.objects[ref]
        if kind and held.kind not in (kind if isinstance(kind, tuple) else (kind,)):
            raise tessera.MismatchError(f"{ref} is a {held.kind}, not a {kind if isinstance(kind, str) else ' or '.join(kind)}")
        return held

    def describe(self, key):
        held = self.objects[key]
        return {"id": key, "kind": held.kind, "fields": _plain(held.fields), "arrays": sorted(held.arrays)}

    def listing(self):
        # Read by rank 0's socket thread while a command may change them:
        # copies made in one step (atomic under the GIL).
        owner = dict(self.owner)
        return [{"id": k, "kind": h.kind, "named": k not in owner, "owner": owner.get(k)}
                for k, h in list(self.objects.items())]

    # -- commands (collective: every rank runs each with the same request) --
    def run(self, op, args, client):
        """Runs a declared operation (operations.py; rank 0 validated the
        request before broadcasting it) by its handler."""
        declared = operations.OPERATIONS.get(op)
        if declared is None or declared.where == "rank0":
            raise tessera.ConfigError(f"unknown command {op!r}")
        method = getattr(self, declared.handler_name)
        # -- memory guardrail (issue 58, session/memory.py): a command that makes a graph or
        # runs an analysis is estimated and refused here, before its handler allocates; it
        # takes the request's memory_limit (declared dispatched in operations.py). --
        args = _memory.guard(self, op, args, client)
        if not op.startswith("trace_") and _recording():
            with _phase(_phase_name(op, args)):
                return method(client, **args)
        return method(client, **args)

    # -- traces (collective: the recorder starts and stops on every rank) -----
    def start_trace(self, path, buffer_mb, client, whole=False):
        path = os.path.abspath(path)

        def check():
            if self.tracing is not None:
                raise tessera.ConfigError(
                    f"the session already records a trace into {self.tracing['path']}" +
                    (" (the whole session, tessera.start(trace=...)): it is written when the session stops"
                     if self.tracing["whole"] else "; one at a time"))
            if _tessera._trace_active():
                raise tessera.ConfigError("the session's ranks already record a trace (TESSERA_TRACE, tessera "
                                          "--trace): it is written when the session stops")
            if buffer_mb is not None and int(buffer_mb) <= 0:
                raise tessera.RangeError(f"a trace buffer of {buffer_mb} MiB")
            if tessera.Runtime().rank == 0 and not os.path.isdir(os.path.dirname(path)):
                raise tessera.ConfigError(f"cannot write a trace to {path}: no directory {os.path.dirname(path)}")
        agreed(check)  # every rank passes before any enters the recorder's collective
        what = f"tessera session ({tessera.Runtime().size} ranks)" + ("" if whole else ": s.trace")
        mb = 0 if buffer_mb is None else int(buffer_mb)  # 0: the recorder's default
        _tessera._trace_start(path, mb, what)
        # The whole session is the trace's outermost phase (as a command is
        # the CLI's): its commands and the waits between them nest in it.
        phase = _tessera._TracePhase("tessera session") if whole else None
        self.tracing = {"path": path, "client": client, "whole": bool(whole), "phase": phase}
        return path

    def stop_trace(self):
        """Collective: the trace recorded written (by rank 0); its path."""
        if self.tracing.get("phase") is not None:
            self.tracing["phase"].end()
        path = _tessera._trace_stop() or self.tracing["path"]
        self.tracing = None
        if tessera.Runtime().rank == 0:
            self.last_trace = {"path": path, "at": time.time()}
        return path

    def op_trace_start(self, client, path, buffer_mb=None):
        return {"path": self.start_trace(path, buffer_mb, client)}

    def op_trace_stop(self, client):
        if self.tracing is None:
            raise tessera.ConfigError("the session records no trace (s.trace(PATH) starts one)")
        if self.tracing["whole"]:
            raise tessera.ConfigError(f"the session records itself whole into {self.tracing['path']}: "
                                      "written when it stops")
        if self.tracing["client"] != client:
            raise tessera.PeerError("another client records this trace; only it stops it")
        return {"path": self.stop_trace()}

    def op_noop(self, client):
        tessera.Runtime().barrier()
        return {}

    def op_stuck(self, client, graph):
        """Tests only (TESSERA_SESSION_TESTING=1): a command stuck for good,
        rank 0 in a kernel's collective that the other ranks never join."""
        if os.environ.get("TESSERA_SESSION_TESTING") != "1":
            raise tessera.ConfigError("unknown command 'stuck'")
        if tessera.Runtime().rank == 0:
            tessera.components(self.get(graph, "Graph").obj)
        else:
            time.sleep(3600)
        return {}

    def op_read_graph(self, client, path, base=None, relabel=False, undirected=False, symmetric=False,
                      pattern=False):
        g = tessera.read_graph(path, base=base, relabel=relabel, undirected=undirected, symmetric=symmetric,
                               pattern=pattern)
        return self.describe(self.add(_graph(g), client))

    def op_generate(self, client, kind, scale=16, edge_factor=16, dims="", seed=1, delete_fraction=0.0,
                    permute=False):
        g = tessera.generate(kind, scale=scale, edge_factor=edge_factor, dims=dims, seed=seed,
                             delete_fraction=delete_fraction, permute=permute)
        return self.describe(self.add(_graph(g), client))

    def op_components(self, client, graph, algorithm="afforest"):
        g = self.get(graph, "Graph").obj
        c = tessera.components(g, algorithm)
        fields = _document_fields(c, exclude=("graph",))
        return self.describe(self.add(Held("Components", c, fields, _with_file_ids(g, {"labels": lambda: c.labels})),
                                      client))

    def op_largest_component(self, client, graph, components=None, algorithm="afforest"):
        g = self.get(graph, "Graph").obj
        c = self.get(components, "Components").obj if components else None
        lcc = tessera.largest_component(g, c, algorithm=algorithm)
        # Its vertices stay where they were in g: new ranges, aligned, so
        # its vertex arrays map as one array in the client.
        aligned = tessera.Graph(lcc._impl.rebalanced())
        del lcc
        return self.describe(self.add(_graph(aligned, {"component_of": graph}), client))

    def op_hitting_times(self, client, graph, targets=None, solver=None, preconditioner=None, matrix=None,
                         tolerance=None, max_iterations=None, verbose=False):
        g = self.get(graph, "Graph").obj
        h = tessera.hitting_times(g, targets, solver=solver, preconditioner=preconditioner, matrix=matrix,
                                  tolerance=tolerance, max_iterations=max_iterations, verbose=verbose)
        fields = _document_fields(h, exclude=("file_ids",))
        ids = h.file_ids
        return self.describe(self.add(Held("HittingTimes", h, fields,
                                           {"times": lambda: h.times, "file_ids": lambda: _local_array(ids)}),
                                      client))

    def op_pagerank(self, client, graph, damping=0.85, tolerance=1e-4, max_iterations=20, method="gauss-seidel",
                    personalization=None, verbose=False):
        g = self.get(graph, "Graph").obj
        p = tessera.pagerank(g, damping=damping, tolerance=tolerance, max_iterations=max_iterations, method=method,
                             personalization=personalization, verbose=verbose)
        return self.describe(self.add(Held("PageRank", p, _document_fields(p),
                                           _with_file_ids(g, {"scores": lambda: p.scores})), client))

    def op_bfs(self, client, graph, source, direction="optimizing", hops=-1, verbose=False, max_depth=None):
        g = self.get(graph, "Graph").obj
        b = tessera.bfs(g, source, direction=direction, hops=hops if max_depth is None else max_depth,
                        verbose=verbose)
        return self.describe(self.add(Held("Bfs", b, _document_fields(b),
                                           _with_file_ids(g, {"parents": lambda: b.parents,
                                                              "depths": lambda: b.depths})), client))

    def op_spectral(self, client, graph, what="fiedler", method="lobpcg", tolerance=1e-10, max_iterations=20000,
                    matrix="edgelist", verbose=False):
        g = self.get(graph, "Graph").obj
        sp = tessera.spectral(g, what, method=method, tolerance=tolerance, max_iterations=max_iterations,
                              matrix=matrix, verbose=verbose)
        return self.describe(self.add(Held("Spectrum", sp, _document_fields(sp),
                                           _with_file_ids(g, {"vector": lambda: sp.vector})), client))

    def op_command(self, client, graph, name, options, verbose=False):
        """``tessera NAME --session PATH @GRAPH``: the command's workflow, with
        the options the command line parsed (its paths resolved against the
        allowed root, no analysis program or launcher: operations.py), on
        the resident graph."""
        g = self.get(graph, "Graph").obj
        document, code = _tessera._run_command(name, g._impl, options, bool(verbose))
        return {"document": json.loads(document), "exit_code": code}

    # -- residents saved and restored (the resilience store: python/src/store.cpp) --
    # Kept apart from a graph's own pieces: its arc arrays and the arrays made from it.
    _GRAPH_DERIVED = ("dst", "weight", "file_ids", "out_degrees")

    def op_save(self, client, dir, name=None):
        """Collective: the named residents (or one) written to ``dir``, each
        graph with its id map, each other resident as its fields and arrays;
        the save before in ``dir`` is replaced only once this one is whole."""
        names = [name] if name is not None else sorted(k for k in self.objects if not k.startswith("#"))
        held = {n: self.get(n) for n in names}
        writer = _tessera._store_begin(dir)  # (the store makes the directory)
        entries = []
        for n, h in held.items():
            entry = {"name": n, "kind": h.kind, "fields": _plain(h.fields), "arrays": {}}
            if h.kind == "Graph":
                entry["ids"] = writer.add_graph(f"graph/{n}", h.obj._impl)
            for field in sorted(h.arrays):
                if h.kind == "Graph" and field in self._GRAPH_DERIVED:
                    continue
                a = h.array(field)
                writer.add_array(f"array/{n}/{field}", a._impl)
                entry["arrays"][field] = a.dtype.name
            entries.append(entry)
        writer.commit(json.dumps({"format": 1, "tessera": tessera.__version__, "ranks": tessera.Runtime().size,
                                  "saved": time.time(), "objects": entries}))
        return {"dir": dir, "names": names}

    def op_restore(self, client, dir):
        """Collective: a save's residents back under their names (named, so
        no client owns them), at this session's rank count."""
        reader = _tessera._store_open(dir)  # refuses a damaged or partial save, saying why
        try:
            manifest = json.loads(reader.manifest)
            entries = manifest["objects"]
        except (ValueError, KeyError, TypeError) as e:
            raise tessera.FormatError(f"the save in {dir} has no readable manifest ({e})") from None
        taken = [e["name"] for e in entries if e["name"] in self.objects]
        if taken:
            raise tessera.ConfigError(f"the session already holds {', '.join(taken)}: drop them before restoring "
                                      f"{dir}")
        _memory.check_restore(self, entries, reader)  # memory guardrail (issue 58): before anything is read
        restored = {}
        for e in entries:
            n, kind = e["name"], e["kind"]
            arrays = {f: tessera.DistArray(None, 0, _impl=reader.read_array(f"array/{n}/{f}", np.dtype(dt), None))
                      for f, dt in e["arrays"].items()}
            if kind == "Graph":
                ids = e["ids"]
                g = tessera.Graph(reader.read_graph(f"graph/{n}", bool(ids["relabelled"]), int(ids["base"]),
                                                    bool(ids["connected"])))
                extra = {k: v for k, v in e["fields"].items() if k == "component_of"}
                restored[n] = _graph(g, extra)
            elif kind == "DistArray":
                restored[n] = self._array(arrays["values"])
            else:
                # A result comes back as its data: its fields and arrays (read, viewed, converted);
                # computing on it again starts from its restored graph.
                restored[n] = Held(kind, types.SimpleNamespace(**arrays), e["fields"],
                                   {f: (lambda a=a: a) for f, a in arrays.items()})
        self.objects.update(restored)
        return {"names": sorted(restored), "ranks_saved": int(manifest.get("ranks", 0))}

    # -- graphs from the client's arrays ------------------------------------
    def op_edges_chunk(self, client, payload=None):
        """Rank 0 keeps a part of a graph's edges until the client's
        from_edges; refused when they would take more than half the memory
        the node has available."""
        if tessera.Runtime().rank != 0:
            return {}
        chunks = self.staged.setdefault(client, [])
        held = sum(a.nbytes for chunk in chunks for a in chunk)
        room = _available_memory() // 2
        if held + sum(a.nbytes for a in payload) > room:
            self.staged.pop(client, None)
            raise tessera.RangeError(f"the edges sent for from_edges would hold {held + sum(a.nbytes for a in payload)} "
                                     f"bytes on rank 0, more than half the {2 * room} bytes available on its node; "
                                     "the parts sent so far are dropped (write the edges to a file and read_graph it)")
        chunks.append(payload)
        return {"staged": sum(len(c[0]) for c in chunks)}

    def op_from_edges(self, client, undirected=False, symmetric=False, relabel=False, vertices=None, payload=None):
        if tessera.Runtime().rank == 0:
            chunks = self.staged.pop(client, []) + [payload]
            src = np.concatenate([c[0] for c in chunks])
            dst = np.concatenate([c[1] for c in chunks])
            weights = [c[2] for c in chunks]
            # Weights on some parts only: as many as given, refused (agreed) by from_edges.
            w = np.concatenate(weights) if any(len(x) for x in weights) else None
        else:
            src = dst = np.empty(0, np.int64)
            w = None
        g = tessera.from_edges(src, dst, w, undirected=undirected, symmetric=symmetric, relabel=relabel,
                               vertices=vertices)
        del src, dst, w
        return self.describe(self.add(_graph(g), client))

    # -- distributed arrays ----------------------------------------------
    def _array(self, a):
        return Held("DistArray", a, {"size": a.size, "dtype": a.dtype.name}, {"values": lambda: a})

    def op_array(self, client, n, dtype="float64", fill="zeros"):
        rt = tessera.Runtime()
        n = int(n)
        if n < 0:
            raise tessera.RangeError(f"an array of {n} elements")
        # Block sizes on the alignment, so the array maps as one in the client.
        per = -(-n // rt.size) if n else 0
        per = -(-per // ALIGNMENT) * ALIGNMENT
        sizes = [max(0, min(per, n - r * per)) for r in range(rt.size)]
        a = tessera.DistArray(rt, n, np.dtype(dtype), sizes=sizes)
        if fill == "arange":
            lo, hi = a.local_range
            a.local[:] = np.arange(lo, hi, dtype=a.dtype)
        elif fill != "zeros":
            raise tessera.ConfigError(f"fill must be \"zeros\" or \"arange\", not {fill!r}")
        return self.describe(self.add(self._array(a), client))

    def _target(self, ref):
        held = self.get(ref[0]) if isinstance(ref, list) else self.get(ref, "DistArray")
        return held.array(ref[1]) if isinstance(ref, list) else held.obj

    def op_gather(self, client, array, payload=None):
        a = self._target(array)
        idx = payload if tessera.Runtime().rank == 0 else np.empty(0, np.int64)
        return {"values": a.gather(idx)}

    @staticmethod
    def _indices_and_values(payload, a):
        """The request's (indices, values) on rank 0; the other ranks take
        part in the collective call with none."""
        if tessera.Runtime().rank == 0:
            return payload
        return np.empty(0, np.int64), np.empty(0, a.dtype)

    def op_scatter(self, client, array, payload=None):
        a = self._target(array)
        a.scatter(*self._indices_and_values(payload, a))
        return {}

    def op_update(self, client, array, op="add", payload=None):
        a = self._target(array)
        a.update(*self._indices_and_values(payload, a), op=op)
        return {}

    def op_argsort(self, client, array, digit_bits=16):
        perm = tessera.argsort(self._target(array), digit_bits=digit_bits)
        return self.describe(self.add(self._array(perm), client))

    def op_view(self, client, ref, field):
        """Where an array lives (made on first request): its metadata file;
        remembered, so later reads of it are answered at once."""
        held = self.get(ref)
        a = held.array(field)
        where = {"metadata": a.metadata_path, "dtype": a.dtype.name, "length": a.size}
        held.views[field] = where
        return where

    def op_fetch(self, client, ref, field, limit):
        """The array copied to rank 0 (for the socket): refused past ``limit`` bytes."""
        a = self.get(ref).array(field)
        if a.size * a.dtype.itemsize > limit:
            raise tessera.ConfigError(
                f"{ref}.{field} is {a.size * a.dtype.itemsize} bytes, more than max_transfer_bytes={limit}; "
                "raise it (tessera.connect(..., max_transfer_bytes=N) or s.max_transfer_bytes = N) "
                "or use the view on the session's node")
        rank0 = tessera.Runtime().rank == 0
        return {"values": a.gather(np.arange(a.size, dtype=np.int64) if rank0 else np.empty(0, np.int64))}

    # -- names and lifetimes -------------------------------------------------
    def op_persist(self, client, ref, name):
        if not NAME.match(name or ""):
            raise tessera.ConfigError(f"{name!r} is not a name for a resident object "
                                      "(letters, digits, _ . -; not starting with a digit; at most 64)")
        held = self.get(ref)
        if name in self.objects and self.objects[name] is not held:
            raise tessera.ConfigError(f"the session already holds an object named {name!r}; drop it first")
        self.objects[name] = held
        # Named: no longer the client's, it outlives the client. The
        # unnamed id stays valid for the client that made it.
        self.owner.pop(ref, None)
        return self.describe(name)

    def op_drop(self, client, ref):
        self.get(ref)
        owner = self.owner.get(ref)
        if owner is not None and owner != client:
            raise tessera.PeerError(f"{ref} belongs to another client; only its maker drops it")
        held = self.objects.pop(ref)
        self.owner.pop(ref, None)

        # Other names of the same object keep it alive; its memory goes with
        # the last name (and the last client view of it).
        del held
        return {}

    def op_client_gone(self, client, gone):
        self.staged.pop(gone, None)
        for key in [k for k, c in self.owner.items() if c == gone]:
            del self.objects[key]
            del self.owner[key]
        if self.tracing is not None and not self.tracing["whole"] and self.tracing["client"] == gone:
            self.stop_trace()  # its s.trace never ended: written now
        return {}


def _limit(name, default):
    try:
        return float(os.environ.get(name, default))
    except ValueError:
        return float(default)


class Limits:
    """What one peer may cost the session (docs/security.md)."""
    # Seconds from accept for a peer to authenticate (hello, and auth on TCP).
    hello = _limit("TESSERA_SESSION_HELLO_TIMEOUT", 5)
    # Seconds a frame begun may wait for its next bytes, and a reply for the
    # peer to read the next of it (a peer that stops reading is gone).
    io = _limit("TESSERA_SESSION_IO_TIMEOUT", 30)
    # Connections not yet authenticated: per uid (or per host for TCP from
    # another node) and in all; authenticated ones in all.
    pending_per_peer = int(_limit("TESSERA_SESSION_PENDING_PER_PEER", 8))
    pending = int(_limit("TESSERA_SESSION_PENDING", 32))
    connections = int(_limit("TESSERA_SESSION_CONNECTIONS", 256))


class Conn:
    """One accepted connection: its peer and, once authenticated, its client."""

    def __init__(self, sock, tcp, peer, pid):
        self.sock, self.tcp, self.peer, self.pid = sock, tcp, peer, pid
        self.accepted = time.monotonic()
        self.id = None          # the client id, once authenticated
        self.authed = False
        self.lock = threading.Lock()  # one frame at a time on the way out
        self.closed = False


class Roots:
    """Where requests' paths may point (operations.Path): the allowed roots
    (``--root``, default the working directory of whoever started the
    session). A TCP client (a token holder) is bounded by them, and so is
    every client when roots were given explicitly; a client on the Unix
    socket (the session's own user, proved by SO_PEERCRED) otherwise names
    any path its user may, relative ones resolved against its own working
    directory (read from /proc here, not taken from the request)."""

    def __init__(self, roots, explicit):
        self.roots = [os.path.realpath(r) for r in roots]
        self.explicit = explicit

    def context(self, conn):
        def resolve(path, write):
            bounded = conn.tcp or self.explicit
            base = None
            if not conn.tcp and conn.pid:
                try:
                    base = os.readlink(f"/proc/{conn.pid}/cwd")
                except OSError:
                    base = None
            if base is None:
                base = self.roots[0]
            full = os.path.normpath(os.path.join(base, path))
            if not bounded:
                return full
            real = os.path.realpath(full)
            if not any(real == r or real.startswith(r.rstrip("/") + "/") for r in self.roots):
                raise operations.Invalid(
                    f"{full!r} is outside the session's allowed root{'s' if len(self.roots) > 1 else ''} "
                    f"({', '.join(self.roots)}): a session reads and writes files only there "
                    "(tessera.start(root=...), tessera serve --root DIR; docs/security.md)")
            return real
        return operations.Context(resolve)


class Endpoint:
    """Rank 0's sockets: the Unix socket (and TCP when asked), and the
    connections, each read by a thread of its own with deadlines and limits
    (one slow or hostile peer never holds another up)."""

    def __init__(self, socket_path, tcp=None, ranks=1):
        self.path = os.path.abspath(socket_path)
        protocol.private_dir(os.path.dirname(self.path))
        if os.path.exists(self.path):
            self._remove_stale(self.path)
        self.selector = selectors.DefaultSelector()
        self.unix = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        old = os.umask(0o177)
        try:
            self.unix.bind(self.path)
        finally:
            os.umask(old)
        self.unix.listen(128)
        self.selector.register(self.unix, selectors.EVENT_READ, "accept")
        self.token = None
        self.token_path = None
        self.connection_file = None  # sessions.write's, once serving
        self.tcp = None
        if tcp:
            host, _, port = tcp.rpartition(":")
            self.tcp = socket.create_server((host or "127.0.0.1", int(port)), backlog=128)
            self.token = protocol.new_token()
            self.token_path = self.path + ".token"
            if os.path.lexists(self.token_path):
                os.unlink(self.token_path)
            protocol.write_private(self.token_path, self.token + "\n")
            self.selector.register(self.tcp, selectors.EVENT_READ, "accept")
        self.conns = {}  # socket -> Conn
        self.lock = threading.Lock()
        self.next_client = 0
        self.secrets = {}  # client id -> the secret its other connections prove themselves with
        self.ranks = ranks

    @staticmethod
    def _remove_stale(path):
        probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            probe.connect(path)
        except (ConnectionRefusedError, FileNotFoundError):
            os.unlink(path)  # a socket nobody serves: left by a killed session
            return
        finally:
            probe.close()
        raise tessera.ConfigError(f"a session already serves {path}; connect to it or choose another --socket")

    def tcp_address(self):
        return "%s:%d" % self.tcp.getsockname()[:2] if self.tcp else None

    @property
    def clients(self):
        """Authenticated connections: socket -> client id (a snapshot)."""
        with self.lock:
            return {c.sock: c.id for c in self.conns.values() if c.authed}

    def client_ids(self):
        with self.lock:
            return {c.id for c in self.conns.values() if c.authed}

    @staticmethod
    def _refuse(sock, message):
        try:
            sock.setblocking(False)
            protocol.send(sock, {"ok": False, "error": {"type": "PeerError", "rank": 0, "message": message}})
        except (OSError, protocol.ProtocolError):
            pass
        finally:
            sock.close()

    def accept(self, listener):
        """A new connection checked and counted: its Conn, or None (refused)."""
        try:
            sock, address = listener.accept()
        except OSError:
            return None
        pid = 0
        if sock.family == socket.AF_UNIX:
            pid, uid = protocol.peer_credentials(sock)
            if uid != os.getuid():
                print(f"tessera session: refused a connection from uid {uid} (serving uid {os.getuid()} only)",
                      file=sys.stderr, flush=True)
                self._refuse(sock, f"this session serves uid {os.getuid()} only, not uid {uid}")
                return None
            peer = f"uid {uid}"
        else:
            uid = protocol.tcp_peer_uid(sock)
            peer = f"uid {uid}" if uid is not None else f"host {address[0]}"
        with self.lock:
            pending = [c for c in self.conns.values() if not c.authed]
            refusal = None
            if len(self.conns) >= Limits.connections:
                refusal = f"the session has {len(self.conns)} connections, its most"
            elif len(pending) >= Limits.pending:
                refusal = "too many connections wait to authenticate; try again"
            elif sum(1 for c in pending if c.peer == peer) >= Limits.pending_per_peer:
                refusal = f"too many connections of {peer} wait to authenticate"
            if refusal is None:
                conn = Conn(sock, sock.family != socket.AF_UNIX, peer, pid)
                self.conns[sock] = conn
        if refusal is not None:
            self._refuse(sock, refusal)
            return None
        return conn

    def drop(self, conn):
        """Closes a connection; True the first time."""
        with self.lock:
            if self.conns.pop(conn.sock, None) is None:
                return False
        conn.closed = True
        try:
            conn.sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        conn.sock.close()
        return True

    def close(self):
        for conn in list(self.conns.values()):
            self.drop(conn)
        for s in (self.unix, self.tcp):
            if s is not None:
                s.close()
        for p in (self.path, self.token_path):
            if p and os.path.exists(p):
                os.unlink(p)
        if self.connection_file:
            _sessions.remove(self.connection_file)


def _error_reply(e):
    message = str(e)
    rank = 0
    m = re.match(r"^on rank (\d+): ", message)
    if m:
        rank = int(m.group(1))
    name = type(e).__name__
    return {"ok": False, "error": {"type": name, "message": message, "rank": rank}}


def _error(kind, message):
    return {"ok": False, "error": {"type": kind, "rank": 0, "message": message}}


def _wire(result):
    """(header, payload) for a command's result; NumPy arrays travel as bytes."""
    payload = b""
    if isinstance(result, dict) and isinstance(result.get("values"), np.ndarray):
        values = result.pop("values")
        result["values"] = {"dtype": values.dtype.name, "length": int(values.size)}
        payload = values.tobytes()
    return {"ok": True, "result": result}, payload


class Serving:
    """Rank 0: a socket thread takes clients and answers what needs no other
    rank (ping, status, list) at once, even while a command runs (the
    kernels release the GIL); the main thread, the only one calling MPI,
    runs the commands it queues, one at a time, on every rank. Lines the
    library prints on stderr while a command with ``verbose`` runs also go
    to that command's client (its progress)."""

    def __init__(self, session, endpoint, rt, pids, dashboard=None, hosts=None, roots=None,
                 max_transfer_bytes=protocol.DEFAULT_MAX_TRANSFER_BYTES):
        self.session, self.endpoint, self.rt = session, endpoint, rt
        self.roots = roots or Roots([os.getcwd()], False)
        self.max_transfer_bytes = int(max_transfer_bytes)
        self.testing = os.environ.get("TESSERA_SESSION_TESTING") == "1"
        self.dashboard = dashboard  # the live page (None: not served)
        self.hosts = hosts or [socket.gethostname()] * rt.size
        self.autosave = None        # --autosave DIR: named residents saved at stop and when idle
        self.autosave_seconds = 600.0
        self.dirty = False          # a command ran since the last save
        self.last_command = time.monotonic()
        self.running = None
        self.running_lock = threading.Lock()  # a cancel never reaches the next command
        self.started = time.time()
        self.stop = False
        self.pids = [int(p) for p in pids]
        self.owner = 0
        self.owner_lost = None  # when the owner was found gone while a command ran
        self.log_fd = None      # the log (stderr before forward_stderr took it)
        self.commands = queue.Queue()
        self.progress_to = None

    # -- every thread ---------------------------------------------------------
    def send(self, conn, header, payload=b""):
        """One frame to ``conn`` (a Conn); a peer that does not read it
        within Limits.io seconds is dropped (its thread then ends)."""
        if conn is None or conn.closed:
            return
        try:
            with conn.lock:
                protocol.send(conn.sock, header, payload, timeout=Limits.io)
        except (OSError, protocol.ProtocolError):
            self.endpoint.drop(conn)  # the client left or stopped reading; its thread notices

    # -- the main thread (MPI) -------------------------------------------------
    def broadcast(self, message):
        _tessera._session_broadcast(json.dumps(message).encode())

    def collective(self, message, payload_args=None):
        """Runs one command on every rank; its reply (header, payload)."""
        with self.running_lock:
            _tessera._session_cancel(False)
            self.running = {"op": message["op"], "client": message["client"], "since": time.time()}
        if self.dashboard is not None:
            self.dashboard.begin(message["op"], message["client"], message["args"])
        self.broadcast(message)
        try:
            args = dict(message["args"])
            if payload_args is not None:
                args["payload"] = payload_args
            result = agreed(lambda: self.session.run(message["op"], args, message["client"]))
            made = result.get("id") if isinstance(result, dict) else None
            reply = _wire(result)
        except Exception as e:  # noqa: BLE001 - every failure goes back to the client
            reply, made = (_error_reply(e), b""), None
        finally:
            with self.running_lock:
                self.running = None
        if self.dashboard is not None:
            error = reply[0].get("error")
            self.dashboard.end("ok" if error is None else f"{error['type']}: {error['message']}"[:300], made)
            self.publish()
        return reply

    def publish(self):
        """Collective (every rank joins ``gather_stats`` after each command):
        the dashboard's snapshot of the session, made here on the main thread."""
        rss, hwm, sizes = _dashboard.gather_stats(self.rt, self.session.objects)
        objects = []
        for (held, keys), size in zip(_dashboard.distinct(self.session.objects), sizes):
            ids = [k for k in keys if k.startswith("#")]
            names = [k for k in keys if not k.startswith("#")]
            owner = next((self.session.owner[k] for k in ids if k in self.session.owner), None)
            objects.append({"id": (ids or names)[0], "names": names, "kind": held.kind, "bytes": int(size),
                            "what": _dashboard.describe_object(held), "owner": owner})
        ranks = [{"rank": r, "host": self.hosts[r], "pid": self.pids[r], "rss": rss[r] if rss[r] >= 0 else None,
                  "peak": hwm[r] if hwm[r] >= 0 else None, "measured": "after the last command"}
                 for r in range(self.rt.size)]
        tracing, last = self.session.tracing, self.session.last_trace
        self.dashboard.publish({
            "session": {"ranks": self.rt.size, "host": socket.gethostname(), "job_id": self.rt.job_id,
                        "tessera": tessera.__version__, "started": self.started, "socket": self.endpoint.path},
            "ranks": ranks, "objects": objects,
            "trace": {"recording": tracing["path"] if tracing else None,
                      "whole": bool(tracing and tracing["whole"]),
                      "last": last["path"] if last else None, "last_at": last["at"] if last else None}})

    def run_commands(self):
        while not self.stop:
            try:
                # Rank 0 between commands: idle time in a trace.
                with _idle("session: waiting for a command"):
                    item = self.commands.get(timeout=1.0)
            except queue.Empty:
                self.stop = self.stop or self.owner_gone()
                if (self.autosave and self.dirty and not self.stop
                        and time.monotonic() - self.last_command > self.autosave_seconds):
                    self.save_named()
                continue
            if item is None:
                break
            conn, client, op, args, payload_args = item
            if conn is None:  # a client left: its unnamed objects go
                self.collective({"op": "client_gone", "args": {"gone": client}, "client": client})
                continue
            if conn.closed:  # its client hung up (a Ctrl-C while it queued)
                continue
            # Validated by its connection's thread (operations.validate).
            message = {"op": op, "args": args, "client": client}
            self.progress_to = conn if message["args"].get("verbose") else None
            reply, out = self.collective(message, payload_args)
            self.progress_to = None
            self.send(conn, reply, out)
            self.dirty = self.dirty or op not in ("save", "noop", "view", "fetch", "gather", "trace_start",
                                                  "trace_stop")
            self.last_command = time.monotonic()
        self.stop = True
        if self.autosave and self.dirty:
            self.save_named()
        self.broadcast({"op": "__stop__"})

    def save_named(self):
        """Autosave: the named residents written to the autosave directory
        (a collective, as a command); a failure is said in the log."""
        reply, _ = self.collective({"op": "save", "args": {"dir": self.autosave, "name": None}, "client": "autosave"})
        if reply.get("ok"):
            self.dirty = False
            print(f"tessera session: saved {', '.join(reply['result']['names']) or 'nothing'} into {self.autosave}",
                  file=sys.stderr, flush=True)
        else:
            print(f"tessera session: autosave into {self.autosave} failed: {reply.get('error')}", file=sys.stderr,
                  flush=True)

    def queued_commands(self):
        """Commands waiting that will run: not those of clients that hung up
        (skipped when their turn comes), nor the clean-ups of clients gone."""
        with self.commands.mutex:
            waiting = list(self.commands.queue)
        return sum(1 for item in waiting if item is not None and item[0] is not None and not item[0].closed)

    def watch_owner(self):
        """Rank 0's socket thread, while a command runs (between commands
        run_commands looks): the owner gone, the command is cancelled; still
        running STUCK_AFTER seconds later, it is stuck in a collective that
        no cancellation point ends, and the ranks would hold their memory
        and files for good: rank 0 ends itself with SIGTERM, as if killed,
        so mpirun ends the others and every rank removes its files."""
        running = self.running
        if not self.owner or running is None or os.path.exists(f"/proc/{self.owner}"):
            return
        now = time.monotonic()
        if self.owner_lost is None:
            self.owner_lost = now
            print(f"tessera session: its owner (pid {self.owner}) ended during {running['op']}; cancelling it",
                  file=sys.stderr, flush=True)
            _tessera._session_cancel(True)
        elif now - self.owner_lost > STUCK_AFTER:
            # Straight to the log: the stderr pump may not run again.
            sys.stderr.flush()
            os.write(self.log_fd if self.log_fd is not None else 2,
                     f"tessera session: {running['op']} did not stop within {STUCK_AFTER:g} s of its owner's end "
                     "(a collective that some rank never joins): ending the session's ranks\n".encode())
            os.kill(os.getpid(), signal.SIGTERM)

    def owner_gone(self):
        if not self.owner or os.path.exists(f"/proc/{self.owner}"):
            return False
        print(f"tessera session: its owner (pid {self.owner}) ended without stopping it; stopping",
              file=sys.stderr, flush=True)
        return True

    # -- the socket side: an accepting thread, a thread per connection -----------
    def local_reply(self, conn, op, args):
        """What rank 0 answers alone (no rank waits for it)."""
        if op == "ping":
            return {"ok": True, "result": {}}
        if op == "status":
            running = dict(self.running) if self.running else None
            if running:
                running["seconds"] = time.time() - running.pop("since")
            tracing = self.session.tracing
            return {"ok": True, "result": {"ranks": self.rt.size, "objects": len(self.session.objects),
                                           "clients": len(self.endpoint.client_ids()), "running": running,
                                           "queued": self.queued_commands(), "uptime": time.time() - self.started,
                                           "dashboard": self.dashboard.url if self.dashboard else None,
                                           "trace": tracing["path"] if tracing else None}}
        if op == "list":
            return {"ok": True, "result": {"objects": self.session.listing()}}
        if op == "describe":
            ref = args["ref"]
            try:
                return {"ok": True, "result": self.session.describe(ref)}
            except KeyError:
                return _error("ConfigError", f"no object {ref!r} in this session")
        if op == "cancel":
            return {"ok": True, "result": {"cancelling": self.cancel(conn.id)}}
        if op == "shutdown":
            self.stop = True
            self.commands.put(None)
            return {"ok": True, "result": {}}
        raise AssertionError(f"no local answer for {op}")

    def authenticate(self, conn):
        """The greeting on a new connection, by Limits.hello seconds from
        accept, in frames of at most MAX_HELLO_BYTES: on TCP the token proved
        both ways (protocol.py), then the version compared, a join proved
        with its client's secret. True when the connection may go on."""
        deadline = conn.accepted + Limits.hello
        limits = dict(max_header=protocol.MAX_HELLO_BYTES, max_payload=0, deadline=deadline, timeout=Limits.hello)
        header, _ = protocol.receive(conn.sock, **limits)
        if header.get("op") != "hello":
            self.send(conn, _error("PeerError", "the first request on a connection is hello"))
            return False
        if conn.tcp:
            nonce = header.get("nonce")
            if not protocol.is_nonce(nonce) or not self.endpoint.token:
                self.send(conn, _error("PeerError", "a TCP client needs the session's token (its hello carries "
                                                    "a nonce; tessera.connect(tcp=..., token_file=...))"))
                return False
            mine = protocol.new_nonce()
            self.send(conn, {"ok": True, "result": {
                "proof": protocol.proof(self.endpoint.token, "server", nonce, mine), "nonce": mine}})
            answer, _ = protocol.receive(conn.sock, **limits)
            if answer.get("op") != "auth" or not protocol.proof_matches(
                    protocol.proof(self.endpoint.token, "client", mine, nonce), answer.get("proof")):
                self.send(conn, _error("PeerError", "a TCP client needs the session's token"))
                return False
            header = answer  # its version and join come with its proof, not before
        # Authenticated from here (uid on the Unix socket, the token on TCP).
        version = header.get("version")
        if version != protocol.PROTOCOL_VERSION:
            self.send(conn, _error("MismatchError", f"the client speaks session protocol {str(version)[:20]}, this "
                                   f"session {protocol.PROTOCOL_VERSION} (tessera {tessera.__version__}): use the "
                                   "same Tessera on both sides"))
            return False
        join = header.get("join")
        secret = None
        if join is not None:
            client = join.get("client") if isinstance(join, dict) else None
            with self.endpoint.lock:
                expected = self.endpoint.secrets.get(client) if isinstance(client, str) else None
            if expected is None or not protocol.proof_matches(expected, join.get("secret")):
                self.send(conn, _error("PeerError", "a join must prove itself with its client's secret "
                                                    "(only that client's own connections may act as it)"))
                return False
            conn.id = client
        else:
            secret = protocol.new_nonce()
            with self.endpoint.lock:
                self.endpoint.next_client += 1
                conn.id = f"c{self.endpoint.next_client}"
                self.endpoint.secrets[conn.id] = secret
        conn.authed = True
        self.send(conn, {"ok": True, "result": {
            "version": protocol.PROTOCOL_VERSION, "tessera": tessera.__version__, "ranks": self.rt.size,
            "host": socket.gethostname(), "job_id": self.rt.job_id, "client": conn.id, "secret": secret,
            "pids": self.pids, "hosts": self.hosts, "shm_dir": os.environ.get("TESSERA_SHM_DIR") or "/dev/shm",
            "max_transfer_bytes": self.max_transfer_bytes, "roots": self.roots.roots,
            "bounded": bool(conn.tcp or self.roots.explicit),
            # Only here, after the peer proved itself (uid, or the TCP token).
            "dashboard": self.dashboard.url if self.dashboard else None}})
        return True

    def take(self, conn, header, payload):
        """One request of an authenticated client: validated against its
        declaration (operations.py), then answered here or queued for
        every rank. A request that does not validate is answered with its
        error; the connection and the session go on."""
        try:
            op, args = operations.validate(header.get("op"), header.get("args"), self.roots.context(conn),
                                           testing=self.testing)
            payload_args = None
            if op.where != "rank0":
                payload_args = operations.payload_arrays(op, header.get("payload"), payload)
            elif payload or header.get("payload"):
                raise operations.Invalid(f"{op.name} takes no payload")
        except operations.Invalid as e:
            self.send(conn, _error("ConfigError", str(e)))
            return
        if op.where == "rank0":
            self.send(conn, self.local_reply(conn, op.name, args))
            return
        # Reading a resident does not wait behind another client's command:
        # where its array was mapped before, rank 0 answers alone.
        held = self.session.objects.get(args.get("ref")) if op.name == "view" else None
        known = held.views.get(args.get("field")) if held is not None else None
        if known is not None:
            self.send(conn, {"ok": True, "result": known})
            return
        ahead = self.queued_commands() + (1 if self.running else 0)
        self.commands.put((conn, conn.id, op.name, args, payload_args))
        if ahead and header.get("args", {}).get("verbose"):
            # A verbose command learns its place: it runs once those before it have.
            self.send(conn, {"progress": f"queued: {ahead} command(s) of the session run before {op.name}"})

    def serve_connection(self, conn):
        """A connection's thread: authenticate, then read requests until it
        ends. Any frame that is not this protocol's within the limits gets an
        error frame and the connection closed; nothing here stops the
        session."""
        try:
            if self.authenticate(conn):
                while not self.stop and not conn.closed:
                    header, payload = protocol.receive(conn.sock, self.max_transfer_bytes, timeout=Limits.io)
                    self.take(conn, header, payload)
        except protocol.ProtocolError as e:
            self.send(conn, _error("FormatError", str(e)))
        except (ConnectionError, OSError):
            pass
        except Exception:  # noqa: BLE001 - a bug here ends this connection, never the session
            traceback.print_exc()
            self.send(conn, _error("Error", "the session could not read this request"))
        finally:
            self.client_left(conn)

    def cancel(self, client):
        """Stops the running command at its next cancellation point if it is
        ``client``'s (its Ctrl-C); the command's name, or None."""
        with self.running_lock:
            if client is None or self.running is None or self.running["client"] != client:
                return None
            _tessera._session_cancel(True)
            return self.running["op"]

    def client_left(self, conn):
        """Once per connection, when its thread ends."""
        self.endpoint.drop(conn)
        if not conn.authed:
            return
        if conn.id not in self.endpoint.client_ids():
            with self.endpoint.lock:
                self.endpoint.secrets.pop(conn.id, None)
            self.cancel(conn.id)  # nobody waits for its command any more
            self.commands.put((None, conn.id, None, None, None))

    def serve_sockets(self):
        while not self.stop:
            self.watch_owner()
            for key, _ in self.endpoint.selector.select(timeout=0.5):
                conn = self.endpoint.accept(key.fileobj)
                if conn is not None:
                    threading.Thread(target=self.serve_connection, args=(conn,), daemon=True,
                                     name=f"connection {conn.peer}").start()
            if self.dashboard is not None:
                self.dashboard.counts(len(self.endpoint.client_ids()), self.queued_commands())


    def forward_stderr(self):
        """fd 2 becomes a pipe read here: each line goes on to the log (the
        old fd 2) and, while a verbose command runs, to its client."""
        read_end, write_end = os.pipe()
        log = os.dup(2)
        os.dup2(write_end, 2)
        os.close(write_end)

        def pump():
            with os.fdopen(read_end, "rb", buffering=0) as pipe:
                pending = b""
                while True:
                    chunk = pipe.read(65536)
                    if not chunk:
                        return
                    os.write(log, chunk)
                    pending += chunk
                    *lines, pending = pending.split(b"\n")
                    target = self.progress_to
                    for line in lines:
                        text = line.decode(errors="replace")
                        if target is not None:
                            self.send(target, {"progress": text})
                        if self.dashboard is not None:
                            self.dashboard.line(text)  # shown only while a command runs
        threading.Thread(target=pump, daemon=True, name="stderr").start()
        return log

    def loop(self):
        log = self.log_fd = self.forward_stderr()
        sockets = threading.Thread(target=self.serve_sockets, daemon=True, name="sockets")
        sockets.start()
        try:
            self.run_commands()
        finally:
            self.stop = True
            sockets.join(timeout=5)
            sys.stderr.flush()
            os.dup2(log, 2)


def follow(session, rt, stats=False):
    """Ranks other than 0: run what rank 0 broadcasts until it says stop
    (and, with a dashboard, join the figures' collective after each)."""
    while True:
        message = json.loads(_tessera._session_broadcast(b""))
        if message["op"] == "__stop__":
            return
        try:
            agreed(lambda: session.run(message["op"], dict(message["args"]), message["client"]))
        except Exception:  # noqa: BLE001 - rank 0 replies; this rank stays in step
            pass
        if stats:
            _dashboard.gather_stats(rt, session.objects)


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python3 -m tessera.session.server",
                                     description="The ranks of a Tessera session (run under mpirun or srun).")
    parser.add_argument("--socket", default=None, help="the Unix socket to serve (its directory: mode 0700; "
                        "default: a new one in the user's private runtime directory, printed)")
    parser.add_argument("--tcp", default=None, help="also serve TCP at [HOST:]PORT (default host 127.0.0.1), "
                        "with a token in SOCKET.token (mode 0600)")
    parser.add_argument("--owner", default="", help="HOST:PID: stop when this process ends (checked where rank 0 "
                        "runs on HOST): the client that started the session and did not ask to keep it")
    parser.add_argument("--dashboard", action="store_true", help="serve the session's live page on 127.0.0.1 "
                        "(its URL, with its token, printed; clients get it as s.dashboard_url)")
    parser.add_argument("--dashboard-port", type=int, default=0, help="its port (default: any free one)")
    parser.add_argument("--dashboard-quiet", action="store_true", help="print the page's URL without its token "
                        "(tessera.start: the log is no place for it; the client has it)")
    parser.add_argument("--trace", default=None, help="record the whole session into this trace file, written "
                        "when the session stops")
    parser.add_argument("--trace-buffer-mb", type=int, default=None, help="the recorder's buffer per thread "
                        "(MiB; default: the recorder's)")
    parser.add_argument("--root", action="append", default=None, help="a directory requests' paths may name "
                        "(repeatable; given, it bounds every client; default: this working directory, bounding "
                        "TCP clients only; docs/security.md)")
    # -- memory guardrail (issue 58): the session's memory limit (session/memory.py) --
    parser.add_argument("--memory-limit", default=None, help="refuse a command whose estimated peak on a node, with "
                        "what the session holds there, is over this: a fraction of the node's memory (0.9, 90%%), "
                        "bytes (20G) or none (default: $TESSERA_MEMORY_LIMIT, else 90%%; docs/memory.md)")
    parser.add_argument("--autosave", default=None, help="save the named residents into this directory when the "
                        "session stops and after --autosave-minutes without commands (s.save_all's format)")
    parser.add_argument("--autosave-minutes", type=float, default=10.0, help="idle minutes before an autosave")
    parser.add_argument("--max-transfer-bytes", type=int, default=protocol.DEFAULT_MAX_TRANSFER_BYTES,
                        help="the largest payload a client may send")
    args = parser.parse_args(argv)
    operations.check_handlers(Session)
    rt = tessera.Runtime()
    _tessera._session_layout(True, ALIGNMENT)
    _tessera._session_cancellation()
    session = Session()
    session.memory_limit = args.memory_limit  # memory guardrail (issue 58); None: TESSERA_MEMORY_LIMIT, else 90%
    endpoint = None
    board = None
    failure = None
    pids = rt.allgather(os.getpid())
    hosts = _dashboard.allgather_text(rt, socket.gethostname())  # the live page's, and the connection file's
    if args.trace:
        try:
            session.start_trace(args.trace, args.trace_buffer_mb, None, whole=True)
        except tessera.Error as e:  # agreed: every rank is here, before any socket exists
            if rt.rank == 0:
                print(f"tessera session: {e}", file=sys.stderr, flush=True)
            return 2
    try:
        protocol.check_shm_dir()  # every rank, on its node
    except PermissionError as e:
        failure = e
    if rt.rank == 0 and failure is None:
        try:
            roots = Roots([os.path.abspath(r) for r in args.root] if args.root else [os.getcwd()], bool(args.root))
            for r in roots.roots:
                if not os.path.isdir(r):
                    raise tessera.ConfigError(f"--root {r}: no such directory")
            endpoint = Endpoint(args.socket or protocol.new_socket_path(), args.tcp, rt.size)
            if args.dashboard:
                board = _dashboard.Dashboard(args.dashboard_port)
        except Exception as e:  # noqa: BLE001 - said below, on every rank
            failure = e
    failed = rt.allreduce(1 if failure else 0, "max")
    if failed:
        if failure:
            print(f"tessera session: {failure}", file=sys.stderr, flush=True)
        if endpoint is not None:
            endpoint.close()
        if session.tracing is not None:
            session.stop_trace()
        return 2
    try:
        if rt.rank == 0:
            where = endpoint.path + (f" and tcp {endpoint.tcp_address()}" if endpoint.tcp else "")
            print(f"tessera session: {rt.size} ranks serving {where}", flush=True)
            serving = Serving(session, endpoint, rt, pids, board, hosts, roots, args.max_transfer_bytes)
            if board is not None:
                serving.publish()  # the first snapshot (a collective the other ranks join below)
                board.start()
                url = board.url.split("?")[0] + " (its token: s.dashboard_url)" if args.dashboard_quiet else board.url
                print(f"tessera session: live page at {url}", flush=True)
            if session.tracing is not None:
                print(f"tessera session: recording a trace into {session.tracing['path']} (written at the end)",
                      flush=True)
            host, _, pid = args.owner.rpartition(":")
            serving.owner = int(pid) if pid and host == socket.gethostname() else 0
            if args.autosave:
                serving.autosave = os.path.abspath(args.autosave)
                serving.autosave_seconds = 60.0 * args.autosave_minutes
            # Found again by tessera.connect() and `tessera sessions` (removed at close).
            endpoint.connection_file = _sessions.write({
                "socket": endpoint.path, "tcp": endpoint.tcp_address(), "token_file": endpoint.token_path,
                "host": socket.gethostname(), "pid": os.getpid(), "pids": [int(p) for p in pids],
                "ranks": rt.size, "hosts": sorted(set(hosts)), "started": serving.started, "job_id": rt.job_id,
                "version": tessera.__version__, "protocol": protocol.PROTOCOL_VERSION,
                "owner": serving.owner or None})
            serving.loop()
        else:
            if args.dashboard:
                _dashboard.gather_stats(rt, session.objects)
            follow(session, rt, stats=args.dashboard)
    except Exception:  # noqa: BLE001
        traceback.print_exc()
        raise
    finally:
        if board is not None:
            board.close()
        if endpoint is not None:
            endpoint.close()
        if session.tracing is not None:
            written = session.stop_trace()  # the whole session's (or an s.trace never ended)
            if rt.rank == 0:
                print(f"tessera session: trace written to {written}", flush=True)
        session.objects.clear()
        session.owner.clear()
        rt.barrier()
    return 0


if __name__ == "__main__":
    sys.exit(main())
