#!/usr/bin/env python3
"""Jacobi3D's checkpoint and restart time against the data size per rank, the
measurement of the Kaapi/Charm++ comparison, with Tessera's own checkpoints.

  scripts/bench_jacobi3d_checkpoint.py [--tessera BUILD] [--ranks 4] [--n 64,128,192]
                                       [--levels node] [--chunks 2x2x2] [--json]

For each grid size N (an N^3 problem: the iterate and the right-hand side,
8 bytes each per cell, with ghost planes), two runs of `tessera -n R bench
jacobi3d-recover --every 5 --iterations 20` in a shm directory of their own:
the first commits checkpoints at steps 5, 10 and 15 and keeps them
(`--keep`; the third reuses the first's memory, as in a long run), the
second finds the one of step 15 and restores it (latest(): every file
checked, its checksums included; the chunks read back) before running steps
16 to 20. Each run's final iterate is checked against the plain sequential
loop (its checksum), so a restore that lost a bit fails the row.

Per size: the checkpoint's bytes on the largest rank, the stall of each
commit (the slowest rank's, from begin() to the end of commit(); the median
of the three), the
restore (latest() to the chunks in memory, slowest rank), and both as
bandwidths; beside them one Jacobi iteration's time. One table, and with
--json one line per size. Exit status 0 when every run finished and
matched the plain loop."""
import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
SOURCE = os.path.dirname(HERE)


def run(tessera, ranks, n, levels, chunks, shm, result, keep):
    argv = [tessera, "-n", str(ranks), "bench", "jacobi3d-recover", "--n", str(n), "--iterations", "20",
            "--every", "5", "--levels", levels, "--chunks", chunks, "--node-dir", shm, "--plain",
            "--result", result, "-q"] + (["--keep"] if keep else [])
    env = dict(os.environ, TESSERA_SHM_DIR=shm, OMPI_MCA_btl_vader_backing_directory=shm)
    p = subprocess.run(argv, capture_output=True, text=True, env=env)
    if p.returncode != 0 or not os.path.exists(result):
        sys.exit(f"bench_jacobi3d_checkpoint: {' '.join(argv)} failed ({p.returncode}):\n{p.stderr[-2000:]}")
    with open(result) as f:
        return json.load(f)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--tessera", default=os.path.join(SOURCE, "build"), help="a build directory (default ./build)")
    ap.add_argument("--ranks", type=int, default=4)
    ap.add_argument("--n", default="64,128,192", help="grid sizes, comma separated")
    ap.add_argument("--levels", default="node", help="checkpoint levels (node, buddy, disk: the job's --levels)")
    ap.add_argument("--chunks", default="2x2x2")
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()
    tessera = os.path.join(os.path.abspath(a.tessera), "tessera")
    if not os.access(tessera, os.X_OK):
        sys.exit(f"bench_jacobi3d_checkpoint: no tessera program in {a.tessera} (build first: make build)")
    rows, ok = [], True
    for n in (int(x) for x in a.n.split(",")):
        shm = tempfile.mkdtemp(prefix="tessera-jacobi-ckpt-", dir="/dev/shm")
        work = tempfile.mkdtemp(prefix="tessera-jacobi-ckpt-")
        try:
            first = run(tessera, a.ranks, n, a.levels, a.chunks, shm, os.path.join(work, "first.json"), True)
            second = run(tessera, a.ranks, n, a.levels, a.chunks, shm, os.path.join(work, "second.json"), False)
        finally:
            shutil.rmtree(shm, ignore_errors=True)
            shutil.rmtree(work, ignore_errors=True)
        good = (first["checksum"] == first["plain_checksum"] and second["checksum"] == second["plain_checksum"]
                and second["resumed_from"] == 15 and second["restore_seconds"] > 0
                and len(first["checkpoint_seconds"]) == 3)
        ok = ok and good
        stalls = sorted(first["checkpoint_seconds"])
        stall = stalls[len(stalls) // 2] if stalls else -1
        size = first["checkpoint_bytes_per_rank"]
        rows.append({"benchmark": "jacobi3d_checkpoint", "n": n, "ranks": a.ranks, "levels": a.levels,
                     "chunks": a.chunks, "bytes_per_rank": size, "checkpoint_seconds": stall,
                     "checkpoint_seconds_all": first["checkpoint_seconds"],
                     "checkpoint_bytes_per_second": size / stall if stall > 0 else None,
                     "restore_seconds": second["restore_seconds"],
                     "restore_bytes_per_second": size / second["restore_seconds"],
                     "iteration_seconds": first["seconds_per_iteration"], "bit_identical": good})
    print(f"Jacobi3D checkpoint and restart, {a.ranks} ranks, levels {a.levels}, chunks {a.chunks}")
    print(f"{'n':>5} {'MB/rank':>9} {'checkpoint s':>13} {'GB/s':>6} {'restore s':>10} {'GB/s':>6} "
          f"{'iteration s':>12}  result")
    for r in rows:
        cb = r["checkpoint_bytes_per_second"]
        print(f"{r['n']:>5} {r['bytes_per_rank'] / 1e6:>9.1f} {r['checkpoint_seconds']:>13.4f} "
              f"{(cb or 0) / 1e9:>6.2f} {r['restore_seconds']:>10.4f} {r['restore_bytes_per_second'] / 1e9:>6.2f} "
              f"{r['iteration_seconds']:>12.4f}  {'bit-identical' if r['bit_identical'] else 'WRONG'}")
    if a.json:
        for r in rows:
            print(json.dumps(r))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
