#!/usr/bin/env python3
"""Draws what `tessera bench ... --json` printed (issue 13).

  for n in 1 2 4; do ./build/tessera bench isx -n $n --json -q; done > results.jsonl
  /usr/bin/python3 scripts/plot_bench.py results.jsonl -o bench.png

One panel per benchmark and group (one unit each): the rate of every variant
as bars, one bar per rank count, with the verified flag (an unverified result
is hatched and labelled). Results that carry a `buffer_bytes` field (at the
top level, in `extra` or in `config`) with several values for the same variant
and rank count are a buffer-size sweep: drawn as rate against buffer size
(log scale), one line per variant and rank count. Summary lines and anything
that is not JSON (progress notes) are skipped. Exit 2 with a message when the
input holds no results."""
import argparse
import collections
import json
import sys


def read_results(paths):
    results = []
    for path in paths:
        with (sys.stdin if path == "-" else open(path, encoding="utf-8")) as f:
            for number, line in enumerate(f, 1):
                line = line.strip()
                if not line.startswith("{"):
                    continue
                try:
                    record = json.loads(line)
                except json.JSONDecodeError as e:
                    raise SystemExit(f"plot_bench: {path}:{number}: not a JSON line: {e}")
                if "summary" in record or "rate" not in record or "bench" not in record or record.get("skipped"):
                    continue
                results.append(record)
    return results


def buffer_bytes(record):
    for place in (record, record.get("extra") or {}, record.get("config") or {}):
        if isinstance(place, dict) and isinstance(place.get("buffer_bytes"), (int, float)):
            return place["buffer_bytes"]
    return None


def label(record):
    text = record.get("variant", "?")
    storage = record.get("storage", "")
    return f"{text}\n{storage}" if storage and storage != "-" else text


def split(results):
    """(bars, sweeps): sweeps are series with several buffer sizes."""
    series = collections.defaultdict(list)
    for r in results:
        key = (r["bench"], r.get("group", ""), r.get("variant"), r.get("storage"), r.get("ranks"))
        series[key].append(r)
    bars, sweeps = [], {}
    for key, rows in series.items():
        sizes = {buffer_bytes(r) for r in rows} - {None}
        if len(sizes) >= 2:
            sweeps[key] = sorted((r for r in rows if buffer_bytes(r) is not None), key=buffer_bytes)
        else:
            bars.extend(rows)
    return bars, sweeps


def draw(results, output, title):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    bars, sweeps = split(results)
    panels = collections.OrderedDict()
    for r in bars:
        panels.setdefault((r["bench"], r.get("group", "")), []).append(r)
    sweep_panels = collections.OrderedDict()
    for key, rows in sweeps.items():
        sweep_panels.setdefault((key[0], key[1]), []).append((key, rows))
    count = len(panels) + len(sweep_panels)
    fig, axes = plt.subplots(count, 1, figsize=(10, 3.6 * count), squeeze=False)
    axes = [a[0] for a in axes]

    for ax, ((bench, group), rows) in zip(axes, panels.items()):
        variants = list(dict.fromkeys(label(r) for r in rows))
        ranks = sorted({r.get("ranks", 0) for r in rows})
        width = 0.8 / max(1, len(ranks))
        best = {}
        for r in rows:  # the last line of a (variant, ranks) pair wins: later runs replace earlier ones
            best[(label(r), r.get("ranks", 0))] = r
        for i, k in enumerate(ranks):
            xs, ys, hatches = [], [], []
            for j, v in enumerate(variants):
                r = best.get((v, k))
                if r is None:
                    continue
                xs.append(j - 0.4 + width * (i + 0.5))
                ys.append(r["rate"])
                hatches.append(not r.get("verified", False))
            drawn = ax.bar(xs, ys, width, label=f"{k} rank{'s' if k != 1 else ''}")
            for patch, unverified in zip(drawn, hatches):
                if unverified:
                    patch.set_hatch("//")
                    ax.annotate("NOT VERIFIED", (patch.get_x(), patch.get_height()), fontsize=7, color="red")
        ax.set_xticks(range(len(variants)))
        ax.set_xticklabels(variants, fontsize=8)
        ax.set_ylabel(rows[0].get("unit", "rate"))
        ax.set_title(f"{bench}" + (f" — {group}" if group else ""))
        ax.legend(fontsize=8)
        ax.grid(axis="y", alpha=0.3)

    for ax, ((bench, group), lines) in zip(axes[len(panels):], sweep_panels.items()):
        for key, rows in lines:
            _, _, variant, storage, ranks = key
            ax.plot([buffer_bytes(r) for r in rows], [r["rate"] for r in rows], marker="o",
                    label=f"{variant} {storage if storage and storage != '-' else ''} ({ranks} ranks)")
        ax.set_xscale("log", base=2)
        ax.set_xlabel("buffer bytes per destination")
        ax.set_ylabel(lines[0][1][0].get("unit", "rate"))
        ax.set_title(f"{bench}" + (f" — {group}" if group else "") + ": buffer-size sweep")
        ax.legend(fontsize=8)
        ax.grid(alpha=0.3)

    if title:
        fig.suptitle(title)
    fig.tight_layout()
    fig.savefig(output, dpi=100)
    plt.close(fig)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("inputs", nargs="+", help="JSON-lines files from `tessera bench ... --json` ('-': stdin)")
    parser.add_argument("-o", "--output", default="bench.png", help="the picture to write (PNG, SVG or PDF)")
    parser.add_argument("--title", default="", help="a title over the panels")
    args = parser.parse_args()
    try:
        results = read_results(args.inputs)
    except OSError as e:
        print(f"plot_bench: cannot read {e.filename}: {e.strerror}", file=sys.stderr)
        return 2
    if not results:
        print("plot_bench: no benchmark results in the input (run `tessera bench NAME --json`)", file=sys.stderr)
        return 2
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        print("plot_bench: matplotlib is missing: apt-get install python3-matplotlib (scripts/setup.sh)",
              file=sys.stderr)
        return 2
    draw(results, args.output, args.title)
    print(f"plot_bench: {len(results)} results drawn to {args.output}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
