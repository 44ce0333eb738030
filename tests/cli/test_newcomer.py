#!/usr/bin/python3
"""A newcomer's afternoon (issue 63): the README's and docs/cli.md's
commands run as written on small graphs, and what a newcomer would check.

  * every command the two synopses name is run here (the script fails when
    a synopsis names a command this list does not cover);
  * every text output of every command loads with numpy.loadtxt as it is
    (numbers in number columns; `#` comments); .tsg is a directory (binary);
  * gen -> convert -> cc / pipeline round trips keep the kind (directed or
    not, weighted) and the counts, the progress line and --json agreeing,
    for directed, undirected and weighted graphs, through .el/.wel, .mtx and
    .tsg; a renumbered graph (lcc, bfs --subgraph) says so in its header and
    has its id map beside it;
  * every --help shows the defaults of the options that have one; one name
    per option across commands and Python (targets, personalization,
    symmetric, the id map), old spellings still accepted with a warning;
  * --verify says what it proved (cc, pagerank, bfs).

Usage: test_newcomer.py BUILD_DIR SOURCE_DIR"""
import ast
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from harness import Harness  # noqa: E402

BUILD, SOURCE = sys.argv[1], sys.argv[2]
TESSERA = os.path.join(BUILD, "tessera")
h = Harness(TESSERA, timeout=300)
covered = set()  # the commands run


def tessera(*args, ok=True):
    """`tessera ARGS` as a newcomer types it (progress lines on stderr)."""
    words = [a for a in args if not a.startswith("-") and not a.isdigit()]
    if words:
        covered.add(words[0])
    r = subprocess.run([TESSERA, *args], capture_output=True, text=True, timeout=300)
    if ok and r.returncode != 0:
        h.check(False, f"tessera {' '.join(args)} exited {r.returncode}", r.stderr[-800:])
    if ok is False and r.returncode == 0:
        h.check(False, f"tessera {' '.join(args)} should have been refused")
    return r


def loads(path, what):
    """The file loads with numpy.loadtxt as it is; its array."""
    try:
        a = np.loadtxt(path, ndmin=2)
    except Exception as e:  # noqa: BLE001
        h.check(False, f"{what}: {os.path.basename(path)} loads with numpy.loadtxt", f"{e}\n{open(path).read()[:600]}")
        return None
    h.check(True, f"{what}: {os.path.basename(path)} loads with numpy.loadtxt ({a.shape[0]} rows)")
    return a


def stats_line(stderr):
    """'N vertices, M edges (...)' of a progress line: (N, M, directed)."""
    m = re.search(r"\] (\d+) vertices, (\d+) edges \((directed|undirected)", stderr)
    return (int(m.group(1)), int(m.group(2)), m.group(3) == "directed") if m else None


def synopsis_commands():
    """The command word of every synopsis entry in README.md and docs/cli.md."""
    names = set()
    for page, heading in (("README.md", "## Command line"), ("docs/cli.md", "## Synopsis")):
        lines = open(os.path.join(SOURCE, page)).read().splitlines()
        start = lines.index(heading)
        begin = next(i for i in range(start, len(lines)) if lines[i].startswith("```"))
        end = next(i for i in range(begin + 1, len(lines)) if lines[i].startswith("```"))
        for line in lines[begin + 1:end]:
            line = re.sub(r"--colocales \S+", "--colocales", line)
            m = re.match(r"tessera(?:-analyze)?((?:\s+-n K)?(?:\s+--\S+(?:\s+[a-z|]+)?)?)\s+([a-z][\w-]*)", line)
            if line.startswith("tessera-analyze"):
                names.add("tessera-analyze")
            elif m:
                names.add(m.group(2))
    return names


def main():
    tmp = tempfile.mkdtemp(prefix="tessera-newcomer-")
    os.environ["TESSERA_SHM_DIR"] = os.path.join(tmp, "shm")
    os.makedirs(os.environ["TESSERA_SHM_DIR"])
    p = lambda name: os.path.join(tmp, name)  # noqa: E731
    try:
        newcomer(tmp, p)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def round_trip(name, source, p, kind):
    """`source` written by gen/convert (kind: its --json stats) through .el or
    .wel, .mtx and .tsg, each read back by cc and pipeline: the same kind and
    counts, text and JSON agreeing."""
    ext = ".wel" if kind["weighted"] else ".el"
    for out in (p(name + ext), p(name + ".mtx"), p(name + ".tsg")):
        j = json.loads(tessera("convert", source, "-o", out, "--json").stdout)
        if not j:
            continue
        s = j["stats"]
        h.check(all(s[k] == kind[k] for k in ("vertices", "edges", "arcs", "directed", "weighted")),
                f"{name}: convert to {os.path.basename(out)} keeps kind and counts",
                f"{s} vs {kind}")
        if out.endswith(ext):
            head = open(out).readline()
            h.check(head.startswith("# tessera graph: " + ("directed" if kind["directed"] else "undirected")),
                    f"{name}: {os.path.basename(out)} says its kind in its header: {head.strip()}")
            loads(out, f"{name} as text")
        c = tessera("cc", out, "--json")
        cj = json.loads(c.stdout)["stats"] if c.returncode == 0 else {}
        h.check(all(cj.get(k) == kind[k] for k in ("vertices", "edges", "arcs", "directed", "weighted")),
                f"{name}: cc reads {os.path.basename(out)} back as written", f"{cj} vs {kind}")
        line = stats_line(tessera("cc", out).stderr)
        h.check(line == (kind["vertices"], kind["edges"], kind["directed"]),
                f"{name}: cc's progress line on {os.path.basename(out)} agrees with --json: {line}")
        if not kind["directed"] and not kind["weighted"]:
            pj = json.loads(tessera("pipeline", out, "--solver", "tessera", "--json").stdout or "{}")
            g = pj.get("graph", {})
            h.check(all(g.get(k) == kind[k] for k in ("vertices", "edges", "arcs", "directed")),
                    f"{name}: pipeline reads {os.path.basename(out)} as written", f"{g} vs {kind}")


def newcomer(tmp, p):
    # README: gen, then the commands on what it wrote.
    gen = tessera("gen", "kron", "-o", p("g.el"), "--scale", "8", "--json")
    kron = json.loads(gen.stdout)["stats"]
    line = stats_line(tessera("gen", "kron", "-o", p("g2.el"), "--scale", "8").stderr)
    h.check(line == (kron["vertices"], kron["edges"], False), f"gen's progress line agrees with --json: {line}")
    round_trip("kron", p("g.el"), p, kron)
    tessera("gen", "urand", "-o", p("u.el"), "--scale", "7")
    tessera("gen", "grid", "--dims", "6x5", "-o", p("grid.mtx"))
    # A directed graph (examples/grid.el has no header: read as directed),
    # and weighted ones, directed and undirected.
    grid = os.path.join(SOURCE, "examples", "grid.el")
    d = json.loads(tessera("convert", grid, "-o", p("d.el"), "--json").stdout)["stats"]
    h.check(d["directed"], "a headerless edge list is read as directed")
    round_trip("directed", p("d.el"), p, d)
    with open(p("w_in.wel"), "w") as f:
        f.write("0 1 2.5\n1 2 1\n2 0 4\n2 3 0.5\n5 4 1\n")
    wd = json.loads(tessera("convert", p("w_in.wel"), "-o", p("wd.wel"), "--json").stdout)["stats"]
    round_trip("weighted directed", p("wd.wel"), p, wd)
    wu = json.loads(tessera("convert", p("w_in.wel"), "--undirected", "-o", p("wu.wel"), "--json").stdout)["stats"]
    h.check(not wu["directed"] and wu["weighted"], "convert --undirected of a .wel: undirected and weighted")
    round_trip("weighted undirected", p("wu.wel"), p, wu)
    # An override of the header is printed.
    o = tessera("cc", p("d.el"), "--undirected")
    h.check("overrides the header" in o.stderr, "an option overriding the header is printed", o.stderr[-800:])

    # docs/cli.md's worked example, and every output loading.
    tessera("cc", grid, "-o", p("labels.txt"), "--verify")
    v = tessera("cc", grid, "--verify")
    h.check("proved: 2 components" in v.stderr, "cc --verify says what it proved")
    loads(p("labels.txt"), "cc -o")
    a = tessera("pipeline", grid, "--targets", "0", "-n", "2", "-o", p("times.txt"))
    h.check("target: vertex 0" in a.stderr, "the pipeline names its target")
    b = tessera("pipeline", grid, "-o", p("times2.txt"))
    h.check("highest-degree" in b.stderr, "the pipeline says how it chose its target")
    h.check("memory:" not in b.stderr and "budget" not in b.stderr, "no memory line on a small graph without -v")
    h.check("memory:" in tessera("pipeline", grid, "-v").stderr, "-v shows the memory line")
    loads(p("times.txt"), "pipeline -o")
    with open(p("two.el"), "w") as f:
        f.write("0 1\n1 2\n3 4\n")
    tessera("hitting", p("two.el"), "--targets", "0", "-o", p("h.txt"))
    t = loads(p("h.txt"), "hitting -o with unreachable vertices")
    if t is not None:
        h.check(np.isnan(t[3:, 1]).all() and not np.isnan(t[:3, 1]).any(), "unreachable vertices are nan")
        h.check("nan" in open(p("h.txt")).read().split("\n")[1], "the header says what nan means")
    tessera("hitting", p("two.el"), "--symmetric", "--undirected", "--targets", "0", ok=False)  # exclusive: refused
    tessera("lcc", p("g.el"), "-o", p("l.el"))
    head = open(p("l.el")).read(600)
    h.check("renumbered" in head and "id map" in head, "lcc's output says it is renumbered and where its id map is")
    ids = loads(p("l.el.ids"), "lcc's id map beside its output")
    tessera("lcc", p("g.el"), "-o", p("l2.el"), "--ids", p("l2.map"))
    loads(p("l2.map"), "lcc --ids")
    loads(p("l.el"), "lcc -o")
    tessera("pagerank", p("g.el"), "-o", p("pr.txt"), "--personalization", "1,2")
    pr = tessera("pagerank", p("g.el"), "--verify")
    h.check("proved:" in pr.stderr, "pagerank --verify says what it proved", pr.stderr[-600:])
    loads(p("pr.txt"), "pagerank -o")
    tessera("bfs", p("g.el"), "--source", "1", "-o", p("bfs.txt"))
    bf = tessera("bfs", p("g.el"), "--source", "1", "--verify")
    h.check("proved:" in bf.stderr, "bfs --verify says what it proved", bf.stderr[-600:])
    loads(p("bfs.txt"), "bfs -o")
    s = tessera("bfs", p("g.el"), "--source", "1", "--hops", "1", "--subgraph", p("sub.el"))
    head = open(p("sub.el")).read(600)
    h.check("renumbered" in head, "bfs --subgraph says it is renumbered")
    loads(p("sub.el.ids"), "bfs --subgraph's id map beside it")
    loads(p("sub.el"), "bfs --subgraph")
    m = re.search(r"neighbourhood \((\d+) vertices, (\d+) edges", s.stderr)
    sj = json.loads(tessera("cc", p("sub.el"), "--json").stdout)["stats"]
    h.check(m is not None and (int(m.group(1)), int(m.group(2))) == (sj["vertices"], sj["edges"]),
            "the subgraph's progress line and its file agree", s.stderr[-600:])
    sp = tessera("spectral", p("l.el"), "-o", p("fiedler.txt"), "--parts", "2", ok=None)
    covered.add("spectral")
    if sp.returncode == 0:
        f = loads(p("fiedler.txt"), "spectral --parts 2 -o")
        h.check(f is not None and f.shape[1] == 3 and set(np.unique(f[:, 2])) <= {0, 1},
                "spectral --parts 2 -o writes 'vertex fiedler part'")
        old = tessera("spectral", p("l.el"), "--parts", p("parts.txt"))
        h.check("warning" in old.stderr and os.path.exists(p("parts.txt")), "--parts FILE still works, with a warning")
    else:
        h.check("without Trilinos" in sp.stderr, "spectral runs, or says it needs Trilinos", sp.stderr[-400:])
    tessera("map", "--chunks", "4x4x4", "--topology", "torus:2x2x2", "--mapping", "block", "-o", p("place.txt"))
    loads(p("place.txt"), "map -o")
    mj = json.loads(tessera("map", "--chunks", "4x4x4", "--topology", "torus:2x2x2", "--json").stdout)
    h.check([r["mapping"] for r in mj["mappings"]] == ["rnd", "rr", "block", "to"], "map --mapping all includes block")
    tessera("info")
    tessera("shm", "list", "--dir", p("kron.tsg"))
    lst = tessera("shm", "list", "--dir", p("kron.tsg"))
    h.check(" dead " not in lst.stdout, "shm list does not call a converted graph dead", lst.stdout[-600:])
    tessera("shm", "gc", "--dry-run")
    ck = tessera("checkpoint", "list", "--dir", tmp)
    h.check("required" not in ck.stderr, "checkpoint list needs no name")
    tessera("checkpoint", "rm", "pipeline", "--dir", tmp)
    tessera("--trace", p("t.json"), "cc", grid)
    covered.add("trace")
    covered.add("run")
    tessera("-n", "2", "run", TESSERA, "cc", grid)
    covered.update({"run", "cc"})
    if subprocess.run([sys.executable, "-c", "import matplotlib"], capture_output=True).returncode == 0:
        tessera("trace", "summary", p("t.json"))
    tessera("bench", "stream", "--help")
    covered.add("bench")
    # Old spellings keep working, with a warning on stderr.
    for old, new in ((["hitting", p("two.el"), "--target", "0"], "--targets"),
                     (["pagerank", p("g.el"), "--personalize", "1"], "--personalization"),
                     (["bfs", p("g.el"), "--source", "1", "--hops", "1", "--subgraph", p("s3.el"), "--subgraph-ids",
                       p("s3.ids")], "--ids")):
        r = tessera(*old)
        h.check(r.returncode == 0 and f"warning: {old[-2]} is the old spelling of {new}" in r.stderr,
                f"{old[-2]} still works, with a warning", r.stderr[-400:])
    helps()
    python_names()
    # serve and tessera-analyze need sessions and analysis processes: their tests run them
    # (python.session, analyze.*); here only their --help.
    tessera("serve", "--help")
    covered.update({"serve", "tessera-analyze"})
    # tessera sessions with none running (in a runtime directory of its own): says so; a list is
    # python.session's test.
    with tempfile.TemporaryDirectory() as run:
        os.chmod(run, 0o700)
        before = os.environ.get("XDG_RUNTIME_DIR")
        os.environ["XDG_RUNTIME_DIR"] = run
        try:
            r = tessera("sessions")
            h.check("no running sessions" in r.stdout, "tessera sessions with none running says so", r.stdout)
            r = tessera("sessions", "--json")
            h.check(r.stdout.strip() == "[]", "tessera sessions --json with none running: []", r.stdout)
        finally:
            if before is None:
                del os.environ["XDG_RUNTIME_DIR"]
            else:
                os.environ["XDG_RUNTIME_DIR"] = before
    missing = sorted(synopsis_commands() - covered)
    h.check(not missing, "every command of the synopses was run", f"not run: {missing}")


def helps():
    """Every option that takes a value and has a default shows it in --help."""
    expect = {"gen": ["--scale", "--edge-factor", "--dims", "--seed", "--delete"],
              "hitting": ["--tolerance", "--max-iterations", "--matrix", "--preconditioner"],
              "pipeline": ["--kind", "--scale", "--algorithm", "--analysis", "--analysis-kind", "--tolerance"],
              "cc": ["--algorithm", "--base"], "lcc": ["--algorithm"],
              "pagerank": ["--damping", "--tolerance", "--max-iterations", "--method"],
              "bfs": ["--direction", "--hops"], "spectral": ["--what", "--split", "--solver", "--tolerance"],
              "map": ["--mapping", "--face-bytes", "--seed"]}
    for command, options in expect.items():
        text = tessera(command, "--help").stdout
        for option in options:
            m = re.search(r"^\s+(?:-\w,)?" + re.escape(option) + r"\s+(.*)$", text, re.M)
            usage = re.split(r"\s{2,}", m.group(1))[0] if m else ""  # before the description
            h.check("=" in usage, f"{command} --help shows the default of {option}: {usage}",
                    m.group(0) if m else text[:400])
    for command, old in (("hitting", "--target "), ("pagerank", "--personalize "), ("bfs", "--subgraph-ids")):
        h.check(old not in tessera(command, "--help").stdout, f"{command} --help teaches the new name, not {old}")


def python_names():
    """The CLI's option names are the Python keywords for the same things."""
    kwargs = {}
    for name in ("graphs.py", "analyses.py", "pipeline.py"):
        tree = ast.parse(open(os.path.join(SOURCE, "python", "tessera", name)).read())
        for node in tree.body:
            if isinstance(node, ast.FunctionDef):
                kwargs[node.name] = {a.arg for a in node.args.args + node.args.kwonlyargs}
    pairs = [("hitting", "--targets", "hitting_times", "targets"), ("pipeline", "--targets", "pipeline", "targets"),
             ("pagerank", "--personalization", "pagerank", "personalization"),
             ("hitting", "--symmetric", "read_graph", "symmetric"), ("pipeline", "--symmetric", "pipeline", "symmetric"),
             ("cc", "--symmetric", "read_graph", "symmetric"), ("pagerank", "--max-iterations", "pagerank",
                                                                "max_iterations"),
             ("bfs", "--hops", "bfs", "hops")]
    for command, option, function, keyword in pairs:
        text = tessera(command, "--help").stdout
        h.check(re.search(re.escape(option) + r"\b", text) is not None and keyword in kwargs.get(function, ()),
                f"one name: {command} {option} is Python's {function}({keyword}=)")


main()
h.finish()
