#!/usr/bin/env python3
"""Every code block marked `<!-- snippet: PATH -->` in the given pages must
equal the file PATH (from the top of the tree) byte for byte, every example
source (examples/*.c, *.cpp, *.sh) must be shown on some page, and no c, cpp,
sh or python block may be left unmarked: the pages cannot drift from the
examples that install.examples, readme.walkthrough and the Python tests
compile and run.

Usage: check_snippets.py ROOT [PAGE.md ...]    (default: README.md and docs/*.md)"""
import pathlib
import re
import sys

MARKED = re.compile(r"<!-- snippet: (\S+) -->\n```[a-z]*\n(.*?)```\n", re.S)
CHECKED_LANGUAGES = r"c|cpp|sh|python"


def pages(root, names):
    if names:
        return [root / n for n in names]
    return [root / "README.md"] + sorted((root / "docs").glob("*.md"))


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    root = pathlib.Path(sys.argv[1])
    problems, shown = [], {}
    for page in pages(root, sys.argv[2:]):
        name = page.relative_to(root) if page.is_relative_to(root) else page
        if not page.is_file():
            problems.append(f"{name} does not exist")
            continue
        text = page.read_text()
        for m in MARKED.finditer(text):
            path, block = m.group(1), m.group(2)
            shown.setdefault(path, []).append(name)
            f = root / path
            if not f.is_file():
                problems.append(f"{name} shows {path}, which does not exist")
            elif f.read_text() != block:
                problems.append(f"{name}'s block for {path} differs from the file: copy the file into {name}")
        unmarked = [m.start() for m in re.finditer(rf"^```({CHECKED_LANGUAGES})$", text, re.M)
                    if not text[:m.start()].rstrip().endswith("-->")]
        if unmarked:
            lines = ", ".join(str(text.count("\n", 0, s) + 1) for s in unmarked)
            problems.append(f"{name}: block(s) at line {lines} are not snippets of a tested file "
                            "(mark them <!-- snippet: PATH -->)")
    for f in sorted((root / "examples").iterdir()):
        if f.suffix in (".c", ".cpp", ".sh") and f"examples/{f.name}" not in shown:
            problems.append(f"examples/{f.name} is not shown on any page (mark it <!-- snippet: examples/{f.name} -->)")
    for p in problems:
        print("FAIL", p)
    count = sum(len(v) for v in shown.values())
    print("PASS" if not problems else "FAILED", f"({count} snippets of {len(shown)} files)")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
