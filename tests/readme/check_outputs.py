#!/usr/bin/env python3
"""The sample outputs in the README and docs/ are what the commands print.

A block marked `<!-- output -->` (or `<!-- output: requires=trilinos -->`)
just before a ```text fence holds `$ COMMAND` lines, each followed by what
the command prints (stdout and stderr together). This runs every command,
in order, in a scratch directory holding `examples/` and `build/` (the build
directory first on PATH, so `tessera` is the built one), and compares the
shape of the output with the sample:

- the same lines in the same order, a line `…` in the sample standing for
  any number of lines, and consecutive lines of one shape counting as one
  (progress lines are printed at most a few times a second);
- the words equal (steps, algorithm and solver names, verdicts);
- graph sizes equal: "N vertices", "N edges", "N arcs", "N of M vertices",
  "N reachable", "unreachable N";
- every other number ignored (timings, residuals, iteration counts, ids,
  pids, job ids shown as `JOB`), as are the Shared directory (shown as /dev/shm), the host
  name and runs of spaces.

`$ make demo` runs the tessera command of the Makefile's demo recipe (not the
build step before it), so the README shows what `make demo` prints.

Usage: check_outputs.py ROOT BUILD [--with trilinos] [--update] [PAGE.md ...]
       (default pages: README.md and docs/*.md)
--update rewrites each sample with what its commands print now (numbers
included; `…` lines kept where they still match, and a sample of the form
`…` + the end of the output kept from its first shown line on), for a
deliberate change."""
import argparse
import os
import pathlib
import re
import shutil
import subprocess
import sys
import tempfile

BLOCK = re.compile(r"^<!-- output(?::\s*(.*?))? -->\n```text\n(.*?)^```$", re.M | re.S)
ELLIPSIS = "…"
SIZES = re.compile(r"\d[\d,]* of \d[\d,]* vertices|\d[\d,]* (?:vertices|edges|arcs|reachable|unreachable)\b"
                   r"|\b(?:reachable vertices|unreachable) \d[\d,]*")
JOB_ID = re.compile(r"\b[0-9a-f]{8}-[0-9a-f]+-[0-9a-f]+\b")  # Runtime::job_id(): host hash, pid, microseconds
NUMBER = re.compile(r"\d+(?:[.,]\d+)*(?:[eE][-+]?\d+)?|\bJOB\b")


def shape(line):
    """What must agree between a sample line and a printed one."""
    line = JOB_ID.sub("JOB", re.sub(r"\bhost \S+", "host H", line))
    kept = []
    line = SIZES.sub(lambda m: kept.append(m.group(0)) or chr(0xE000 + len(kept) - 1), line)
    line = NUMBER.sub("#", line)
    line = re.sub("[\uE000-\uF8FF]", lambda m: kept[ord(m.group(0)) - 0xE000], line)
    return " ".join(line.split())


def groups(lines):
    """Runs of consecutive lines of one shape, as (shape, lines): progress
    lines ("round N: ...") are printed at most a few times a second, so how
    many a run prints depends on the machine, not on the program."""
    out = []
    for line in lines:
        s = ELLIPSIS if line.strip() == ELLIPSIS else shape(line)
        if out and out[-1][0] == s and s != ELLIPSIS:
            out[-1][1].append(line)
        else:
            out.append((s, [line]))
    return out


def align(sample, actual):
    """The printed group matching each sample group (None for `…`), or None if they differ."""
    memo = {}

    def go(i, j):
        if (i, j) not in memo:
            if i == len(sample):
                found = [] if j == len(actual) else None
            elif sample[i][0] == ELLIPSIS:
                found = None
                for k in range(j, len(actual) + 1):
                    rest = go(i + 1, k)
                    if rest is not None:
                        found = [None] + rest
                        break
            elif j < len(actual) and sample[i][0] == actual[j][0]:
                rest = go(i + 1, j + 1)
                found = None if rest is None else [actual[j][1]] + rest
            else:
                found = None
            memo[i, j] = found
        return memo[i, j]

    return go(0, 0)


def first_difference(sample, actual):
    for (s, lines), (a, printed) in zip(sample, actual):
        if s == ELLIPSIS:
            return "no match past a … line; printed:\n    " + "\n    ".join(l for _, ls in actual for l in ls[:1])
        if s != a:
            return f"\n    sample:  {lines[0]}\n    printed: {printed[0]}\n    (shapes: {s!r} vs {a!r})"
    return f"{len(sample)} sample line group(s), {len(actual)} printed"


def tail_from_anchor(sample, actual):
    """For a sample `…` + the end of the output: the printed lines from the
    one shaped like the sample's first shown line (the anchor) on, or None."""
    if not sample or sample[0].strip() != ELLIPSIS or any(l.strip() == ELLIPSIS for l in sample[1:]) or len(sample) < 2:
        return None
    anchor = shape(sample[1])
    for k, line in enumerate(actual):
        if shape(line) == anchor:
            return actual[k:]
    return None


def demo_command(root):
    """The tessera line of the Makefile's demo recipe, run from the top of the tree."""
    recipe, inside = [], False
    for line in (root / "Makefile").read_text().splitlines():
        if re.match(r"demo\s*:", line):
            inside = True
        elif inside and line.startswith("\t"):
            recipe.append(line.strip().lstrip("@"))
        elif inside:
            break
    runs = [r for r in recipe if "$(BUILD)/tessera" in r]
    if len(runs) != 1:
        sys.exit(f"FAIL the Makefile's demo recipe has {len(runs)} tessera commands, expected one: {recipe}")
    return re.sub(r"\s+#.*$", "", runs[0]).replace("$(BUILD)", "build")


def run(command, root, scratch, env):
    actual = demo_command(root) if command.strip() == "make demo" else command
    p = subprocess.run(["bash", "-c", actual], cwd=scratch, env=env, stdout=subprocess.PIPE,
                       stderr=subprocess.STDOUT, text=True, timeout=600)
    shm = env["TESSERA_SHM_DIR"]
    lines = [l.replace(shm, "/dev/shm").replace(str(scratch), ".").rstrip() for l in p.stdout.splitlines()]
    return p.returncode, lines


def for_page(text):
    """A printed line as the sample shows it: job ids (in segment names) as JOB."""
    return JOB_ID.sub("JOB", text)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("root", type=pathlib.Path)
    ap.add_argument("build", type=pathlib.Path)
    ap.add_argument("pages", nargs="*")
    ap.add_argument("--with", dest="features", action="append", default=[], help="a feature this build has")
    ap.add_argument("--update", action="store_true")
    args = ap.parse_intermixed_args()
    root, build = args.root.resolve(), args.build.resolve()
    pages = [root / p for p in args.pages] or [root / "README.md"] + sorted((root / "docs").glob("*.md"))

    tmp = pathlib.Path(tempfile.mkdtemp(prefix="tessera-readme-"))
    problems, checked, skipped = [], 0, 0
    try:
        shm = tmp / "shm"
        shm.mkdir()
        env = dict(os.environ, TESSERA_SHM_DIR=str(shm), PATH=f"{build}:{os.environ.get('PATH', '')}")
        for page in pages:
            text, edits = page.read_text(), []
            name = page.relative_to(root)
            for m in BLOCK.finditer(text):
                where = f"{name}:{text.count(chr(10), 0, m.start()) + 2}"
                options = dict(o.split("=", 1) for o in (m.group(1) or "").split())
                missing = [f for f in options.get("requires", "").split(",") if f and f not in args.features]
                if missing:
                    print(f"skip {where}: this build has no {', '.join(missing)}")
                    skipped += 1
                    continue
                lines = m.group(2).splitlines()
                starts = [i for i, l in enumerate(lines) if l.startswith("$ ")]
                if not starts or starts[0] != 0:
                    problems.append(f"{where}: an output block must start with a `$ COMMAND` line")
                    continue
                scratch = tmp / f"run{checked}"
                scratch.mkdir()
                (scratch / "examples").symlink_to(root / "examples")
                (scratch / "build").symlink_to(build)
                new = []
                for s, e in zip(starts, starts[1:] + [len(lines)]):
                    command, sample = lines[s][2:], lines[s + 1:e]
                    checked += 1
                    rc, actual = run(command, root, scratch, env)
                    new.append(lines[s])
                    if rc != 0:
                        problems.append(f"{where}: `{command}` exited with {rc}:\n    " + "\n    ".join(actual[-15:]))
                        new += sample
                        continue
                    matched = align(groups(sample), groups(actual))
                    if matched is None and not args.update:
                        problems.append(f"{where}: `{command}` prints something else than the sample: "
                                        + first_difference(groups(sample), groups(actual)))
                    if args.update:
                        tail = tail_from_anchor(sample, actual) if matched is None else None
                        if tail is not None:
                            new += [ELLIPSIS] + [for_page(l) for l in tail]
                        elif matched is None and any(l.strip() == ELLIPSIS for l in sample):
                            problems.append(f"{where}: cannot update a sample with … lines that no longer match: "
                                            "edit it by hand")
                            new += sample
                        elif matched is None:
                            new += [for_page(l) for l in actual]
                        else:
                            new += [l for g in matched for l in ([ELLIPSIS] if g is None else map(for_page, g))]
                    else:
                        new += sample
                edits.append((m.start(2), m.end(2), "\n".join(new) + "\n"))
                leftover = sorted(os.listdir(shm))
                if leftover:
                    problems.append(f"{where}: left in the Shared directory: {' '.join(leftover)}")
                    for f in leftover:
                        (shm / f).unlink()
            if args.update and edits:
                for start, end, block in reversed(edits):
                    text = text[:start] + block + text[end:]
                page.write_text(text)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    for p in problems:
        print("FAIL", p)
    if args.update:
        print("updated the samples" + (" (not all: see above)" if problems else ""))
    print("PASS" if not problems else "FAILED", f"({checked} commands checked, {skipped} block(s) skipped)")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
