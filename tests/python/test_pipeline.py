"""tessera.pipeline() and hitting_times() run the library's workflows, as
`tessera pipeline` and `tessera hitting` do: at 1 and 2 ranks, for the same
input and options the document equals the command's --json (modulo times,
memory and the handshake's paths), in process, in a tessera-analyze process
and in a bwrap container (skipped, with the reason, when bwrap cannot run
here); the hitting times on the largest component match scipy's sparse
direct solve; every None option is the library's default, the solver's
included (Belos when built with Trilinos, else Tessera's CG)."""
import json
import os
import shutil
import subprocess
import sys

import numpy as np
import pytest

import tessera
from conftest import everyone

scipy_sparse = pytest.importorskip("scipy.sparse")
scipy_csgraph = pytest.importorskip("scipy.sparse.csgraph")
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from scipy_reference import reference_hitting  # noqa: E402

pytestmark = pytest.mark.scipy

BUILD = os.environ.get("TESSERA_BINARY_DIR",
                       os.path.join(os.path.dirname(os.path.abspath(tessera.__file__)), "..", ".."))
CLI = os.path.join(BUILD, "tessera")
SCALE = 8  # a Kronecker graph of 256 vertices: small enough for oversubscribed ranks, with a few components
# What differs between two runs of the same work: times, memory, the handshake's paths and latencies.
VARYING = {"step_seconds", "memory", "anonymous_memory_growth_bytes", "seconds", "solve_seconds", "setup_seconds",
           "seconds_per_iteration", "matrix_measured_bytes",
           "memory_estimate"}  # the command line's check against the node's free memory at the time (docs/memory.md)


def comparable(document):
    """The document without what varies from run to run; the handshake by its keys."""
    if isinstance(document, dict):
        out = {}
        for k, v in document.items():
            if k in VARYING:
                continue
            out[k] = sorted(v) if k == "handshake" and isinstance(v, dict) else comparable(v)
        return out
    if isinstance(document, list):
        return [comparable(v) for v in document]
    return document


def cli_environment():
    """This process's environment without its MPI job: a command started from
    a rank must start a job of its own (as the library does for tessera-analyze)."""
    prefixes = ("OMPI_", "PMIX_", "PMI_", "OPAL_", "ORTE_", "HYDRA_", "MPIR_")
    env = {k: v for k, v in os.environ.items() if not k.startswith(prefixes)}
    env.update(OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1", OMPI_MCA_mpi_yield_when_idle="1")
    return env


def cli_json(rt, *args):
    """Rank 0 runs `tessera ARGS -n RANKS --json -q` (the others wait); the
    parsed document on rank 0, None elsewhere."""
    document = None
    failure = ""
    if rt.rank == 0:
        p = subprocess.run([CLI, *args, "-n", str(rt.size), "--json", "-q"], capture_output=True, text=True,
                           timeout=300, env=cli_environment())
        if p.returncode == 0:
            document = json.loads(p.stdout)
        else:
            failure = f"tessera {' '.join(args)} exited {p.returncode}: {p.stderr[-4000:]}"
    rt.barrier()
    assert not failure, failure
    return document


def bwrap_unusable():
    """Why the container analysis cannot run here, or "" when it can."""
    if not shutil.which("bwrap"):
        return "bwrap is not installed (apt-get install bubblewrap)"
    probe = subprocess.run(["bwrap", "--unshare-all", "--die-with-parent", "--ro-bind", "/", "/", "--proc", "/proc",
                            "--dev", "/dev", "true"], capture_output=True, text=True)
    if probe.returncode != 0:
        return f"bwrap cannot create namespaces here: {probe.stderr.strip()[:200]}"
    return ""


def skip_unless_container_works(rt, analysis):
    if analysis != "container":
        return
    reason = bwrap_unusable()
    usable = rt.allreduce(0 if reason else 1, "min")  # every rank skips or none does
    if not usable:
        pytest.skip(reason or "bwrap cannot run on another rank")


@pytest.fixture(scope="module")
def reference(rt):
    """The generated graph as scipy sees it, built from Tessera's own arrays of
    the same generator call (the graph does not depend on the rank count)."""
    g = tessera.kron(scale=SCALE)
    src, dst = everyone(rt, g.src), everyone(rt, g.dst)
    return scipy_sparse.csr_matrix((np.ones(src.size), (src, dst)), shape=(g.vertices, g.vertices))


def check_times_match_scipy(rt, result, adjacency):
    targets = result["hitting"]["target_file_ids"]
    want = reference_hitting(adjacency, np.array(targets))[result.file_ids.astype(np.int64)]
    got = result.times.local
    assert got.size == result.file_ids.size
    assert np.allclose(got, want, rtol=1e-8, atol=1e-8), f"max difference {np.nanmax(np.abs(got - want))}"
    assert rt.allreduce(int(got.size)) == result["lcc"]["vertices"]


def test_defaults_are_the_librarys(rt):
    d = tessera.pipeline_defaults()
    solver = "belos" if tessera.trilinos_available() else "tessera"
    assert d["solver"] == tessera.default_solver() == solver and d["analysis_kind"] == "hitting"
    assert d["analysis"] == "inprocess" and d["algorithm"] == "afforest" and d["scale"] == 16
    assert d["tolerance"] == 1e-10 and d["max_iterations"] == 20000 and d["preconditioner"] == "diagonal"
    help_text = ""
    if rt.rank == 0:
        help_text = subprocess.run([CLI, "pipeline", "--help"], capture_output=True, text=True,
                                   env=cli_environment()).stdout
        assert f"here {solver}" in help_text, "the command names the same default solver"


@pytest.mark.parametrize("analysis", ["inprocess", "process", "container"])
def test_pipeline_equals_the_command_and_scipy(rt, reference, analysis):
    skip_unless_container_works(rt, analysis)
    result = tessera.pipeline(scale=SCALE, analysis=analysis, tolerance=1e-12)
    assert isinstance(result, dict) and result.exit_code == 0
    assert result["command"] == "pipeline" and result["ranks"] == rt.size
    assert result["hitting"]["analysis"] == analysis and result["hitting"]["solver"] == tessera.default_solver()
    assert result["hitting"]["status"] == "converged"
    assert (result["hitting"]["handshake"] is None) == (analysis == "inprocess")
    assert not result.times.local.flags.owndata  # a view of the library's array, not a copy
    check_times_match_scipy(rt, result, reference)
    command = cli_json(rt, "pipeline", "--scale", str(SCALE), "--analysis", analysis, "--tolerance", "1e-12")
    if rt.rank == 0:
        assert comparable(dict(result)) == comparable(command)


def test_both_solvers_and_a_given_graph_file(rt, reference):
    for solver in ["tessera"] + (["belos"] if tessera.trilinos_available() else []):
        result = tessera.pipeline(scale=SCALE, solver=solver, targets=[5], tolerance=1e-12)
        assert result["hitting"]["solver"] == solver and result["hitting"]["target_file_ids"] == [5]
        check_times_match_scipy(rt, result, reference)
        command = cli_json(rt, "pipeline", "--scale", str(SCALE), "--solver", solver, "--targets", "5",
                           "--tolerance", "1e-12")
        if rt.rank == 0:
            assert comparable(dict(result)) == comparable(command)


@pytest.mark.parametrize("kernel", ["pagerank", "bfs", "fiedler", "centrality"])
def test_analyses_equal_the_commands(rt, kernel):
    """Python's pagerank(), bfs() and spectral() and `tessera pagerank | bfs |
    spectral` are one workflow (pipeline::run_*): the same document, field for
    field (the same names: "lambda2", the damping, the top vertex), but for
    the input's name."""
    if kernel in ("fiedler", "centrality") and not tessera.trilinos_available():
        pytest.skip("built without Trilinos (Anasazi)")
    path = f"/tmp/tessera-pytest-{rt.job_id}-grid-{kernel}.el"  # connected: a Fiedler vector exists
    cli_json(rt, "gen", "grid", "--dims", "6x7", "-o", path)
    g = tessera.read_graph(path, undirected=True)
    if kernel == "pagerank":
        r = tessera.pagerank(g, damping=0.8, tolerance=1e-9, max_iterations=200, personalization=[0, 5])
        command = cli_json(rt, "pagerank", path, "--undirected", "--damping", "0.8", "--tolerance", "1e-9",
                           "--max-iterations", "200", "--personalize", "0,5")
        assert (r.damping, r.tolerance, r.max_iterations, r.personalization) == (0.8, 1e-9, 200, [0, 5])
        top = rt.allreduce(float(r.scores.local.max()) if r.scores.local.size else 0.0, "max")
        assert r.converged and r.top_score == top and r.score_sum == pytest.approx(1.0, abs=1e-6)
    elif kernel == "bfs":
        r = tessera.bfs(g, 3)
        command = cli_json(rt, "bfs", path, "--undirected", "--source", "3")
        assert r.source == 3 and r.reached == rt.allreduce(int((r.depths.local >= 0).sum()), "sum")
    else:
        r = tessera.spectral(g, kernel)
        command = cli_json(rt, "spectral", path, "--undirected", "--what", kernel)
        assert r.lambda_ == r.document["lambda2" if kernel == "fiedler" else "lambda"] and r.converged
    mine = dict(r.document)
    assert mine.pop("input") == "a graph in memory"
    assert mine["command"] == ("spectral" if kernel in ("fiedler", "centrality") else kernel)
    if rt.rank == 0:
        os.unlink(path)
        assert command.pop("input") == path
        assert comparable(mine) == comparable(command)


def test_a_graph_in_memory_and_a_file(rt, source_dir, tmp_path_factory):
    """The pipeline from a Graph already read, from its file and from the
    command give the same answer; output= writes the command's lines."""
    path = os.path.join(source_dir, "examples", "grid.el")
    from_file = tessera.pipeline(path, targets=[0])
    in_memory = tessera.pipeline(tessera.read_graph(path), targets=[0])
    assert in_memory["input"] == "a graph in memory"
    for key in ("components", "lcc", "graph"):
        assert comparable(in_memory[key]) == comparable(from_file[key])
    assert np.array_equal(in_memory.times.local, from_file.times.local)
    assert np.array_equal(in_memory.file_ids, from_file.file_ids)
    assert from_file["hitting"]["mean"] == pytest.approx(68.913939, abs=1e-5)  # the README's walkthrough
    command = cli_json(rt, "pipeline", path, "--targets", "0")
    if rt.rank == 0:
        assert comparable(dict(from_file)) == comparable(command)
    out = f"/tmp/tessera-pytest-{rt.job_id}-times.txt"
    written = tessera.pipeline(path, targets=[0], output=out)
    try:
        if rt.rank == 0:
            lines = [line.split() for line in open(out) if not line.startswith("#")]
            assert len(lines) == written["lcc"]["vertices"]
        rt.barrier()
    finally:
        if rt.rank == 0 and os.path.exists(out):
            os.remove(out)


def test_hitting_times_default_solver_and_document_equal_the_command(rt, source_dir):
    path = os.path.join(source_dir, "examples", "grid.el")
    h = tessera.hitting_times(tessera.read_graph(path), [0])
    assert h.solver == tessera.default_solver() and h.converged
    assert h.document["command"] == "hitting" and h.targets == [0]
    command = cli_json(rt, "hitting", path, "--targets", "0")
    if rt.rank == 0:
        assert comparable(h.document) == comparable(command)


def lcc_eigenpair(adjacency, kind):
    """eigh's eigenvalue and eigenspace of the largest component (file ids ascending) for `kind`."""
    _, labels = scipy_csgraph.connected_components(adjacency, directed=False)
    counts = np.bincount(labels)
    members = np.nonzero(labels == labels[np.nonzero(counts[labels] == counts.max())[0][0]])[0]
    a = adjacency[members][:, members].toarray()
    m = np.diag(a.sum(axis=1)) - a if kind == "fiedler" else a
    values, vectors = np.linalg.eigh(m)
    k = 1 if kind == "fiedler" else len(values) - 1
    return members, values[k], vectors[:, np.abs(values - values[k]) <= 1e-9 * max(1.0, abs(values[k]))]


@pytest.mark.skipif(not tessera.trilinos_available(), reason="built without Trilinos (Anasazi)")
@pytest.mark.parametrize("kind,analysis", [("fiedler", "inprocess"), ("centrality", "inprocess"),
                                           ("fiedler", "process")])  # every mode: tests/analyze/test_analysis_kinds.py
def test_pipeline_spectral_kinds_equal_eigh(rt, reference, analysis, kind):
    result = tessera.pipeline(scale=SCALE, analysis_kind=kind, analysis=analysis)
    assert result.exit_code == 0 and result["analysis_kind"] == kind and "hitting" not in result
    j = result[kind]
    assert j["analysis"] == analysis and j["converged"] and (j["handshake"] is None) == (analysis == "inprocess")
    assert result.times is None and result.vector is result.values
    assert not result.vector.local.flags.owndata
    members, want, space = lcc_eigenpair(reference, kind)
    got = j["lambda2" if kind == "fiedler" else "lambda"]
    assert abs(got - want) <= 1e-8 * abs(want)
    # The vector in file-id order, gathered from every rank.
    ids, x = everyone(rt, result.file_ids.astype(np.int64)), everyone(rt, result.vector.local)
    assert np.array_equal(np.sort(ids), members)
    x = x[np.argsort(ids)]
    assert abs(np.linalg.norm(x) - 1) <= 1e-9 and np.linalg.norm(x - space @ (space.T @ x)) <= 1e-6
    if space.shape[1] == 1:
        assert min(np.linalg.norm(x - space[:, 0]), np.linalg.norm(x + space[:, 0])) <= 1e-6
    if analysis == "inprocess":
        command = cli_json(rt, "pipeline", "--scale", str(SCALE), "--analysis-kind", kind)
        if rt.rank == 0:
            # Anasazi's start block differs between a process' first solve and
            # its later ones (as here, after other tests' solves): the path to
            # the eigenpair (iterations, residual, the next Ritz value) is not
            # the same to the bit, the eigenvalue is to rounding.
            mine, theirs = comparable(dict(result)), comparable(command)
            ours, its = mine.pop(kind), theirs.pop(kind)
            assert mine == theirs and ours.keys() == its.keys()
            lam = "lambda2" if kind == "fiedler" else "lambda"
            assert ours[lam] == pytest.approx(its[lam], rel=1e-9) and its["residual"] <= 1e-8
            path = {lam, "iterations", "residual", "lambda3", "lambda_next"}
            assert {k: v for k, v in ours.items() if k not in path} == {k: v for k, v in its.items() if k not in path}


def test_bad_options_are_named(rt):
    with pytest.raises(tessera.ConfigError, match="analysis kind must be one of hitting, fiedler, centrality, not 'pca'"):
        tessera.pipeline(scale=6, analysis_kind="pca")
    with pytest.raises(tessera.ConfigError, match="the centrality analysis takes none"):
        tessera.pipeline(scale=6, analysis_kind="centrality", targets=[1])
    with pytest.raises(tessera.ConfigError, match="solver must be one of tessera, belos, not 'magic'"):
        tessera.pipeline(scale=6, solver="magic")
    with pytest.raises(tessera.ConfigError, match="analysis must be one of"):
        tessera.pipeline(scale=6, analysis="cloud")
    with pytest.raises(tessera.ConfigError, match="option scale=.* has the wrong type"):
        tessera.pipeline(scale="large")
    with pytest.raises(tessera.RangeError, match="target vertex 999 is outside the vertex ids of the generated graph, 0..63"):
        tessera.pipeline(scale=6, targets=[999])


def by_file_id(rt, result):
    """{file id: value} of the result's vector over every rank."""
    ids, x = everyone(rt, result.file_ids.astype(np.int64)), everyone(rt, result.values.local)
    return dict(zip(ids.tolist(), x.tolist()))


@pytest.mark.skipif(not tessera.trilinos_available(), reason="built without Trilinos (Belos reads the packed rows)")
def test_packed_equals_the_edge_lists_and_the_command(rt, reference, source_dir):
    """packed=True: the EdgeList's document keys and answers (components, the
    largest component, the target, the times by file id), plus the packed
    facts; the command's --packed document; a Graph given is copied into the
    packed form and gives the same; refusals named."""
    plain = tessera.pipeline(scale=SCALE, tolerance=1e-12)
    packed = tessera.pipeline(scale=SCALE, tolerance=1e-12, packed=True)
    assert packed.exit_code == 0 and packed["graph"]["form"] == "packed" and "form" not in plain["graph"]
    extra = {"components": set(), "lcc": {"form", "id_array_bytes"},
             "graph": {"form", "id_array_bytes", "edge_list_bytes_per_edge"}}
    for key in extra:
        assert set(packed[key]) == set(plain[key]) | extra[key]
    assert set(packed) == set(plain) | {"packed"} and set(packed["hitting"]) == set(plain["hitting"])
    for k in ("components", "largest_size", "largest_label", "isolated_vertices"):
        assert packed["components"][k] == plain["components"][k]
    assert packed["lcc"]["vertices"] == plain["lcc"]["vertices"] and packed["lcc"]["edges"] == plain["lcc"]["edges"]
    assert packed["hitting"]["target_file_ids"] == plain["hitting"]["target_file_ids"]
    want, got = by_file_id(rt, plain), by_file_id(rt, packed)
    assert want.keys() == got.keys() and all(abs(got[v] - want[v]) <= 1e-6 * max(1.0, abs(want[v])) for v in want)
    check_times_match_scipy(rt, packed, reference)
    command = cli_json(rt, "pipeline", "--scale", str(SCALE), "--tolerance", "1e-12", "--packed")
    if rt.rank == 0:
        assert comparable(dict(packed)) == comparable(command)
    given = tessera.pipeline(tessera.kron(scale=SCALE), tolerance=1e-12, packed=True)
    assert given["input"] == "a graph in memory" and given["graph"]["form"] == "packed"
    assert comparable(given["components"]) == comparable(packed["components"])
    mine = by_file_id(rt, given)
    assert mine.keys() == got.keys() and all(abs(mine[v] - got[v]) <= 1e-9 * max(1.0, abs(got[v])) for v in got)
    with pytest.raises(tessera.ConfigError, match="only algorithm that reads the packed form"):
        tessera.pipeline(scale=6, packed=True, algorithm="lp")
    with pytest.raises(tessera.ConfigError, match="--solver tessera reads an EdgeList"):
        tessera.pipeline(scale=6, packed=True, solver="tessera")
