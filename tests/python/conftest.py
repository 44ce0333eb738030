import os

import pytest


def pytest_configure(config):
    config.addinivalue_line("markers", "scipy: needs scipy (skipped in the NumPy 2 run)")


@pytest.fixture(scope="session")
def rt():
    import tessera
    return tessera.Runtime()


@pytest.fixture(scope="session")
def source_dir():
    return os.environ.get("TESSERA_SOURCE_DIR", os.path.join(os.path.dirname(__file__), "..", ".."))


def everyone(rt, array_like):
    """The concatenation of every rank's local array, on every rank (a
    reference helper: gathers through a DistArray built from the blocks)."""
    import numpy as np
    import tessera
    block = np.ascontiguousarray(array_like)
    d = tessera.from_local(rt, block)
    return d.gather(np.arange(d.size))


def pytest_sessionfinish(session, exitstatus):
    """A run where some test skipped itself (a missing module) and none failed
    exits 77: ctest reports it skipped (SKIP_RETURN_CODE), not passed."""
    reporter = session.config.pluginmanager.get_plugin("terminalreporter")
    if exitstatus == 0 and reporter is not None and reporter.stats.get("skipped"):
        session.exitstatus = 77


def clean_env():
    """This environment without the launcher's variables: a process started
    with it is a fresh job of its own, not a rank of the test's."""
    return {k: v for k, v in os.environ.items() if not k.startswith(("OMPI_", "PMIX_", "PMI_"))}


def start_serve(tmp_path, ranks, *options):
    """`tessera -n RANKS serve --socket PATH OPTIONS...` from the build
    beside the package (skipped without it): (the process, its stdout a text
    pipe with stderr merged; the socket path)."""
    import subprocess
    import tessera
    program = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(tessera.__file__)))),
                           "tessera")
    if not os.path.exists(program):
        pytest.skip(f"no {program}")
    d = tmp_path / "sock"
    d.mkdir(mode=0o700)
    path = str(d / "s.sock")
    serve = subprocess.Popen([program, "-n", str(ranks), "serve", "--socket", path, *options], env=clean_env(),
                             stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    return serve, path
