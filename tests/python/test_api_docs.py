"""Help on every public name (issue "A Python package analysts can pick up").

Walks the public API with ``inspect``: the names of ``tessera`` and
``tessera.session`` (their ``__all__``) and of ``tessera.tracefile``, each
public class's methods and properties (``tessera.Session``'s included). It
fails, naming the file that defines it, on

- a public class, function, method or property without a docstring;
- a callable taking a bare ``**kwargs`` / ``**options`` (a VAR_KEYWORD
  parameter): ``help()`` then hides what it accepts;
- a parameter missing from the docstring's numpy-style ``Parameters``
  section (a line ``Parameters`` over dashes, then ``name : type`` lines);
- a module-level function without a ``Returns`` section, or a module-level
  function or class without an ``Examples`` section;
- a public function or class that docs/python.md does not name (as code:
  in backticks or a code block).

The checker is tried on a small fake module first, so that it is known to
find what it must. Also: ``help()`` text of a session method shows its
parameters and defaults, and results show themselves in a notebook
(``_repr_html_``), list their fields in ``dir()`` and give ``to_pandas()``.
Plain interpreter, one rank.
"""
import importlib
import inspect
import os
import pydoc
import re
import sys
import types

import numpy as np
import pytest

import tessera
import tessera.session
import tessera.session.client
import tessera.tracefile

MODULES = ("tessera", "tessera.session", "tessera.tracefile")
# Callables whose **kwargs is what they are for, not a pass-through of
# parameters they could name, each with why; test_forwarding_is_current
# keeps the list true (each still exists and still takes **kwargs).
FORWARDING = {
    "tessera.session.client.Session.submit":
        "runs s.<command>(*args, **kwargs) for any command, as concurrent.futures.Executor.submit does",
}
SOURCE_DIR = os.environ.get("TESSERA_SOURCE_DIR", os.path.join(os.path.dirname(__file__), "..", ".."))


# -- the checker ------------------------------------------------------------------------------
def sections(doc):
    """A numpy-style docstring's sections: {header: body}, a header being an
    unindented line over a line of dashes."""
    lines = inspect.cleandoc(doc).splitlines()
    found, current = {}, None
    i = 0
    while i < len(lines):
        line = lines[i]
        if (line.strip() and not line[0].isspace() and i + 1 < len(lines)
                and re.fullmatch(r"-{3,}", lines[i + 1].strip())):
            current = line.strip()
            found[current] = []
            i += 2
            continue
        if current is not None:
            found[current].append(line)
        i += 1
    return {k: "\n".join(v) for k, v in found.items()}


def documented_parameters(doc):
    """The names a numpy ``Parameters`` (or ``Other Parameters``) section
    lists: unindented ``name : type`` or ``a, b : type`` lines."""
    names = set()
    secs = sections(doc)
    for header in ("Parameters", "Other Parameters"):
        for line in secs.get(header, "").splitlines():
            if line.strip() and not line[0].isspace():
                for part in line.split(" : ", 1)[0].rstrip(":").split(","):
                    names.add(part.strip().lstrip("*"))
    return names


class Item:
    """One public name: its full name (where it is defined), the object, its
    kind ("function", "class", "method", "property") and its module."""

    def __init__(self, name, obj, kind, module):
        self.name, self.obj, self.kind, self.module = name, obj, kind, module

    def __repr__(self):
        return f"{self.kind} {self.name}"


def _members(cls, root):
    """The public methods and properties of ``cls`` and of its bases
    defined in the package ``root`` (not those of object, dict, list,
    Exception): (name, object, kind, defining class)."""
    seen = set()
    for klass in cls.__mro__:
        if not klass.__module__.split(".")[0] == root:
            continue
        for name, member in vars(klass).items():
            if name.startswith("_") or name in seen:
                continue
            seen.add(name)
            if isinstance(member, property):
                yield name, member, "property", klass
            elif isinstance(member, (staticmethod, classmethod)):
                yield name, member.__func__, "method", klass
            elif inspect.isfunction(member) or inspect.isbuiltin(member) or inspect.ismethoddescriptor(member):
                yield name, member, "method", klass


def public_api(modules):
    """Every public name of ``modules`` (``__all__``, else the functions and
    classes a module defines), each class's members too, each once."""
    items, seen = [], set()
    for module in modules:
        root = module.__name__.split(".")[0]
        names = getattr(module, "__all__", None)
        if names is None:
            names = [n for n, v in vars(module).items() if not n.startswith("_") and callable(v)
                     and getattr(v, "__module__", None) == module.__name__]
        for name in names:
            obj = getattr(module, name)
            if isinstance(obj, types.ModuleType) or id(obj) in seen:
                continue
            seen.add(id(obj))
            where = getattr(obj, "__module__", None) or module.__name__
            qualname = getattr(obj, "__qualname__", name)
            if inspect.isclass(obj):
                items.append(Item(f"{where}.{qualname}", obj, "class", where))
                for mname, member, kind, klass in _members(obj, root):
                    if id(member) in seen:
                        continue
                    seen.add(id(member))
                    function = member.fget if kind == "property" else member
                    defined = getattr(function, "__module__", None) or klass.__module__
                    items.append(Item(f"{klass.__module__}.{klass.__qualname__}.{mname}", member, kind, defined))
            elif callable(obj):
                items.append(Item(f"{where}.{qualname}", obj, "function", where))
    return items


def problems(item):
    """What is wrong with one public name's help (an empty list: nothing)."""
    obj, kind = item.obj, item.kind
    doc = obj.__doc__
    if not doc or not doc.strip():
        return ["no docstring"]
    if kind == "property":
        return []
    out = []
    secs = sections(doc)
    try:
        signature = inspect.signature(obj)
    except (TypeError, ValueError):  # a builtin without one
        signature = None
    if signature is not None:
        params = [p for p in signature.parameters.values()
                  if p.name not in ("self", "cls") and not p.name.startswith("_")]
        for p in params:
            if p.kind is inspect.Parameter.VAR_KEYWORD and item.name not in FORWARDING:
                out.append(f"takes a bare **{p.name}: name the keyword parameters it accepts")
        if params:
            text = doc + ("\n" + obj.__init__.__doc__ if kind == "class" and obj.__init__.__doc__ and
                          "__init__" in vars(obj) else "")
            listed = documented_parameters(text)
            missing = [p.name for p in params if p.name not in listed]
            if not listed:
                out.append("no numpy 'Parameters' section (a line 'Parameters' over dashes, then 'name : type' "
                           f"lines) for {', '.join(p.name for p in params)}")
            elif missing:
                out.append(f"not in its Parameters section: {', '.join(missing)}")
    if kind == "function" and not ({"Returns", "Yields"} & set(secs)):
        out.append("no 'Returns' section")
    if kind in ("function", "class") and "Examples" not in secs:
        out.append("no 'Examples' section")
    return out


def report(items):
    """{name: [problems]} of the items with any."""
    found = {}
    for item in items:
        p = problems(item)
        if p:
            found[item.name] = p
    return found


def failure_text(found, module):
    lines = [f"{len(found)} public name(s) defined in {module} lack help:"]
    for name, what in sorted(found.items()):
        lines += [f"  {name}:"] + [f"      {w}" for w in what]
    return "\n".join(lines)


API = public_api([importlib.import_module(m) for m in MODULES])
DEFINING_MODULES = sorted({item.module for item in API})


# -- the checker can fail ---------------------------------------------------------------------
FAKE = '''
__all__ = ["undocumented", "passthrough", "Thing", "good"]

def undocumented(x):
    return x

def passthrough(graph, **options):
    """Runs something on graph.

    Parameters
    ----------
    graph : Graph
        The graph.

    Returns
    -------
    int

    Examples
    --------
    >>> passthrough(g)
    """
    return 0

class Thing:
    """A thing.

    Examples
    --------
    >>> Thing()
    """

    def method(self, a):
        return a

    @property
    def size(self):
        return 1

    def half(self, a, b=2):
        """Half documented.

        Parameters
        ----------
        a : int
            The first.
        """

def good(a, b=1):
    """Adds.

    Parameters
    ----------
    a, b : int
        What is added (``b``: default 1).

    Returns
    -------
    int
        ``a + b``.

    Examples
    --------
    >>> good(1)
    2
    """
    return a + b
'''


def test_the_checker_finds_what_it_must():
    fake = types.ModuleType("fake_api")
    exec(compile(FAKE, "fake_api.py", "exec"), fake.__dict__)  # noqa: S102 - the fake module's text above
    found = report(public_api([fake]))
    assert found["fake_api.undocumented"] == ["no docstring"]
    assert any("bare **options" in p for p in found["fake_api.passthrough"])
    assert found["fake_api.Thing.method"] == ["no docstring"]
    assert found["fake_api.Thing.size"] == ["no docstring"]
    assert found["fake_api.Thing.half"] == ["not in its Parameters section: b"]
    assert "fake_api.good" not in found and "fake_api.Thing" not in found
    assert set(found) == {"fake_api.undocumented", "fake_api.passthrough", "fake_api.Thing.method",
                          "fake_api.Thing.size", "fake_api.Thing.half"}


def test_the_walk_covers_the_api():
    names = {item.name for item in API}
    for expected in ("tessera.analyses.pagerank", "tessera.graphs.Graph.out_degrees", "tessera.arrays.DistArray.local",
                     "tessera.tracefile.load", "tessera.tracefile.Trace.lane", "tessera.session.client.Session",
                     "tessera.session.client.Session.hitting_times", "tessera.session.client.Remote",
                     "tessera.analyses._Result.to_pandas", "tessera._errors.ConfigError",
                     "tessera.mpi_library_version"):
        assert expected in names, expected
    assert not any(name.split(".")[-1].startswith("_") for name in names)


# -- the package --------------------------------------------------------------------------------
def test_forwarding_is_current():
    by_name = {item.name: item for item in API}
    for name, why in FORWARDING.items():
        assert name in by_name, f"{name} is listed in FORWARDING ({why}) but is not a public name"
        kinds = [p.kind for p in inspect.signature(by_name[name].obj).parameters.values()]
        assert inspect.Parameter.VAR_KEYWORD in kinds, f"{name} no longer takes **kwargs: drop it from FORWARDING"


@pytest.mark.parametrize("module", DEFINING_MODULES)
def test_public_names_have_help(module):
    found = report([item for item in API if item.module == module])
    assert not found, failure_text(found, module)


def test_session_help_shows_parameters_and_defaults():
    method = tessera.session.client.Session.hitting_times
    text = pydoc.render_doc(method, renderer=pydoc.plaintext)
    signature = inspect.signature(method)
    head = text.split("\n\n", 1)[1].splitlines()[0]   # hitting_times(self, graph, targets=None, ...)
    for p in signature.parameters.values():
        if p.name == "self":
            continue
        shown = p.name if p.default is inspect.Parameter.empty else f"{p.name}={p.default!r}"
        assert shown in head, (shown, head)
        assert re.search(rf"^\s*{p.name}\b", text.split(head, 1)[1], re.M), (p.name, text)
    assert "graph" in head and "targets=None" in head and "verbose=False" in head


@pytest.mark.parametrize("function, shown", [
    (tessera.pagerank, ["damping=0.85", "tolerance=0.0001", "max_iterations=20", "method='gauss-seidel'"]),
    (tessera.fiedler, ["method='lobpcg'", "tolerance=1e-10", "max_iterations=20000", "matrix='edgelist'"]),
    (tessera.kron, ["scale=16", "edge_factor=16", "seed=1", "delete_fraction=0.0", "storage='default'"]),
    (tessera.zeros, ["dtype=<class 'numpy.float64'>", "storage='default'", "persist=False"]),
])
def test_help_shows_the_real_parameters(function, shown):
    text = pydoc.render_doc(function, renderer=pydoc.plaintext)
    for s in shown:
        assert s in text, (s, text[:400])
    assert "**" not in text.split("\n\n", 1)[1].splitlines()[0]


def code_in(markdown):
    """The code of a Markdown text: its fenced blocks and inline spans."""
    blocks = re.findall(r"^```[^\n]*\n(.*?)^```", markdown, re.M | re.S)
    prose = re.sub(r"^```[^\n]*\n.*?^```", "", markdown, flags=re.M | re.S)
    return "\n".join(blocks + re.findall(r"`([^`\n]+)`", prose))


def test_docs_name_every_public_function_and_class():
    with open(os.path.join(SOURCE_DIR, "docs", "python.md")) as f:
        code = code_in(f.read())
    names = {item.name.split(".")[-1] for item in API if item.kind in ("function", "class")}
    missing = sorted(n for n in names if not re.search(rf"\b{re.escape(n)}\b", code))
    assert not missing, f"docs/python.md does not name (as code): {', '.join(missing)}"


def test_docs_check_can_fail():
    code = code_in("A `tessera.pagerank(g)` call.\n\n```python\nh = tessera.hitting_times(g)\n```\n"
                   "then bfs, unquoted.\n")
    assert re.search(r"\bpagerank\b", code) and re.search(r"\bhitting_times\b", code)
    assert not re.search(r"\bbfs\b", code)


# -- results in a notebook ----------------------------------------------------------------------
@pytest.fixture(scope="module")
def grid(rt):
    return tessera.grid((4, 5), seed=1)


class FakePandas(types.ModuleType):
    """pandas as far as to_pandas() uses it: DataFrame(dict of columns, ...)."""

    def __init__(self):
        super().__init__("pandas")

        class DataFrame(dict):
            def __init__(self, columns, **options):
                super().__init__(columns)
        self.DataFrame = DataFrame


@pytest.fixture
def fake_pandas(monkeypatch):
    monkeypatch.setitem(sys.modules, "pandas", FakePandas())


def results(grid):
    out = [grid, tessera.components(grid), tessera.pagerank(grid), tessera.bfs(grid, 0),
           tessera.hitting_times(grid, 6), tessera.arange(tessera.Runtime(), 7)]
    if tessera.trilinos_available():
        out.append(tessera.fiedler(grid))
    return out


def test_results_show_an_html_table(grid):
    for r in results(grid):
        page = r._repr_html_()
        assert page.startswith("<table") and f"tessera.{type(r).__name__}" in page, page
        assert "<script" not in page
    p = tessera.pagerank(grid)
    page = p._repr_html_()
    assert re.search(rf"<th[^>]*>iterations</th><td[^>]*>{p.iterations}</td>", page), page
    first = ", ".join(f"{x:.6g}" for x in p.scores.local[:5])
    assert f"[{first}, ...]" in page                                 # the first values, not all
    page = tessera.components(grid)._repr_html_()
    assert "&lt;" not in page or "tessera.Graph(" in page            # a repr inside is escaped


def test_html_is_escaped():
    from tessera import _display
    page = _display.html_table("a <b>", [("<i>", "<script>alert(1)</script>"), ("x", np.arange(9))])
    assert "<script>" not in page and "&lt;script&gt;" in page and "&lt;i&gt;" in page
    assert "[0, 1, 2, 3, 4, ...]" in page


def test_results_list_their_fields(grid):
    p = tessera.pagerank(grid)
    assert {"scores", "iterations", "converged", "top_vertex", "document", "to_pandas"} <= set(dir(p))
    b = tessera.bfs(grid, 0)
    assert {"parents", "depths", "reached", "levels"} <= set(dir(b))
    h = tessera.hitting_times(grid, 6)
    assert {"times", "file_ids", "mean", "targets", "farthest"} <= set(dir(h))
    c = tessera.components(grid)
    assert {"labels", "count", "largest_size", "graph"} <= set(dir(c))
    assert {"vertices", "edges", "dst", "file_ids", "src"} <= set(dir(grid))
    assert {"local", "size", "dtype", "local_range"} <= set(dir(tessera.zeros(tessera.Runtime(), 3)))


def test_to_pandas_columns(grid, fake_pandas):
    ids = grid.file_ids
    p = tessera.pagerank(grid)
    df = p.to_pandas()
    assert list(df) == ["file_id", "scores"]
    assert np.array_equal(df["file_id"], ids) and np.array_equal(df["scores"], p.scores.local)
    b = tessera.bfs(grid, 0)
    assert list(b.to_pandas()) == ["file_id", "parents", "depths"]
    h = tessera.hitting_times(grid, 6)
    df = h.to_pandas()
    assert list(df) == ["file_id", "times"] and np.array_equal(df["times"], h.times.local)
    c = tessera.components(grid)
    assert list(c.to_pandas()) == ["file_id", "labels"]
    if tessera.trilinos_available():
        assert list(tessera.fiedler(grid).to_pandas()) == ["file_id", "vector"]
    assert np.array_equal(p.scores.local, tessera.pagerank(grid).scores.local)   # numpy access as it was


def test_to_pandas_without_pandas_says_so(grid, monkeypatch):
    monkeypatch.setitem(sys.modules, "pandas", None)   # import pandas raises ImportError
    with pytest.raises(tessera.ConfigError, match="needs pandas"):
        tessera.pagerank(grid).to_pandas()


def test_to_pandas_when_the_graph_is_gone(rt, fake_pandas):
    g = tessera.grid((3, 3))
    p = tessera.pagerank(g)
    del g
    import gc
    gc.collect()
    with pytest.raises(tessera.ConfigError, match="graph"):
        p.to_pandas()


class FakeSession:
    """What a Remote asks its session for: arrays by name (views here)."""
    same_node, copy_results = True, False

    def __init__(self, arrays):
        self.arrays, self.asked = arrays, []

    def _array(self, remote, name):
        self.asked.append(name)
        remote._how[name] = "view"
        return self.arrays[name]


def test_remote_shows_itself(fake_pandas):
    arrays = {"file_ids": np.arange(10, 16, dtype=np.uint64), "scores": np.linspace(0, 1, 6)}
    session = FakeSession(arrays)
    r = tessera.session.Remote(session, {"id": "#3", "kind": "PageRank", "arrays": ["file_ids", "scores"],
                                         "fields": {"iterations": 7, "method": "<jacobi>"}})
    assert {"iterations", "method", "file_ids", "scores", "to_pandas", "array"} <= set(dir(r))
    page = r._repr_html_()
    assert session.asked == []                                    # dir() and a display send no request
    assert "tessera.session.PageRank #3" in page and "&lt;jacobi&gt;" in page and "<jacobi>" not in page
    assert "not read yet: .scores maps it, no copy" in page
    df = r.to_pandas()
    assert session.asked == ["file_ids", "scores"]
    assert list(df) == ["file_id", "scores"] and np.array_equal(df["scores"], arrays["scores"])
    page = r._repr_html_()                                       # read now: the first values
    assert "[10, 11, 12, 13, 14, ...]" in page and "[0, 0.2, 0.4, 0.6, 0.8, ...]" in page
    session.same_node = False
    r2 = tessera.session.Remote(session, {"id": "#4", "kind": "Components", "arrays": ["labels"], "fields": {}})
    assert "not read yet: .labels copies it here" in r2._repr_html_()
