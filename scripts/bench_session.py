#!/usr/bin/env python3
"""What an analyst waits for in a session (tessera.start), measured in one
run: a command's round trip (rank 0 alone, and through every rank; warm and
after the ranks have slept a second), and an N-element result read as a view
of the session's memory against the same result copied through the socket,
with the client's private memory (RssAnon: where a copy goes) and shared
memory (RssShmem: the session's pages mapped here) grown by each.

    PYTHONPATH=build/python python3 scripts/bench_session.py [--ranks 2] [--elements 100000000]

Prints a table and one JSON line per result; exits 1 when a result's values
are wrong (the view and the copy are checked against the formula)."""
import argparse
import json
import os
import statistics
import sys
import time

import numpy as np

import tessera


def memory():
    with open("/proc/self/status") as f:
        fields = dict(line.split(":", 1) for line in f)
    return {k: int(fields[k].split()[0]) * 1024 for k in ("RssAnon", "RssShmem")}


def round_trips(call, count):
    times = []
    for _ in range(count):
        t = time.perf_counter()
        call()
        times.append(time.perf_counter() - t)
    return statistics.median(times) * 1e3


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--ranks", type=int, default=2)
    parser.add_argument("--elements", type=int, default=100_000_000)
    args = parser.parse_args()
    results, ok = [], True
    with tessera.start(ranks=args.ranks, max_transfer_bytes=max(1 << 30, 8 * args.elements + 1)) as s:
        s.noop()
        results.append(("round trip, rank 0 only (ping)", "ms", round_trips(s.ping, 200)))
        results.append(("round trip, every rank (noop), warm", "ms", round_trips(s.noop, 100)))

        def after_sleep():
            time.sleep(1.0)
            t = time.perf_counter()
            s.noop()
            return time.perf_counter() - t
        results.append(("round trip, every rank, after 1 s idle", "ms",
                        statistics.median(after_sleep() for _ in range(5)) * 1e3))

        n = args.elements
        t = time.perf_counter()
        a = s.arange(n, dtype=np.float64)
        results.append((f"make a {n:,}-element array in the session", "s", time.perf_counter() - t))
        expected = n * (n - 1) / 2

        before = memory()
        t = time.perf_counter()
        view = a.values
        total = float(view.sum())
        elapsed = time.perf_counter() - t
        after = memory()
        good = total == expected and a.is_view("values") and not view.flags.owndata
        ok &= good
        results.append(("view: map and sum", "s", elapsed))
        results.append(("view: client private memory grown", "MiB", (after["RssAnon"] - before["RssAnon"]) / 2**20))
        results.append(("view: client shared memory grown", "MiB", (after["RssShmem"] - before["RssShmem"]) / 2**20))
        del view
        a.__dict__.pop("values", None)

        before = memory()
        t = time.perf_counter()
        copied = a.array("values", copy=True)
        total = float(copied.sum())
        elapsed = time.perf_counter() - t
        after = memory()
        good = total == expected and copied.flags.owndata
        ok &= good
        results.append(("copy through the socket: fetch and sum", "s", elapsed))
        results.append(("copy: client private memory grown", "MiB", (after["RssAnon"] - before["RssAnon"]) / 2**20))
        results.append(("array bytes", "MiB", 8 * n / 2**20))
        del copied
    print(f"{'session, ' + str(args.ranks) + ' ranks':<48} {'value':>12}")
    for name, unit, value in results:
        print(f"{name:<48} {value:>12.3f} {unit}")
    for name, unit, value in results:
        print(json.dumps({"bench": "session", "ranks": args.ranks, "elements": args.elements, "result": name,
                          "unit": unit, "value": round(value, 6), "verified": ok}))
    if not ok:
        print("FAILED: a result's values were wrong", file=sys.stderr)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
