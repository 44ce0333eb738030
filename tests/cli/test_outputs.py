#!/usr/bin/python3
"""Outputs that are not regular files: every writing command (gen, convert,
cc -o, lcc -o, lcc --ids, hitting -o, pipeline -o, map -o) writes a FIFO,
"-", /dev/stdout-style descriptors, sockets and character devices in place, never
renaming a temporary over them; refuses a directory, a block device, --json
with "-" before any work; keeps a symbolic link to a regular file a link.
What a stream received is compared with what the same command wrote to a
regular file at the same rank count. (test_cli_options.sh covers all-or-none
commits of regular files.)

Usage: test_outputs.py BUILD_DIR [--devices]
  --devices: character and block device nodes made here with mknod (root
  only; exits 77, which ctest reports as skipped, when mknod is not allowed).
  The real /dev/null is never used.
"""
import json
import os
import socket
import stat
import subprocess
import sys
import tempfile
import threading

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from harness import Harness  # noqa: E402

SKIP = 77
TESSERA = os.path.join(sys.argv[1], "tessera")
DEVICES = "--devices" in sys.argv[2:]
h = Harness(TESSERA, timeout=180)


def commands(tmp):
    """name -> arguments with OUT where the output goes. Small graphs: the
    point is where the bytes go."""
    g, w = os.path.join(tmp, "g.el"), os.path.join(tmp, "w.wel")
    return {
        "gen": ["gen", "grid", "--dims", "7x5", "-o", "OUT"],
        "convert": ["convert", g, "-o", "OUT"],
        "convert weighted": ["convert", w, "-o", "OUT"],  # "-" and streams: "u v w" lines
        "cc -o": ["cc", g, "-o", "OUT"],
        "lcc -o": ["lcc", g, "-o", "OUT"],
        "lcc --ids": ["lcc", g, "-o", os.path.join(tmp, "lcc-beside.el"), "--ids", "OUT"],
        "hitting -o": ["hitting", g, "--targets", "0", "--solver", "tessera", "-o", "OUT"],
        "pipeline -o": ["pipeline", g, "--targets", "0", "--solver", "tessera", "-o", "OUT"],
    }


def with_out(args, out):
    return [out if a == "OUT" else a for a in args]


def values(text):
    """Data lines as (id, value) pairs; values parsed as floats where they are
    (hitting times may differ in the last bits between runs), else kept."""
    rows = []
    for line in text.splitlines():
        if not line or line[0] in "#%":
            rows.append(line)
            continue
        parts = line.split()
        try:
            rows.append(tuple(parts[:-1]) + (float(parts[-1]),))
        except ValueError:
            rows.append(tuple(parts))
    return rows


def same(got, want):
    """Bytes equal, except that floats agree to 1e-9 relative."""
    if got == want:
        return True
    a, b = values(got.decode()), values(want.decode())
    if len(a) != len(b):
        return False
    for x, y in zip(a, b):
        if isinstance(x, tuple) and isinstance(y, tuple) and len(x) == len(y):
            for u, v in zip(x, y):
                if isinstance(u, float) and isinstance(v, float):
                    if not (u == v or abs(u - v) <= 1e-9 * max(abs(u), abs(v))):
                        return False
                elif u != v:
                    return False
        elif x != y:
            return False
    return True


def leftovers(directory, known):
    """Files in `directory` the test did not make (temporaries)."""
    return sorted(set(os.listdir(directory)) - set(known))


def run_fifo(args, fifo, ranks):
    """Runs the command writing to `fifo` while a reader thread collects the
    bytes; returns (process, bytes)."""
    received = []

    def reader():
        with open(fifo, "rb") as f:
            received.append(f.read())

    t = threading.Thread(target=reader, daemon=True)
    t.start()
    p = h.tessera(*with_out(args, fifo), ranks=ranks, expect_ok=False)
    if t.is_alive():  # the command never opened it: give the reader its end of file
        try:
            os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))
        except OSError:
            pass
    t.join(30)
    return p, (received[0] if received else None)


def write_inputs(tmp):
    with open(os.path.join(tmp, "g.el"), "w") as f:  # a 6-cycle with a chord, a triangle, an edge
        f.write("0 1\n1 2\n2 3\n3 4\n4 5\n5 0\n1 4\n10 11\n11 12\n12 10\n20 21\n")
    with open(os.path.join(tmp, "w.wel"), "w") as f:
        f.write("0 1 0.5\n1 2 2\n2 0 1.25\n3 4 3\n")


def references(tmp, ranks, names=None):
    """name -> bytes each command (of `names`, default all) writes to a
    regular file at `ranks`."""
    refs = {}
    for name, args in commands(tmp).items():
        if names is not None and name not in names:
            continue
        out = os.path.join(tmp, f"ref-{name.replace(' ', '').replace('-', '')}-{ranks}.txt")
        if name.startswith("convert weighted"):
            out = out[:-4] + ".wel"  # the file names its format; "-" and streams take the weights as they are
        p = h.tessera(*with_out(args, out), ranks=ranks)
        if p.returncode == 0:
            with open(out, "rb") as f:
                refs[name] = f.read()
        h.check(p.returncode == 0 and len(refs.get(name, b"")) > 0, f"{name} OUT=FILE works ({ranks} ranks)")
    return refs


def streams(tmp, ranks):
    # Every command at 1 rank (no mpirun) and 2 (rank 0 writes what all
    # ranks gathered); at 3 the writers whose gathers differ from 2's.
    refs = references(tmp, ranks, None if ranks < 3 else ("cc -o", "hitting -o", "convert"))
    fifo = os.path.join(tmp, "fifo")
    os.mkfifo(fifo)
    for name, args in commands(tmp).items():
        if name not in refs:
            continue
        p, got = run_fifo(args, fifo, ranks)
        h.check(p.returncode == 0 and got is not None and same(got, refs[name]) and
                stat.S_ISFIFO(os.lstat(fifo).st_mode),
                f"{name} OUT=FIFO: the reader gets what a file gets, the FIFO stays a FIFO ({ranks} ranks)"
                + ("" if p.returncode == 0 else f": {p.stderr.strip()[-300:]}"))
        p = h.tessera(*with_out(args, "-"), ranks=ranks, expect_ok=False)
        h.check(p.returncode == 0 and same(p.stdout.encode(), refs[name]),
                f"{name} OUT=-: standard output is what a file gets ({ranks} ranks)"
                + ("" if p.returncode == 0 else f": {p.stderr.strip()[-300:]}"))
        if ranks == 2:
            p = h.tessera(*with_out(args, "/dev/stdout"), ranks=ranks, expect_ok=False)
            h.check(p.returncode == 0 and same(p.stdout.encode(), refs[name]),
                    f"{name} OUT=/dev/stdout: written through the descriptor ({ranks} ranks)")
    os.unlink(fifo)
    if ranks < 3:  # a listening Unix socket: connected to, written, never replaced
        for name in ("cc -o", "convert weighted"):
            sock_path = os.path.join(tmp, "sock")
            server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            server.bind(sock_path)
            server.listen(1)
            server.settimeout(120)
            got = []

            def serve():
                try:
                    conn, _ = server.accept()
                except OSError:
                    return
                with conn:
                    chunks = []
                    while data := conn.recv(65536):
                        chunks.append(data)
                    got.append(b"".join(chunks))

            t = threading.Thread(target=serve, daemon=True)
            t.start()
            p = h.tessera(*with_out(commands(tmp)[name], sock_path), ranks=ranks, expect_ok=False)
            t.join(30)
            server.close()
            h.check(p.returncode == 0 and got and same(got[0], refs[name]) and
                    stat.S_ISSOCK(os.lstat(sock_path).st_mode),
                    f"{name} OUT=SOCKET: the listener gets what a file gets, the socket stays ({ranks} ranks)"
                    + ("" if p.returncode == 0 else f": {p.stderr.strip()[-300:]}"))
            os.unlink(sock_path)
    if ranks == 3:
        return
    known = set(os.listdir(tmp))
    # A FIFO's reader that goes away: an error naming it, not SIGPIPE, and nothing left behind.
    os.mkfifo(fifo)
    big = ["gen", "kron", "--scale", "14", "-o", fifo]

    def early_reader():
        with open(fifo, "rb") as f:
            f.read(10)

    t = threading.Thread(target=early_reader, daemon=True)
    t.start()
    p = h.tessera(*big, ranks=ranks, expect_ok=False)
    t.join(30)
    h.check(p.returncode != 0 and "fifo" in p.stderr and "Broken pipe" in p.stderr and
            stat.S_ISFIFO(os.lstat(fifo).st_mode) and not leftovers(tmp, known | {"fifo"}),
            f"a FIFO whose reader leaves early: a clear error, the FIFO kept, no temporaries ({ranks} ranks)")
    os.unlink(fifo)


def descriptors(tmp):
    """/proc/self/fd/N of a job started without mpirun (a singleton) is the
    caller's descriptor N; under mpirun only 0-2 are the caller's."""
    refs = references(tmp, 1)
    for name in ("cc -o", "convert weighted"):
        r, w = os.pipe()
        args = with_out(commands(tmp)[name], f"/proc/self/fd/{w}")
        p = subprocess.Popen([TESSERA, *args, "-q"], pass_fds=(w,), stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        os.close(w)
        with os.fdopen(r, "rb") as f:
            got = f.read()
        _, err = p.communicate(timeout=120)
        h.check(p.returncode == 0 and same(got, refs[name]),
                f"{name} OUT=/proc/self/fd/{w} (no mpirun): the caller's pipe gets the bytes"
                + ("" if p.returncode == 0 else f": {err.decode().strip()[-300:]}"))
    r, w = os.pipe()
    p = subprocess.run([TESSERA, "cc", os.path.join(tmp, "g.el"), "-o", f"/proc/self/fd/{w}", "-n", "2", "-q"],
                       pass_fds=(w,), capture_output=True, text=True, timeout=120)
    os.close(r), os.close(w)
    h.check(p.returncode != 0 and "mpirun" in p.stderr and f"/proc/self/fd/{w}" in p.stderr,
            "-o /proc/self/fd/N (N > 2) under mpirun is refused: mpirun does not pass it to the ranks")


def refusals(tmp):
    g = os.path.join(tmp, "g.el")
    full = os.path.join(tmp, "full")
    os.makedirs(full, exist_ok=True)
    with open(os.path.join(full, "keep"), "w") as f:
        f.write("x")
    empty = os.path.join(tmp, "empty")
    os.makedirs(empty, exist_ok=True)
    known = set(os.listdir(tmp))
    for ranks in (1, 2):
        for name, args in commands(tmp).items():
            # Text lines refuse any directory; a graph output takes an empty one (a .tsg), not one with files.
            target = empty if name in ("cc -o", "lcc --ids", "hitting -o", "pipeline -o") else full
            p = subprocess.run([TESSERA, *with_out(args, target), "-n", str(ranks)], capture_output=True, text=True,
                               timeout=120)
            h.check(p.returncode != 0 and target in p.stderr and "directory" in p.stderr and
                    "reading" not in p.stderr and "generating" not in p.stderr and
                    not leftovers(tmp, known) and os.listdir(full) == ["keep"] and not os.listdir(empty),
                    f"{name} OUT=DIR is refused before any work, naming it, leaving nothing ({ranks} ranks)"
                    + (f": {p.stderr.strip()[-300:]}" if p.returncode == 0 or target not in p.stderr else ""))
    for args, what in ((["cc", g, "-o", "-", "--json"], "--json"),
                       (["lcc", g, "-o", "-", "--ids", "-"], "both write to standard output"),
                       (["convert", g, "-o", os.path.join(tmp, "no", "such", "g.el")], "does not exist"),
                       (["map", "--chunks", "4x4x4", "--topology", "torus:2x2x2", "--mapping", "rr", "-o", "-"],
                        "table on standard output")):
        p = subprocess.run([TESSERA, *args], capture_output=True, text=True, timeout=120)
        h.check(p.returncode != 0 and what in p.stderr and "reading" not in p.stderr and not p.stdout,
                f"{' '.join(args[:1] + args[-3:])} is refused before any work ({what})")
    # A symbolic link to a regular file stays a link; its target gets the bytes.
    target = os.path.join(tmp, "real.el")
    link = os.path.join(tmp, "link.el")
    with open(target, "w") as f:
        f.write("old\n")
    os.symlink("real.el", link)
    for ranks in (1, 2):
        p = h.tessera("convert", g, "-o", link, ranks=ranks)
        ref = h.tessera("convert", g, "-o", os.path.join(tmp, "direct.el"), ranks=ranks)
        with open(target, "rb") as a, open(os.path.join(tmp, "direct.el"), "rb") as b:
            h.check(p.returncode == 0 and ref.returncode == 0 and os.path.islink(link) and
                    os.readlink(link) == "real.el" and a.read() == b.read(),
                    f"convert -o LINK replaces the link's target, the link stays ({ranks} ranks)")
    os.mkdir(os.path.join(tmp, "linked.tsg"))
    os.symlink("linked.tsg", os.path.join(tmp, "dirlink.tsg"))
    p = h.tessera("convert", g, "-o", os.path.join(tmp, "dirlink.tsg"), ranks=2)
    h.check(p.returncode == 0 and os.path.islink(os.path.join(tmp, "dirlink.tsg")) and
            os.path.isfile(os.path.join(tmp, "linked.tsg", "edgelist.json")),
            "convert -o LINK.tsg to an empty directory: the graph goes there, the link stays")
    def summary(graph):
        p = h.tessera("cc", graph, "--json", ranks=1)
        if p.returncode != 0:
            return {}
        r = json.loads(p.stdout)["results"][0]
        return {k: r[k] for k in ("components", "largest_size", "largest_label")}

    h.check(summary(os.path.join(tmp, "dirlink.tsg")) == summary(g) != {}, "... and reads back the same graph")


def devices(tmp):
    null = os.path.join(tmp, "null")
    try:
        os.mknod(null, 0o666 | stat.S_IFCHR, os.makedev(1, 3))
    except PermissionError as e:
        print(f"SKIP: cannot make a device node here ({e}); --devices needs root")
        sys.exit(SKIP)

    def still_null():
        st = os.lstat(null)
        return stat.S_ISCHR(st.st_mode) and st.st_rdev == os.makedev(1, 3)

    known = set(os.listdir(tmp))
    for ranks in (1, 2, 4):
        for name, args in commands(tmp).items():
            if ranks > 2 and name not in ("gen", "cc -o", "lcc -o", "hitting -o"):
                continue
            p = h.tessera(*with_out(args, null), ranks=ranks, expect_ok=False)
            h.check(p.returncode == 0 and still_null() and not leftovers(tmp, known | {"lcc-beside.el"}),
                    f"{name} OUT=DIR/null: exit 0, still the character device 1,3, no temporaries ({ranks} ranks)"
                    + ("" if p.returncode == 0 else f": {p.stderr.strip()[-300:]}"))
    link = os.path.join(tmp, "null-link")
    os.symlink(null, link)
    p = h.tessera("gen", "kron", "--scale", "8", "-o", link, ranks=2, expect_ok=False)
    h.check(p.returncode == 0 and still_null() and os.path.islink(link), "gen -o LINK-TO-DEVICE writes in place")
    p = h.tessera("map", "--chunks", "4x4x4", "--topology", "torus:2x2x2", "--mapping", "rr", "-o", null,
                  expect_ok=False)
    h.check(p.returncode == 0 and still_null(), "map -o DIR/null: the device stays")
    tsg = os.path.join(tmp, "null.tsg")
    os.mknod(tsg, 0o666 | stat.S_IFCHR, os.makedev(1, 3))
    p = subprocess.run([TESSERA, "convert", os.path.join(tmp, "g.el"), "-o", tsg], capture_output=True, text=True,
                       timeout=120)
    h.check(p.returncode != 0 and tsg in p.stderr and "character device" in p.stderr and
            stat.S_ISCHR(os.lstat(tsg).st_mode) and "reading" not in p.stderr,
            "a .tsg (a directory) onto a character device is refused before reading")
    block = os.path.join(tmp, "loop")
    os.mknod(block, 0o600 | stat.S_IFBLK, os.makedev(7, 250))  # never opened: refused on its type
    for args in (["cc", os.path.join(tmp, "g.el"), "-o", block], ["gen", "grid", "--dims", "3x3", "-o", block]):
        p = subprocess.run([TESSERA, *args], capture_output=True, text=True, timeout=120)
        h.check(p.returncode != 0 and block in p.stderr and "block device" in p.stderr and
                "reading" not in p.stderr and "generating" not in p.stderr and stat.S_ISBLK(os.lstat(block).st_mode),
                f"{args[0]} -o BLOCK-DEVICE is refused before any work")


def case_dir(tmp, name):
    """A directory of the case's own, with the inputs: cases run at once
    (Harness.each) and each checks that its directory holds no temporaries."""
    d = os.path.join(tmp, name)
    os.mkdir(d)
    write_inputs(d)
    return d


with tempfile.TemporaryDirectory() as tmp:
    if DEVICES:
        devices(case_dir(tmp, "devices"))
    else:
        cases = {"streams, 1 rank": lambda d: streams(d, 1), "streams, 2 ranks": lambda d: streams(d, 2),
                 "streams, 3 ranks": lambda d: streams(d, 3), "descriptors": descriptors, "refusals": refusals}
        h.each(list(cases), lambda name: cases[name](case_dir(tmp, name.replace(",", "").replace(" ", "-"))))
h.finish()
