#!/usr/bin/env python3
"""`tessera bench hitting` end to end at 1 and 2 ranks on a small Kronecker
graph and a small grid: every row verified (each answer against the CRS
one and by its true residual), the summaries carry the paired time ratios
and the memory split of the EdgeListRowMatrix (Tpetra's column Map and
Import plus its own make its whole), the column layout follows the graph,
nothing is left in the Shared directory, and a bad option is refused."""
import os
import sys

from bench_cli import expect_refused, private_shm, run_bench

BUILD = sys.argv[1]
TESSERA = os.path.join(BUILD, "tessera")


def main():
    skipped = []  # parts this build cannot run: the test then ends SKIPPED (exit 77)
    with private_shm("tessera-hitting-") as env:
        for ranks in ("1", "2"):
            for graph in (["--scale", "10"], ["--grid", "12"]):
                run, rows, summaries = run_bench(TESSERA, ["hitting", "-n", ranks, *graph, "--reps", "2"], env)
                assert run.returncode == 0, (ranks, graph, run.stderr)
                summary = {}
                for s in summaries:
                    summary.update(s)
                assert all(r["verified"] for r in rows), [r for r in rows if not r["verified"]]
                assert all(r["reps"] == 2 for r in rows), rows
                assert summary["time_ratio"] > 0 and summary["edgelist_memory_fraction"] >= 0, summary
                if "belos_rowmatrix_vs_crs" not in summary:  # built without Trilinos
                    assert len(rows) == 2, rows
                    skipped.append(f"the Belos rows at {ranks} ranks (built without Trilinos)")
                    continue
                assert len(rows) == 4, rows
                assert summary["belos_rowmatrix_vs_crs"] > 0 and summary["belos_rowmatrix_vs_tessera_cg"] > 0, summary
                total, tpetra, own = (summary["rowmatrix_memory_fraction"], summary["rowmatrix_tpetra_required_fraction"],
                                      summary["rowmatrix_own_fraction"])
                assert tpetra >= 0 and own >= 0 and abs(tpetra + own - max(total, tpetra)) < 1e-9, summary
                layout = summary["rowmatrix_column_layout"]
                if ranks == "1":
                    assert layout == "owned" and tpetra == 0, summary
                else:  # a Kronecker graph's ranks read most columns; a grid's few
                    assert layout == ("dense" if graph[0] == "--scale" else "compact"), (graph, summary)
                    assert tpetra > 0, summary
        expect_refused(TESSERA, ["hitting", "--grid", "1"], "--grid", env)
    print("bench hitting: ok")
    if skipped:
        print("SKIPPED (the rest passed): " + "; ".join(skipped))
        sys.exit(77)


if __name__ == "__main__":
    main()
