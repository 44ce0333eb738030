"""The one harness of the Python test scripts (the pytest suite in
tests/python has pytest's own).

  check(ok, what, detail="")   one check, printed as "ok   what" or "FAIL what"
                               (detail, e.g. said(p), printed on failure only)
  finish(skipped=())           the verdict: exit 1 when a check failed, 77
                               (ctest: skipped) when parts could not run, else 0
  run(argv, timeout=120)       a command, its output captured as text
  said(p)                      a finished command's output, for check's detail
  numbers(path), same_numbers  a "vertex value" file, compared to a tolerance
  Harness                      `tessera` runs: checked exit, timings, cases at once

A script that recorded a failed check can never exit 0: if it ends without
finish() (or with sys.exit(0) or 77), the exit hook below makes it exit 1.
"""
import atexit
import concurrent.futures
import os
import subprocess
import sys
import threading
import time

failures = []


def check(ok, what, detail=""):
    print(("ok   " if ok else "FAIL ") + what, flush=True)
    if not ok:
        if detail:
            print(detail, flush=True)
        failures.append(what)
    return ok


def run(argv, timeout=120, **kw):
    return subprocess.run(argv, capture_output=True, text=True, timeout=timeout, **kw)


def said(p, limit=3000):
    """The tail of a finished command's stdout and stderr."""
    return f"--- stdout\n{(p.stdout or '')[-limit:]}\n--- stderr\n{(p.stderr or '')[-limit:]}"


def finish(skipped=()):
    """skipped: the parts this machine could not run (ctest reports the test
    skipped, SKIP_RETURN_CODE 77, only when everything else passed)."""
    if failures:
        print(f"{len(failures)} failed", flush=True)
        sys.exit(1)
    if skipped:
        print(f"SKIPPED (the other parts passed): {', '.join(skipped)}", flush=True)
        sys.exit(77)
    print("PASS", flush=True)
    sys.exit(0)


@atexit.register
def _failed_checks_fail_the_script():
    # Registered at import, before the scripts' own clean-ups, so it runs
    # after them (atexit is last in, first out) and may end the process.
    if failures:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(1)


def numbers(path):
    """{vertex: value} of the two-column lines of a file (times, scores):
    a float, or the word written instead of one ("unreachable"); comments
    (# or %) and other lines skipped."""
    out = {}
    with open(path) as f:
        for line in f:
            parts = line.split()
            if len(parts) == 2 and not line.startswith(("#", "%")):
                try:
                    out[parts[0]] = float(parts[1])
                except ValueError:
                    out[parts[0]] = parts[1]
    return out


def same_numbers(a, b, rel=1e-6):
    """The same vertices, every value the same word or within rel of the
    other's (relative to the larger of 1 and the values); NaN (an
    unreachable vertex) equals NaN."""
    def close(x, y):
        if x == y:
            return True
        if isinstance(x, str) or isinstance(y, str):
            return False
        if x != x or y != y:
            return x != x and y != y
        return abs(x - y) <= rel * max(1.0, abs(x), abs(y))
    return a.keys() == b.keys() and all(close(a[k], b[k]) for k in a)


# Cases run by Harness.each at once. A tessera run is mostly mpirun starting
# and stopping ranks that then wait on each other: a few at once keep the
# machine busy without oversubscribing it much more than one 4-rank job does.
JOBS = int(os.environ.get("TESSERA_TEST_JOBS", "3"))
# TESSERA_TEST_TIMES=FILE appends "seconds command" for every run: where a
# slow test spends its time.
TIMES = os.environ.get("TESSERA_TEST_TIMES")


class Harness:
    """Runs `tessera` with -n RANKS --quiet; a run that should succeed and
    did not is a failed check (or, with fatal=True, ends the script)."""

    def __init__(self, tessera, timeout=300, fatal=False):
        self.tessera_path = tessera
        self.timeout = timeout
        self.fatal = fatal  # a failed command ends the test (later checks would only repeat it)
        self._case = threading.local()  # the checks of the case this thread runs (Harness.each)

    @property
    def failures(self):
        return failures

    def check(self, ok, what, detail=""):
        pending = getattr(self._case, "checks", None)
        if pending is not None:
            pending.append((ok, what, detail))
            return ok
        return check(ok, what, detail)

    def tessera(self, *args, ranks=1, expect_ok=True):
        cmd = [self.tessera_path, *args, "-n", str(ranks), "--quiet"]
        start = time.monotonic()
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=self.timeout)
        if TIMES:
            with open(TIMES, "a") as f:
                f.write(f"{time.monotonic() - start:.2f} {' '.join(cmd)}\n")
        if expect_ok and p.returncode != 0:
            if self.fatal:
                raise SystemExit(f"{' '.join(cmd)} failed ({p.returncode}):\n{p.stderr}")
            self.check(False, f"{' '.join(cmd)} exited {p.returncode}: {p.stderr.strip()[-400:]}")
        return p

    def each(self, cases, body):
        """body(case) for every case, JOBS cases at a time (each case's runs
        are independent of the others'); the checks are reported afterwards
        case by case, in the order of `cases`, as a plain loop would."""
        def run_case(case):
            self._case.checks = []
            stop = None
            try:
                body(case)
            except SystemExit as e:  # a fatal command failure: report it, then stop
                self._case.checks.append((False, str(e.code), ""))
                stop = e
            except Exception as e:  # e.g. a timeout: this case fails, the others still report
                self._case.checks.append((False, f"{case}: {type(e).__name__}: {e}", ""))
            checks, self._case.checks = self._case.checks, None
            return checks, stop

        with concurrent.futures.ThreadPoolExecutor(max_workers=JOBS) as pool:
            results = list(pool.map(run_case, cases))
        for checks, stop in results:
            for ok, what, detail in checks:
                self.check(ok, what, detail)
            if stop is not None:
                raise stop

    def finish(self, skipped=()):
        finish(skipped)
