#!/usr/bin/env python3
"""scripts/results_table.py on real `tessera bench isx --json` output at 2
ranks: the Markdown holds the stamp (date, nproc, CPU model, kernel, the exact
command), one row per result line with the right columns and values, the
summary, and the quoted references in their own section; --run runs the
command itself; malformed input is refused with a message naming the file,
line and what is wrong."""
import json
import os
import re
import subprocess
import sys
import tempfile

BUILD = sys.argv[1]
SOURCE = os.environ.get("TESSERA_SOURCE_DIR") or os.path.join(os.path.dirname(__file__), "..", "..")
TESSERA = os.path.join(BUILD, "tessera")
SCRIPT = os.path.join(SOURCE, "scripts", "results_table.py")
PEERS = os.path.join(SOURCE, "scripts", "peers.py")
COLUMNS = ["bench", "ranks", "group", "variant", "storage", "best s", "median s", "reps", "rate", "unit",
           "x baseline", "verified"]


def table(*args, stdin=None):
    return subprocess.run([sys.executable, SCRIPT, *args], input=stdin, capture_output=True, text=True, timeout=600)


def rows_of(markdown, header):
    """The rows of the Markdown table whose header starts with `header`, as lists of cells."""
    lines = markdown.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("| " + header))
    out = []
    for line in lines[start:]:
        if not line.startswith("|"):
            break
        out.append([c.strip() for c in re.split(r"(?<!\\)\|", line)[1:-1]])
    return out[0], out[2:]  # the header, the body (without the |---| line)


def expect_refused(stdin, *needles, args=("--command", "x")):
    run = table(*args, stdin=stdin)
    assert run.returncode == 2 and run.stdout == "", (run.returncode, run.stdout, run.stderr)
    assert run.stderr.startswith("results_table: ") and run.stderr.count("\n") == 1, run.stderr
    for needle in needles:
        assert needle in run.stderr, (needle, run.stderr)


def main():
    command = [TESSERA, "-n", "2", "bench", "isx", "--keys", "20000", "--max-key", "1000003", "--reps", "2", "--json",
               "-q"]
    bench = subprocess.run(command, capture_output=True, text=True, timeout=300)
    assert bench.returncode == 0, bench.stderr
    records = [json.loads(line) for line in bench.stdout.splitlines()]
    results = [r for r in records if "summary" not in r]
    summaries = [r for r in records if "summary" in r]
    assert len(results) == 3 and len(summaries) == 1, records
    quoted = subprocess.run([sys.executable, PEERS, "quoted"], capture_output=True, text=True, check=True).stdout
    quoted_lines = quoted.splitlines()

    with tempfile.TemporaryDirectory() as tmp:
        jsonl = os.path.join(tmp, "isx.jsonl")
        with open(jsonl, "w") as f:
            f.write(bench.stdout + quoted)
        out = os.path.join(tmp, "isx.md")
        said = " ".join(command)
        run = table("--command", said, jsonl, "-o", out)
        assert run.returncode == 0 and run.stdout == "", run.stderr
        with open(out) as f:
            md = f.read()

    # The stamp.
    assert md.startswith("# tessera bench isx\n"), md[:80]
    assert re.search(r"^- date: \d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC$", md, re.M), md
    machine = re.search(r"^- machine: nproc (\d+), CPU (.+), kernel (\S+) (\S+), load average", md, re.M)
    assert machine, md
    assert int(machine.group(1)) == len(os.sched_getaffinity(0))
    assert machine.group(4) == os.uname().release, machine.group(4)
    with open("/proc/cpuinfo") as f:
        models = {line.split(":", 1)[1].strip() for line in f if line.startswith("model name")}
    assert not models or machine.group(2) in models, (machine.group(2), models)
    assert f"- command: `{said}`\n" in md, md

    # One row per result line, in order, with its figures.
    header, body = rows_of(md, "bench | ranks")
    assert header == COLUMNS, header
    assert len(body) == len(results), body
    for row, r in zip(body, results):
        cells = dict(zip(header, row))
        assert len(row) == len(COLUMNS), row
        assert (cells["bench"], cells["ranks"], cells["variant"], cells["storage"], cells["unit"]) == \
            ("isx", "2", r["variant"], r["storage"], r["unit"]), (cells, r)
        assert float(cells["rate"]) == float(f"{r['rate']:.4g}"), (cells["rate"], r["rate"])
        assert float(cells["best s"]) == float(f"{r['seconds']:.4g}"), (cells["best s"], r["seconds"])
        assert cells["reps"] == "2" and cells["verified"] == "yes", cells
        for baseline, ratio in r["ratios"].items():
            assert f"{baseline} {ratio:.2f}" in cells["x baseline"], (cells, r["ratios"])
    assert f"- isx, 2 ranks: {summaries[0]['summary']}" in md, md

    # The quoted references: a section of their own, every one with its source and machine.
    section = md.split("## Quoted, not measured here", 1)
    assert len(section) == 2 and "| bench | ranks" not in section[1], md
    qheader, qbody = rows_of(section[1], "bench | peer")
    assert qheader == ["bench", "peer", "ranks", "figure", "value", "unit", "source", "machine"], qheader
    assert len(qbody) == len(quoted_lines), qbody
    for row, line in zip(qbody, quoted_lines):
        q = json.loads(line)
        assert row[:3] == [q["bench"], q["peer"], str(q["ranks"])] and row[6] == q["source"].replace("|", "\\|"), row

    # --run: the command is run here and stamped as run.
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "run.md")
        run = table("-o", out, "--run", *command)
        assert run.returncode == 0, run.stderr
        with open(out) as f:
            ran = f.read()
    assert f"- command: `{' '.join(command)}`, run by this script (exit status 0)" in ran, ran
    assert len(rows_of(ran, "bench | ranks")[1]) == 3, ran

    # Malformed input.
    expect_refused(bench.stdout + "isx: 40000 keys in [0, 1000003)\n", "stdin:5:", "not a JSON line")
    cut = bench.stdout.splitlines()[1][:-20] + "\n"
    expect_refused(bench.stdout.splitlines()[0] + "\n" + cut, "stdin:2:", "not a JSON line")
    no_rate = dict(results[0])
    del no_rate["rate"]
    expect_refused(json.dumps(no_rate) + "\n", "stdin:1:", "a result line without rate")
    expect_refused('{"hello": 1}\n', "stdin:1:", "neither a result line")
    expect_refused("[1, 2]\n", "stdin:1:", "JSON list")
    expect_refused(json.dumps(summaries[0]) + "\n", "no result line")
    expect_refused("", "no result line")
    expect_refused(bench.stdout, "--command", args=())
    expect_refused("", "cannot read /nonexistent/x.jsonl", args=("--command", "x", "/nonexistent/x.jsonl"))
    print("results_table on real bench isx output: ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())
