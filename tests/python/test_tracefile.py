"""The trace file tools (tessera.tracefile, issue 57) on traces written by
hand (trace_samples.py): exact summary numbers (busy, idle, untracked,
imbalance, the traffic matrix from events and from comm_stats), every kind
of malformed file refused with a message naming the file and the fault, the
text tables, pictures (PNG and SVG) and `python3 -m tessera.tracefile`. Runs
without MPI and without the compiled extension (ctest: PYTHONPATH is the
source tree's python/). Plots skip without matplotlib."""
import json
import os
import subprocess
import sys

import pytest

import tessera
import tessera.tracefile as tf
from trace_samples import SAMPLE_EXPECTED, comm_stats, sample, variant, write, x

EXACT = dict(rel=1e-12, abs=1e-12)


@pytest.fixture
def sample_path(tmp_path):
    return write(str(tmp_path / "t.json"), sample())


def test_load_reads_every_kind_of_event(sample_path):
    t = tf.load(sample_path)
    assert t.ranks == 3 and t.hosts == ["alpha", "alpha", "beta"] and t.nodes == [0, 0, 1]
    assert t.command == "tessera pipeline --scale 20"
    assert len(t.slices) == 19 and len(t.instants) == 1 and len(t.counters) == 1
    assert set(t.flows) == {1} and t.flows[1][1]["pid"] == 1
    assert t.thread_names[(2, 1)] == "session socket"
    assert t.threads() == [(0, 0), (1, 0), (2, 0), (2, 1)]
    depth = {(s.rank, s.name, s.start_us): s.depth for s in t.slices}
    assert depth[(0, "read", 0.0)] == 0 and depth[(0, "Afforest round", 0.1e6)] == 1
    assert depth[(0, "flush", 0.55e6)] == 2  # in all_reduce, in components


def test_summary_per_rank_times_are_exact(sample_path):
    s = tf.summary(tf.load(sample_path))
    assert len(s["ranks"]) == 3 and s["wall_s"] == pytest.approx(1.0, **EXACT)
    for rank, expected in enumerate(SAMPLE_EXPECTED["ranks"]):
        got = s["ranks"][rank]
        assert got["rank"] == rank and got["host"] == ["alpha", "alpha", "beta"][rank]
        for kind, seconds in expected.items():
            assert got[f"{kind}_s"] == pytest.approx(seconds, **EXACT), (rank, kind)
            if kind != "wall":
                assert got[f"{kind}_share"] == pytest.approx(seconds / expected["wall"], **EXACT), (rank, kind)
    assert [r["dropped_events"] for r in s["ranks"]] == [0, 0, 7] and s["dropped_events"] == 7
    assert [r["events"] for r in s["ranks"]] == [8, 7, 4]
    assert s["clock"]["max_skew_us"] == 0.8 and s["clock"]["max_uncertainty_us"] == 4.5
    json.dumps(s)  # JSON-ready as it is


def test_summary_phases_by_slowest_rank_with_imbalance(sample_path):
    phases = tf.summary(tf.load(sample_path))["phases"]
    assert [(p["name"], p["category"]) for p in phases] == [(n, c) for n, c, _, _ in SAMPLE_EXPECTED["phases"]]
    for p, (name, _, seconds, events) in zip(phases, SAMPLE_EXPECTED["phases"]):
        mean = sum(seconds) / 3
        assert p["per_rank_s"] == pytest.approx(seconds, **EXACT), name
        assert p["events"] == events, name
        assert p["mean_s"] == pytest.approx(mean, **EXACT) and p["max_s"] == pytest.approx(max(seconds), **EXACT)
        assert p["slowest_rank"] == seconds.index(max(seconds))
        assert p["imbalance"] == pytest.approx(max(seconds) / mean, **EXACT), name
    assert phases[1]["imbalance"] == pytest.approx(4 / 3, **EXACT)  # read: 0.4 s against a mean of 0.3 s
    assert "serve" not in [p["name"] for p in phases]  # another thread's work: not the rank's main thread


def test_traffic_from_send_batch_events(sample_path):
    traffic = tf.summary(tf.load(sample_path))["traffic"]
    assert traffic["source"] == "send batch events"
    for key in ("bytes", "batches", "records", "same_node"):
        assert traffic[key] == SAMPLE_EXPECTED[key], key
    assert traffic["totals"]["same_node"] == {"bytes": 80, "batches": 1, "records": 10}
    assert traffic["totals"]["other_node"] == {"bytes": 64, "batches": 2, "records": 8}


def test_traffic_from_comm_stats_wins_over_events(tmp_path):
    sent = {(0, 1): (1000, 4, 8000), (1, 0): (7, 1, 56), (2, 2): (3, 1, 24), (1, 2): (50, 2, 400)}
    path = write(str(tmp_path / "stats.json"),
                 variant(lambda d: d["otherData"]["tessera"].__setitem__("comm_stats", comm_stats(3, sent))))
    traffic = tf.summary(tf.load(path))["traffic"]
    assert traffic["source"] == "comm_stats"
    for index, key in enumerate(("records", "batches", "bytes")):
        assert traffic[key] == [[sent.get((s, d), (0, 0, 0))[index] for d in range(3)] for s in range(3)], key
    assert traffic["totals"]["same_node"] == {"records": 1010, "batches": 6, "bytes": 8080}
    assert traffic["totals"]["other_node"] == {"records": 50, "batches": 2, "bytes": 400}


def test_events_outside_the_window_are_clipped_and_unions_count_once(tmp_path):
    def change(d):
        d["otherData"]["tessera"]["start_us"][2] = 0.1e6  # rank 2 started late: "read" began before it
        d["traceEvents"] += [x("flush", "wait", 2, 0.32, 0.34), x("progress", "wait", 2, 0.33, 0.34)]
    s = tf.summary(tf.load(write(str(tmp_path / "clip.json"), variant(change))))
    rank2 = s["ranks"][2]
    assert rank2["wall_s"] == pytest.approx(0.4, **EXACT)
    assert rank2["busy_s"] == pytest.approx(0.2, **EXACT) and rank2["idle_s"] == pytest.approx(0.2, **EXACT)
    assert rank2["untracked_s"] == pytest.approx(0.0, abs=1e-12)


def test_format_summary_tables(sample_path):
    text = tf.format_summary(tf.summary(tf.load(sample_path)))
    assert "tessera pipeline --scale 20" in text and "3 ranks on 2 hosts (alpha, beta)" in text
    assert "7 events dropped" in text and "clock skew 0.8 us" in text
    lines = text.splitlines()
    header = next(i for i, line in enumerate(lines) if line.startswith("rank  host"))
    rank0 = lines[header + 1].split()
    assert rank0[:3] == ["0", "alpha", "1.000"] and "60.0%" in rank0 and "30.0%" in rank0 and "10.0%" in rank0
    assert len({len(line) for line in lines[header:header + 4]}) == 1  # aligned
    components = next(line for line in lines if line.startswith("components"))
    assert components.split()[-2:] == ["1", "1.64"]  # slowest rank 1, 0.6 / (1.1 / 3)
    assert "80 B" in text and "40 B*" in text  # rank 1 -> rank 2 crosses nodes


def test_format_summary_many_ranks_lists_totals(tmp_path):
    ranks = 20
    document = {"traceEvents": [x("work", "phase", r, 0.0, 0.5) for r in range(ranks)],
                "otherData": {"tessera": {"format": 1, "ranks": ranks, "hosts": ["h"] * ranks, "nodes": [0] * ranks,
                                          "start_us": [0.0] * ranks, "end_us": [1e6] * ranks}}}
    text = tf.format_summary(tf.summary(tf.load(write(str(tmp_path / "wide.json"), document))))
    assert "rank  sent  batches  received  batches" in text
    assert "no events dropped" in text and "clock skew not measured" in text


def meta(d):
    return d["otherData"]["tessera"]


def event_named(d, name, rank=None):
    return next(e for e in d["traceEvents"] if e.get("name") == name and rank in (None, e.get("pid")))


MALFORMED = {
    "not JSON": ("{\"traceEvents\": [", "not JSON (line 1"),
    "not an object": ("[1, 2]", "not a JSON object with \"traceEvents\""),
    "no traceEvents": (lambda d: d.pop("traceEvents"), "no \"traceEvents\" list"),
    "traceEvents not a list": (lambda d: d.__setitem__("traceEvents", {}), "\"traceEvents\" is not a list"),
    "not a Tessera trace": (lambda d: d.pop("otherData"), "not a Tessera trace: no otherData.tessera"),
    "another format": (lambda d: meta(d).__setitem__("format", 2), "this reader knows format 1"),
    "ranks": (lambda d: meta(d).__setitem__("ranks", 0), "otherData.tessera.ranks: not a positive integer"),
    "hosts short": (lambda d: meta(d)["hosts"].pop(), "otherData.tessera.hosts: not a list of 3 entries"),
    "no end_us": (lambda d: meta(d).pop("end_us"), "no \"end_us\""),
    "clock short": (lambda d: meta(d)["clock"]["offset_us"].pop(),
                    "otherData.tessera.clock.offset_us: not a list of 3 entries"),
    "end before start": (lambda d: meta(d)["end_us"].__setitem__(1, -5.0), "end_us[1]: -5.0 is before"),
    "comm_stats shape": (lambda d: meta(d).__setitem__("comm_stats", comm_stats(2, {})),
                         "comm_stats: not a list of 3 objects"),
    "comm_stats counts": (lambda d: meta(d).__setitem__(
        "comm_stats", [dict(s, to=[{"records": 1}] * 3) for s in comm_stats(3, {})]),
        "comm_stats[0].to[0]: needs counts records, batches, bytes"),
    "X without dur": (lambda d: event_named(d, "read", 1).pop("dur"), "traceEvents[",
                      "(X \"read\"): a complete (X) event without \"dur\""),
    "negative dur": (lambda d: event_named(d, "barrier", 2).__setitem__("dur", -3.0), "negative \"dur\" -3.0"),
    "dur not a number": (lambda d: event_named(d, "barrier", 2).__setitem__("dur", "long"),
                         "\"dur\" is not a number"),
    "no ts": (lambda d: event_named(d, "barrier", 2).pop("ts"), "no \"ts\" number"),
    "pid outside the ranks": (lambda d: event_named(d, "barrier", 2).__setitem__("pid", 3),
                              "pid 3 is not a rank of this 3-rank job (0..2)"),
    "negative pid": (lambda d: event_named(d, "barrier", 2).__setitem__("pid", -1), "pid -1 is not a rank"),
    "no tid": (lambda d: event_named(d, "barrier", 2).pop("tid"), "no \"tid\""),
    "unknown category": (lambda d: event_named(d, "barrier", 2).__setitem__("cat", "sleep"),
                         "\"cat\" 'sleep' is none of phase, round, wait"),
    "unknown ph": (lambda d: d["traceEvents"].append({"name": "b", "ph": "B", "ts": 1, "pid": 0, "tid": 0}),
                   "\"ph\" 'B' is not in format 1"),
    "no name": (lambda d: event_named(d, "barrier", 2).pop("name"), "no \"name\" string"),
    "nested args": (lambda d: event_named(d, "checkpoint").__setitem__("args", {"level": {"x": 1}}),
                    "args.level is not a number or a string"),
    "batch to no rank": (lambda d: event_named(d, "send batch", 1)["args"].__setitem__("dst", 9),
                         "args.dst is not a rank of this 3-rank job: 9"),
    "batch without bytes": (lambda d: event_named(d, "handle batch")["args"].pop("bytes"),
                            "args.bytes is not a count"),
    "overlap without nesting": (lambda d: d["traceEvents"].append(x("verify", "phase", 1, 0.9, 1.1)),
                                "rank 1 thread 0: \"components\" (phase, 400000.000..1000000.000 us) and "
                                "\"verify\" (phase, 900000.000..1100000.000 us) overlap without nesting"),
    "flow finish without start": (lambda d: d["traceEvents"].append({"name": "batch", "cat": "batch", "ph": "f",
                                                                     "bp": "e", "id": 9, "ts": 1.0, "pid": 1,
                                                                     "tid": 0}),
                                  "flow id 9 finishes without its start"),
    "flow started twice": (lambda d: d["traceEvents"].append(dict(event_named(d, "batch"))),
                           "flow id 1 starts twice"),
    "flow finish unbound": (lambda d: next(e for e in d["traceEvents"] if e.get("ph") == "f").pop("bp"),
                            "a flow finish without \"bp\""),
}


@pytest.mark.parametrize("case", sorted(MALFORMED))
def test_malformed_files_are_refused_naming_file_and_fault(tmp_path, case):
    change, *expected = MALFORMED[case]
    path = str(tmp_path / "bad.json")
    write(path, change if isinstance(change, str) else variant(change))
    with pytest.raises(tessera.FormatError) as caught:
        tf.load(path)
    message = str(caught.value)
    assert message.startswith(path + ": "), message
    for part in expected:
        assert part in message, message
    assert isinstance(caught.value, ValueError)


def test_a_missing_file_is_a_system_error(tmp_path):
    with pytest.raises(tessera.SystemError, match="missing.json: cannot read: No such file"):
        tf.load(str(tmp_path / "missing.json"))


def test_nesting_tolerates_rounding_of_the_recorders_sums(tmp_path):
    def change(d):  # a child ending 5 ns after its parent, as rounded microseconds can
        d["traceEvents"].append(x("Afforest round", "round", 1, 0.9, 1.0 + 0.005e-6))
    tf.load(write(str(tmp_path / "ok.json"), variant(change)))


def test_tracefile_needs_neither_the_extension_nor_mpi():
    # The package imports without the extension (ctest runs this on the source
    # tree); what needs it says so when used.
    if getattr(tessera, "_tessera", None) is None:
        with pytest.raises(ImportError, match="needs the compiled extension"):
            tessera.Runtime
    assert "mpi4py" not in sys.modules and "matplotlib.pyplot" not in sys.modules


def test_trace_is_a_recording_context_manager():
    recording = tessera.trace("t.json", buffer_mb=16)
    assert isinstance(recording, tessera.Recording)
    assert recording.path == "t.json" and recording.buffer_mb == 16
    assert hasattr(recording, "__enter__") and hasattr(recording, "__exit__")


def image_size_plausible(path, low, high):
    size = os.path.getsize(path)
    assert low < size < high, size


def test_plot_png(sample_path, tmp_path):
    pytest.importorskip("matplotlib")
    from matplotlib.image import imread
    out = tf.plot(tf.load(sample_path), str(tmp_path / "t.png"))
    with open(out, "rb") as f:
        assert f.read(8) == b"\x89PNG\r\n\x1a\n"
    image_size_plausible(out, 20_000, 2_000_000)
    height, width = imread(out).shape[:2]
    assert width == 1540  # 14 in at 110 dpi
    assert 600 < height < 1200, height
    assert "matplotlib.pyplot" not in sys.modules  # no global backend chosen for the caller


def test_plot_svg_names_the_phases(sample_path, tmp_path):
    pytest.importorskip("matplotlib")
    out = tf.plot(sample_path, str(tmp_path / "t.svg"))  # a path works too
    text = open(out).read()
    assert text.lstrip().startswith("<?xml") and "<svg" in text
    image_size_plausible(out, 20_000, 5_000_000)
    for label in ("components", "read", "waiting (idle)", "rank 2 (beta)", "session socket", "Utilization",
                  "destination rank"):
        assert label in text, label


def test_plot_many_events_and_ranks(tmp_path):
    pytest.importorskip("matplotlib")
    ranks, rounds = 24, 2000
    events = []
    for r in range(ranks):
        events.append(x("solve", "phase", r, 0.0, 1.0))
        for i in range(rounds):
            t = i / rounds
            events.append(x("CG iteration", "round", r, t, t + 0.6 / rounds))
            events.append(x("all_reduce", "wait", r, t + 0.6 / rounds, t + 0.9 / rounds))
            events.append(x("send batch", "comm", r, t, t + 0.1 / rounds, dst=(r + 1) % ranks, records=1, bytes=8))
    document = {"traceEvents": events,
                "otherData": {"tessera": {"format": 1, "ranks": ranks, "hosts": [f"n{r // 8}" for r in range(ranks)],
                                          "nodes": [r // 8 for r in range(ranks)], "start_us": [0.0] * ranks,
                                          "end_us": [1e6] * ranks}}}
    t = tf.load(write(str(tmp_path / "big.json"), document))
    s = tf.summary(t)
    assert s["ranks"][5]["idle_s"] == pytest.approx(0.3, rel=1e-9)
    assert s["traffic"]["bytes"][23][0] == 8 * rounds and not s["traffic"]["same_node"][23][0]
    image_size_plausible(tf.plot(t, str(tmp_path / "big.png")), 20_000, 5_000_000)


def test_dense_rows_draw_the_share_of_each_pixel():
    pytest.importorskip("numpy")
    share = tf._coverage([(0.5, 1.0), (1.0, 1.25), (2.0, 3.0), (2.5, 2.75)], 4.0, 4)
    assert list(share) == [0.5, 0.25, 1.0, 0.0]


def test_plot_refuses_other_formats(sample_path, tmp_path):
    with pytest.raises(tessera.ConfigError, match=r"\.png or \.svg"):
        tf.plot(sample_path, str(tmp_path / "t.pdf"))


def run_module(*args):
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p))
    return subprocess.run([sys.executable, "-m", "tessera.tracefile", *args], capture_output=True, text=True,
                          env=env, timeout=120)


def test_command_summary_text_and_json(sample_path):
    text = run_module("summary", sample_path)
    assert text.returncode == 0 and not text.stderr, text.stderr
    assert text.stdout.strip() == tf.format_summary(tf.summary(tf.load(sample_path)))
    document = run_module("summary", sample_path, "--json")
    assert document.returncode == 0, document.stderr
    assert json.loads(document.stdout) == json.loads(json.dumps(tf.summary(tf.load(sample_path))))


def test_command_errors_are_one_line(tmp_path):
    bad = write(str(tmp_path / "bad.json"), variant(lambda d: event_named(d, "read", 1).pop("dur")))
    p = run_module("summary", bad)
    assert p.returncode == 1 and p.stdout == ""
    assert p.stderr.startswith(f"tessera: error: {bad}: traceEvents[") and p.stderr.count("\n") == 1, p.stderr
    p = run_module("plot", bad, "-o", str(tmp_path / "x.png"))
    assert p.returncode == 1 and "without \"dur\"" in p.stderr
    assert not os.path.exists(tmp_path / "x.png")
    p = run_module("summary")
    assert p.returncode == 2 and "usage: tessera trace" in p.stderr


def test_command_plot(sample_path, tmp_path):
    pytest.importorskip("matplotlib")
    out = str(tmp_path / "cli.svg")
    p = run_module("plot", sample_path, "-o", out)
    assert p.returncode == 0, p.stderr
    assert f"{out}: 3 ranks, 19 events drawn" in p.stderr
    assert os.path.getsize(out) > 20_000
