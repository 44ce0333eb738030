#!/usr/bin/env python3
"""scripts/bench_vs_bale.py.

  test_bench_vs_bale.py usage            (always)
    Without --bale it prints how to get a Bale tree and exits 2, nothing on
    stdout; a missing directory, a tree that is not Bale's and bad options
    are refused with exit 2 and a message naming what is wrong. The rows:
    a Bale variant whose check failed is unverified and never Bale's best.

  test_bench_vs_bale.py bale BUILD       (needs TESSERA_BALE_SRC, else exit 77)
    Builds Bale from $TESSERA_BALE_SRC (once, in the script's default cache),
    runs ig and histo at 2 PEs, every variant, and parses that real output:
    sizes, times and Bale's own check. The parser is then fed the same output
    with what Bale prints when its check fails (the lines taken from Bale's
    own sources), with a nonzero exit, with its JSON cut before its check
    ended and without the variant's time: each must come out unverified or
    refused. Last, the script end to end at small sizes, one round: every
    row verified, the ratios recomputed from the rows."""
import importlib.util
import json
import os
import re
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
SCRIPT = os.path.join(HERE, "..", "..", "scripts", "bench_vs_bale.py")
SKIP = 77


def load_script():
    spec = importlib.util.spec_from_file_location("bench_vs_bale", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def script(*args, env=None):
    return subprocess.run([sys.executable, SCRIPT, *args], capture_output=True, text=True, timeout=3600,
                          env=env or os.environ)


def test_usage():
    bale = load_script()
    run = script()
    assert run.returncode == 2 and run.stdout == "", (run.returncode, run.stdout)
    assert "--bale DIR" in run.stderr and bale.BALE_URL in run.stderr and bale.BALE_COMMIT in run.stderr, run.stderr

    run = script("--bale", "/nonexistent/bale-tree")
    assert run.returncode == 2 and "/nonexistent/bale-tree: no such directory" in run.stderr, run.stderr

    with tempfile.TemporaryDirectory(prefix="tessera-not-bale-") as empty:
        run = script("--bale", empty, "--tessera", empty)
        assert run.returncode == 2 and "no tessera executable" in run.stderr, run.stderr
        os.makedirs(os.path.join(empty, "tessera"))  # a directory, not an executable
        run = script("--bale", empty, "--tessera", empty)
        assert run.returncode == 2 and "no tessera executable" in run.stderr, run.stderr
        with open(os.path.join(empty, "tessera", "tessera"), "w") as f:
            f.write("#!/bin/sh\nexit 1\n")
        os.chmod(os.path.join(empty, "tessera", "tessera"), 0o755)
        run = script("--bale", empty, "--tessera", os.path.join(empty, "tessera"))
        assert run.returncode == 2 and f"{empty} is not a Bale source tree" in run.stderr, run.stderr

    for args, what in ((["--bench", "sort"], "--bench sort"), (["--ranks", "0"], "--ranks"),
                       (["--rounds", "0"], "--rounds"), (["--requests", "0"], "--requests"),
                       (["--bale-buf", "0"], "--bale-buf"), (["--nodes", "0"], "--nodes"),
                       (["--ranks", "3", "--nodes", "2"], "must split evenly over the nodes"),
                       (["--bale-variants", "Exstack,Exstack3"], "--bale-variants Exstack3")):
        run = script("--bale", "/tmp", *args)
        assert run.returncode == 2 and what in run.stderr, (args, run.stderr)
    # Both sides get the same Open MPI settings: idle ranks yield only when
    # the ranks outnumber the cores, unless the environment says otherwise.
    saved = os.environ.pop("OMPI_MCA_mpi_yield_when_idle", None)
    try:
        cores = os.cpu_count() or 1
        assert bale.mpi_env(cores) == {"OMPI_MCA_mpi_yield_when_idle": "0"}, bale.mpi_env(cores)
        assert bale.mpi_env(cores + 1) == {"OMPI_MCA_mpi_yield_when_idle": "1"}, bale.mpi_env(cores + 1)
        assert bale.bale_env(cores)["OMPI_MCA_mpi_yield_when_idle"] == "0"
        os.environ["OMPI_MCA_mpi_yield_when_idle"] = "1"
        assert bale.mpi_env(cores) == {"OMPI_MCA_mpi_yield_when_idle": "1"}
        assert bale.bale_env(cores)["OMPI_MCA_mpi_yield_when_idle"] == "1"
    finally:
        os.environ.pop("OMPI_MCA_mpi_yield_when_idle", None)
        if saved is not None:
            os.environ["OMPI_MCA_mpi_yield_when_idle"] = saved
    assert bale.parse_args(["--bale", "/tmp"]).bale_buf == 65536 // 8
    # Across emulated nodes the summary says where the ranks ran; on one node it says nothing more.
    assert bale.where(bale.parse_args(["--bale", "/tmp"])) == ""
    assert bale.where(bale.parse_args(["--bale", "/tmp", "--ranks", "4", "--nodes", "2"])) == \
        " on 2 emulated nodes (2 per node)"
    # A Bale variant whose own check failed in one round: its row is not
    # verified, and it is not taken as Bale's best however fast it ran.
    args = bale.parse_args(["--bale", "/tmp", "--rounds", "2"])
    unit = bale.BENCHES["histogram"]["unit"]
    def runs(*rates, failed=False):
        return [{"rate": r, "seconds": 1 / r, "unit": unit, "verified": not (failed and k == 0),
                 "check": "Bale's own check failed: FAILED!!!!" if failed and k == 0 else "ok"}
                for k, r in enumerate(rates)]
    samples = {("bale", "Exstack", "-", ""): runs(50.0, 70.0), ("bale", "Exstack2", "-", ""): runs(90.0, 110.0, failed=True),
               ("tessera", "aggregated", "heap", ""): runs(120.0, 140.0),
               ("tessera", bale.LOCAL_LOOP, "heap", ""): runs(1000.0, 1200.0)}
    rows, summary = bale.make_rows(args, "histogram", samples, "test")
    by = {r["variant"]: r for r in rows}
    assert not by["Exstack2"]["verified"] and "FAILED!!!!" in by["Exstack2"]["check"], by["Exstack2"]
    assert all(by[v]["verified"] for v in ("Exstack", "aggregated", bale.LOCAL_LOOP)), rows
    assert summary["bale_best_variant"] == "Exstack", summary
    exstack = sum(r["rate"] for r in samples[("bale", "Exstack", "-", "")]) / 2  # the median of two
    headline = sum(r["rate"] for r in samples[("tessera", "aggregated", "heap", "")]) / 2
    assert abs(summary["bale_ratio"] - headline / exstack) < 1e-12, summary
    assert by["aggregated"]["headline"] and not by["Exstack"]["headline"], rows
    print("bench_vs_bale.py: the how-to without --bale, bad input refused, a failed Bale check reported: ok")
    return 0


def failure_lines(source):
    """What Bale's app prints when its check fails, rendered from its own
    fprintf format strings (ERROR ... and ... FAILED!!!! ...)."""
    lines = []
    for call in re.findall(r'fprintf\(\s*stderr\s*,\s*((?:"[^"]*"\s*|PRId64\s*)+)', source):
        text = "".join("ld" if macro else literal for literal, macro in re.findall(r'"([^"]*)"|(PRId64)', call))
        if "FAILED" in text or text.startswith("ERROR"):
            lines.append(re.sub(r"%l?d", "3", text).replace("\\n", "").strip())
    return lines


def test_bale(build):
    tree = os.environ.get("TESSERA_BALE_SRC")
    if not tree:
        print("skipped: set TESSERA_BALE_SRC to a Bale source tree to parse real Bale output "
              "(CI has none: no internet)")
        return SKIP
    bale = load_script()
    classic = bale.bale_classic(tree)
    ident = bale.tree_id(tree, classic)
    bin_dir = bale.build_bale(classic, bale.default_build_dir(ident))
    per_rank = {"indexgather": 20000, "histogram": 30000}
    table = {"indexgather": 5000, "histogram": 100}
    with tempfile.TemporaryDirectory(prefix="tessera-bale-runs-") as work:
        for bench, spec in bale.BENCHES.items():
            sources = [os.path.join(root, f) for root, _, files in os.walk(os.path.join(classic, "apps"))
                       for f in files if f == spec["app"] + ".upc"]
            assert len(sources) == 1, sources
            with open(sources[0]) as f:
                failures = failure_lines(f.read())
            assert any("FAILED" in line for line in failures) and any(l.startswith("ERROR") for l in failures), failures

            for variant, mask in bale.VARIANTS:
                command = ["oshrun", "--oversubscribe", "-n", "2", os.path.join(bin_dir, spec["app"]),
                           "-n", str(per_rank[bench]), "-T", str(table[bench]), "-M", str(mask), "-j",
                           os.path.join(work, f"{bench}-{variant}.json")]
                run = subprocess.run(command, capture_output=True, text=True, env=bale.bale_env(2), timeout=600, cwd=work)
                with open(os.path.join(work, f"{bench}-{variant}.json")) as f:
                    written = f.read()
                good = bale.parse_bale(bench, written, run.stderr, run.returncode)
                assert good["verified"] and good["check"] == spec["check"], (bench, variant, good, run.stderr)
                assert (good["pes"], good["per_pe"], good["total"], good["table_per_pe"]) == \
                    (2, per_rank[bench], 2 * per_rank[bench], table[bench]), good
                assert list(good["seconds"]) == [variant] and good["seconds"][variant] > 0, good
                # The script's own runner gives the same figures' shape.
                again = bale.run_bale(bin_dir, bench, 2, per_rank[bench], table[bench], variant, work)
                assert again["verified"] and list(again["seconds"]) == [variant], again

                # Wrong answers: every failure line Bale can print, alone, turns the run unverified.
                for line in failures:
                    bad = bale.parse_bale(bench, written, run.stderr + line + "\n", run.returncode)
                    assert not bad["verified"] and line in bad["check"], (line, bad)
                bad = bale.parse_bale(bench, written, run.stderr, 3)
                assert not bad["verified"] and "exited 3" in bad["check"], bad
                cut = written[:written.rindex("}")]  # Bale died before closing its file, after its check
                bad = bale.parse_bale(bench, cut, run.stderr, 0)
                assert not bad["verified"] and "stopped before the end of its own check" in bad["check"], bad
                no_time = json.dumps({k: v for k, v in json.loads(written).items() if k != variant})
                try:
                    bale.parse_bale(bench, no_time, run.stderr, 0)
                    raise AssertionError(f"a {bench} run without the {variant} time was accepted")
                except bale.BaleError as e:
                    assert "printed no time" in str(e), e

    # End to end, small: every row verified, Bale's four variants and Tessera's headline per benchmark.
    run = script("--bale", tree, "--tessera", build, "--rounds", "1", "--ranks", "2", "--requests", "20000",
                 "--table", "5000", "--updates", "30000", "--counts", "100", "--json")
    assert run.returncode == 0, run.stderr
    records = [json.loads(line) for line in run.stdout.splitlines()]
    for bench in bale.BENCHES:
        rows = [r for r in records if r["bench"] == bench and "summary" not in r]
        summary = [r for r in records if r["bench"] == bench and "summary" in r]
        assert all(r["verified"] for r in rows), [r for r in rows if not r["verified"]]
        peer = {r["variant"]: r for r in rows if r["side"] == "bale"}
        assert sorted(peer) == sorted(v for v, _ in bale.VARIANTS), peer
        headline = [r for r in rows if r["headline"]]
        assert len(headline) == 1 and (headline[0]["variant"], headline[0]["storage"]) == ("aggregated", "heap")
        best = max(peer.values(), key=lambda r: r["rate"])
        assert len(summary) == 1 and summary[0]["bale_best_variant"] == best["variant"], summary
        assert abs(summary[0]["bale_ratio"] - headline[0]["rate"] / best["rate"]) < 1e-9 * summary[0]["bale_ratio"]
        ceiling = [r for r in rows if r["variant"] == bale.LOCAL_LOOP]
        assert len(ceiling) == 1, rows
        for r in rows:
            if r["unit"] == best["unit"] and r is not ceiling[0]:
                assert abs(r["fraction_of_ceiling"] - r["rate"] / ceiling[0]["rate"]) < 1e-9, r
        assert not any(r["variant"].startswith("fine-grained") for r in rows), "a prefix-sized row was compared"
    # Across 2 emulated nodes (namespaces: root only), both sides verified and the summary says so.
    if os.geteuid() == 0:
        run = script("--bale", tree, "--tessera", build, "--rounds", "1", "--ranks", "2", "--nodes", "2",
                     "--bale-variants", "Exstack", "--requests", "20000", "--table", "5000", "--updates", "30000", "--counts", "100", "--json")
        assert run.returncode == 0, run.stderr
        records = [json.loads(line) for line in run.stdout.splitlines()]
        assert all(r["verified"] for r in records if "summary" not in r), records
        summaries = [r for r in records if "summary" in r]
        assert len(summaries) == len(bale.BENCHES), summaries
        assert all(r["nodes"] == 2 and "on 2 emulated nodes (1 per node)" in r["summary"] for r in summaries), summaries
    print("bench_vs_bale.py: real Bale output parsed, its check's failures reported, end to end verified: ok")
    return 0


if __name__ == "__main__":
    if sys.argv[1:2] == ["usage"]:
        sys.exit(test_usage())
    if sys.argv[1:2] == ["bale"] and len(sys.argv) == 3:
        sys.exit(test_bale(sys.argv[2]))
    sys.exit("usage: test_bench_vs_bale.py usage | bale BUILD")
