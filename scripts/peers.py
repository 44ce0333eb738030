#!/usr/bin/env python3
"""Peers of `tessera bench`: measured beside Tessera in the same run, or quoted.

A peer's figure is either measured in the same run as Tessera's, or printed as
a quoted reference ("quoted, not measured here", with its source and machine);
never a ratio of a Tessera run to a figure typed in from elsewhere.

  scripts/peers.py isx DIR [-n 2] [--keys N | --total-keys N] [--reps 7] [--tessera build/tessera]

    Runs ParRes ISx's MPI version, already built in DIR (an ISx checkout, or
    its MPI/ folder, holding bin/isx.weak and bin/isx.strong), --reps times
    at the given sizes, and prints one JSON line with the field names of
    `tessera bench isx --json` (bench, variant, ranks, seconds, rate, unit,
    verified, config, ...; plus "peer"). ISx's key range is compiled in
    (params.h, 2^28): the line's config says which it ran. With --tessera,
    `tessera bench isx` then runs at the same ranks, keys and key range, its
    lines are passed through, and a summary line adds the ratio of the best
    Tessera variant to ISx in this run (parres_isx_ratio). Where DIR or its
    binaries are absent: one line on stderr, nothing on stdout, exit 0.
    This project neither bundles nor builds ISx; the README says how to.

  scripts/peers.py quoted [BENCH ...]

    Prints the figures of peers that are not run here (Charm++ stencil3d,
    Arkouda argsort and gather) as JSON lines labelled "quoted, not measured
    here", each with its source and machine, from quoted_references.json.

ISx's timed region per iteration ("Average total time (per PE)") takes in
generating its keys, bucketing, both all-to-alls and its per-key counting;
each rep is one ISx process of one timed iteration after its own burn-in, and
"seconds" is the best rep, as Tessera's is. Errors: exit 2 with a message."""
import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
QUOTED = os.path.join(HERE, "quoted_references.json")
QUOTED_LABEL = "quoted, not measured here"
ISX = "ParRes ISx"
ISX_TIMED = ("ISx's Average total time (per PE) of one iteration after its burn-in: key generation, "
             "bucketing, both all-to-alls and the per-key counting")


class PeerError(Exception):
    pass


def skip(message):
    print(f"peers: {message}; skipped", file=sys.stderr)
    return 0


def isx_binary(tree, scaling):
    """The built ISx binary under tree (checkout or its MPI/ folder), or None."""
    name = "isx.weak" if scaling == "weak" else "isx.strong"
    for folder in (os.path.join(tree, "MPI"), tree):
        path = os.path.join(folder, "bin", name)
        if os.path.isfile(path) and os.access(path, os.X_OK):
            return path
    return None


def parse_isx(stdout):
    """ISx's stdout: its keys per PE, max key, PEs, scaling, seconds per iteration and its own check."""
    fields = {
        "keys_per_pe": ("Number of Keys per PE", r"Number of Keys per PE:\s*(\d+)"),
        "max_key": ("Max Key Value", r"Max Key Value:\s*(\d+)"),
        "pes": ("Number of PEs", r"Number of PEs:\s*(\d+)"),
        "scaling": ("... Scaling!", r"^\s*(WEAK|STRONG|WEAK_ISOBUCKET) Scaling!"),
        "seconds": ("Average total time (per PE)", r"Average total time \(per PE\):\s*([0-9.eE+-]+) seconds"),
    }
    found = {}
    for name, (label, pattern) in fields.items():
        m = re.search(pattern, stdout, re.MULTILINE)
        if not m:
            tail = " | ".join(stdout.strip().splitlines()[-3:]) or "nothing"
            raise PeerError(f"ISx printed no '{label}' line (its output ends: {tail})")
        found[name] = m.group(1)
    failed = re.search(r"Failed Verification|Verification Failed", stdout)
    return {
        "keys_per_pe": int(found["keys_per_pe"]), "max_key": int(found["max_key"]), "pes": int(found["pes"]),
        "scaling": found["scaling"].lower(), "seconds": float(found["seconds"]),
        "verified": not failed,
        "check": "ISx's own check failed: " + failed.group(0) if failed else
                 "ISx's own check: keys within their bucket, bucket sizes and key count kept",
    }


def run_isx_once(binary, ranks, size, workdir):
    log = os.path.join(workdir, "isx.log")  # ISx appends its timers to a log file it is given
    command = ["bash", os.path.join(HERE, "mpirun.sh"), "-n", str(ranks), binary, str(size), "1", log]
    run = subprocess.run(command, capture_output=True, text=True, cwd=workdir)
    if run.returncode != 0 and "Verification" not in run.stdout:
        raise PeerError(f"{' '.join(command)} exited {run.returncode}: {(run.stderr or run.stdout).strip()[-400:]}")
    result = parse_isx(run.stdout)
    if run.returncode != 0:
        result["verified"] = False
    return result


def tree_commit(tree):
    run = subprocess.run(["git", "-C", tree, "rev-parse", "HEAD"], capture_output=True, text=True)
    return run.stdout.strip() if run.returncode == 0 else None


def isx_row(tree, binary, runs, reps):
    first = runs[0]
    samples = [r["seconds"] for r in runs]
    best = min(samples)
    work = first["keys_per_pe"] * first["pes"]
    bad = [r for r in runs if not r["verified"]]
    return {
        "bench": "isx", "group": "", "variant": "ParRes ISx MPI (peer)", "storage": "-", "ranks": first["pes"],
        "seconds": best, "median_seconds": statistics.median(samples), "reps": reps, "work": work,
        "rate": work / best / 1e6, "unit": "M keys/s", "verified": not bad,
        "check": (bad[0] if bad else first)["check"], "ratios": {},
        "config": {"scaling": first["scaling"], "keys_per_rank": first["keys_per_pe"], "total_keys": work,
                   "max_key": first["max_key"], "reps": reps},
        "extra": {"peer": ISX, "tree": os.path.abspath(tree), "commit": tree_commit(tree), "binary": binary,
                  "samples": samples, "timed": ISX_TIMED},
        "peer": ISX,
    }


def tessera_isx(tessera, row, reps):
    config = row["config"]
    size = ["--keys", str(config["keys_per_rank"])] if config["scaling"] == "weak" else \
        ["--total-keys", str(config["total_keys"])]
    command = [tessera, "-n", str(row["ranks"]), "bench", "isx", *size, "--max-key", str(config["max_key"]),
               "--reps", str(reps), "--json", "-q"]
    run = subprocess.run(command, capture_output=True, text=True)
    if run.returncode != 0:
        raise PeerError(f"{' '.join(command)} exited {run.returncode}: {run.stderr.strip()[-400:]}")
    lines = [line for line in run.stdout.splitlines() if line.startswith("{")]
    summaries = [r for r in map(json.loads, lines) if "summary" in r]
    if not summaries or "best_rate" not in summaries[0]:
        raise PeerError(f"{' '.join(command)} printed no summary line with best_rate")
    return lines, summaries[0]


def cmd_isx(args):
    if args.ranks < 1 or args.reps < 1:
        raise PeerError("-n and --reps must be at least 1")
    scaling = "strong" if args.total_keys else "weak"
    if scaling == "strong" and args.total_keys % args.ranks:
        raise PeerError(f"--total-keys {args.total_keys} must be a multiple of -n {args.ranks}: ParRes ISx gives "
                        "every rank ceil(total / ranks) keys")
    if not os.path.isdir(args.tree):
        return skip(f"{ISX}: no tree at {args.tree}")
    binary = isx_binary(args.tree, scaling)
    if binary is None:
        return skip(f"{ISX}: {args.tree} holds no built MPI/bin/isx.{scaling} (build ISx's MPI version there first)")
    if args.tessera and not os.access(args.tessera, os.X_OK):
        raise PeerError(f"--tessera {args.tessera} is not an executable")
    size = args.keys if scaling == "weak" else args.total_keys
    with tempfile.TemporaryDirectory(prefix="tessera-peer-isx-") as workdir:
        runs = [run_isx_once(binary, args.ranks, size, workdir) for _ in range(args.reps)]
    row = isx_row(args.tree, binary, runs, args.reps)
    if row["ranks"] != args.ranks:
        raise PeerError(f"ISx ran on {row['ranks']} PEs, not the {args.ranks} asked for")
    print(json.dumps(row), flush=True)
    if not args.tessera:
        return 0
    lines, summary = tessera_isx(args.tessera, row, args.reps)
    for line in lines:
        print(line)
    ratio = summary["best_rate"] / row["rate"]
    config = row["config"]
    print(json.dumps({
        "bench": "isx", "ranks": row["ranks"], "peer": ISX,
        "summary": f"best Tessera variant {summary['best_rate']:.4g} M keys/s = {ratio:.3g}x {ISX} MPI's "
                   f"{row['rate']:.4g} M keys/s, both measured in this run ({config['scaling']} scaling, "
                   f"{config['keys_per_rank']} keys per rank in [0, {config['max_key']}))",
        "tessera_best_rate": summary["best_rate"], "peer_rate": row["rate"], "parres_isx_ratio": ratio,
        "scaling": config["scaling"], "keys_per_rank": config["keys_per_rank"], "max_key": config["max_key"],
    }), flush=True)
    return 0


def load_quoted(path=QUOTED):
    with open(path, encoding="utf-8") as f:
        entries = json.load(f)
    needed = ("bench", "peer", "figure", "value", "unit", "ranks", "config", "source", "machine")
    for number, entry in enumerate(entries, 1):
        missing = [k for k in needed if k not in entry]
        if missing:
            raise PeerError(f"{path}: entry {number} lacks {', '.join(missing)}")
    return entries


def cmd_quoted(args):
    entries = load_quoted()
    known = sorted({e["bench"] for e in entries})
    unknown = [b for b in args.bench if b not in known]
    if unknown:
        raise PeerError(f"no quoted reference for {', '.join(unknown)} (there are some for {', '.join(known)})")
    for entry in entries:
        if not args.bench or entry["bench"] in args.bench:
            print(json.dumps({"quoted": QUOTED_LABEL, **entry}))
    return 0


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    isx = sub.add_parser("isx", help="run a built ParRes ISx tree beside tessera bench isx")
    isx.add_argument("tree", metavar="DIR", help="ParRes ISx checkout (or its MPI/ folder) with its binaries built")
    isx.add_argument("-n", "--ranks", type=int, default=2, help="ranks (ISx's PEs), as tessera -n")
    isx.add_argument("--keys", type=int, default=1 << 24, help="keys per rank, weak scaling (tessera's default)")
    isx.add_argument("--total-keys", type=int, default=0, help="keys in all, strong scaling")
    isx.add_argument("--reps", type=int, default=7, help="ISx runs; the best is reported (tessera's default)")
    isx.add_argument("--tessera", help="the tessera binary: run bench isx at the same sizes and print the ratio")
    quoted = sub.add_parser("quoted", help="print the quoted references (not measured here)")
    quoted.add_argument("bench", nargs="*", help="only these benchmarks (stencil3d, argsort)")
    args = parser.parse_args(argv)
    try:
        return cmd_isx(args) if args.command == "isx" else cmd_quoted(args)
    except PeerError as e:
        print(f"peers: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
