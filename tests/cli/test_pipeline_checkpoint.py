#!/usr/bin/env python3
"""`tessera pipeline --checkpoint DIR`: a run killed after a stage (by the
supervisor's injected SIGKILL) resumes after its newest checkpoint without
reading the input again, on the same or another rank count (1-4 ranks), and
writes the same hitting times as an uninterrupted run: byte for byte at the
same rank count (the solve is deterministic there), to 1e-12 relative across
rank counts (its sums are split differently); a checkpoint of another input
is refused naming the difference; a damaged checkpoint falls back to the one
before; nothing is left in the private shm directory."""
import json
import os
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from harness import Harness, run  # noqa: E402

TESSERA = os.path.join(os.path.abspath(sys.argv[1]), "tessera")
h = Harness(TESSERA)
shm = tempfile.mkdtemp(prefix="tessera-test-pipeckpt-", dir="/dev/shm")
os.environ["TESSERA_SHM_DIR"] = shm
tmp = tempfile.mkdtemp(prefix="tessera-test-pipeckpt-")
graph = os.path.join(tmp, "k10.el")
ck = os.path.join(tmp, "ck")
# Tessera's CG: each iteration is a supervisor step, so a kill can land inside the solve.
SOLVE = ["--solver", "tessera", "--json"]


def pipeline(ranks, out, *extra, supervised=None, recover=True):
    """The pipeline at `ranks`, directly or under `tessera run` with the
    supervisor options `supervised`; returns (process, document or None)."""
    job = [TESSERA, "pipeline", graph, "-o", out, "--checkpoint", ck, *SOLVE, *extra]
    if supervised is None:
        argv = [TESSERA, "-n", str(ranks)] + job[1:]
    else:
        argv = [TESSERA, "-n", str(ranks), "run"] + (["--recover"] if recover else []) + supervised + job
    p = run(argv, timeout=120)
    doc = None
    for line in reversed(p.stdout.splitlines()):
        if line.startswith("{"):
            doc = json.loads(line)
            break
    return p, doc


def values(path):
    out = {}
    for line in open(path):
        if not line.startswith("#"):
            v, t = line.split()
            out[int(v)] = float(t)
    return out


def close(a, b):
    return a.keys() == b.keys() and all(abs(a[k] - b[k]) <= 1e-12 * max(1.0, abs(a[k])) for k in a)


def said(p):
    return f": {p.stderr.strip()[-300:]}"


try:
    h.tessera("gen", "kron", "--scale", "10", "-o", graph)
    # Uninterrupted references, without checkpoints.
    ref = {}
    for ranks in (1, 2, 3):
        out = os.path.join(tmp, f"ref{ranks}.txt")
        h.tessera("pipeline", graph, "-o", out, *SOLVE, ranks=ranks)
        ref[ranks] = out
    h.check(close(values(ref[1]), values(ref[3])) and close(values(ref[1]), values(ref[2])),
            "uninterrupted runs at 1, 2, 3 ranks agree to 1e-12")

    # Killed after the labels stage, recovered by the supervisor at 2 ranks.
    out = os.path.join(tmp, "a.txt")
    p, doc = pipeline(2, out, supervised=["--kill-rank", "1", "--kill-at-step", "2"])
    c = (doc or {}).get("checkpoint", {})
    h.check(p.returncode == 0 and "attempt 1: rank died" in p.stderr, "killed after step 2 and recovered" + said(p))
    h.check(c.get("resumed_from") == "labels" and c.get("written") == ["largest component"],
            f"resumed after the labels stage, wrote only the largest component ({c})")
    steps = set((doc or {}).get("step_seconds", {}))
    h.check("read" not in steps and "components" not in steps and "restore" in steps,
            f"the resumed attempt neither read the input nor labelled again ({sorted(steps)})")
    h.check(set(c.get("skipped_seconds", {})) >= {"read", "components"}, "it reports the read and label times skipped")
    h.check(os.path.exists(out) and open(out).read() == open(ref[2]).read(),
            "hitting times byte-identical to the uninterrupted 2-rank run")
    h.check(c.get("removed") is True and not os.path.exists(os.path.join(ck, "pipeline.ckpt")),
            "checkpoints removed after the successful run")

    # Killed during the solve (CG iteration 2 = step 5) at 2 ranks, rank 0.
    out = os.path.join(tmp, "b.txt")
    p, doc = pipeline(2, out, supervised=["--kill-rank", "0", "--kill-at-step", "5"])
    c = (doc or {}).get("checkpoint", {})
    h.check(p.returncode == 0 and "after step 5" in p.stderr, "killed in the solve (step 5) and recovered" + said(p))
    h.check(c.get("resumed_from") == "largest component" and c.get("written") == [],
            f"resumed after the largest component, nothing recomputed before the solve ({c})")
    h.check(os.path.exists(out) and open(out).read() == open(ref[2]).read(),
            "hitting times byte-identical to the uninterrupted 2-rank run")

    # Killed after the labels at 2 ranks, no recovery: the input renamed away,
    # resumed by hand at 3 ranks (it cannot have been read).
    p, _ = pipeline(2, os.path.join(tmp, "x.txt"), supervised=["--kill-rank", "1", "--kill-at-step", "2"],
                    recover=False)
    h.check(p.returncode != 0, "an unrecovered kill fails the job")
    os.rename(graph, graph + ".away")
    out = os.path.join(tmp, "c.txt")
    p, doc = pipeline(3, out)
    os.rename(graph + ".away", graph)
    c = (doc or {}).get("checkpoint", {})
    h.check(p.returncode == 0 and c.get("resumed_from") == "labels" and c.get("written_by_ranks") == 2,
            f"2-rank checkpoint resumed at 3 ranks with the input gone ({c})" + said(p))
    h.check("is gone" in p.stderr, "the resumed run says the input is gone")
    h.check(os.path.exists(out) and open(out).read() == open(ref[3]).read() and close(values(out), values(ref[2])),
            "byte-identical to the uninterrupted 3-rank run, within 1e-12 of the 2-rank run")

    # Killed after the largest component at 4 ranks, resumed at 1.
    pipeline(4, os.path.join(tmp, "x.txt"), supervised=["--kill-rank", "3", "--kill-at-step", "3"], recover=False)
    out = os.path.join(tmp, "d.txt")
    p, doc = pipeline(1, out)
    c = (doc or {}).get("checkpoint", {})
    h.check(p.returncode == 0 and c.get("resumed_from") == "largest component" and c.get("written_by_ranks") == 4,
            f"4-rank checkpoint resumed at 1 rank ({c})" + said(p))
    h.check(os.path.exists(out) and open(out).read() == open(ref[1]).read(), "byte-identical to the 1-rank run")

    # A checkpoint of another input is refused, naming the difference.
    pipeline(2, os.path.join(tmp, "x.txt"), supervised=["--kill-rank", "0", "--kill-at-step", "1"], recover=False)
    shutil.copy(graph, graph + ".orig")
    with open(graph, "a") as f:
        f.write("0 1\n")
    p, doc = pipeline(2, os.path.join(tmp, "e.txt"))
    h.check(p.returncode != 0 and "another job" in p.stderr and "input.size" in p.stderr and
            "tessera checkpoint rm pipeline" in p.stderr and doc is None,
            "a checkpoint of another input is refused, naming the size and how to start fresh" + said(p))
    os.replace(graph + ".orig", graph)
    os.utime(graph)  # the same bytes, another mtime: still another input
    p, _ = pipeline(2, os.path.join(tmp, "e.txt"))
    h.check(p.returncode != 0 and "input.mtime_ns" in p.stderr, "a touched input is refused too" + said(p))
    p = run([TESSERA, "checkpoint", "rm", "pipeline", "--dir", ck])
    h.check(p.returncode == 0 and "removed 1" in p.stdout, f"tessera checkpoint rm removes it ({p.stdout.strip()})")

    # A damaged newest checkpoint: the one before is used, with a message.
    p, doc = pipeline(2, os.path.join(tmp, "f.txt"), "--keep-checkpoint")
    kept = sorted(os.listdir(os.path.join(ck, "pipeline.ckpt")))
    h.check(p.returncode == 0 and len(kept) == 2, f"--keep-checkpoint keeps the two newest ({kept})")
    data = os.path.join(ck, "pipeline.ckpt", kept[-1], "r000001.data")
    with open(data, "r+b") as f:
        f.seek(os.path.getsize(data) - 10)
        b = f.read(1)
        f.seek(-1, 1)
        f.write(bytes([b[0] ^ 0x40]))
    out = os.path.join(tmp, "g.txt")
    p, doc = pipeline(2, out)
    c = (doc or {}).get("checkpoint", {})
    h.check(p.returncode == 0 and c.get("resumed_from") == "labels" and "checksum" in p.stderr and
            len(c.get("skipped_checkpoints", [])) == 1,
            f"the damaged stage-3 checkpoint skipped with a message, resumed after the labels ({c})" + said(p))
    h.check(os.path.exists(out) and open(out).read() == open(ref[2]).read(), "byte-identical to the 2-rank run")

    p = run([TESSERA, "-n", "2", "pipeline", "-", "--checkpoint", ck, "-q"], timeout=60)
    h.check(p.returncode != 0 and "standard input" in p.stderr, "--checkpoint with standard input is refused" + said(p))
    p = run([TESSERA, "-n", "2", "pipeline", graph + ".none", "--checkpoint", ck, "-q"], timeout=60)
    h.check(p.returncode != 0 and "does not exist" in p.stderr, "a missing input without a checkpoint" + said(p))

    p = run([TESSERA, "shm", "list", "--json", "--dir", shm])
    files = json.loads(p.stdout)["files"] if p.returncode == 0 else None
    h.check(files == [], f"no Tessera segment left in the shm directory ({files})")
    left = [f for f in os.listdir(shm) if not f.startswith("vader_segment")]
    h.check(left == [], f"nothing left in the shm directory ({left})")
finally:
    shutil.rmtree(tmp, ignore_errors=True)
    subprocess.run(["rm", "-rf", shm])
h.finish()
