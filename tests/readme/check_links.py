#!/usr/bin/env python3
"""Every relative link in the given Markdown pages points to a file or
directory that exists, and its #anchor (if any) to a heading of that page,
named as GitHub names headings. Links inside code are not links; http(s) and
mailto links are not checked (no network in tests).

Usage: check_links.py ROOT [PAGE.md ...]    (default: README.md and docs/*.md)"""
import pathlib
import re
import sys

LINK = re.compile(r"!?\[(?:[^\]\[]|\[[^\]]*\])*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")
FENCE = re.compile(r"^(```|~~~).*?^\1[^\n]*$", re.M | re.S)
CODE_SPAN = re.compile(r"(`+)(?:(?!\1).)+?\1", re.S)
HEADING = re.compile(r"^#{1,6}\s+(.*?)\s*#*\s*$", re.M)


def without_code(text):
    # Keep the line count (for messages): blank out code, never delete lines.
    blank = lambda m: re.sub(r"[^\n]", " ", m.group(0))
    return CODE_SPAN.sub(blank, FENCE.sub(blank, text))


def slug(heading):
    """GitHub's anchor for a heading: link text kept, markup and punctuation
    dropped, lower case, spaces to hyphens."""
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", heading)
    text = re.sub(r"<[^>]+>", "", text).lower()
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def anchors(page):
    found, seen = set(), {}
    for m in HEADING.finditer(FENCE.sub("", page.read_text())):
        s = slug(m.group(1))
        n = seen.get(s, 0)
        seen[s] = n + 1
        found.add(s if n == 0 else f"{s}-{n}")
    return found


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    root = pathlib.Path(sys.argv[1]).resolve()
    pages = [root / n for n in sys.argv[2:]] or [root / "README.md"] + sorted((root / "docs").glob("*.md"))
    problems, checked = [], 0
    for page in pages:
        text = without_code(page.read_text())
        for m in LINK.finditer(text):
            target = m.group(1)
            if re.match(r"[a-z][a-z0-9+.-]*:", target, re.I):  # http:, https:, mailto:
                continue
            checked += 1
            where = f"{page.relative_to(root)}:{text.count(chr(10), 0, m.start()) + 1}"
            path, _, anchor = target.partition("#")
            dest = (page.parent / path).resolve() if path else page
            if not dest.exists():
                problems.append(f"{where}: {target}: {path} does not exist")
            elif root not in dest.parents and dest != root:
                problems.append(f"{where}: {target} leaves the repository")
            elif anchor:
                if dest.suffix != ".md" or dest.is_dir():
                    problems.append(f"{where}: {target}: an anchor into a file that is not a Markdown page")
                elif anchor not in anchors(dest):
                    problems.append(f"{where}: {target}: {dest.relative_to(root)} has no heading #{anchor}")
    for p in problems:
        print("FAIL", p)
    print("PASS" if not problems else "FAILED", f"({checked} relative links in {len(pages)} pages)")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
