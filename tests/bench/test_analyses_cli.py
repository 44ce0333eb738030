#!/usr/bin/env python3
"""`tessera bench pagerank|bfs|spectral` end to end on tiny graphs, at 1 and 2
ranks: every Tessera row verified by its kernel's verifier, the steps a user
waits for timed in its JSON, the summary's figures there; on a small graph
file the answer also matches a serial reference computed here (BFS: reached
and levels; spectral: lambda2 of a path, 2 - 2 cos(pi / n)). Without a GAPBS
tree the GAPBS row is skipped and says how to get one; with
TESSERA_GAPBS_SRC set, GAPBS runs in the same run on the same graph and its
row is verified by GAPBS's own verifier. Nothing is left in the Shared
directory; bad input is refused naming the option.

  test_analyses_cli.py BUILD pagerank|bfs|spectral"""
import collections
import math
import os
import sys
import tempfile

from bench_cli import expect_refused, private_shm, run_bench

BUILD, KERNEL = sys.argv[1], sys.argv[2]
TESSERA = os.path.join(BUILD, "tessera")
GAPBS = os.environ.get("TESSERA_GAPBS_SRC")


def bench(args, env):
    run, rows, summaries = run_bench(TESSERA, [KERNEL, *args], env, timeout=120)
    if KERNEL == "spectral" and "needs the trilinos/ layer" in run.stderr:
        print("SKIPPED: built without Trilinos (Anasazi)")
        sys.exit(77)
    assert run.returncode == 0, (args, run.returncode, run.stderr[-1500:])
    # The kernel's summary, and with GAPBS beside a packed row, the packed row's (its keys merged in).
    packed = any("packed" in r["variant"] for r in rows) and any(s.get("gapbs_seconds") for s in summaries)
    assert len(summaries) == (2 if packed else 1), summaries
    merged = dict(summaries[0])
    if packed:
        assert "packed_over_gapbs" in summaries[1], summaries
        merged.update({k: v for k, v in summaries[1].items() if k.startswith(("packed_", "bytes_", "gapbs_bytes"))})
    return rows, merged


def tessera_row(rows, step):
    [row] = [r for r in rows if r["variant"].startswith("Tessera") and "packed" not in r["variant"]]
    assert row["verified"] is True and row["reps"] == 2 and row["seconds"] > 0, row
    steps = row["extra"]["step_seconds"]
    assert set(steps) == {step, "build", "verify"} and all(v >= 0 for v in steps.values()), steps
    assert steps[step] > 0 and steps["verify"] > 0, steps
    return row


def gapbs_row(rows, summary, ranks, graph_edges):
    [row] = [r for r in rows if r["variant"].startswith("GAPBS")]
    if not GAPBS:
        assert "--peer-gapbs" in row["skipped"], row
        assert "github.com/sbeamer/gapbs" in summary["gapbs_how_to"], summary
        assert summary["gapbs_seconds"] is None, summary
        return
    assert row["verified"] is True and "PASS" in row["check"] and "the same graph" in row["check"], row
    assert row["storage"] == f"{ranks} thread" + ("s" if ranks > 1 else ""), row
    assert row["work"] == graph_edges, row
    [t] = [r for r in rows if r["variant"].startswith("Tessera") and "packed" not in r["variant"]]
    assert abs(summary["tessera_over_gapbs"] - t["seconds"] / row["seconds"]) < 1e-9 * summary["tessera_over_gapbs"]


def packed_row(rows, summary, row):
    """An undirected graph's packed row: verified, under 4 bytes an edge, the same search or a fixed point."""
    [p] = [r for r in rows if "packed" in r["variant"]]
    assert p["verified"] is True and p["extra"]["step_seconds"]["pack"] > 0, p
    assert 0 < p["extra"]["bytes_per_edge"] < 4 and row["config"]["bytes_per_edge"] == 8.0, (p, row)
    assert row["config"]["gapbs_bytes_per_edge"] == 8.0, row
    if KERNEL == "bfs":
        assert "check_bfs passed" in p["check"], p
        assert (p["extra"]["reached"], p["extra"]["levels"]) == (row["extra"]["reached"], row["extra"]["levels"]), (p, row)
    else:
        assert "check_pagerank passed" in p["check"] and p["extra"]["converged"] is True, p
    if "packed_over_gapbs" in summary:
        assert summary["packed_bytes_per_edge"] == p["extra"]["bytes_per_edge"], summary


def write(path, edges):
    with open(path, "w") as f:
        f.writelines(f"{u} {v}\n" for u, v in edges)


def directed_graph():
    """A small directed graph: a cycle, chords, a tail only the source reaches, a vertex nobody reaches."""
    n = 40
    edges = [(i, (i + 1) % 30) for i in range(30)] + [(i, (3 * i + 7) % 30) for i in range(0, 30, 4)]
    edges += [(5, 30)] + [(i, i + 1) for i in range(30, 38)] + [(39, 0)]
    return n, edges


def bfs_reference(edges, source):
    out = collections.defaultdict(list)
    for u, v in edges:
        out[u].append(v)
    depth = {source: 0}
    frontier = [source]
    while frontier:
        nxt = []
        for u in frontier:
            for v in out[u]:
                if v not in depth:
                    depth[v] = depth[u] + 1
                    nxt.append(v)
        frontier = nxt
    return len(depth), max(depth.values())


def main():
    peer = ["--peer-gapbs", GAPBS] if GAPBS else []
    with private_shm(f"tessera-bench-{KERNEL}-") as env, tempfile.TemporaryDirectory(prefix="tessera-bench-") as d:
        env = dict(env, TMPDIR=d)
        directed = os.path.join(d, "directed.el")
        n, edges = directed_graph()
        write(directed, edges)
        if KERNEL in ("pagerank", "bfs"):
            for ranks in ("1", "2"):
                rows, summary = bench(["--scale", "8", "--reps", "2", "-n", ranks, *peer], env)
                row = tessera_row(rows, "generate")
                assert row["config"]["kron_scale"] == 8 and row["config"]["directed"] is False, row
                assert row["extra"]["step_seconds"]["build"] == 0, row  # undirected: pulls over its own arrays
                if KERNEL == "pagerank":
                    assert "check_pagerank" in row["check"] and 1 <= row["extra"]["iterations"] <= 20, row
                else:
                    assert "check_bfs" in row["check"] and row["extra"]["reached"] > 1, row
                gapbs_row(rows, summary, int(ranks), row["config"]["arcs"])
                packed_row(rows, summary, row)
            # A directed file: the transpose is built, and (BFS) the serial answer.
            extra = ["--source", "0"] if KERNEL == "bfs" else []
            rows, summary = bench(["--graph", directed, "--reps", "2", "-n", "2", *extra], env)
            row = tessera_row(rows, "read")
            assert not [r for r in rows if "packed" in r["variant"]], rows  # a directed graph is not packed
            # A simple graph, as GAPBS counts it: the chord (12, 13) repeats a cycle arc.
            assert row["config"]["directed"] is True and row["config"]["arcs"] == len(set(edges)), row
            assert row["extra"]["step_seconds"]["build"] > 0, row
            if KERNEL == "bfs":
                reached, levels = bfs_reference(edges, 0)
                assert (row["extra"]["reached"], row["extra"]["levels"]) == (reached, levels), (row, reached, levels)
            if KERNEL == "bfs":
                expect_refused(TESSERA, ["bfs", "--graph", directed, "--source", "40"], "--source 40", env)
        else:
            lam = {}
            for ranks in ("1", "2"):
                rows, summary = bench(["--scale", "8", "--reps", "2", "-n", ranks], env)
                assert [r["variant"] for r in rows] == ["Anasazi/CrsMatrix", "Anasazi/EdgeListRowMatrix"], rows
                for r in rows:
                    assert r["verified"] is True and r["reps"] == 2 and r["seconds"] > 0, r
                    assert "||Lx - lambda x|| / lambda" in r["check"] and "vs the CrsMatrix answer" in r["check"], r
                    assert r["extra"]["iterations"] > 0 and r["extra"]["edge_array_bytes"] > 0, r
                    assert r["extra"]["memory_fraction_of_edges"] >= 0, r
                lam[ranks] = rows[1]["extra"]["lambda2"]
                assert summary["edgelist_over_crs_per_iteration"] > 0, summary
                assert summary["edgelist_memory_fraction"] >= 0 and summary["crs_memory_fraction"] > 0, summary
                step = rows[0]["config"]["step_seconds"]
                assert step["generate"] > 0 and step["largest_component"] > 0, step
            assert abs(lam["1"] - lam["2"]) <= 1e-8 * lam["1"], lam
            # A path of 60 vertices: lambda2 = 2 - 2 cos(pi / 60).
            path = os.path.join(d, "path.el")
            write(path, [(i, i + 1) for i in range(59)])
            rows, summary = bench(["--graph", path, "--undirected", "--reps", "2", "-n", "2"], env)
            want = 2 - 2 * math.cos(math.pi / 60)
            for r in rows:
                assert r["verified"] is True and r["config"]["lcc_vertices"] == 60, r
                assert abs(r["extra"]["lambda2"] - want) <= 1e-8 * want, (r["extra"]["lambda2"], want)
            expect_refused(TESSERA, ["spectral", "--graph", directed], "--symmetric", env)
    print(f"bench {KERNEL}: ok" + ("" if GAPBS else " (GAPBS peer not run: TESSERA_GAPBS_SRC is not set)"))


if __name__ == "__main__":
    main()
