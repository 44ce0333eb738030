"""A real job's trace, end to end: `tessera -n 2 --trace t.json pipeline
--scale 20` writes one file that opens as Chrome Trace Event JSON, with
every rank, events well formed and nested, each rank's time covered by
phases and waits (busy + idle within 2% of its wall time), the pipeline's
stage names and kernel rounds; `tessera trace summary` and `tessera trace
plot` read it; TESSERA_TRACE does the same for any program; and
`--comm-stats` prints and reports counts that equal the aggregation
engine's own (bench indexgather: the rows' traffic, the fine-grained
baseline's MPI_Get count).

Usage: test_trace.py BUILD_DIR"""
import json
import os
import shutil
import struct
import sys
import tempfile

BUILD = os.path.abspath(sys.argv[1])
TESSERA = os.path.join(BUILD, "tessera")
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, ".."))
sys.path.insert(0, os.path.join(HERE, "..", "..", "python"))  # tessera.tracefile: pure Python
from harness import check, finish, run, said  # noqa: E402
from tessera import tracefile  # noqa: E402


def png_size(path):
    with open(path, "rb") as f:
        head = f.read(24)
    if head[:8] != b"\x89PNG\r\n\x1a\n":
        return None
    return struct.unpack(">II", head[16:24])


def nested_on_every_thread(doc):
    """Events of one (pid, tid) either nest or are disjoint (times are
    printed to the nanosecond: rounds told by their ends share an end with
    the next one's start up to that rounding)."""
    by_thread = {}
    for e in doc["traceEvents"]:
        if e.get("ph") == "X":
            by_thread.setdefault((e["pid"], e["tid"]), []).append((e["ts"], e["ts"] + e["dur"], e["name"]))
    for key, spans in by_thread.items():
        spans.sort(key=lambda s: (s[0], -s[1]))
        stack = []
        for begin, end, name in spans:
            while stack and stack[-1][1] <= begin + 0.01:
                stack.pop()
            if stack and end > stack[-1][1] + 1.0:
                return f"{name} [{begin}, {end}] on {key} crosses {stack[-1][2]} [{stack[-1][0]}, {stack[-1][1]}]"
            stack.append((begin, end, name))
    return ""


def main():
    work = tempfile.mkdtemp(prefix="tessera-trace-test-")
    try:
        path = os.path.join(work, "t.json")
        p = run([TESSERA, "-n", "2", "--trace", path, "pipeline", "--scale", "20", "--json", "-q"], timeout=600)
        check(p.returncode == 0, "tessera -n 2 --trace t.json pipeline --scale 20 exits 0", said(p))
        check(f"trace written to {path}" in p.stderr, "the job says where the trace went", said(p))
        if p.returncode != 0 or not os.path.exists(path):
            return finish()
        with open(path) as f:
            doc = json.load(f)
        meta = doc["otherData"]["tessera"]
        check(meta["ranks"] == 2 and len(meta["hosts"]) == 2, "the file names 2 ranks and their hosts", str(meta)[:400])
        pids = {e["pid"] for e in doc["traceEvents"] if e.get("ph") == "X"}
        check(pids == {0, 1}, "both ranks recorded events", str(pids))
        problem = nested_on_every_thread(doc)
        check(not problem, "events nest on every thread", problem)
        bad = [e for e in doc["traceEvents"] if e.get("ph") == "X" and (e["dur"] < 0 or "cat" not in e)]
        check(not bad, "every complete event has a category and a duration >= 0", str(bad[:3]))
        names = {e["name"] for e in doc["traceEvents"] if e.get("ph") == "X"}
        for stage in ("tessera pipeline", "generate", "components", "largest component", "hitting times"):
            check(stage in names, f"the pipeline's stage '{stage}' is in the trace", str(sorted(names))[:600])
        rounds = {e["name"] for e in doc["traceEvents"] if e.get("cat") == "round"}
        check("Afforest round" in rounds or "Belos iteration" in rounds or "CG iteration" in rounds,
              "kernel rounds are in the trace", str(rounds))
        waits = [e for e in doc["traceEvents"] if e.get("cat") == "wait"]
        check(len(waits) > 0, "waits (idle time) are in the trace")
        counters = [e for e in doc["traceEvents"] if e.get("ph") == "C" and e["name"] == "resident memory"]
        check(len(counters) >= 2, "resident memory is sampled over time")

        trace = tracefile.load(path)
        s = tracefile.summary(trace)
        for r, row in enumerate(s["ranks"]):
            covered = row["busy_s"] + row["idle_s"]
            check(abs(covered - row["wall_s"]) <= 0.02 * row["wall_s"],
                  f"rank {r}: busy {row['busy_s']:.3f} s + idle {row['idle_s']:.3f} s within 2% of wall "
                  f"{row['wall_s']:.3f} s", json.dumps(row))

        p = run([TESSERA, "trace", "summary", path])
        check(p.returncode == 0 and "rank" in p.stdout and "idle" in p.stdout, "tessera trace summary prints the table",
              said(p))
        p = run([TESSERA, "trace", "summary", path, "--json"])
        ok = p.returncode == 0
        try:
            j = json.loads(p.stdout)
        except ValueError:
            ok, j = False, {}
        check(ok and len(j.get("ranks", [])) == 2, "tessera trace summary --json gives both ranks", said(p))
        png = os.path.join(work, "t.png")
        p = run([TESSERA, "trace", "plot", path, "-o", png], timeout=300)
        size = png_size(png) if os.path.exists(png) else None
        check(p.returncode == 0 and size is not None and size[0] >= 400 and size[1] >= 300,
              f"tessera trace plot writes a PNG ({size})", said(p))

        # Any program on the library: TESSERA_TRACE.
        graph = os.path.join(work, "g.el")
        run([TESSERA, "gen", "grid", "--dims", "60x60", "-o", graph, "-q"])
        env_path = os.path.join(work, "env.json")
        env = dict(os.environ, TESSERA_TRACE=env_path)
        p = run([TESSERA, "-n", "3", "cc", graph, "-q"], env=env)
        ok = p.returncode == 0 and os.path.exists(env_path)
        if ok:
            with open(env_path) as f:
                ranks = json.load(f)["otherData"]["tessera"]["ranks"]
            ok = ranks == 3
        check(ok, "TESSERA_TRACE=FILE records a 3-rank cc", said(p))

        # --comm-stats: a table on stderr, the counts in the JSON document.
        p = run([TESSERA, "-n", "2", "--comm-stats", "cc", graph, "--json", "-q"])
        ok = p.returncode == 0
        try:
            stats = json.loads(p.stdout)["comm_stats"]
        except (ValueError, KeyError):
            ok, stats = False, []
        check(ok and len(stats) == 2 and "communication (aggregation engine" in p.stderr,
              "--comm-stats: a table on stderr and comm_stats in the JSON", said(p))
        if ok:
            sent = [sum(c["bytes"] for c in s["to"]) for s in stats]
            received = [sum(c["bytes"] for c in s["from"]) for s in stats]
            check(sent[0] == received[1] and sent[1] == received[0],
                  f"what one rank sent the other received ({sent}, {received})")

        # The engine's own counters: the aggregated rows' traffic (one
        # repetition each) against --comm-stats over the whole run.
        p = run([TESSERA, "-n", "2", "--comm-stats", "bench", "indexgather", "--reps", "1", "--json", "-q",
                 "--table", "4096", "--requests", "20000", "--fine-requests", "3000"], timeout=300)
        lines = [json.loads(line) for line in p.stdout.splitlines() if line.startswith("{")]
        rows = [line for line in lines if "variant" in line]
        totals = [line for line in lines if "comm_stats" in line]
        check(p.returncode == 0 and rows and totals, "bench indexgather --comm-stats --json runs", said(p))
        if rows and totals:
            counts = totals[0]["comm_stats"]
            traffic = [r["extra"]["traffic"] for r in rows if "traffic" in r.get("extra", {})]
            check(len(traffic) >= 3, f"{len(traffic)} aggregated rows report their traffic")
            engine_bytes = sum(t["bytes_sent"] for t in traffic)
            counted_bytes = sum(c["bytes"] for s in counts for c in s["to"])
            check(engine_bytes == counted_bytes,
                  f"--comm-stats bytes {counted_bytes} equal the rows' engine counters {engine_bytes}",
                  json.dumps(rows)[:1500])
            requests = sum(t["requests"] for t in traffic)
            records = sum(c["records"] for s in counts for c in s["to"])
            check(records == 2 * requests and requests > 0,
                  f"records sent {records} = requests {requests} and their replies")
            direct = sum(t["records_direct"] for t in traffic)
            reads = sum(s["direct"]["reads"] for s in counts)
            check(reads == direct and direct > 0, f"direct reads {reads} = the rows' same-node direct reads {direct}")
            gets = sum(s["one_sided"]["gets"] for s in counts)
            check(gets == 2 * 3000, f"one-sided gets {gets} = 2 ranks x 3000 fine-grained MPI_Get")
        return finish()
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
