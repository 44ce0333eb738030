#!/usr/bin/env python3
"""Turns `tessera bench ... --json` output into a Markdown table stamped with
the date, the machine (nproc, CPU model, kernel, load) and the exact command.

  scripts/results_table.py -o docs/results/isx.md --run build/tessera -n 2 bench isx --keys 1048576 --json -q
  build/tessera bench isx --json -q > isx.jsonl
  scripts/results_table.py --command "build/tessera bench isx --json -q" isx.jsonl

--run runs the command itself, so the stamp is the command that printed the
lines; otherwise the lines come from files (or stdin, "-") and --command says
which command printed them. The input is JSON lines only: result lines (one
table row each), summary lines (listed under the table), the lines of
`scripts/peers.py isx` (a peer measured in the same run: rows like Tessera's,
marked as the peer's) and of `scripts/peers.py quoted` (a separate table,
"quoted, not measured here"). Anything else, or no result line at all, is
refused: exit 2 with a message naming the file and line."""
import argparse
import datetime
import json
import os
import platform
import shlex
import subprocess
import sys

RESULT_FIELDS = ("bench", "variant", "storage", "ranks", "seconds", "rate", "unit", "verified")
SUMMARY_FIELDS = ("bench", "summary", "ranks")
QUOTED_FIELDS = ("quoted", "bench", "peer", "ranks", "value", "unit", "source", "machine")
COLUMNS = ("bench", "ranks", "group", "variant", "storage", "best s", "median s", "reps", "rate", "unit",
           "x baseline", "verified")


class InputError(Exception):
    pass


def kind_of(record, where):
    if not isinstance(record, dict):
        raise InputError(f"{where}: a JSON {type(record).__name__}, not an object from `tessera bench --json`")
    if "quoted" in record:
        kind, fields = "quoted", QUOTED_FIELDS
    elif "summary" in record:
        kind, fields = "summary", SUMMARY_FIELDS
    elif "variant" in record or "rate" in record:
        kind, fields = "result", RESULT_FIELDS
    else:
        raise InputError(f"{where}: neither a result line (bench, variant, rate, ...), a summary line nor a quoted "
                         f"reference: keys {', '.join(sorted(record)) or 'none'}")
    missing = [f for f in fields if f not in record]
    if missing:
        raise InputError(f"{where}: a {kind} line without {', '.join(missing)}")
    if kind == "result" and not all(isinstance(record[f], (int, float)) for f in ("seconds", "rate", "ranks")):
        raise InputError(f"{where}: a result line whose seconds, rate or ranks is not a number")
    return kind


def read_records(named_texts):
    """[(name, text)] -> {"result": [...], "summary": [...], "quoted": [...]}, in input order."""
    records = {"result": [], "summary": [], "quoted": []}
    for name, text in named_texts:
        for number, line in enumerate(text.splitlines(), 1):
            line = line.strip()
            if not line:
                continue
            where = f"{name}:{number}"
            try:
                record = json.loads(line)
            except json.JSONDecodeError as e:
                raise InputError(f"{where}: not a JSON line ({e.msg}): {line[:80]!r}; "
                                 "give only what `tessera bench ... --json` prints on stdout")
            records[kind_of(record, where)].append(record)
    if not records["result"]:
        raise InputError("the input holds no result line (was --json given to tessera bench?)")
    return records


def cpu_model():
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def source_commit():
    here = os.path.dirname(os.path.abspath(__file__))
    head = subprocess.run(["git", "-C", here, "rev-parse", "--short=12", "HEAD"], capture_output=True, text=True)
    if head.returncode != 0:
        return "not a git checkout"
    dirty = subprocess.run(["git", "-C", here, "status", "--porcelain", "--untracked-files=no"],
                           capture_output=True, text=True).stdout.strip()
    return head.stdout.strip() + (" with local changes" if dirty else "")


def stamp(command, status=None, now=None):
    now = now or datetime.datetime.now(datetime.timezone.utc)
    load = " ".join(f"{x:.2f}" for x in os.getloadavg())
    return [
        f"- date: {now.strftime('%Y-%m-%d %H:%M:%S')} UTC",
        f"- machine: nproc {len(os.sched_getaffinity(0))}, CPU {cpu_model()}, kernel "
        f"{platform.system()} {platform.release()}, load average {load} when tabulated",
        f"- command: `{command}`" + (f", run by this script (exit status {status})" if status is not None else ""),
        f"- source tree of this script: {source_commit()}",
    ]


def cell(value):
    return str(value).replace("|", "\\|").replace("\n", " ")


def number(x):
    return f"{x:.4g}" if isinstance(x, (int, float)) else "-"


def row_of(r):
    ratios = r.get("ratios") or {}
    variant = r["variant"] + (f" [peer: {r['peer']}]" if r.get("peer") and "peer" not in r["variant"] else "")
    if r.get("skipped"):
        return [r["bench"], r["ranks"], r.get("group", ""), variant, r["storage"], "-", "-", "-", "-", r["unit"], "-",
                f"skipped: {r['skipped']}"]
    return [r["bench"], r["ranks"], r.get("group", ""), variant, r["storage"], number(r["seconds"]),
            number(r.get("median_seconds")), r.get("reps", "-"), number(r["rate"]), r["unit"],
            ", ".join(f"{k} {v:.2f}" for k, v in ratios.items()) or "-",
            "yes" if r["verified"] else f"NO: {r.get('check', '')}"]


def table(columns, rows):
    lines = ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
    lines += ["| " + " | ".join(cell(v) for v in row) + " |" for row in rows]
    return lines


def markdown(records, command, status=None, now=None):
    benches = list(dict.fromkeys(r["bench"] for r in records["result"]))
    out = [f"# tessera bench {', '.join(benches)}", ""] + stamp(command, status, now) + [""]
    note = "Rates are best of the reps; \"x baseline\" is the rate over that of the named baseline of the same run."
    if any(r.get("peer") for r in records["result"]):
        note += " Peer rows are that peer, measured in this run by scripts/peers.py."
    out += [note, ""]
    out += table(COLUMNS, [row_of(r) for r in records["result"]])
    if records["summary"]:
        out += ["", "Summaries:", ""]
        out += [f"- {cell(s['bench'])}, {s['ranks']} ranks: {cell(s['summary'])}" for s in records["summary"]]
    if records["quoted"]:
        out += ["", "## Quoted, not measured here", "",
                "Figures from elsewhere, for orientation only: no ratio to this run is taken.", ""]
        out += table(("bench", "peer", "ranks", "figure", "value", "unit", "source", "machine"),
                     [[q["bench"], q["peer"], q["ranks"], q.get("figure", ""), number(q["value"]), q["unit"],
                       q["source"], q["machine"]] for q in records["quoted"]])
    return "\n".join(out) + "\n"


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("inputs", nargs="*", help="JSON-lines files ('-' or none: stdin)")
    parser.add_argument("--command", help="the exact command that printed the input")
    parser.add_argument("--run", nargs=argparse.REMAINDER, help="run this command and tabulate its stdout")
    parser.add_argument("-o", "--output", help="write the Markdown here (default: stdout)")
    args = parser.parse_args(argv)
    try:
        if args.run:
            if args.inputs or args.command:
                raise InputError("--run takes the command and its arguments; give no input files or --command with it")
            command = shlex.join(args.run)
            try:
                run = subprocess.run(args.run, capture_output=True, text=True)
            except OSError as e:
                raise InputError(f"cannot run `{command}`: {e.strerror}")
            if run.returncode != 0 and not run.stdout.strip():
                raise InputError(f"`{command}` exited {run.returncode}: {run.stderr.strip()[-400:]}")
            named = [("stdout of the command", run.stdout)]
            status = run.returncode
        else:
            if not args.command:
                raise InputError("say which command printed the input with --command (or let --run run it)")
            command, status = args.command, None
            named = []
            for path in args.inputs or ["-"]:
                if path == "-":
                    named.append(("stdin", sys.stdin.read()))
                else:
                    try:
                        with open(path, encoding="utf-8") as f:
                            named.append((path, f.read()))
                    except OSError as e:
                        raise InputError(f"cannot read {path}: {e.strerror}")
        text = markdown(read_records(named), command, status)
    except InputError as e:
        print(f"results_table: {e}", file=sys.stderr)
        return 2
    if args.output:
        with open(args.output, "w", encoding="utf-8") as f:
            f.write(text)
    else:
        sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
