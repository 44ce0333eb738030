#!/usr/bin/env python3
"""Tessera's indexgather and histogram beside Bale's (bale_classic `ig` and
`histo`), measured in the same run, at the same sizes and PE count.

  scripts/bench_vs_bale.py --bale DIR [--build-dir DIR] [--ranks 2] [--rounds 3]
                           [--tessera BUILD] [--requests N] [--table N] [--updates N]
                           [--counts N] [--bench indexgather,histogram] [--json]

--bale is a Bale source tree (a clone of https://github.com/jdevinney/bale,
or its src/bale_classic folder). Bale is built once with Open MPI's OpenSHMEM
compiler (oshcc; autoconf, automake and pkg-config) into --build-dir (default
~/.cache/tessera/bale-<commit>, outside any checkout; the sources are copied
there, the tree given is never written) and reused by later runs.

Each round runs, per benchmark, `tessera bench indexgather|histogram --json
--reps 1` (TESSERA_AGG_SAME_NODE=0), then Bale's app once per variant (AGP,
Exstack, Exstack2, Conveyor: -M 1, 2, 4, 8, one process each so its own check
belongs to that variant), at the same sizes: reads or updates per rank, table
entries per rank, and the same per-destination buffer memory: Bale's -b
(--bale-buf, packets of 8 bytes per destination buffer of Exstack and
Exstack2) defaults to the packets one Tessera buffer holds (64 KiB / 8 = 8192;
Bale's own default, 1024, gives it 8 KiB buffers and many more exchange
rounds). Both sides run with the same Open MPI settings (mpi_env): idle
ranks yield the core only when the ranks outnumber the cores, as Open MPI
itself decides for an oversubscribed node (OMPI_MCA_mpi_yield_when_idle in
the environment overrides it, for both). Rates are M reads/s or M updates/s for the whole job (the
requests of all ranks over the time). Bale's time is its own timer (the
average over PEs, set-up excluded); Tessera's is the slowest rank, building
its aggregator included. Bale checks its own results (ig: every value read;
histo: the counts return to zero once every update is subtracted); a Bale row
is verified only when that check ran to its end and reported no error.

The table: per variant the median over the rounds; every row's ratio to
Bale's best variant (by median) and its fraction of the per-core ceiling
(Tessera's "local loop (no communication)" row of the same run). The
headline Tessera row ("messages only") is the aggregated row on Heap storage
with the same-node path off; Tessera's other rows (shared memory, the
same-node path, co-locale segments, multi-hop, alltoallv) are separate
variants, never the headline. Then one JSON line per row and one summary
line per benchmark (bale_ratio: headline over Bale's best). --json prints
only the JSON lines.

What Bale's rate depends on here (measured interleaved, A B A B, ratios
only, on the shared 2-vCPU machine with load averages of 9 to 19 from other
builds; Bale's ig and histo, 2 PEs, 1,048,576 per PE, 4 rounds each):
- Barrier-bound variants are hypersensitive to a loaded machine. Exstack
  (ig and histo) runs two barriers per exchange round and one round moves
  at most -b packets per destination: a PE descheduled at a barrier stalls
  both. Loaded, its rate fell 100-400x below the quiet figures; the issue's
  quiet Bale figures and a run beside others' builds differ by that effect,
  which is outside this script's control: compare on a quiet machine.
- mpi_yield_when_idle=1 (which this script once set for Bale): each idle
  poll in shmem_barrier_all calls sched_yield. Loaded, Exstack ig ran 4.7-9.5x
  and Exstack histo 11-12x faster without it; Exstack2 histo and AGP ig did
  not change (0.8-1.15x, noise). Tessera waits with its own backoff.
- -b: loaded, Exstack ig at -b 4096 / 16384 ran 3.0x / 9.9x its rate at the
  default 1024, Exstack histo 3.4x / 18x, Exstack2 histo 1.35x / 2.25x; -b 256
  was slower (0.2-0.3x). Conveyor and AGP take no -b.
- Compile flags: -O3 -march=native against autoconf's -g -O2: 0.75-1.14x,
  within the noise (the kernels wait on communication, not on code).
- Transport: Open MPI 4.1's OpenSHMEM has one SPML here, ucx; UCX 1.13 maps
  the peer's symmetric heap (sysv/posix shared memory, UCX_LOG_LEVEL=info:
  "rma(sysv/memory posix/memory)"), so puts are plain stores already;
  UCX_TLS=cma,self (a system call per put) did not run.
- Binding: oshrun's default (to cores at 2 PEs), as mpirun's for Tessera;
  --bind-to none was 0.28x (Exstack2 histo) to 4x (Exstack ig) under load.
- The rate: Bale times its kernel on every PE (set-up excluded) and reports
  the average over PEs; rate = requests of all PEs / that time, the same
  unit as Tessera's (which takes its slowest rank, so Bale is not
  handicapped by the rate's definition).

Exit status: 0 when every row verified, 1 when one did not, 2 on a usage
error (no --bale tree: how to get one) or when a build or a run fails."""
import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import peer_tree  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
BALE_URL = "https://github.com/jdevinney/bale"
BALE_COMMIT = "1b8f673"  # the commit the comparison was first made against
PACKAGES = ("libgetput", "exstack", "convey", "spmat", "std_options", "apps")
# Bale's variants: its -M mask bit and the key its JSON output times them under.
VARIANTS = (("AGP", 1), ("Exstack", 2), ("Exstack2", 4), ("Conveyor", 8))
HEADLINE = ("aggregated", "heap")
LOCAL_LOOP = "local loop (no communication)"
# Bale's -b: Tessera's default per-destination buffer (64 KiB) in Bale's 8-byte packets, the same memory.
BALE_BUF = 65536 // 8
HOW_TO = f"""bench_vs_bale.py needs a Bale source tree: --bale DIR.
Get one with
  git clone {BALE_URL} ~/src/bale && git -C ~/src/bale checkout {BALE_COMMIT}
then run
  scripts/bench_vs_bale.py --bale ~/src/bale --tessera build
Bale is built with Open MPI's OpenSHMEM (oshcc, from openmpi-bin) and
autotools (autoconf, automake, pkg-config; scripts/setup.sh installs them)."""


class BaleError(Exception):
    """A usage, build or run failure: the message says what to do."""


# What each benchmark is called on both sides, its size options, and Bale's check.
BENCHES = {
    "indexgather": {
        "app": "ig", "unit": "M reads/s", "total_key": "num_requests_total", "per_pe_key": "num_requests_per_pe",
        "check": "Bale's own check: every value read equals the table entry it was read from",
    },
    "histogram": {
        "app": "histo", "unit": "M upd/s", "total_key": "num_updates_total", "per_pe_key": "num_updates_per_pe",
        "check": "Bale's own check: every count returns to zero once every update is subtracted",
    },
}
# The lines Bale prints when its check fails (ig: "ERROR: ..." per rank then
# "YOU FAILED!!!!"; histo: "ERROR: ..." then "FAILED!!!! total errors = N").
FAILURE = re.compile(r"^(ERROR:.*|.*FAILED!!!!.*)$", re.MULTILINE)


# --- Bale: locate, build, run, parse ----------------------------------------

def bale_classic(tree):
    """The bale_classic folder of a Bale tree (the repository or that folder)."""
    for folder in (os.path.join(tree, "src", "bale_classic"), tree):
        if all(os.path.isfile(os.path.join(folder, p, "configure.ac")) for p in PACKAGES):
            return folder
    raise BaleError(f"{tree} is not a Bale source tree: no src/bale_classic/{{{','.join(PACKAGES)}}}/configure.ac "
                    f"(clone {BALE_URL})")


def tree_id(tree, classic):
    """The tree's git commit (short), or a digest of bale_classic's files when it is no git checkout."""
    return peer_tree.tree_id(tree, classic)


def default_build_dir(ident):
    cache = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(cache, "tessera", f"bale-{ident}")


def require_tools():
    needed = {"oshcc": "openmpi-bin", "oshrun": "openmpi-bin", "autoreconf": "autoconf", "automake": "automake",
              "pkg-config": "pkg-config", "make": "make"}
    missing = sorted({pkg for tool, pkg in needed.items() if shutil.which(tool) is None})
    if missing:
        raise BaleError(f"building Bale needs {', '.join(sorted(t for t, p in needed.items() if p in missing))}: "
                        f"apt-get install {' '.join(missing)} (or scripts/setup.sh)")


def mpi_env(ranks):
    """The Open MPI settings both sides run with. Idle ranks yield the core
    only when ranks outnumber cores (Open MPI's own rule for an oversubscribed
    node); yielding at every idle poll makes Bale's barrier-bound variants
    several times slower on a busy machine, and Tessera's own waits back off
    without it. A value in the environment wins, for both sides."""
    value = os.environ.get("OMPI_MCA_mpi_yield_when_idle") or ("1" if ranks > (os.cpu_count() or 1) else "0")
    return {"OMPI_MCA_mpi_yield_when_idle": value}


def bale_env(ranks=2):
    """Open MPI's environment for Bale's runs: mpi_env, root allowed as scripts/mpirun.sh does."""
    env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1", **mpi_env(ranks))
    # Open MPI 4.1's osc/rdma crashes in MPI_Finalize under oshrun (SIGSEGV in
    # ompi_osc_base_finalize, after the app's output): OpenSHMEM does not use
    # MPI one-sided, so that component is left out.
    env.setdefault("OMPI_MCA_osc", "^rdma")
    return env


def build_bale(classic, build_dir, log=sys.stderr):
    """Bale's apps under build_dir/install/bin, built once; returns that folder."""
    bin_dir = os.path.join(build_dir, "install", "bin")
    if all(os.access(os.path.join(bin_dir, app), os.X_OK) for app in ("ig", "histo")):
        return bin_dir
    require_tools()
    src = os.path.join(build_dir, "src")
    if os.path.isdir(src):
        shutil.rmtree(src)  # a build that stopped half-way starts over
    os.makedirs(build_dir, exist_ok=True)
    shutil.copytree(classic, src, ignore=shutil.ignore_patterns("build_*", "autom4te.cache"))
    log_path = os.path.join(build_dir, "build.log")
    install = os.path.join(build_dir, "install")
    env = dict(os.environ, CC="oshcc", PKG_CONFIG_PATH=os.path.join(install, "lib", "pkgconfig"))
    print(f"bench_vs_bale: building Bale from {classic} in {build_dir} (once; log: {log_path})", file=log, flush=True)
    with open(log_path, "w") as out:
        def step(command, cwd, what):
            out.write(f"\n$ (cd {cwd} && {' '.join(command)})\n")
            out.flush()
            if subprocess.run(command, cwd=cwd, env=env, stdout=out, stderr=subprocess.STDOUT).returncode != 0:
                out.flush()
                with open(log_path) as f:
                    tail = "".join(f.readlines()[-15:])
                raise BaleError(f"building Bale failed at {what} (full log: {log_path}):\n{tail}")
        for pkg in PACKAGES:
            step(["autoreconf", "-fi"], os.path.join(src, pkg), f"autoreconf in {pkg}")
        for pkg in PACKAGES:
            obj = os.path.join(build_dir, "obj", pkg)
            os.makedirs(obj, exist_ok=True)
            step([os.path.join(src, pkg, "configure"), f"--prefix={install}", "--with-shmem"], obj, f"configure {pkg}")
            step(["make", f"-j{os.cpu_count() or 1}"], obj, f"make {pkg}")
            step(["make", "install"], obj, f"make install {pkg}")
    return bin_dir


def parse_bale(bench, json_text, stderr, returncode):
    """One run of Bale's app: {pes, per_pe, total, table_per_pe, seconds: {variant: s}, verified, check}.
    json_text is what the app wrote with -j FILE, stderr its stderr."""
    spec = BENCHES[bench]
    text = json_text.strip()
    finished = text.endswith("}")  # Bale closes its JSON file after its check (bale_app_finish)
    if not finished:
        text = text.rstrip(",") + "}"
    try:
        fields = json.loads(text)
    except json.JSONDecodeError as e:
        tail = " | ".join(stderr.strip().splitlines()[-3:]) or "nothing on stderr"
        raise BaleError(f"Bale's {spec['app']} wrote no readable JSON ({e}); its stderr ends: {tail}") from None
    for key in ("pes", spec["total_key"], spec["per_pe_key"], "table_size_per_pe"):
        if key not in fields:
            raise BaleError(f"Bale's {spec['app']} JSON has no \"{key}\" (keys: {', '.join(fields)})")
    seconds = {name: float(fields[name]) for name, _ in VARIANTS if name in fields}
    if not seconds:
        raise BaleError(f"Bale's {spec['app']} printed no time for any of {', '.join(n for n, _ in VARIANTS)}")
    bad = [s for s in seconds.values() if not s > 0]
    failures = FAILURE.findall(stderr)
    if failures:
        verified, check = False, f"Bale's own check failed: {failures[0].strip()}"
    elif not finished:
        verified, check = False, "Bale stopped before the end of its own check (its JSON file was not closed)"
    elif returncode != 0:
        verified, check = False, f"Bale's {spec['app']} exited {returncode} (its exit status counts the errors its check found)"
    elif bad:
        verified, check = False, f"Bale reported a time of {bad[0]} s"
    else:
        verified, check = True, spec["check"]
    return {"pes": int(fields["pes"]), "per_pe": int(fields[spec["per_pe_key"]]), "total": int(fields[spec["total_key"]]),
            "table_per_pe": int(fields["table_size_per_pe"]), "seconds": seconds, "verified": verified, "check": check}


def run_bale(bin_dir, bench, ranks, per_rank, table_per_rank, variant, workdir, buf=None, wrap=()):
    """One process of Bale's app running one variant (Exstack and Exstack2
    with `buf` packets per buffer, -b; None: Bale's default); the parsed run."""
    spec = BENCHES[bench]
    mask = dict(VARIANTS)[variant]
    out = os.path.join(workdir, f"{spec['app']}-{variant}.json")
    if os.path.exists(out):
        os.remove(out)  # Bale appends to its JSON file
    command = ["oshrun", "--oversubscribe", "-n", str(ranks), os.path.join(bin_dir, spec["app"]), "-n", str(per_rank),
               "-T", str(table_per_rank), "-M", str(mask), "-j", out, *(["-b", str(buf)] if buf else [])]
    run = subprocess.run([*wrap, *command], capture_output=True, text=True, cwd=workdir, env=bale_env(ranks), timeout=1800)
    if not os.path.exists(out):
        tail = (run.stderr or run.stdout).strip()[-600:] or "no output"
        raise BaleError(f"{' '.join(command)} exited {run.returncode} and wrote no JSON: {tail}")
    with open(out) as f:
        parsed = parse_bale(bench, f.read(), run.stderr, run.returncode)
    if variant not in parsed["seconds"]:
        raise BaleError(f"{' '.join(command)} printed no {variant} time")
    if (parsed["pes"], parsed["per_pe"], parsed["table_per_pe"]) != (ranks, per_rank, table_per_rank):
        raise BaleError(f"Bale ran {parsed['pes']} PEs x {parsed['per_pe']} per PE, table {parsed['table_per_pe']} per PE; "
                        f"asked for {ranks} x {per_rank}, table {table_per_rank}")
    return parsed


# --- Tessera -----------------------------------------------------------------

def tessera_binary(build):
    path = os.path.join(build, "tessera")
    if not (os.path.isfile(path) and os.access(path, os.X_OK)):
        raise BaleError(f"--tessera {build}: no tessera executable there (build it with `make build`, "
                        "or give the build directory)")
    return path


def run_tessera(binary, bench, ranks, per_rank, table_per_rank, wrap=()):
    """`tessera bench BENCH --json --reps 1`, same-node path off: its result rows
    (`wrap`: the command's prefix, e.g. cluster.py exec into an emulated node)."""
    sizes = ["--table", str(table_per_rank), "--requests", str(per_rank)] if bench == "indexgather" else \
        ["--counts", str(table_per_rank), "--updates", str(per_rank)]
    command = [binary, "bench", bench, "-n", str(ranks), *sizes, "--reps", "1", "--json", "-q"]
    run = subprocess.run([*wrap, *command], capture_output=True, text=True, timeout=1800,
                         env=dict(os.environ, TESSERA_AGG_SAME_NODE="0", **mpi_env(ranks)))
    if run.returncode not in (0, 1) or not run.stdout.strip():  # 1: a row did not verify, still reported
        raise BaleError(f"{' '.join(command)} exited {run.returncode}: {run.stderr.strip()[-600:]}")
    rows = [json.loads(line) for line in run.stdout.splitlines() if line.startswith("{")]
    return [r for r in rows if "summary" not in r and not r.get("skipped")]


# --- Rounds, rows, table -------------------------------------------------------

def collect(args, binary, bin_dir, workdir, log):
    """samples[bench][(side, variant, storage)] = list of per-round dicts {rate, verified, check, unit}."""
    samples = {b: {} for b in args.bench}
    for round_no in range(1, args.rounds + 1):
        for bench in args.bench:
            per_rank, table = (args.requests, args.table) if bench == "indexgather" else (args.updates, args.counts)
            print(f"bench_vs_bale: round {round_no}/{args.rounds}: {bench}: Tessera, then Bale's "
                  f"{', '.join(args.bale_variants)}", file=log, flush=True)
            for r in run_tessera(binary, bench, args.ranks, per_rank, table, args.wrap):
                if r["variant"].startswith("fine-grained"):
                    continue  # runs a prefix of the requests only: not the same size
                key = ("tessera", r["variant"], r["storage"], r["group"])
                samples[bench].setdefault(key, []).append(
                    {"rate": r["rate"], "seconds": r["seconds"], "unit": r["unit"], "verified": r["verified"],
                     "check": r["check"]})
            for variant in args.bale_variants:
                run = run_bale(bin_dir, bench, args.ranks, per_rank, table, variant, workdir, args.bale_buf, args.wrap)
                seconds = run["seconds"][variant]
                samples[bench].setdefault(("bale", variant, "-", ""), []).append(
                    {"rate": run["total"] / seconds / 1e6, "seconds": seconds, "unit": BENCHES[bench]["unit"],
                     "verified": run["verified"], "check": run["check"]})
    return samples


def collect_across_nodes(args, binary, bin_dir, workdir):
    """collect() with both sides launched inside node0 of an emulated cluster
    of args.nodes nodes (mpirun/oshrun place args.ranks / nodes per node),
    brought up for this run and taken down after it."""
    cluster = [sys.executable, os.path.join(HERE, "cluster.py")]
    cluster_dir = os.path.join(workdir, f"cluster-{os.getpid()}")
    up = subprocess.run(cluster + ["up", "--dir", cluster_dir, "--nodes", str(args.nodes), "--slots",
                                   str(args.ranks // args.nodes), "--owner", str(os.getpid())],
                        capture_output=True, text=True)
    if up.returncode != 0:
        raise BaleError(f"--nodes {args.nodes}: the emulated cluster did not come up: {up.stderr.strip()[-600:]}")
    try:
        args.wrap = (*cluster, "exec", "--dir", cluster_dir, "node0", "--")
        return collect(args, binary, bin_dir, workdir, sys.stderr)
    finally:
        subprocess.run(cluster + ["down", "--dir", cluster_dir], capture_output=True)
        shutil.rmtree(cluster_dir, ignore_errors=True)


def make_rows(args, bench, samples, ident):
    per_rank, table = (args.requests, args.table) if bench == "indexgather" else (args.updates, args.counts)
    unit = BENCHES[bench]["unit"]
    rows = []
    for (side, variant, storage, group), runs in samples.items():
        rates = [s["rate"] for s in runs]
        bad = [s for s in runs if not s["verified"]]
        rows.append({
            "bench": bench, "side": side, "variant": variant, "storage": storage, "group": group, "ranks": args.ranks,
            "nodes": args.nodes,
            "rate": statistics.median(rates), "samples": rates, "rounds": len(rates), "reps": len(rates),
            "seconds": statistics.median(s["seconds"] for s in runs),
            "median_seconds": statistics.median(s["seconds"] for s in runs), "unit": runs[0]["unit"],
            "verified": not bad, "check": (bad[0] if bad else runs[0])["check"],
            "headline": side == "tessera" and (variant, storage) == HEADLINE,
            "config": {"per_rank": per_rank, "table_per_rank": table,
                       "env": {**({"TESSERA_AGG_SAME_NODE": "0"} if side == "tessera" else {}), **mpi_env(args.ranks)},
                       **({"buf_cnt": args.bale_buf} if side == "bale" else {})},
            **({"peer": "Bale", "commit": ident} if side == "bale" else {}),
        })
    bale = [r for r in rows if r["side"] == "bale" and r["verified"]]
    best = max(bale, key=lambda r: r["rate"]) if bale else None
    ceiling = next((r for r in rows if r["variant"] == LOCAL_LOOP), None)
    for r in rows:
        same_unit = r["unit"] == unit
        r["x_bale_best"] = r["rate"] / best["rate"] if best and same_unit else None
        r["fraction_of_ceiling"] = r["rate"] / ceiling["rate"] if ceiling and same_unit and r is not ceiling else None
        r["ratios"] = {"Bale best": r["x_bale_best"]} if r["x_bale_best"] is not None else {}
    order = {"bale": 0, "tessera": 1}
    rows.sort(key=lambda r: (order[r["side"]], not r["headline"], r["unit"] != unit, -r["rate"]))
    summary = None
    headline = next((r for r in rows if r["headline"]), None)
    if best and headline:
        ratio = headline["rate"] / best["rate"]
        summary = {"bench": bench, "ranks": args.ranks, "nodes": args.nodes, "peer": "Bale", "commit": ident,
                   "summary": f"{bench}: Tessera aggregated (heap, messages only) {headline['rate']:.4g} {unit} = "
                              f"{ratio:.3g}x Bale's best ({best['variant']}, {best['rate']:.4g} {unit}); medians of "
                              f"{args.rounds} interleaved rounds at {args.ranks} ranks{where(args)}",
                   "bale_ratio": ratio, "bale_best_variant": best["variant"], "bale_best_rate": best["rate"],
                   "tessera_rate": headline["rate"], "rounds": args.rounds,
                   "per_rank": per_rank, "table_per_rank": table}
    return rows, summary


def where(args):
    """How the ranks were placed, for the summary line."""
    return "" if args.nodes == 1 else f" on {args.nodes} emulated nodes ({args.ranks // args.nodes} per node)"


def number(x, digits=4):
    return "-" if x is None else f"{x:.{digits}g}"


def print_table(bench, rows, summary, out=sys.stdout):
    nodes = rows[0].get("nodes", 1)
    placed = "" if nodes == 1 else f" on {nodes} emulated nodes"
    print(f"\n== {bench} vs Bale == {rows[0]['ranks']} ranks{placed}, medians of {rows[0]['rounds']} rounds", file=out)
    print(f"{'side':8} {'variant':31} {'storage':16} {'rate':>10} {'unit':10} {'x Bale best':>11} "
          f"{'of ceiling':>10}  verified", file=out)
    for r in rows:
        name = r["variant"] + (" *" if r["headline"] else "")
        print(f"{r['side']:8} {name:31} {r['storage']:16} {number(r['rate']):>10} {r['unit']:10} "
              f"{number(r['x_bale_best'], 3):>11} {number(r['fraction_of_ceiling'], 3):>10}  "
              f"{'yes' if r['verified'] else 'NO: ' + r['check']}", file=out)
    print("* the headline: aggregated, Heap storage, same-node path off (messages only)", file=out)
    if summary:
        print(summary["summary"], file=out)


def parse_args(argv):
    p = argparse.ArgumentParser(description="Tessera's indexgather and histogram beside Bale's, in the same run.",
                                epilog=HOW_TO, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--bale", help="a Bale source tree (clone of " + BALE_URL + ")")
    p.add_argument("--build-dir", help="where Bale is built and kept (default ~/.cache/tessera/bale-<commit>)")
    p.add_argument("--ranks", type=int, default=2, help="ranks = Bale PEs (default 2)")
    p.add_argument("--rounds", type=int, default=3, help="interleaved rounds; medians are reported (default 3)")
    p.add_argument("--tessera", default=os.path.join(REPO, "build"), help="Tessera's build directory (default build/)")
    p.add_argument("--requests", type=int, default=4194304, help="indexgather reads per rank")
    p.add_argument("--table", type=int, default=100000, help="indexgather table entries per rank")
    p.add_argument("--updates", type=int, default=4194304, help="histogram updates per rank")
    p.add_argument("--counts", type=int, default=1000, help="histogram counts per rank")
    p.add_argument("--bale-buf", type=int, default=BALE_BUF,
                   help=f"Bale's -b, packets per Exstack/Exstack2 buffer (default {BALE_BUF}: Tessera's 64 KiB buffer in "
                        "8-byte packets)")
    p.add_argument("--bench", default="indexgather,histogram", help="comma-separated: indexgather, histogram")
    p.add_argument("--bale-variants", default=",".join(n for n, _ in VARIANTS),
                   help="comma-separated Bale variants to run, Bale's best among them is the reference (default all: "
                        "AGP,Exstack,Exstack2,Conveyor; across emulated nodes, 4 ranks, indexgather: AGP took 163 s, Exstack2 "
                        "and Conveyor did not end in 11 and 15 min, Exstack took 0.6 s)")
    p.add_argument("--nodes", type=int, default=1,
                   help="run both sides across this many emulated nodes (scripts/cluster.py: namespaces with their own "
                        "hostname and /dev/shm, TCP between them; needs root); --ranks is split evenly (default 1)")
    p.add_argument("--json", action="store_true", help="only the JSON lines on stdout")
    args = p.parse_args(argv)
    args.wrap = ()
    args.bale_variants = [v.strip() for v in args.bale_variants.split(",") if v.strip()]
    names = [n for n, _ in VARIANTS]
    wrong = [v for v in args.bale_variants if v not in names]
    if wrong or not args.bale_variants:
        raise BaleError(f"--bale-variants {','.join(wrong) or '(empty)'}: choose among {', '.join(names)}")
    args.bench = [b.strip() for b in args.bench.split(",") if b.strip()]
    unknown = [b for b in args.bench if b not in BENCHES]
    if unknown or not args.bench:
        raise BaleError(f"--bench {','.join(unknown) or '(empty)'}: choose among {', '.join(BENCHES)}")
    for name in ("ranks", "rounds", "requests", "table", "updates", "counts", "bale_buf", "nodes"):
        if getattr(args, name) < 1:
            raise BaleError(f"--{name.replace('_', '-')} must be at least 1")
    if args.ranks % args.nodes:
        raise BaleError(f"--nodes {args.nodes}: --ranks {args.ranks} must split evenly over the nodes")
    if args.ranks > 0xffff:
        raise BaleError("--ranks: Bale's indexgather packs the PE into 16 bits")
    return args


def main(argv=None):
    try:
        args = parse_args(sys.argv[1:] if argv is None else argv)
        if not args.bale:
            print(HOW_TO, file=sys.stderr)
            return 2
        if not os.path.isdir(args.bale):
            raise BaleError(f"--bale {args.bale}: no such directory\n{HOW_TO}")
        binary = tessera_binary(args.tessera)
        classic = bale_classic(args.bale)
        ident = tree_id(args.bale, classic)
        build_dir = os.path.abspath(args.build_dir or default_build_dir(ident))
        if os.path.commonpath([build_dir, REPO]) == REPO:
            raise BaleError(f"--build-dir {build_dir} lies inside the Tessera checkout; give one outside it")
        bin_dir = build_bale(classic, build_dir)
        workdir = os.path.join(build_dir, "runs")
        os.makedirs(workdir, exist_ok=True)
        if args.nodes == 1:
            samples = collect(args, binary, bin_dir, workdir, sys.stderr)
        else:
            samples = collect_across_nodes(args, binary, bin_dir, workdir)
    except BaleError as e:
        print(f"bench_vs_bale: {e}", file=sys.stderr)
        return 2
    except subprocess.TimeoutExpired as e:
        print(f"bench_vs_bale: {' '.join(map(str, e.cmd))} did not finish in {e.timeout:.0f} s", file=sys.stderr)
        return 2
    ok = True
    lines = []
    for bench in args.bench:
        rows, summary = make_rows(args, bench, samples[bench], ident)
        ok &= all(r["verified"] for r in rows)
        if not args.json:
            print_table(bench, rows, summary)
        lines += [json.dumps(r) for r in rows] + ([json.dumps(summary)] if summary else [])
    if not args.json:
        print()
    print("\n".join(lines), flush=True)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
