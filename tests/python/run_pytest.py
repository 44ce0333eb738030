"""Runs pytest on every rank of an MPI job (mpirun -n K python3 run_pytest.py
ARGS...). Every rank runs the same tests in the same order (they are
collective); rank 0 reports, the others stay quiet unless they fail, when
their report follows on stderr. Exit code: non-zero if any rank failed."""
import contextlib
import io
import os
import sys

import pytest

rank = int(os.environ.get("OMPI_COMM_WORLD_RANK", os.environ.get("PMI_RANK", "0")))
args = ["-p", "no:cacheprovider", "-q", "--color=no", *sys.argv[1:]]
if rank == 0:
    sys.exit(pytest.main(args))
captured = io.StringIO()
with contextlib.redirect_stdout(captured):
    code = pytest.main(args)
if code != 0:
    sys.stderr.write(f"---- rank {rank}: pytest exit {code} ----\n{captured.getvalue()}")
sys.exit(code)
