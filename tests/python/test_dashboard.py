"""A session's live page (tessera.start(..., dashboard=True)) in a real
browser: headless Chromium (Debian's chromium, chromium-driver and
python3-selenium, installed by scripts/setup.sh) opens the page of a 2-rank
session that loaded examples/grid.el and ran components, waits for it to
show the ranks and the resident graph, and its text is checked against the
session's own state (ranks, hosts, PIDs, the objects' names and bytes, the
last command); a screenshot is saved in the test's temporary directory. The
page follows the session as it changes (a command running, with its
progress lines; cancelled; a new object; a traced command's timeline). A
request without the token, or with a wrong one, gets 403 and no data; the
page listens on 127.0.0.1 only, and its token never reaches the session's
log. ``s.trace(PATH)`` writes a trace whose commands are phases
("session: components") on every rank, and ``tessera.start(trace=FILE)``
records a whole session; ``tessera serve --dashboard`` prints the URL."""
import glob
import json
import os
import re
import shutil
import socket
import subprocess
import time
import urllib.error
import urllib.request

import pytest

import tessera
from conftest import clean_env, start_serve

SOURCE = os.environ.get("TESSERA_SOURCE_DIR", os.path.join(os.path.dirname(__file__), "..", ".."))
GRID = os.path.abspath(os.path.join(SOURCE, "examples", "grid.el"))
CHROMEDRIVER = "/usr/bin/chromedriver"
PACKAGE_PARENT = os.path.dirname(os.path.dirname(os.path.abspath(tessera.__file__)))
SHM = os.environ.get("TESSERA_SHM_DIR", "/dev/shm")
URL = re.compile(r"^http://127\.0\.0\.1:(\d+)/\?token=([0-9a-f]{64})$")



def get(url, method="GET"):
    """(status, body, headers) of one request; errors are answers too."""
    try:
        with urllib.request.urlopen(urllib.request.Request(url, method=method), timeout=10) as r:
            return r.status, r.read(), r.headers
    except urllib.error.HTTPError as e:
        return e.code, e.read(), e.headers


def state(s):
    return json.loads(get(s.dashboard_url.replace("/?", "/state.json?"))[1])


def wait_for(what, condition, timeout=60):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = condition()
        if value:
            return value
        time.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what}")


@pytest.fixture(scope="module")
def session():
    with tessera.start(ranks=2, dashboard=True) as s:
        g = s.persist(s.read_graph(GRID, undirected=True), "grid")
        c = s.components(g)
        yield s, g, c
    assert not glob.glob(os.path.join(SHM, f"tessera-{s.job_id}-*"))


def listeners(port):
    """The addresses listening on TCP ``port`` in this network namespace
    (from /proc/net/tcp and tcp6; a LISTEN socket has state 0A)."""
    found = []
    for table, family in (("/proc/net/tcp", 4), ("/proc/net/tcp6", 6)):
        try:
            lines = open(table).read().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            fields = line.split()
            address, hexport = fields[1].split(":")
            if int(hexport, 16) != port or fields[3] != "0A":
                continue
            if family == 4:
                found.append(socket.inet_ntop(socket.AF_INET, bytes.fromhex(address)[::-1]))
            else:
                raw = b"".join(bytes.fromhex(address[i:i + 8])[::-1] for i in range(0, 32, 8))
                found.append(socket.inet_ntop(socket.AF_INET6, raw))
    return found


def test_the_url_has_a_256_bit_token_and_the_page_listens_on_loopback_only(session):
    s, _, _ = session
    m = URL.match(s.dashboard_url or "")
    assert m, s.dashboard_url
    port, token = int(m.group(1)), m.group(2)
    assert len(bytes.fromhex(token)) * 8 == 256
    assert listeners(port) == ["127.0.0.1"], listeners(port)
    # Not on another address of this machine: 127.0.0.2 (loopback, but not
    # the bound one) and the host's own addresses refuse the connection.
    others = {"127.0.0.2"}
    try:
        others |= {a[4][0] for a in socket.getaddrinfo(socket.gethostname(), None, socket.AF_INET)}
    except socket.gaierror:
        pass
    for address in sorted(others - {"127.0.0.1"}):
        with pytest.raises(OSError):
            socket.create_connection((address, port), timeout=5).close()
    # The status op tells it too (to this authenticated client); another
    # client of the same user gets it in its hello; the log never holds it.
    assert s.status()["dashboard"] == s.dashboard_url
    other = tessera.connect(s.socket_path)
    assert other.dashboard_url == s.dashboard_url
    other.close()
    log = open(s._launched.log).read()
    assert token not in log and f"127.0.0.1:{port}" in log, log


def test_requests_without_the_right_token_are_refused_with_403_and_no_data(session):
    s, _, _ = session
    token = URL.match(s.dashboard_url).group(2)
    base = s.dashboard_url.split("/?")[0]
    wrong = "0" * 64 if token != "0" * 64 else "1" * 64
    secret_bits = [b"grid", b"Graph", b"components", str(s._pids[0]).encode(), s.host.encode()]
    for path in ["/", "/state.json", "/?token=", f"/?token={wrong}", f"/state.json?token={wrong}",
                 f"/state.json?token={token[:-1]}", f"/state.json?token={token.upper()}",
                 f"/state.json?token={token}0", f"/state.json?tok={token}", "/favicon.ico", "/nothing"]:
        code, body, _ = get(base + path)
        assert code == 403, (path, code)
        assert not any(bit in body for bit in secret_bits), (path, body)
    code, body, _ = get(base + "/", method="POST")
    assert code != 200 and b"grid" not in body
    # With it: the page (no external resource) and the state.
    code, page, headers = get(s.dashboard_url)
    assert code == 200 and headers["Content-Type"].startswith("text/html")
    assert "default-src 'none'" in headers["Content-Security-Policy"]
    assert not re.search(rb"""(src|href)=["']?(https?:)?//""", page), "the page must need nothing from outside"
    code, body, _ = get(f"{base}/state.json?token={token}")
    assert code == 200
    st = json.loads(body)
    assert st["session"]["ranks"] == s.ranks and [r["pid"] for r in st["ranks"]] == s._pids


def bytes_in(text):
    m = re.search(r"\((\d+) bytes\)", text)
    assert m, text
    return int(m.group(1))


def browser():
    webdriver = pytest.importorskip("selenium.webdriver", reason="python3-selenium (scripts/setup.sh)")
    if not os.path.exists(CHROMEDRIVER) or not shutil.which("chromium"):
        pytest.skip("no chromium and chromium-driver (scripts/setup.sh installs them)")
    from selenium.webdriver.chrome.service import Service
    options = webdriver.ChromeOptions()
    for flag in ("--headless=new", "--no-sandbox", "--disable-gpu", "--window-size=1280,1400",
                 "--disable-dev-shm-usage"):
        options.add_argument(flag)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    return webdriver.Chrome(service=Service(CHROMEDRIVER, log_path=os.devnull), options=options)


def table(driver, name):
    """The rendered text of a table's cells, read in one script (the page
    rebuilds its rows at each refresh: elements found one by one go stale)."""
    return driver.execute_script(
        f"return [...document.querySelectorAll('#{name} tbody tr')].map(tr => [...tr.cells].map(td => td.innerText))")


def test_the_page_in_headless_chromium_shows_the_session_as_it_is(session, tmp_path):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait
    s, g, c = session
    driver = browser()
    try:
        driver.get(s.dashboard_url)
        WebDriverWait(driver, 30, poll_frequency=0.2).until(
            lambda d: len(table(d, "ranks")) == s.ranks and any(r[:3] == ["#1", "grid", "Graph"]
                                                                for r in table(d, "objects")))
        # The ranks: one row each, on the session's host, their PIDs, their
        # resident memory (a real figure), idle.
        ranks = table(driver, "ranks")
        assert [r[0] for r in ranks] == [str(k) for k in range(s.ranks)]
        assert [r[1] for r in ranks] == [s.host] * s.ranks == [socket.gethostname()] * s.ranks
        assert [int(r[2]) for r in ranks] == s._pids
        for r in ranks:
            assert 4 << 20 < bytes_in(r[3]) < 64 << 30, r
            assert r[5] == "idle", r
        summary = driver.find_element(By.ID, "summary").text
        assert summary.startswith(f"{s.ranks} ranks on {s.host}, job {s.job_id}"), summary
        # The resident objects, as the session lists them, with their bytes.
        listed = {o["id"]: o for o in s.list()}
        objects = table(driver, "objects")
        assert {row[0] for row in objects} == {k for k in listed if k.startswith("#")}
        graph_row = next(r for r in objects if r[1] == "grid")
        assert graph_row[:3] == ["#1", "grid", "Graph"] and listed["grid"]["named"]
        assert graph_row[4].startswith(f"{g.vertices} vertices, {g.edges} edges, undirected"), graph_row
        assert graph_row[5] == "named"
        # A graph's bytes: its arc arrays (edge_array_bytes) and its row
        # offsets, 64-bit, one more than each rank's vertices.
        assert bytes_in(graph_row[3]) == g.edge_array_bytes + 8 * (g.vertices + s.ranks), (graph_row, g.fields)
        comp_row = next(r for r in objects if r[0] == c.id)
        assert comp_row[2] == "Components" and comp_row[5] == s.client_id
        assert comp_row[4] == f"{c.count} components, the largest of {c.largest_size} vertices"
        assert bytes_in(comp_row[3]) == c.labels.nbytes == 8 * g.vertices  # the labels, uint64 per vertex
        # The last commands, newest first: components, persist, read_graph; ok.
        history = table(driver, "history")
        assert history[0][1] == "components(graph=grid, algorithm=afforest)" and history[0][4] == "ok", history
        assert history[0][5] == c.id and history[0][2] == s.client_id
        assert history[1][1] == "persist(ref=#1, name=grid)" and history[1][5] == "grid", history
        assert history[2][1] == f"read_graph(path={GRID}, undirected=True)" and history[2][4] == "ok", history
        assert len(history) == 3
        assert 0 <= float(history[0][3]) < 60
        assert driver.find_element(By.ID, "running").text == "nothing"

        # It follows the session: a command running (its progress lines, the
        # ranks' state), then cancelled (the outcome), a new object.
        k = s.kron(scale=16)
        future = s.submit("pagerank", k, verbose=True, method="jacobi", tolerance=1e-300, max_iterations=10**7)
        WebDriverWait(driver, 60, poll_frequency=0.2).until(
            lambda d: "L1 change" in d.find_element(By.ID, "running").text)
        running = driver.find_element(By.ID, "running").text
        assert running.startswith(f"pagerank(graph={k.id}, verbose=True, method=jacobi") and s.client_id in running
        assert [r[5] for r in table(driver, "ranks")] == ["running pagerank"] * s.ranks
        assert s.cancel() == "pagerank"
        with pytest.raises(tessera.Cancelled):
            future.result(timeout=60)
        WebDriverWait(driver, 10, poll_frequency=0.2).until(
            lambda d: (table(d, "history") or [[""] * 6])[0][1].startswith("pagerank("))
        latest = table(driver, "history")[0]
        assert latest[4].startswith("Cancelled: ") and latest[5] == "", latest
        assert driver.find_element(By.ID, "running").text == "nothing"
        assert [r[5] for r in table(driver, "ranks")] == ["idle"] * s.ranks
        assert any(r[0] == k.id and r[2] == "Graph" and r[4].startswith(f"{k.vertices} vertices")
                   for r in table(driver, "objects"))

        # The timeline of a traced command: a row per rank, its phase on each.
        path = tmp_path / "components.json"
        with s.trace(path) as t:
            s.components(g)
        assert t.written == str(path)
        WebDriverWait(driver, 30, poll_frequency=0.2).until(
            lambda d: d.find_elements(By.CSS_SELECTOR, "#timeline svg rect"))
        caption = driver.find_element(By.ID, "timeline-caption").text
        assert caption.startswith(str(path)) and f"{s.ranks} ranks" in caption, caption
        titles = driver.execute_script(
            "return [...document.querySelectorAll('#timeline svg rect title')].map(t => t.textContent)")
        for rank in range(s.ranks):
            assert any(t.startswith(f"session: components (phase), rank {rank}:") for t in titles), titles[:10]
        assert any("(wait)" in t for t in titles), titles[:10]

        shot = tmp_path / "dashboard.png"
        driver.save_screenshot(str(shot))
        print(f"\ndashboard screenshot: {shot}")
        data = shot.read_bytes()
        assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 20000
        severe = [e for e in driver.get_log("browser") if e["level"] == "SEVERE"]
        assert not severe, severe  # no script error, no blocked resource, no failed fetch
    finally:
        driver.quit()


def test_s_trace_records_each_command_as_a_phase_on_every_rank(session, tmp_path):
    s, g, _ = session
    path = tmp_path / "t.json"
    with s.trace(path) as t:
        assert s.status()["trace"] == str(path)
        with pytest.raises(tessera.ConfigError, match="already records"):
            with s.trace(tmp_path / "second.json"):
                pass
        s.components(g)
        s.largest_component(g)
    assert t.written == str(path) and s.status()["trace"] is None
    doc = json.load(open(path))
    phases = [e for e in doc["traceEvents"] if e.get("ph") == "X" and e.get("cat") == "phase"]
    for rank in range(s.ranks):
        names = [e["name"] for e in phases if e["pid"] == rank]
        assert "session: components" in names and "session: largest_component" in names, names
        assert not any(n.startswith("session: trace") for n in names)
    assert doc["otherData"]["tessera"]["ranks"] == s.ranks
    # The page draws it.
    timeline = wait_for("the timeline", lambda: (state(s)["trace"].get("timeline") or {}).get("path") == str(path)
                        and state(s)["trace"]["timeline"])
    assert "<svg" in timeline["svg"] and "session: components" in timeline["svg"] and timeline["ranks"] == s.ranks
    with pytest.raises(tessera.ConfigError, match="no directory"):
        with s.trace(tmp_path / "missing" / "t.json"):
            pass


def test_a_whole_session_trace_is_written_when_it_stops(tmp_path):
    path = tmp_path / "session.json"
    with tessera.start(ranks=2, trace=path) as s:
        g = s.read_graph(GRID, undirected=True)
        s.components(g)
        assert s.status()["trace"] == str(path) and s.dashboard_url is None
        with pytest.raises(tessera.ConfigError, match="whole session"):
            with s.trace(tmp_path / "inner.json"):
                pass
    doc = json.load(open(path))
    for rank in range(2):
        names = {e["name"] for e in doc["traceEvents"] if e.get("ph") == "X" and e["pid"] == rank}
        assert {"session: read_graph", "session: components"} <= names, names
    # Between commands the ranks wait for the next one: idle time, so each
    # rank's commands and waits cover its wall time (the recorder's start and
    # stop, outside any command, are the rest).
    from tessera import tracefile
    for row in tracefile.summary(tracefile.load(path))["ranks"]:
        assert abs(row["busy_s"] + row["idle_s"] - row["wall_s"]) <= 0.02 * row["wall_s"], row


def test_tessera_serve_dashboard_prints_the_url(tmp_path):
    serve, path = start_serve(tmp_path, 1, "--dashboard")
    try:
        lines = [serve.stdout.readline() for _ in range(3)]
        url = lines[2].split("live page: ")[-1].strip()
        assert URL.match(url), lines
        code, page, _ = get(url)
        assert code == 200 and b"Tessera session" in page
        assert get(url.split("?")[0])[0] == 403
        s = tessera.connect(path)
        assert s.dashboard_url == url
        assert state(s)["session"]["ranks"] == 1
        s.stop()
        assert serve.wait(timeout=60) == 0
    finally:
        if serve.poll() is None:
            serve.kill()


def test_the_timeline_is_a_row_per_rank_with_waits_in_red(tmp_path):
    """The page's picture of the tools' hand-made sample trace (3 ranks on 2
    hosts, trace_samples.py): each rank's idle share as the summary has it,
    every span of a main thread a bar, the waits red, every text escaped."""
    import trace_samples
    from tessera.session import dashboard

    doc = trace_samples.sample()
    doc["traceEvents"].append(trace_samples.x("<script>alert(1)</script>", "phase", 2, 0.31, 0.32))
    path = tmp_path / "sample.json"
    trace_samples.write(path, doc)
    t = dashboard.load_timeline(str(path))
    assert t["ranks"] == 3 and t["span_us"] == 1e6 and not t["note"]
    assert t["idle"] == pytest.approx([r["idle"] / r["wall"] for r in trace_samples.SAMPLE_EXPECTED["ranks"]])
    main = [e for e in doc["traceEvents"] if e.get("ph") == "X" and e.get("tid") == 0 and e["cat"] != "comm"]
    assert t["events"] == t["shown"] == len(main)
    waits = [e for e in main if e["cat"] == "wait"]
    assert t["svg"].count(f'fill="{dashboard.WAIT_COLOUR}">') == len(waits)
    for r, host in enumerate(("alpha", "alpha", "beta")):
        assert f"rank {r} ({host})" in t["svg"]
    assert "<script>" not in t["svg"] and "&lt;script&gt;alert(1)&lt;/script&gt; (phase), rank 2" in t["svg"]
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    assert dashboard.load_timeline(str(bad))["note"].startswith("cannot draw it")


def test_a_peer_without_the_session_token_is_never_told_the_url(tmp_path):
    from tessera.session import protocol
    d = tmp_path / "sock"
    d.mkdir(mode=0o700)
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    with tessera.start(ranks=1, socket=str(d / "s.sock"), tcp=f"127.0.0.1:{port}", dashboard=True) as s:
        page_token = URL.match(s.dashboard_url).group(2)
        for header in ({"op": "hello", "args": {}, "version": protocol.PROTOCOL_VERSION, "token": "0" * 64},
                       {"op": "status", "args": {}}):
            with socket.create_connection(("127.0.0.1", port), timeout=10) as peer:
                protocol.send(peer, header)
                try:
                    reply, _ = protocol.receive(peer)
                except ConnectionError:
                    continue  # refused without a word
                assert not reply.get("ok") and page_token not in json.dumps(reply), reply
        token = open(s.socket_path + ".token").read().strip()
        other = tessera.connect(tcp=f"127.0.0.1:{port}", token=token)
        assert other.dashboard_url == s.dashboard_url
        other.close()


def test_without_dashboard_there_is_no_page():
    with tessera.start(ranks=1) as s:
        assert s.dashboard_url is None and s.status()["dashboard"] is None
