"""What the `tessera bench` CLI tests share: a private Shared directory that
must be empty when the benchmark is done, the JSON lines split into rows
and summaries, and the check that a bad option is refused."""
import contextlib
import json
import os
import shutil
import subprocess
import tempfile


@contextlib.contextmanager
def private_shm(prefix):
    """The environment for runs whose Shared storage lives in a fresh
    directory under /dev/shm; nothing may be left in it afterwards."""
    shm = tempfile.mkdtemp(prefix=prefix, dir="/dev/shm")
    try:
        yield dict(os.environ, TESSERA_SHM_DIR=shm)
        assert os.listdir(shm) == [], os.listdir(shm)
    finally:
        shutil.rmtree(shm, ignore_errors=True)


def run_bench(tessera, args, env, timeout=300):
    """`tessera bench ARGS --json -q`: the completed process, its result rows
    and its summary lines."""
    run = subprocess.run([tessera, "bench", *args, "--json", "-q"], capture_output=True, text=True, timeout=timeout,
                         env=env)
    records = [json.loads(line) for line in run.stdout.splitlines()] if run.returncode == 0 else []
    return run, [r for r in records if "summary" not in r], [r for r in records if "summary" in r]


def expect_refused(tessera, args, option, env):
    bad = subprocess.run([tessera, "bench", *args], capture_output=True, text=True, timeout=60, env=env)
    assert bad.returncode != 0 and option in bad.stderr, bad.stderr
