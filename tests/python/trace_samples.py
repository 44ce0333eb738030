"""Trace files written by hand for the trace tools' tests (format 1,
docs/trace.md): three ranks on two nodes with intervals whose summary is
known exactly (SAMPLE_EXPECTED), and a builder for variants and faults.

Rank 0 (node 0, 1 s): "read" 0-0.4 s holding an Afforest round 0.1-0.2 and a
barrier 0.3-0.4; "components" 0.4-0.9 holding a send batch to rank 1
0.45-0.46 (10 records, 80 bytes), an all_reduce 0.5-0.7 with a flush
0.55-0.6 nested in it, a checkpoint 0.8-0.85; nothing 0.9-1.0.
Rank 1 (node 0, 1 s): "read" 0-0.2, a barrier 0.2-0.4 outside any phase,
"components" 0.4-1.0 holding two Afforest rounds 0.41-0.51 and 0.52-0.62, a
handle batch from rank 0 0.46-0.47 and a send batch to rank 2 0.47-0.48
(5 records, 40 bytes).
Rank 2 (node 1, 0.5 s): "read" 0-0.3, a barrier 0.3-0.5; its thread 1
("session socket") serves 0-0.5 and sends a batch to rank 0 (3 records,
24 bytes): in the traffic, not in the main thread's times.
"""
import json

US = 1e6


def x(name, cat, pid, ts_s, end_s, tid=0, **args):
    event = {"name": name, "cat": cat, "ph": "X", "ts": ts_s * US, "dur": (end_s - ts_s) * US, "pid": pid,
             "tid": tid}
    if args:
        event["args"] = args
    return event


def sample():
    """The three-rank trace as a dict (a fresh copy each call)."""
    events = []
    for rank, host in enumerate(("alpha", "alpha", "beta")):
        events += [{"name": "process_name", "ph": "M", "pid": rank, "args": {"name": f"rank {rank} ({host})"}},
                   {"name": "process_sort_index", "ph": "M", "pid": rank, "args": {"sort_index": rank}},
                   {"name": "thread_name", "ph": "M", "pid": rank, "tid": 0, "args": {"name": "main"}}]
    events.append({"name": "thread_name", "ph": "M", "pid": 2, "tid": 1, "args": {"name": "session socket"}})
    events += [
        x("read", "phase", 0, 0.0, 0.4),
        x("Afforest round", "round", 0, 0.1, 0.2),
        x("barrier", "wait", 0, 0.3, 0.4),
        x("components", "phase", 0, 0.4, 0.9),
        x("send batch", "comm", 0, 0.45, 0.46, dst=1, records=10, bytes=80, channel="request"),
        x("all_reduce", "wait", 0, 0.5, 0.7),
        x("flush", "wait", 0, 0.55, 0.6),
        x("checkpoint", "checkpoint", 0, 0.8, 0.85, level="buddy", bytes=4096),

        x("read", "phase", 1, 0.0, 0.2),
        x("barrier", "wait", 1, 0.2, 0.4),
        x("components", "phase", 1, 0.4, 1.0),
        x("Afforest round", "round", 1, 0.41, 0.51),
        x("handle batch", "comm", 1, 0.46, 0.47, src=0, records=10, bytes=80, channel="request"),
        x("send batch", "comm", 1, 0.47, 0.48, dst=2, records=5, bytes=40, channel="forward"),
        x("Afforest round", "round", 1, 0.52, 0.62),

        x("read", "phase", 2, 0.0, 0.3),
        x("barrier", "wait", 2, 0.3, 0.5),
        x("serve", "phase", 2, 0.0, 0.5, tid=1),
        x("send batch", "comm", 2, 0.1, 0.11, tid=1, dst=0, records=3, bytes=24, channel="reply"),

        {"name": "batch", "cat": "batch", "ph": "s", "id": 1, "ts": 0.45 * US, "pid": 0, "tid": 0},
        {"name": "batch", "cat": "batch", "ph": "f", "bp": "e", "id": 1, "ts": 0.46 * US, "pid": 1, "tid": 0},
        {"name": "allocate", "cat": "storage", "ph": "i", "s": "t", "ts": 0.01 * US, "pid": 0, "tid": 0,
         "args": {"bytes": 1 << 20, "storage": "heap", "what": "edges"}},
        {"name": "resident memory", "ph": "C", "ts": 0.2 * US, "pid": 1, "args": {"MiB": 12.5}},
    ]
    return {
        "traceEvents": events,
        "displayTimeUnit": "ms",
        "otherData": {"tessera": {
            "format": 1, "version": "0.1.0", "command": "tessera pipeline --scale 20", "ranks": 3,
            "hosts": ["alpha", "alpha", "beta"], "pids": [101, 102, 201], "nodes": [0, 0, 1],
            "start_us": [0.0, 0.0, 0.0], "end_us": [1.0 * US, 1.0 * US, 0.5 * US],
            "clock": {"reference": 0, "method": "ping-pong with rank 0, best of 8", "offset_us": [0, -1.2, 2.0],
                      "uncertainty_us": [0, 3.1, 4.5], "skew_at_end_us": [0, 0.8, 0.3], "max_skew_us": 0.8},
            "dropped_events": [0, 0, 7], "buffer_events": 1048576,
        }},
    }


def comm_stats(ranks, sent):
    """comm_stats for `ranks` ranks from {(src, dst): (records, batches, bytes)}."""
    zero = {"records": 0, "batches": 0, "bytes": 0}
    stats = []
    for r in range(ranks):
        to = [dict(zip(("records", "batches", "bytes"), sent[(r, d)])) if (r, d) in sent else dict(zero)
              for d in range(ranks)]
        received = [dict(zip(("records", "batches", "bytes"), sent[(s, r)])) if (s, r) in sent else dict(zero)
                    for s in range(ranks)]
        stats.append({"rank": r, "host": "h", "to": to, "from": received,
                      "direct": {"reads": 0, "writes": 0}, "one_sided": {"gets": 0, "puts": 0, "accumulates": 0}})
    return stats


# What summary() must find in sample() (seconds; shares are seconds / wall).
SAMPLE_EXPECTED = {
    "ranks": [
        {"wall": 1.0, "busy": 0.6, "idle": 0.3, "communication": 0.01, "checkpoint": 0.05, "untracked": 0.1},
        {"wall": 1.0, "busy": 0.8, "idle": 0.2, "communication": 0.02, "checkpoint": 0.0, "untracked": 0.0},
        {"wall": 0.5, "busy": 0.3, "idle": 0.2, "communication": 0.0, "checkpoint": 0.0, "untracked": 0.0},
    ],
    # name, category, seconds per rank, events: sorted by the slowest rank
    "phases": [
        ("components", "phase", [0.5, 0.6, 0.0], 2),
        ("read", "phase", [0.4, 0.2, 0.3], 3),
        ("Afforest round", "round", [0.1, 0.2, 0.0], 3),
    ],
    "bytes": [[0, 80, 0], [0, 0, 40], [24, 0, 0]],
    "batches": [[0, 1, 0], [0, 0, 1], [1, 0, 0]],
    "records": [[0, 10, 0], [0, 0, 5], [3, 0, 0]],
    "same_node": [[True, True, False], [True, True, False], [False, False, True]],
}


def write(path, document):
    with open(path, "w") as f:
        json.dump(document, f) if not isinstance(document, str) else f.write(document)
    return path


def variant(change):
    """sample() after change(document) edits it."""
    document = sample()
    change(document)
    return document
