"""The session's operations, declared once: each one's name, where it runs,
its parameters (name, type, default, meaning), the arrays a request may
carry, and what it returns.

Everything else follows this table:

- the server (server.py) validates every request against it before anything
  runs (``validate``): an unknown operation, an unknown parameter, a value
  of the wrong type or out of range, a path outside the connection's allowed
  root, an array of a dtype that is not a plain number: refused with
  ``tessera.ConfigError`` to that client alone, nothing queued, no rank
  involved. Its dispatch is built from it (``handler_name``), and it refuses
  to start when a declared operation has no handler or a handler is not
  declared.
- the client's methods (client.py) are checked against it by a test
  (tests/python/test_session_hostile.py): a method's parameters and defaults
  are the declaration's.

The types check JSON values (what ``json.loads`` gives) and return them
converted (an int for an Int, a resolved absolute path for a Path).
"""
import json
import math
import os
import re

import numpy as np

NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_.\-]{0,63}$")
_REF = re.compile(r"^(#[0-9]{1,18}|[A-Za-z_][A-Za-z0-9_.\-]{0,63})$")
# The dtypes an array may have on the wire: plain numbers (never object,
# strings, structured or datetime dtypes, whose bytes are not values).
NUMERIC_DTYPES = ("bool", "int8", "uint8", "int16", "uint16", "int32", "uint32", "int64", "uint64", "float32",
                  "float64")
INT64 = (-(1 << 63), (1 << 63) - 1)
UINT64 = (0, (1 << 64) - 1)


class Invalid(Exception):
    """A request that does not match the declaration (said to its client as
    a ConfigError)."""


def _what(value):
    text = json.dumps(value)[:40] if not isinstance(value, str) else repr(value[:40])
    return f"{type(value).__name__} {text}"


class Type:
    """A parameter's type: ``check(value, where)`` returns the value
    converted or raises Invalid; ``text`` is how documentation names it."""
    text = "any"

    def check(self, value, where):
        return value


class Bool(Type):
    text = "bool"

    def check(self, value, where):
        if not isinstance(value, bool):
            raise Invalid(f"must be true or false, not {_what(value)}")
        return value


class Int(Type):
    def __init__(self, lo=INT64[0], hi=INT64[1]):
        self.lo, self.hi = lo, hi
        self.text = f"int in [{lo}, {hi}]"

    def check(self, value, where):
        if isinstance(value, bool) or not isinstance(value, int):
            raise Invalid(f"must be an integer, not {_what(value)}")
        if not self.lo <= value <= self.hi:
            raise Invalid(f"must be in [{self.lo}, {self.hi}], not {value}")
        return value


class Float(Type):
    def __init__(self, lo=-math.inf, hi=math.inf):
        self.lo, self.hi = lo, hi
        self.text = f"float in [{lo}, {hi}]"

    def check(self, value, where):
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise Invalid(f"must be a number, not {_what(value)}")
        value = float(value)
        if not (self.lo <= value <= self.hi):  # NaN fails too
            raise Invalid(f"must be in [{self.lo}, {self.hi}], not {value}")
        return value


class Str(Type):
    def __init__(self, choices=None, max_len=256):
        self.choices, self.max_len = tuple(choices) if choices else None, max_len
        self.text = " | ".join(f'"{c}"' for c in self.choices) if self.choices else "str"

    def check(self, value, where):
        if not isinstance(value, str):
            raise Invalid(f"must be a string, not {_what(value)}")
        if self.choices is not None and value not in self.choices:
            raise Invalid(f"must be one of {', '.join(self.choices)}, not {value[:40]!r}")
        if len(value) > self.max_len:
            raise Invalid(f"must be at most {self.max_len} characters")
        return value


class Optional(Type):
    def __init__(self, inner):
        self.inner = inner
        self.text = f"{inner.text} or None"

    def check(self, value, where):
        return None if value is None else self.inner.check(value, where)


class Ref(Type):
    """An object of the session: its id ``#N`` or a name."""
    text = "object id or name"

    def check(self, value, where):
        if not isinstance(value, str) or not _REF.match(value):
            raise Invalid(f"must name an object of the session (\"#N\" or a name), not {_what(value)}")
        return value


class ArrayRef(Type):
    """A DistArray of the session, or [object, array field]."""
    text = "array id or [object, field]"

    def check(self, value, where):
        if isinstance(value, list) and len(value) == 2:
            return [Ref().check(value[0], where), Str(max_len=64).check(value[1], where)]
        return Ref().check(value, where)


class Name(Type):
    text = "name (letters, digits, _ . -; not starting with a digit; at most 64)"

    def check(self, value, where):
        if not isinstance(value, str) or not NAME.match(value):
            raise Invalid(f"is not a name for a resident object ({self.text}): {_what(value)}")
        return value


class IntList(Type):
    def __init__(self, lo=UINT64[0], hi=UINT64[1], max_len=1 << 20):
        self.item, self.max_len = Int(lo, hi), max_len
        self.text = f"list of int (at most {max_len})"

    def check(self, value, where):
        if not isinstance(value, list):
            raise Invalid(f"must be a list of integers, not {_what(value)}")
        if len(value) > self.max_len:
            raise Invalid(f"must hold at most {self.max_len} integers")
        return [self.item.check(v, where) for v in value]


class Dtype(Type):
    text = "dtype: " + ", ".join(NUMERIC_DTYPES)

    def check(self, value, where):
        if not isinstance(value, str) or value not in NUMERIC_DTYPES:
            raise Invalid(f"must be one of {', '.join(NUMERIC_DTYPES)}, not {_what(value)}")
        return value


class Path(Type):
    """A file path, resolved on the server against the connection's allowed
    root (``where.resolve``): a relative path is the client's, a path
    outside the root is refused."""

    def __init__(self, write):
        self.write = write
        self.text = "path (written)" if write else "path (read)"

    def check(self, value, where):
        if not isinstance(value, str) or not value or "\0" in value or len(value) > 4096:
            raise Invalid(f"must be a file path, not {_what(value)}")
        return where.resolve(value, self.write)


class MemoryLimit(Type):
    """A memory limit (issue 58, docs/memory.md): a fraction of the node's
    memory (0 < f <= 1), bytes (an integer above 1), or the text
    ``--memory-limit`` takes ("90%", "0.9", "20G", "none")."""
    text = "fraction (0.9), bytes (int), or \"90%\" | \"20G\" | \"none\""
    _TEXT = re.compile(r"^\s*(none|off|default|[0-9]+(\.[0-9]+)?%|0?\.[0-9]+|1(\.0*)?|[0-9]+\s*[KMGT]?(i?B)?)\s*$",
                       re.IGNORECASE)

    def check(self, value, where):
        if isinstance(value, bool):
            raise Invalid(f"must be a fraction, bytes or a text such as \"90%\", not {_what(value)}")
        if isinstance(value, (int, float)):
            if not (value > 0 and math.isfinite(value)):
                raise Invalid(f"must be above 0, not {value}")
            if value <= 1:
                return float(value)
            if float(value) != int(value):
                raise Invalid(f"is bytes above 1: a whole number, not {value}")
            return int(value)
        if isinstance(value, str) and len(value) <= 32 and self._TEXT.match(value):
            return value.strip()
        raise Invalid(f"must be a fraction of the node's memory (0.9), bytes (an integer) or a text such as \"90%\", "
                      f"\"20G\" or \"none\", not {_what(value)}")


# The workflow options of ``tessera CMD --session``: fields naming files
# (resolved like Path), fields that start programs (never from the wire: the
# server's own configuration decides), and those that must stay empty.
WORKFLOW_PATHS = (("output",), ("ids_output",), ("bfs", "subgraph"), ("bfs", "subgraph_ids"), ("spectral", "parts"),
                  ("checkpoint", "dir"), ("checkpoint", "node_dir"))
WORKFLOW_FROM_SERVER = (("analysis", "program"), ("analysis", "launcher"), ("analysis", "control"))


class WorkflowOptions(Type):
    """pipeline::options_json's document (text): paths resolved against the
    allowed root; the analysis program, launcher and control path are not
    taken from a request (refused when given)."""
    text = "workflow options (JSON text, pipeline::options_json)"

    def check(self, value, where):
        if not isinstance(value, str) or len(value) > (1 << 20):
            raise Invalid(f"must be the workflow options as JSON text, not {_what(value)}")
        try:
            doc = json.loads(value)
        except (ValueError, RecursionError):
            raise Invalid("are not JSON") from None
        if not isinstance(doc, dict):
            raise Invalid("must be a JSON object")
        for section, field in WORKFLOW_FROM_SERVER:
            part = doc.get(section)
            if isinstance(part, dict) and part.get(field):
                raise Invalid(f"{section}.{field} is not taken from a request: the analysis program and its "
                              "launcher are the session's own configuration (docs/security.md)")
        for key in WORKFLOW_PATHS:
            parent = doc
            for k in key[:-1]:
                parent = parent.get(k) if isinstance(parent, dict) else None
            if not isinstance(parent, dict) or parent.get(key[-1]) in (None, ""):
                continue
            try:
                parent[key[-1]] = Path(write=True).check(parent[key[-1]], where)
            except Invalid as e:
                raise Invalid(f"{'.'.join(key)} {e}") from None
        return json.dumps(doc)


class Param:
    """One parameter: ``name``, ``type``, ``default`` (``REQUIRED`` when the
    request must give it) and what it means."""
    REQUIRED = object()

    def __init__(self, name, type_, default=REQUIRED, doc="", dispatched=False):
        self.name, self.type, self.default, self.doc = name, type_, default, doc
        # Taken by the dispatch before the handler runs (Session.run's
        # hooks: memory_limit goes to session/memory.py), not the handler's.
        self.dispatched = dispatched

    @property
    def required(self):
        return self.default is Param.REQUIRED


class Op:
    """One operation. ``where``: "rank0" (answered by rank 0's socket side
    at once, no other rank involved), "collective" (queued; every rank runs
    it), or "internal" (never accepted from a client). ``payload``: the
    arrays a request carries, as (name, dtype or None for any numeric).
    ``client``: the Session methods that send it."""

    def __init__(self, name, where, params, returns, doc, payload=(), client=(), testing=False):
        self.name, self.where, self.params, self.returns, self.doc = name, where, tuple(params), returns, doc
        self.payload, self.client, self.testing = tuple(payload), tuple(client), testing
        self.by_name = {p.name: p for p in self.params}

    @property
    def handler_name(self):
        return "op_" + self.name


P = Param
_GRAPH = P("graph", Ref(), doc="the graph: its id or name")
_VERBOSE = P("verbose", Bool(), False, "progress lines to the client as the command runs")
_ALGORITHM = P("algorithm", Str(("afforest", "lp", "fastsv")), "afforest", "the components algorithm")
# Memory guardrails (issue 58; session/memory.py): a command that makes a graph
# or runs an analysis is estimated first and refused when it does not fit.
_MEMORY_LIMIT = P("memory_limit", Optional(MemoryLimit()), None,
                  "refuse it at once when its estimated peak on a node, with what the session holds there, is over "
                  "this (a fraction of the node's memory, bytes, or \"none\"; default the session's, 90%); the node's "
                  "available memory and free Shared space bound it anyway", dispatched=True)
OBJECT = "a resident object (Remote: its fields as attributes, its arrays as read-only NumPy arrays)"
_OBJECT = OBJECT

OPERATIONS = {op.name: op for op in [
    # -- answered by rank 0 alone ------------------------------------------------
    Op("ping", "rank0", [], "{}", "A round trip to rank 0 (no rank waits).", client=["ping"]),
    Op("status", "rank0", [], "{ranks, objects, clients, running, queued, uptime, dashboard, trace}",
       "The session's state, answered even while a command runs.", client=["status"]),
    Op("list", "rank0", [], "{objects: [{id, kind, named, owner}]}", "The resident objects.", client=["list"]),
    Op("describe", "rank0", [P("ref", Ref(), doc="an object's id or name")], _OBJECT,
       "A resident object by name or id.", client=["get"]),
    Op("cancel", "rank0", [], "{cancelling: op or None}",
       "Stops this client's running command at its next cancellation point.", client=["cancel"]),
    Op("shutdown", "rank0", [], "{}", "Stops the session's ranks.", client=["stop"]),
    # -- every rank ---------------------------------------------------------------
    Op("noop", "collective", [], "{}", "A round trip through every rank (a barrier).", client=["noop"]),
    Op("trace_start", "collective",
       [P("path", Path(write=True), doc="the trace file rank 0 writes (inside the allowed root)"),
        P("buffer_mb", Optional(Int(1, 1 << 16)), None, "the recorder's buffer per thread (MiB)")],
       "{path}", "Starts recording the commands into a trace file.", client=["trace"]),
    Op("trace_stop", "collective", [], "{path}", "Stops this client's recording; the file written.",
       client=["trace"]),
    Op("read_graph", "collective",
       [P("path", Path(write=False), doc="a graph file or .tsg directory (inside the allowed root)"),
        P("base", Optional(Int(0, 1 << 62)), None, "the first vertex id (default 1 for .mtx, else 0)"),
        P("relabel", Bool(), False, "number sparse ids densely"),
        P("undirected", Bool(), False, "add the reverse of every arc"),
        P("symmetric", Bool(), False, "the file lists both directions (verified)"),
        P("pattern", Bool(), False, "ignore weights"), _MEMORY_LIMIT],
       _OBJECT, "Reads a graph file on every rank (as tessera.read_graph).", client=["read_graph"]),
    Op("generate", "collective",
       [P("kind", Str(("kron", "urand", "grid")), doc="the generator"),
        P("scale", Int(0, 40), 16, "2**scale vertices (kron, urand)"),
        P("edge_factor", Int(0, 1 << 16), 16, "edges per vertex (kron, urand)"),
        P("dims", Str(max_len=64), "", "grid: \"RxC\" or \"XxYxZ\""),
        P("seed", Int(*UINT64), 1, "the generator's seed"),
        P("delete_fraction", Float(0.0, 1.0), 0.0, "grid: the fraction of edges deleted"),
        P("permute", Bool(), False, "permute the vertex ids"), _MEMORY_LIMIT],
       _OBJECT, "A generated undirected graph (as tessera.generate).", client=["generate", "kron", "urand", "grid"]),
    Op("save", "collective",
       [P("dir", Path(write=True), doc="the save's directory (made if absent; a save there before is replaced)"),
        P("name", Optional(Ref()), None, "one resident (default: every named resident)")],
       "{dir, names}", "Residents written through the resilience store (checksummed, any rank count).",
       client=["save", "save_all"]),
    Op("restore", "collective",
       [P("dir", Path(write=False), doc="a directory s.save or autosave wrote"), _MEMORY_LIMIT],
       "{names, ranks_saved}", "The residents of a save, back under their names (a damaged save is refused).",
       client=["restore", "restart"]),
    Op("edges_chunk", "collective", [], "{staged}",
       "A part of a graph's edges, kept on rank 0 for this client's next from_edges.",
       payload=[("src", "int64"), ("dst", "int64"), ("weights", "float64")]),
    Op("from_edges", "collective",
       [P("undirected", Bool(), False, "add the reverse of every edge (duplicates dropped)"),
        P("symmetric", Bool(), False, "the edges are listed both ways already (verified)"),
        P("relabel", Bool(), False, "ids are any non-negative numbers; the vertices are the ids that occur"),
        P("vertices", Optional(Int(0, 1 << 48)), None, "the vertex count (default the largest id + 1)"),
        _MEMORY_LIMIT],
       _OBJECT, "A graph of the edges sent (as tessera.from_edges), with the parts edges_chunk kept.",
       payload=[("src", "int64"), ("dst", "int64"), ("weights", "float64")],
       client=["from_edges", "from_scipy", "from_networkx", "from_pandas"]),
    Op("components", "collective", [_GRAPH, _ALGORITHM, _MEMORY_LIMIT], _OBJECT, "Connected components.",
       client=["components"]),
    Op("largest_component", "collective",
       [_GRAPH, P("components", Optional(Ref()), None, "components of the graph already computed"), _ALGORITHM,
        _MEMORY_LIMIT],
       _OBJECT, "The subgraph induced by the largest component.", client=["largest_component"]),
    Op("hitting_times", "collective",
       [_GRAPH, P("targets", Optional(IntList()), None, "target file ids (default: the highest-degree vertex)"),
        P("solver", Optional(Str(("tessera", "belos"))), None, "None: tessera.default_solver()"),
        P("preconditioner", Optional(Str(("diagonal", "relaxation"))), None, "Belos' preconditioner"),
        P("matrix", Optional(Str(("edgelist", "crs"))), None, "the operator"),
        P("tolerance", Optional(Float(0.0, 1.0)), None, "relative residual to stop at"),
        P("max_iterations", Optional(Int(0, 1 << 40)), None, "the solver's iterations"),
        _VERBOSE, _MEMORY_LIMIT],
       _OBJECT, "Hitting times to the targets (as tessera.hitting_times).", client=["hitting_times"]),
    Op("pagerank", "collective",
       [_GRAPH, P("damping", Float(0.0, 1.0), 0.85, "the damping factor"),
        P("tolerance", Float(0.0, math.inf), 1e-4, "stop when an iteration's L1 change is below"),
        P("max_iterations", Int(0, 1 << 40), 20, "at most this many iterations"),
        P("method", Str(("gauss-seidel", "jacobi")), "gauss-seidel", "the iteration"),
        P("personalization", Optional(IntList()), None, "file ids to teleport to"),
        _VERBOSE, _MEMORY_LIMIT],
       _OBJECT, "PageRank (as tessera.pagerank).", client=["pagerank"]),
    Op("bfs", "collective",
       [_GRAPH, P("source", Int(), doc="the source's file id"),
        P("direction", Str(("optimizing", "top-down", "bottom-up")), "optimizing", "the traversal"),
        P("hops", Int(-1, 1 << 40), -1, ">= 0: stop at this depth (as tessera bfs --hops)"),
        _VERBOSE,
        P("max_depth", Optional(Int(-1, 1 << 40)), None, "the old name of hops (a warning; goes in the next release)"),
        _MEMORY_LIMIT],
       _OBJECT, "Breadth-first search (as tessera.bfs).", client=["bfs"]),
    Op("spectral", "collective",
       [_GRAPH, P("what", Str(("fiedler", "centrality")), "fiedler", "which eigenpair"),
        P("method", Str(("lobpcg", "krylov-schur")), "lobpcg", "Anasazi's eigensolver"),
        P("tolerance", Float(0.0, 1.0), 1e-10, "the Ritz residual to stop at"),
        P("max_iterations", Int(0, 1 << 40), 20000, "the eigensolver's iterations"),
        P("matrix", Str(("edgelist", "crs")), "edgelist", "the operator"),
        _VERBOSE, _MEMORY_LIMIT],
       _OBJECT, "An eigenpair of the Laplacian or adjacency (as tessera.spectral).", client=["spectral"]),
    Op("command", "collective",
       [_GRAPH, P("name", Str(("cc", "hitting", "pagerank", "bfs", "spectral")), doc="the CLI command"),
        P("options", WorkflowOptions(), doc="the options the command line parsed"), _VERBOSE],
       "{document, exit_code}", "tessera NAME --session PATH @GRAPH: the command's workflow on a resident graph."),
    Op("array", "collective",
       [P("n", Int(0, 1 << 48), doc="elements"), P("dtype", Dtype(), "float64", "element type"),
        P("fill", Str(("zeros", "arange")), "zeros", "the values")],
       _OBJECT, "A new DistArray.", client=["zeros", "arange"]),
    Op("gather", "collective", [P("array", ArrayRef(), doc="a DistArray, or [object, field]")],
       "{values} (an array in the payload)", "array[indices].", payload=[("indices", "int64")], client=["gather"]),
    Op("scatter", "collective", [P("array", ArrayRef(), doc="a DistArray, or [object, field]")], "{}",
       "array[indices] = values.", payload=[("indices", "int64"), ("values", None)], client=["scatter"]),
    Op("update", "collective",
       [P("array", ArrayRef(), doc="a DistArray, or [object, field]"),
        P("op", Str(("add", "min", "max", "xor")), "add", "how values fold in")],
       "{}", "array[indices] = op(array[indices], values).", payload=[("indices", "int64"), ("values", None)],
       client=["update"]),
    Op("argsort", "collective",
       [P("array", ArrayRef(), doc="a DistArray, or [object, field]"),
        P("digit_bits", Int(1, 20), 16, "bits per radix pass")],
       _OBJECT, "The permutation that sorts the array.", client=["argsort"]),
    Op("view", "collective", [P("ref", Ref(), doc="an object"), P("field", Str(max_len=64), doc="its array")],
       "{metadata, dtype, length}", "Where an array lives (mapped by a client on the node)."),
    Op("fetch", "collective",
       [P("ref", Ref(), doc="an object"), P("field", Str(max_len=64), doc="its array"),
        P("limit", Int(0, 1 << 62), doc="the most bytes the client takes")],
       "{values} (an array in the payload)", "An array copied through the socket."),
    Op("persist", "collective", [P("ref", Ref(), doc="an object"), P("name", Name(), doc="its name")], _OBJECT,
       "Names an object: it outlives its client.", client=["persist"]),
    Op("drop", "collective", [P("ref", Ref(), doc="a name or an unnamed object of this client")], "{}",
       "Forgets a name or an object.", client=["drop"]),
    # -- never from a client ------------------------------------------------------
    Op("client_gone", "internal", [P("gone", Str(max_len=64), doc="the client id")], "{}",
       "A client left: its unnamed objects go."),
    Op("stuck", "internal", [_GRAPH], "{}", "Tests only: a command stuck for good.", testing=True),
]}


class Context:
    """What a request is checked in: how its paths resolve (``resolve``)."""

    def __init__(self, resolve):
        self.resolve = resolve


def validate(op_name, args, context, testing=False):
    """The request's ``args`` checked against ``op_name``'s declaration:
    (the Op, a dict of the given parameters converted, in their order).
    Invalid names the operation, the parameter and what is wrong."""
    if not isinstance(op_name, str) or len(op_name) > 64:
        raise Invalid(f"a request's op must be a string, not {_what(op_name)}")
    op = OPERATIONS.get(op_name)
    if op is None or (op.where == "internal" and not (testing and op.testing)):
        raise Invalid(f"unknown command {op_name!r}")
    if args is None:
        args = {}
    if not isinstance(args, dict):
        raise Invalid(f"{op_name}: args must be an object of named parameters, not {_what(args)}")
    out = {}
    for key, value in args.items():
        param = op.by_name.get(key)
        if param is None:
            known = ", ".join(op.by_name) or "none"
            raise Invalid(f"{op_name}: no parameter {key[:40]!r} (its parameters: {known})")
        try:
            out[key] = param.type.check(value, context)
        except Invalid as e:
            raise Invalid(f"{op_name}: {key} {e}") from None
    missing = [p.name for p in op.params if p.required and p.name not in out]
    if missing:
        raise Invalid(f"{op_name}: missing {', '.join(missing)}")
    return op, out


def payload_arrays(op, spec, payload, target_dtype=None):
    """The arrays a request carries, checked against ``op.payload``: each
    part {dtype, length} with a plain numeric dtype, lengths that add up to
    the payload's bytes. One array, or a tuple; None without payload."""
    if not op.payload:
        if spec or payload:
            raise Invalid(f"{op.name} takes no payload")
        return None
    if not isinstance(spec, list) or len(spec) != len(op.payload):
        raise Invalid(f"{op.name}: payload must describe {len(op.payload)} array(s): "
                      f"{', '.join(n for n, _ in op.payload)}")
    arrays, offset = [], 0
    for part, (name, dtype) in zip(spec, op.payload):
        if not isinstance(part, dict) or set(part) != {"dtype", "length"}:
            raise Invalid(f"{op.name}: payload {name} must be {{dtype, length}}")
        try:
            given = Dtype().check(part["dtype"], None)
            n = Int(0, 1 << 62).check(part["length"], None)
        except Invalid as e:
            raise Invalid(f"{op.name}: payload {name} {e}") from None
        if dtype is not None and given != dtype:
            raise Invalid(f"{op.name}: payload {name} must be {dtype}, not {given}")
        dt = np.dtype(given)
        if offset + n * dt.itemsize > len(payload):
            raise Invalid(f"{op.name}: a payload of {len(payload)} bytes for more arrays than that")
        arrays.append(np.frombuffer(payload, dtype=dt, count=n, offset=offset))
        offset += n * dt.itemsize
    if offset != len(payload):
        raise Invalid(f"{op.name}: a payload of {len(payload)} bytes for arrays of {offset}")
    return arrays[0] if len(arrays) == 1 else tuple(arrays)


def check_handlers(cls):
    """The server refuses to start when its handlers and this declaration
    disagree: every operation one handler ``op_NAME`` whose parameters after
    ``client`` are the declaration's (with its defaults), and no other."""
    import inspect
    declared = {op.handler_name for op in OPERATIONS.values() if op.where != "rank0"}
    present = {n for n in dir(cls) if n.startswith("op_")}
    if declared != present:
        raise AssertionError(f"handlers and operations.py disagree: declared without a handler "
                             f"{sorted(declared - present)}, handlers not declared {sorted(present - declared)}")
    for op in OPERATIONS.values():
        if op.where == "rank0":
            continue
        sig = inspect.signature(getattr(cls, op.handler_name))
        params = [p for p in sig.parameters.values() if p.name not in ("self", "client", "payload")]
        got = [(p.name, Param.REQUIRED if p.default is inspect.Parameter.empty else p.default) for p in params]
        want = [(p.name, p.default) for p in op.params if not p.dispatched]
        if got != want:
            raise AssertionError(f"{op.handler_name}{sig} disagrees with operations.py: {want}")


def docstring(op):
    """The client method's docstring, from the declaration (numpy style)."""
    lines = [op.doc, ""]
    if op.params:
        lines += ["Parameters", "----------"]
        for p in op.params:
            default = "" if p.required else f", default {p.default!r}"
            lines += [f"{p.name} : {p.type.text}{default}", f"    {p.doc[:1].upper() + p.doc[1:]}."]
        lines.append("")
    lines += ["Returns", "-------", op.returns, "",
              "Raises", "------",
              "tessera.ConfigError",
              "    A request that does not match this declaration (nothing runs).",
              "tessera.Error",
              "    The operation's own error on the session's ranks (its subclass, \"on rank k: \" first).",
              "tessera.SessionLost",
              "    The session ended meanwhile."]
    return "\n".join(lines)



def signature_text(op):
    """``name(graph, algorithm="afforest")``: for docs and messages."""
    parts = [p.name if p.required else f"{p.name}={p.default!r}" for p in op.params]
    return f"{op.name}({', '.join(parts)})"
