#!/usr/bin/env python3
"""scripts/peers.py: quoted references are labelled and carry their source
and machine; an absent peer tree is skipped with one line; bad options and
ISx output it cannot read are refused with a message. With TESSERA_PEER_ISX
set to a ParRes ISx checkout whose MPI version is built, ISx runs beside
`tessera bench isx` at 2 ranks: its line has every field of Tessera's result
lines, both are verified at the same sizes, and the ratio is of that run."""
import importlib.util
import json
import os
import subprocess
import sys
import tempfile

BUILD = sys.argv[1]
SOURCE = os.environ.get("TESSERA_SOURCE_DIR") or os.path.join(os.path.dirname(__file__), "..", "..")
TESSERA = os.path.join(BUILD, "tessera")
PEERS = os.path.join(SOURCE, "scripts", "peers.py")
CHECK = os.path.join(SOURCE, "tests", "bench", "check_targets.py")


def peers(*args, timeout=600):
    return subprocess.run([sys.executable, PEERS, *args], capture_output=True, text=True, timeout=timeout)


def refused(run, *needles):
    assert run.returncode == 2 and run.stdout == "", (run.returncode, run.stdout, run.stderr)
    assert run.stderr.startswith("peers: "), run.stderr
    for needle in needles:
        assert needle in run.stderr, (needle, run.stderr)


def load_module():
    spec = importlib.util.spec_from_file_location("peers", PEERS)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def check_quoted():
    run = peers("quoted")
    assert run.returncode == 0, run.stderr
    lines = [json.loads(line) for line in run.stdout.splitlines()]
    assert {q["bench"] for q in lines} == {"stencil3d", "argsort"}, lines
    for q in lines:
        assert q["quoted"] == "quoted, not measured here", q
        assert q["source"] and q["machine"] and isinstance(q["value"], (int, float)), q
        assert "rate" not in q and "verified" not in q and "summary" not in q, q  # never read as a result
    only = peers("quoted", "stencil3d")
    assert {json.loads(line)["peer"] for line in only.stdout.splitlines()} == {"Charm++ stencil3d"}, only.stdout
    refused(peers("quoted", "isx"), "no quoted reference for isx")
    # check_targets takes them as no result and sets no target on them.
    checker = subprocess.run([sys.executable, CHECK], input=run.stdout, capture_output=True, text=True)
    assert checker.returncode == 0, checker.stderr


def check_skips_and_refusals():
    with tempfile.TemporaryDirectory() as empty:
        for tree, why in ((os.path.join(empty, "ISx"), "no tree at"), (empty, "holds no built MPI/bin/isx.weak")):
            run = peers("isx", tree, "-n", "2", "--keys", "1000")
            assert run.returncode == 0 and run.stdout == "", (run.returncode, run.stdout)
            assert run.stderr.count("\n") == 1 and why in run.stderr and "skipped" in run.stderr, run.stderr
    refused(peers("isx", "/nonexistent", "-n", "2", "--total-keys", "1001"), "--total-keys 1001", "multiple of -n 2")
    refused(peers("isx", "/nonexistent", "-n", "0"), "-n and --reps")

    parse = load_module().parse_isx
    good = ("ISx MPI 2 sided v1.1\n  Number of Keys per PE: 1000\n  Max Key Value: 268435456\n"
            "  Bucket Width: 134217728\n  Number of Iterations: 1\n  Number of PEs: 2\n  WEAK Scaling!\n"
            "Average total time (per PE): 0.250000 seconds\nAverage all2all time (per PE): 0.010000 seconds\n")
    got = parse(good)
    assert (got["keys_per_pe"], got["max_key"], got["pes"], got["scaling"], got["seconds"], got["verified"]) == \
        (1000, 1 << 28, 2, "weak", 0.25, True), got
    failed = parse(good.replace("Average total", "Rank 1 Failed Verification!\nAverage total"))
    assert not failed["verified"] and "Failed Verification" in failed["check"], failed
    try:
        parse(good.replace("Average total time (per PE): 0.250000 seconds\n", ""))
        raise AssertionError("ISx output without its time was accepted")
    except Exception as e:  # the script's PeerError
        assert type(e).__name__ == "PeerError" and "Average total time (per PE)" in str(e), e


def check_isx_beside_tessera(tree):
    run = peers("isx", tree, "-n", "2", "--keys", "20000", "--reps", "1", "--tessera", TESSERA, timeout=900)
    assert run.returncode == 0, run.stderr
    records = [json.loads(line) for line in run.stdout.splitlines()]
    peer = [r for r in records if r.get("peer") and "summary" not in r]
    ours = [r for r in records if not r.get("peer") and "summary" not in r]
    ratio = [r for r in records if "parres_isx_ratio" in r]
    assert len(peer) == 1 and len(ours) == 3 and len(ratio) == 1, records
    missing = set(ours[0]) - set(peer[0])
    assert not missing, f"the peer's line lacks {missing}"
    assert all(r["verified"] for r in peer + ours), records
    for field in ("keys_per_rank", "total_keys", "max_key", "scaling"):
        assert peer[0]["config"][field] == ours[0]["config"][field], (field, peer[0]["config"], ours[0]["config"])
    assert peer[0]["ranks"] == ours[0]["ranks"] == 2
    best = max(r["rate"] for r in ours if r["variant"] != "alltoallv (ParRes ISx shape)")
    assert abs(ratio[0]["parres_isx_ratio"] - best / peer[0]["rate"]) < 1e-9 * best / peer[0]["rate"], ratio
    checker = subprocess.run([sys.executable, CHECK], input=run.stdout, capture_output=True, text=True)
    assert checker.returncode == 0, checker.stderr  # small sizes: no target, every row verified


def main():
    check_quoted()
    check_skips_and_refusals()
    tree = os.environ.get("TESSERA_PEER_ISX")
    if tree:
        check_isx_beside_tessera(tree)
        print("peers: ParRes ISx beside tessera bench isx: ok")
    else:
        print("peers: TESSERA_PEER_ISX not set (a built ParRes ISx checkout): ISx not run")
    print("peers: ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())
