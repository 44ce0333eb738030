#!/usr/bin/env python3
"""Bytes per operation of `bench indexgather` and `bench histogram`, at 1, 2
and 3 ranks: every aggregated row's traffic says what its exchange handed to
the transport (bytes_sent) for how many operations (requests), and the wire
and side bytes per operation. Against the record shapes: an indexgather read
sends an 8-byte offset and gets an 8-byte value back, its destination pointer
(8 bytes) stays at the origin; a histogram update sends its offset alone, 4
bytes on these small tables (the row "heap update records", the general
update aggregator, sends a 4-byte offset and an 8-byte value: 12 bytes)
and gets nothing back;
every batch and every reply batch carries an
8-byte header. So with direct routing bytes_sent is exactly
requests x (request + reply) + batches x (8 + 8 with replies); forwarding
(multi-hop, node-first) only adds. The operations counted must be the same
whichever path served them, and about (P-1)/P of all (uniform indices)."""
import math
import os
import sys

from bench_cli import private_shm, run_bench

BUILD = sys.argv[1]
TESSERA = os.path.join(BUILD, "tessera")
PER_RANK = 20000
HEADER = 8  # the batch header: ticket and count, 4 bytes each
BENCHES = {
    # bench: (its size options, request bytes, reply bytes, side bytes, what one operation is called)
    "indexgather": (["--table", "1000", "--requests", str(PER_RANK), "--fine-requests", "100"], 8, 8, 8, "read"),
    "histogram": (["--counts", "100", "--updates", str(PER_RANK), "--fine-updates", "100"], 4, 0, 0, "update"),
}
# Rows whose records differ from their bench's: (bench, storage) -> request bytes.
REQUEST_BYTES = {("histogram", "heap update records"): 12}
DIRECT = ("heap", "heap via MPI", "shared", "shared+direct", "colocale+direct")
ROUTED = ("heap multi-hop", "heap node-first")


def check(bench, ranks, rows, summaries):
    _, heap_request, reply, side, what = BENCHES[bench]
    aggregated = {r["storage"]: r for r in rows if r["variant"] == "aggregated"}
    assert set(DIRECT[:4]) | set(ROUTED) <= set(aggregated), sorted(aggregated)
    assert (bench == "histogram") == ("heap update records" in aggregated), sorted(aggregated)
    remote = None
    for storage, row in aggregated.items():
        request = REQUEST_BYTES.get((bench, storage), heap_request)
        t = row["extra"]["traffic"]
        assert t["side_bytes_per_request"] == side, (storage, t)
        carried = t["requests"] + t["records_direct"]  # every remote operation, by whichever path
        remote = carried if remote is None else remote
        assert carried == remote, (storage, carried, remote)
        if ranks == 1:
            assert t["requests"] == 0 and t["bytes_sent"] == 0 and t["wire_bytes_per_request"] is None, (storage, t)
            continue
        assert t["requests"] > 0 or t["records_direct"] > 0, (storage, t)
        batches = t["batches_same_node"] + t["batches_between_nodes"]
        exact = t["requests"] * (request + reply) + batches * (HEADER + (HEADER if reply else 0))
        if storage in ROUTED:
            assert t["bytes_sent"] >= t["requests"] * (request + reply), (storage, t)
        else:
            assert t["bytes_sent"] == exact, (storage, t, exact)
        if t["requests"]:
            assert math.isclose(t["wire_bytes_per_request"], t["bytes_sent"] / t["requests"], rel_tol=1e-12), t
            assert t["wire_bytes_per_request"] >= request + reply, (storage, t)
    if ranks > 1:
        expected = PER_RANK * ranks * (ranks - 1) / ranks
        assert abs(remote - expected) < 0.05 * expected, (remote, expected)
        # Batches are large here: the headers add little to the record bytes.
        heap = aggregated["heap"]["extra"]["traffic"]
        assert heap["wire_bytes_per_request"] < (heap_request + reply) * 1.05, heap
    lines = [s for s in summaries if "wire_bytes_per_request" in s]
    if ranks == 1:
        assert not lines, lines
        return
    assert len(lines) == 1, summaries
    s = lines[0]
    assert s["bytes_storage"] == "heap" and s["side_bytes_per_request"] == side, s
    assert math.isclose(s["wire_bytes_per_request"], aggregated["heap"]["extra"]["traffic"]["wire_bytes_per_request"],
                        rel_tol=1e-12), s
    assert f"bytes per {what}" in s["summary"], s["summary"]


def main():
    with private_shm("tessera-wire-bytes-") as env:
        for ranks in (1, 2, 3):
            for bench, (args, *_) in BENCHES.items():
                run, rows, summaries = run_bench(TESSERA, [bench, "-n", str(ranks), "--reps", "1", *args], env)
                assert run.returncode == 0, (bench, ranks, run.stderr)
                check(bench, ranks, rows, summaries)
    print("wire and side bytes per operation match the record shapes at 1-3 ranks: ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())
