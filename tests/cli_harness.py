"""What the Python CLI tests share: run `tessera`, record checks, exit with
the verdict."""
import subprocess
import sys


class Harness:
    def __init__(self, tessera, timeout=300, fatal=False):
        self.tessera_path = tessera
        self.timeout = timeout
        self.fatal = fatal  # a failed command ends the test (later checks would only repeat it)
        self.failures = []

    def check(self, ok, what):
        print(("ok   " if ok else "FAIL ") + what, flush=True)
        if not ok:
            self.failures.append(what)

    def tessera(self, *args, ranks=1, expect_ok=True):
        cmd = [self.tessera_path, *args, "-n", str(ranks), "--quiet"]
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=self.timeout)
        if expect_ok and p.returncode != 0:
            if self.fatal:
                raise SystemExit(f"{' '.join(cmd)} failed ({p.returncode}):\n{p.stderr}")
            self.check(False, f"{' '.join(cmd)} exited {p.returncode}: {p.stderr.strip()[-400:]}")
        return p

    def finish(self):
        print(f"{len(self.failures)} failed" if self.failures else "PASS")
        sys.exit(1 if self.failures else 0)
