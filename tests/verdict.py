"""What the Python test scripts share: each check printed as it passes or
fails, a command run with its output captured, and the exit with the verdict
(0 when every check passed)."""
import subprocess
import sys

failures = []


def check(ok, what):
    print(("ok   " if ok else "FAIL ") + what, flush=True)
    if not ok:
        failures.append(what)
    return ok


def run(argv, timeout=120, **kw):
    return subprocess.run(argv, capture_output=True, text=True, timeout=timeout, **kw)


def finish():
    print(f"{len(failures)} failed" if failures else "PASS", flush=True)
    sys.exit(1 if failures else 0)
