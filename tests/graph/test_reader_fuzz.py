#!/usr/bin/env python3
"""Reader fuzz corpus: a few hundred deterministically mutated graph files.

Usage: test_reader_fuzz.py BUILD_DIR [COUNT]

From small seed files (.el, .wel, .mtx and a binary .tsg directory) a fixed
seed derives mutated files: flipped and inserted bytes, cut and repeated
lines, hostile tokens (NaN, inf, ids near 2^63 and 2^64, negative numbers, a
byte-order mark, NUL bytes, gzip magic, a huge Matrix Market header, lies in
edgelist.json and the array metadata). Each file is read by `tessera cc` at
1 rank (every eleventh, which walks through all six seed kinds, also at 2
ranks) with a timeout. A second corpus (its own seed, a third as many files)
mutates the formats GAPBS reads: DIMACS .gr, METIS .graph, and GAPBS's
serialized .sg/.wsg written by `tessera convert` (every seventh also at 3
ranks). Every run must end with
exit code 0 or 1 -- never a signal, never a hang -- print "tessera: error"
when it fails, and leave no file in its private TESSERA_SHM_DIR.
"""
import concurrent.futures
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile

SEED = 20261123
TIMEOUT = 60  # seconds per run; the sanitizer build is slow

HOSTILE = [b"nan", b"inf", b"-inf", b"-1", b"18446744073709551615", b"18446744073709551616",
           b"9223372036854775807", b"4294967296", b"1e308", b"1e999", b"0x10", b"\x00", b"\xef\xbb\xbf",
           b"\x1f\x8b\x08", b"#", b"%", b"\r", b"\t", b",", b"99999999999999999999999", b"-0", b"1.5", b" "]


def seed_texts():
    el = b"# a small graph\n" + b"".join(b"%d %d\n" % (i, (i * 7 + 3) % 40) for i in range(60))
    wel = b"".join(b"%d %d %g\n" % (i, (i * 5 + 1) % 30, 0.5 + i) for i in range(40))
    mtx = (b"%%MatrixMarket matrix coordinate real symmetric\n% comment\n30 30 35\n" +
           b"".join(b"%d %d %g\n" % ((i % 30) + 1, ((i * 11) % 30) + 1, 1.0 + i) for i in range(35)))
    snap = b"40 60\n" + b"".join(b"%d %d\n" % (i % 40, (i * 3 + 1) % 40) for i in range(60))
    return {"el": el, "wel": wel, "mtx": mtx, "snap.el": snap}


SEMANTIC = [b"nan", b"inf", b"-inf", b"18446744073709551615", b"9223372036854775807", b"4294967296",
            b"2305843009213693952", b"100000000000", b"1e999", b"-1", b"0"]


def replace_number(data, rng, tokens):
    """One number of a well-formed file replaced: the file stays parseable
    up to that value, so the value itself is what the reader meets."""
    spans, i = [], 0
    while i < len(data):
        if chr(data[i]).isdigit() and (i == 0 or chr(data[i - 1]) in " \t\n"):
            j = i
            while j < len(data) and chr(data[j]) not in " \t\r\n":
                j += 1
            spans.append((i, j))
            i = j
        else:
            i += 1
    if not spans:
        return bytes(data)
    a, b = rng.choice(spans)
    return bytes(data[:a] + rng.choice(tokens) + data[b:])


def mutate(data, rng):
    if rng.random() < 0.5:
        return replace_number(bytearray(data), rng, SEMANTIC)
    data = bytearray(data)
    for _ in range(rng.randint(1, 4)):
        kind = rng.randrange(8)
        pos = rng.randrange(len(data) + 1)
        if kind == 0 and data:  # flip a byte
            data[min(pos, len(data) - 1)] = rng.randrange(256)
        elif kind == 1:  # insert a hostile token
            data[pos:pos] = rng.choice(HOSTILE)
        elif kind == 2:  # replace a number by a hostile token
            start = pos
            while start < len(data) and not chr(data[start]).isdigit():
                start += 1
            end = start
            while end < len(data) and chr(data[end]).isdigit():
                end += 1
            data[start:end] = rng.choice(HOSTILE)
        elif kind == 3:  # cut a range
            data[pos:pos + rng.randint(1, 40)] = b""
        elif kind == 4:  # repeat a line
            lines = bytes(data).split(b"\n")
            k = rng.randrange(len(lines))
            lines.insert(k, lines[k])
            data = bytearray(b"\n".join(lines))
        elif kind == 5:  # truncate
            data = data[:pos]
        elif kind == 6:  # random bytes
            data[pos:pos] = bytes(rng.randrange(256) for _ in range(rng.randint(1, 12)))
        else:  # a very long line
            data[pos:pos] = b"1" * rng.choice([100, 5000])
    return bytes(data)


def mutate_json(text, rng):
    """A lie or a corruption in a JSON metadata document."""
    try:
        doc = json.loads(text)
    except ValueError:
        return mutate(text, rng)
    paths = []

    def walk(node, path):
        if isinstance(node, dict):
            for k, v in node.items():
                walk(v, path + [k])
        elif isinstance(node, list):
            for i, v in enumerate(node):
                walk(v, path + [i])
        else:
            paths.append(path)
    walk(doc, [])
    if not paths or rng.random() < 0.25:
        return mutate(text, rng)
    path = rng.choice(paths)
    parent = doc
    for p in path[:-1]:
        parent = parent[p]
    parent[path[-1]] = rng.choice([
        0, 1, -1, 2**62, 2**63 - 1, 2**64 - 1, 2**64, 4096, 3, True, False, None, "x", "../../etc/passwd",
        "uint64", "float64", "bytes3", [], {}, 1.5])
    return json.dumps(doc).encode()


def run(tessera, path, ranks, shm_dir, stderr=None):
    """What is wrong with one `tessera cc` run on a (corrupt) file, or None;
    its stderr appended to `stderr` (a list) when given."""
    env = dict(os.environ, TESSERA_SHM_DIR=shm_dir)
    cmd = [tessera] + (["-n", str(ranks)] if ranks > 1 else []) + ["cc", path]
    try:
        p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=TIMEOUT, env=env)
    except subprocess.TimeoutExpired:
        return "hang (no exit within %d s)" % TIMEOUT
    err = p.stderr.decode(errors="replace")
    if stderr is not None:
        stderr.append(err)
    if p.returncode < 0 or p.returncode > 1:
        return "exit code %d\n%s" % (p.returncode, err[-2000:])
    if "Sanitizer" in err or "runtime error:" in err:
        return "sanitizer report\n%s" % err[-4000:]
    if p.returncode == 1 and "tessera: error" not in err:
        return "exit 1 without a 'tessera: error' message\n%s" % err[-2000:]
    left = os.listdir(shm_dir)
    if left:
        return "left %s in its shared directory" % left
    return None


def gapbs_seeds(tessera, work):
    """Seeds in the formats GAPBS reads: .gr and .graph text, and .sg/.wsg
    (directed and undirected) written by tessera convert from a .wel."""
    gr = b"c a small graph\np sp 30 40\n" + b"".join(b"a %d %d %d\n" % (i % 30 + 1, (i * 7 + 3) % 30 + 1, i + 1)
                                                   for i in range(40))
    rows = [[] for _ in range(20)]
    for i in range(20):  # a ring with chords, each edge at both ends
        for j in ((i + 1) % 20, (i * 3 + 7) % 20):
            if j != i and j not in rows[i]:
                rows[i].append(j)
                rows[j].append(i)
    metis = (b"%% comment\n%d %d\n" % (20, sum(map(len, rows)) // 2) +
             b"".join(b"".join(b"%d " % (j + 1) for j in r) + b"\n" for r in rows))
    seeds = {"gr": gr, "graph": metis}
    wel = os.path.join(work, "seed-gapbs.wel")
    with open(wel, "wb") as f:
        f.write(b"".join(b"%d %d %d\n" % (i, (i * 5 + 2) % 25, i % 7 + 1) for i in range(50)))
    for name, extra in (("sg", ["--pattern"]), ("wsg", []), ("u.sg", ["--pattern", "--undirected"])):
        out = os.path.join(work, "seed." + name)
        if subprocess.run([tessera, "convert", wel, "-o", out, "-q", *extra]).returncode != 0:
            raise SystemExit("FAIL: cannot write the %s seed graph with tessera convert" % name)
        with open(out, "rb") as f:
            seeds[name] = f.read()
    return seeds


def make_binary_seed(tessera, work):
    src = os.path.join(work, "seed-bin.el")
    with open(src, "wb") as f:
        f.write(b"".join(b"%d %d\n" % (i, (i * 3 + 1) % 20) for i in range(30)))
    out = os.path.join(work, "seed.tsg")
    for args in ([src, out], [src, "-o", out]):  # positional OUT, or -o
        if subprocess.run([tessera, "convert"] + args, stdout=subprocess.DEVNULL,
                          stderr=subprocess.DEVNULL).returncode == 0:
            return out
        shutil.rmtree(out, ignore_errors=True)
    raise SystemExit("FAIL: cannot write the binary seed graph with tessera convert")


def corrupt_data_checks(tessera, binary, work):
    """The arrays themselves wrong (a row offset out of order, a destination
    outside the graph), read at the writer's rank count (mapped in place) and
    at others (each rank copies its rows): every run exits 1 naming the file
    and calling it corrupt. Returns the failures."""
    failures = []
    graph = json.load(open(os.path.join(binary, "edgelist.json")))
    id_bytes = 4 if graph["id_type"] == "uint32" else 8
    rows = graph["vertices"] + graph["ranks"]
    for name, array, width, length, index, value in (
            ("row offset out of order", "offsets", 8, rows, 5, 10 ** 6),
            ("destination outside the graph", "dst", id_bytes, graph["arcs"], 7, 1000)):
        path = os.path.join(work, "data-%s.tsg" % array)
        shutil.copytree(binary, path)
        seg = os.path.join(path, array + ".r0.seg")
        with open(seg, "r+b") as f:
            f.seek(os.path.getsize(seg) - width * length + width * index)  # the elements end the file
            f.write(value.to_bytes(width, "little"))
        for ranks in (1, 2, 3):
            shm = os.path.join(work, "shm-data-%s-%d" % (array, ranks))
            os.mkdir(shm)
            said = []
            problem = run(tessera, path, ranks, shm, said)
            if problem:
                failures.append("%s at %d rank(s): %s" % (name, ranks, problem))
            elif "tessera: error" not in said[0] or path not in said[0] or "corrupt" not in said[0]:
                failures.append("%s at %d rank(s): no error naming %s as corrupt: %s"
                                % (name, ranks, path, said[0][-600:]))
    return failures


def main():
    build = sys.argv[1]
    count = int(sys.argv[2]) if len(sys.argv) > 2 else 300
    tessera = os.path.join(build, "tessera")
    rng = random.Random(SEED)
    work = tempfile.mkdtemp(prefix="tessera-fuzz-")
    try:
        seeds = seed_texts()
        binary = make_binary_seed(tessera, work)
        jobs = []
        for i in range(count):
            kind = i % 6
            if kind < 4:
                name = list(seeds)[kind]
                path = os.path.join(work, "f%03d.%s" % (i, name))
                with open(path, "wb") as f:
                    f.write(mutate(seeds[name], rng))
            else:  # a binary graph with a mutated metadata file or segment header
                path = os.path.join(work, "f%03d.tsg" % i)
                shutil.copytree(binary, path)
                target = rng.choice(["edgelist.json", "edgelist.json", "offsets.json", "dst.json", "offsets.r0.seg"])
                full = os.path.join(path, target)
                with open(full, "rb") as f:
                    data = f.read()
                if target.endswith(".json"):
                    data = mutate_json(data, rng)
                else:  # only the header page: the data itself is any bytes
                    data = mutate(data[:200], rng) + data[200:]
                with open(full, "wb") as f:
                    f.write(data)
            for ranks in ([1, 2] if i % 11 == 0 else [1]):
                shm = os.path.join(work, "shm-%03d-%d" % (i, ranks))
                os.mkdir(shm)
                jobs.append((path, ranks, shm))
        # The formats GAPBS reads, from their own random sequence (the corpus
        # above stays as it was).
        gapbs = gapbs_seeds(tessera, work)
        grng = random.Random(SEED + 1)
        for i in range(count // 3):
            name = list(gapbs)[i % len(gapbs)]
            path = os.path.join(work, "g%03d.%s" % (i, name))
            with open(path, "wb") as f:
                f.write(mutate(gapbs[name], grng))
            for ranks in ([1, 3] if i % 7 == 0 else [1]):
                shm = os.path.join(work, "shm-g%03d-%d" % (i, ranks))
                os.mkdir(shm)
                jobs.append((path, ranks, shm))
        failures = corrupt_data_checks(tessera, binary, work)
        with concurrent.futures.ThreadPoolExecutor(max_workers=4) as pool:
            results = pool.map(lambda j: (j, run(tessera, *j)), jobs)
            for (path, ranks, _), problem in results:
                if problem:
                    failures.append("%s at %d rank(s): %s" % (os.path.basename(path), ranks, problem))
        for f in failures:
            print("FAIL:", f)
        if failures:
            print("kept the corpus in", work)
            sys.exit(1)
        print("PASS: %d mutated files, %d runs: no signal, no hang, a message for each failure" % (count, len(jobs)))
    except BaseException:
        raise
    else:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
