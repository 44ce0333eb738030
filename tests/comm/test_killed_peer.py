"""A rank SIGKILLed in the middle of an aggregation through the same-node
rings, at 2, 3 and 4 ranks: the job must end within 30 s with an error that
names the dead rank, no rank may be left running, and nothing may be left in
/dev/shm (the rings are memfd memory, freed with the last mapping).

Usage: test_killed_peer.py BUILD_DIR SOURCE_DIR"""
import os
import subprocess
import sys
import tempfile
import time

BUILD, SOURCE = (os.path.abspath(a) for a in sys.argv[1:3])
PROGRAM = os.path.join(BUILD, "tests", "killed_peer")
MPIRUN = os.path.join(SOURCE, "scripts", "mpirun.sh")
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from harness import check, finish, run  # noqa: E402


def processes_left():
    p = subprocess.run(["pgrep", "-f", PROGRAM], capture_output=True, text=True)
    return [line for line in p.stdout.split() if line.strip()]


def main():
    before = set(os.listdir("/dev/shm"))
    for ranks, victim in [(2, 1), (3, 0), (4, 2)]:
        with tempfile.TemporaryDirectory() as tmp:
            ready = os.path.join(tmp, "ready")
            t0 = time.time()
            p = run([MPIRUN, "-n", str(ranks), PROGRAM, str(victim), ready])
            took = time.time() - t0
            text = p.stdout + p.stderr
            check(os.path.exists(ready), f"{ranks} ranks: rank {victim} reached the kill point")
            check(p.returncode != 0, f"{ranks} ranks: the job failed (exit {p.returncode})")
            check(took < 30, f"{ranks} ranks: the job ended {took:.1f} s after its start")
            named = f"rank {victim}" in text and ("signal 9" in text or "Killed" in text)
            check(named, f"{ranks} ranks: the error names rank {victim} and its signal"
                  + ("" if named else f": {text.strip()[-500:]}"))
            check("was not ended" not in text, f"{ranks} ranks: no survivor outlived the job")
        for _ in range(50):
            if not processes_left():
                break
            time.sleep(0.1)
        check(not processes_left(), f"{ranks} ranks: no rank left running")
    left = sorted(f for f in set(os.listdir("/dev/shm")) - before if "tessera" in f)
    check(not left, f"nothing of Tessera's left in /dev/shm ({left})")
    finish()


if __name__ == "__main__":
    main()
