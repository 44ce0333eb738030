"""Memory guardrails of a session's commands (issue 58; docs/memory.md).

Before a command that makes a graph (generate, read_graph, from_edges) or
runs on one (components, largest_component, hitting_times, pagerank, bfs,
spectral, and ``tessera CMD --session``) allocates anything, every rank
runs ``guard``: the command's peak on each node is estimated by the same
C++ model the ``tessera`` commands use (pipeline/memory.hpp, through
``_tessera._memory_check``) from the graph's sizes or the generator's
parameters, and checked against the node: its Shared bytes against the free
space of the Shared directory, and with the memory the session's ranks hold
already against MemAvailable (and the cgroup's limit) and the session's
``memory_limit`` (default 90% of the node's memory; ``tessera.start(
memory_limit=...)``, ``tessera serve --memory-limit``, or a command's own
``memory_limit=``). A command that does not fit is refused at once with a
``tessera.RangeError`` naming the node, the bytes needed and available and
the ways out; nothing was allocated, so the session and its residents stay
as they were.
"""
import json
import os

import numpy as np

from tessera import _tessera

ENV = "TESSERA_MEMORY_LIMIT"
GUARDED = ("read_graph", "generate", "from_edges", "components", "largest_component", "hitting_times", "pagerank",
           "bfs", "spectral", "command", "restore")
# tessera CMD --session: the estimate's name of each command's work.
_COMMANDS = {"cc": "components", "hitting": "hitting_times", "pagerank": "pagerank", "bfs": "bfs",
             "spectral": "spectral"}


def limit_text(value):
    """A declared memory_limit (operations.MemoryLimit) as --memory-limit's text."""
    if value is None:
        return None
    if isinstance(value, float):
        return "1" if value == 1.0 else repr(value)
    if isinstance(value, int):
        return str(value)
    return str(value)


def default_limit():
    """The session's own limit when it was started without one: TESSERA_MEMORY_LIMIT, else 90%."""
    return os.environ.get(ENV, "")


def _sizes(held, largest=0):
    f = held.fields
    return {"vertices": int(f["vertices"]), "arcs": int(f["arcs"]), "directed": bool(f["directed"]),
            "weighted": bool(f["weighted"]), "id_bytes": 8 if f.get("id_type") == "uint64" else 4,
            "largest": int(largest), "connected": bool(getattr(held.obj, "connected", False))}


def _request(session, op, args, client):
    """(estimate's command, options document, sizes document or None, this
    rank's edges) of a declared request."""
    if op == "generate":
        keys = ("kind", "scale", "edge_factor", "dims", "seed", "delete_fraction", "permute")
        given = {k: args[k] for k in keys if k in args}
        if given.get("kind") == "grid" and not given.get("dims"):
            given.pop("dims", None)
        return "generate", {"input": given}, None, 0
    if op == "read_graph":
        given = {k: args[k] for k in ("path", "relabel", "undirected", "symmetric", "pattern") if k in args}
        if args.get("base") is not None:
            given["base"] = int(args["base"])
        return "read_graph", {"input": given}, None, 0
    if op == "from_edges":
        edges, weighted = 0, False
        payload = args.get("payload")
        if payload is not None:  # rank 0: the parts kept and this one
            parts = list(session.staged.get(client, [])) + [payload]
            edges = sum(len(p[0]) for p in parts)
            weighted = any(len(p[2]) for p in parts)
        weighted = bool(_tessera._allreduce_int(1 if weighted else 0, "max"))
        sizes = {"vertices": int(args.get("vertices") or 0), "weighted": weighted, "from_edges": True}
        return "from_edges", {"input": {"undirected": bool(args.get("undirected") or args.get("symmetric")),
                                        "relabel": bool(args.get("relabel"))}}, sizes, edges
    if op == "command":
        options = json.loads(args["options"])
        return _COMMANDS.get(args["name"], args["name"]), options, _sizes(session.get(args["graph"], "Graph")), 0
    held = session.get(args["graph"], "Graph")
    if op == "components":
        return "components", {"algorithm": args.get("algorithm", "afforest")}, _sizes(held), 0
    if op == "largest_component":
        largest = 0
        if args.get("components"):
            largest = session.get(args["components"], "Components").fields.get("largest_size") or 0
        return "largest_component", {"algorithm": args.get("algorithm", "afforest")}, _sizes(held, largest), 0
    if op == "hitting_times":
        analysis = {k: args[k] for k in ("solver", "preconditioner", "matrix") if args.get(k) is not None}
        return "hitting_times", {"analysis": analysis}, _sizes(held), 0
    if op == "pagerank":
        pr = {"tolerance": args.get("tolerance", 1e-4), "method": args.get("method", "gauss-seidel"),
              "personalize": list(args.get("personalization") or [])}
        return "pagerank", {"pagerank": pr}, _sizes(held), 0
    if op == "bfs":
        return "bfs", {"bfs": {"direction": args.get("direction", "optimizing")}}, _sizes(held), 0
    if op == "spectral":
        analysis = {"kind": args.get("what", "fiedler"), "eigensolver": args.get("method", "lobpcg"),
                    "matrix": args.get("matrix", "edgelist")}
        return "spectral", {"analysis": analysis}, _sizes(held), 0
    raise AssertionError(f"no memory guardrail for {op}")


def guard(session, op, args, client):
    """Collective (every rank, the same request): ``args`` without
    ``memory_limit``, once the command's estimate fits every node;
    tessera.RangeError on every rank when it does not. The estimate and the
    node's figures are kept as ``session.memory_checked``."""
    given = args.get("memory_limit")
    if op not in GUARDED:
        return args
    args = {k: v for k, v in args.items() if k != "memory_limit"}
    if op == "restore":  # its sizes are the save's: checked by check_restore once its manifest is read
        session.restore_limit = limit_text(given) or getattr(session, "memory_limit", None) or default_limit()
        return args
    command, options, sizes, edges = _request(session, op, args, client)
    limit = limit_text(given)
    if op == "command" and limit is None:
        limit = options.get("memory_limit") or None
    if limit is None:
        limit = getattr(session, "memory_limit", None) or default_limit()
    checked = _tessera._memory_check(command, json.dumps(options), json.dumps(sizes) if sizes else "", int(edges),
                                     limit, True)
    session.memory_checked = json.loads(checked)
    return args


def check_restore(session, entries, reader):
    """Collective, in restore before anything is read: the save's graphs
    (their sizes summed: the arrays they are loaded into, no build) and its
    other arrays (their lengths from the store) against every node, as a
    command's estimate; tessera.RangeError on every rank when they do not
    fit (nothing read yet, the session as it was)."""
    graphs = {"vertices": 0, "arcs": 0, "directed": False, "weighted": False, "id_bytes": 4}
    other = 0
    for e in entries:
        f = e.get("fields") or {}
        if e["kind"] == "Graph":
            graphs["vertices"] += int(f.get("vertices") or 0)
            graphs["arcs"] += int(f.get("arcs") or 0)
            graphs["directed"] = graphs["directed"] or bool(f.get("directed"))
            graphs["weighted"] = graphs["weighted"] or bool(f.get("weighted"))
            if f.get("id_type") == "uint64":
                graphs["id_bytes"] = 8
            if (e.get("ids") or {}).get("relabelled"):
                other += 8 * int(f.get("vertices") or 0)  # the file ids
        for field, dtype in (e.get("arrays") or {}).items():
            other += reader.length(f"array/{e['name']}/{field}") * np.dtype(dtype).itemsize
    graphs["array_bytes"] = other
    checked = _tessera._memory_check("restore", "", json.dumps(graphs), 0, session.restore_limit, True)
    session.memory_checked = json.loads(checked)
