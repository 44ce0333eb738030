"""Naming a peer's source tree (Bale, GAPBS) for its build cache: the tree's
own git commit, or a digest of its sources when it is no git checkout."""
import hashlib
import os
import subprocess


def tree_id(tree, sources):
    """The short commit of `tree`'s own repository (a tree unpacked inside
    another checkout is no checkout of the peer), else "src-" and a digest of
    every file under `sources` (names relative to it, and contents)."""
    run = subprocess.run(["git", "-C", tree, "rev-parse", "--show-toplevel", "--short=7", "HEAD"],
                         capture_output=True, text=True)
    lines = run.stdout.split()
    if run.returncode == 0 and len(lines) == 2 and os.path.realpath(lines[0]) == os.path.realpath(tree):
        return lines[1]
    digest = hashlib.sha256()
    for root, dirs, files in os.walk(sources):
        dirs.sort()
        for name in sorted(files):
            path = os.path.join(root, name)
            digest.update(os.path.relpath(path, sources).encode())
            with open(path, "rb") as f:
                digest.update(f.read())
    return "src-" + digest.hexdigest()[:12]
