"""What the Python CLI tests share: run `tessera`, record checks, exit with
the verdict."""
import concurrent.futures
import os
import subprocess
import threading
import time

import verdict

# Cases run by Harness.each at once. A tessera run is mostly mpirun starting
# and stopping ranks that then wait on each other: a few at once keep the
# machine busy without oversubscribing it much more than one 4-rank job does.
JOBS = int(os.environ.get("TESSERA_TEST_JOBS", "3"))
# TESSERA_TEST_TIMES=FILE appends "seconds command" for every run: where a
# slow test spends its time.
TIMES = os.environ.get("TESSERA_TEST_TIMES")


class Harness:
    def __init__(self, tessera, timeout=300, fatal=False):
        self.tessera_path = tessera
        self.timeout = timeout
        self.fatal = fatal  # a failed command ends the test (later checks would only repeat it)
        self._case = threading.local()  # the checks of the case this thread runs (Harness.each)

    @property
    def failures(self):
        return verdict.failures

    def check(self, ok, what):
        pending = getattr(self._case, "checks", None)
        if pending is not None:
            pending.append((ok, what))
            return
        verdict.check(ok, what)

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
        def run(case):
            self._case.checks = []
            stop = None
            try:
                body(case)
            except SystemExit as e:  # a fatal command failure: report it, then stop
                self._case.checks.append((False, str(e.code)))
                stop = e
            except Exception as e:  # e.g. a timeout: this case fails, the others still report
                self._case.checks.append((False, f"{case}: {type(e).__name__}: {e}"))
            checks, self._case.checks = self._case.checks, None
            return checks, stop

        with concurrent.futures.ThreadPoolExecutor(max_workers=JOBS) as pool:
            results = list(pool.map(run, cases))
        for checks, stop in results:
            for ok, what in checks:
                self.check(ok, what)
            if stop is not None:
                raise stop

    def finish(self):
        verdict.finish()
