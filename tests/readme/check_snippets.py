#!/usr/bin/env python3
"""Every README code block marked `<!-- snippet: PATH -->` must equal the file
PATH byte for byte, and every example source must be shown, so the README
cannot drift from the examples that install.examples compiles and runs."""
import pathlib, re, sys

root = pathlib.Path(sys.argv[1])
readme = (root / "README.md").read_text()
shown = {}
for m in re.finditer(r"<!-- snippet: (\S+) -->\n```[a-z]*\n(.*?)```\n", readme, re.S):
    shown[m.group(1)] = m.group(2)
problems = []
for path, text in shown.items():
    f = root / path
    if not f.is_file():
        problems.append(f"README shows {path}, which does not exist")
    elif f.read_text() != text:
        problems.append(f"README's block for {path} differs from the file: copy the file into the README")
for f in sorted((root / "examples").iterdir()):
    if f.suffix in (".c", ".cpp", ".sh") and f"examples/{f.name}" not in shown:
        problems.append(f"examples/{f.name} is not shown in the README (mark it <!-- snippet: examples/{f.name} -->)")
unmarked = [m.start() for m in re.finditer(r"^```(c|cpp|sh)$", readme, re.M)
            if not readme[:m.start()].rstrip().endswith("-->")]
if unmarked:
    problems.append(f"{len(unmarked)} c/cpp/sh block(s) in the README are not snippets of a tested file")
for p in problems:
    print("FAIL", p)
print("PASS" if not problems else "FAILED", f"({len(shown)} snippets)")
sys.exit(1 if problems else 0)
