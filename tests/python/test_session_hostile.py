"""A session against hostile peers (issue 59): a 2-rank session serving its
Unix socket and TCP, attacked by frames no client sends, by floods and slow
peers (as another OS user, ``nobody``, where the attack is another user's:
TCP; as the owner where only the owner can reach: the Unix socket), by fake
listeners its clients must not trust, and by token holders reaching past
what a token allows. After each attack the owner's ``s.ping()`` answers
within 5 s and a command runs. Also: the operations' declaration
(operations.py) against the client's methods and the server's handlers.

The session's limits are shortened for the test (hello within 2 s, frames
and replies stalled at most 2 s) so that what they end, ends quickly."""
import concurrent.futures
import contextlib
import inspect
import json
import os
import shutil
import socket
import stat
import struct
import subprocess
import sys
import tempfile
import textwrap
import threading
import time
import types

import numpy as np
import pytest

import tessera
from tessera.session import client as session_client
from tessera.session import operations, protocol, server

NOBODY = os.getuid() == 0 and shutil.which("setpriv") is not None
as_another_user = pytest.mark.skipif(not NOBODY, reason="needs root and setpriv to act as nobody")
LIMITS = {"TESSERA_SESSION_HELLO_TIMEOUT": "2", "TESSERA_SESSION_IO_TIMEOUT": "2"}
PACKAGE_PARENT = os.path.dirname(os.path.dirname(os.path.abspath(tessera.__file__)))


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    base = tmp_path_factory.mktemp("hostile")
    os.chmod(base, 0o755)
    sockets = base / "sock"
    sockets.mkdir(mode=0o700)
    root = base / "root"
    root.mkdir()
    (root / "grid.el").write_text("".join(f"{i} {i + 1}\n" for i in range(20)))
    port = free_port()
    here = os.getcwd()
    os.chdir(root)  # the starter's working directory: TCP clients' root
    try:
        s = tessera.start(ranks=2, socket=str(sockets / "s.sock"), tcp=f"127.0.0.1:{port}", env=LIMITS)
    finally:
        os.chdir(here)
    try:
        token = open(s.socket_path + ".token").read().strip()
        yield types.SimpleNamespace(s=s, port=port, token=token, root=str(root), base=str(base))
    finally:
        try:
            s.stop()
        finally:
            log = s._launched.log_tail(40)  # kept only when the ranks failed
    assert s._process.returncode == 0, log


def healthy(x):
    """The owner's ping answers within 5 s; a command runs (on every rank)."""
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        start = time.monotonic()
        pool.submit(x.s.ping).result(timeout=5)
        assert time.monotonic() - start < 5
        g = pool.submit(x.s.grid, (6, 6)).result(timeout=30)
        assert pool.submit(x.s.components, g).result(timeout=30).count == 1
        x.s.drop(g)


# -- raw peers ---------------------------------------------------------------------
def frame(header, payload=b"", lengths=None):
    data = header if isinstance(header, bytes) else json.dumps(header).encode()
    head, size = lengths or (len(data), len(payload))
    return struct.pack(">QQ", head, size) + data + payload


def unix_peer(x):
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.connect(x.s.socket_path)
    sock.settimeout(10)
    return sock


def owner_peer(x):
    """A raw authenticated connection of the owner (the Unix socket)."""
    sock = unix_peer(x)
    sock.sendall(frame({"op": "hello", "args": {}, "version": protocol.PROTOCOL_VERSION}))
    reply, _ = protocol.receive(sock)
    assert reply["ok"], reply
    return sock


def answer(sock):
    """The next frame's header, or "closed"."""
    try:
        return protocol.receive(sock, 1 << 30, timeout=10, first_timeout=10)[0]
    except (ConnectionError, OSError, protocol.ProtocolError):
        return "closed"


def closed_within(sock, seconds):
    sock.settimeout(seconds)
    try:
        while sock.recv(65536):
            pass
        return True
    except socket.timeout:
        return False
    except OSError:
        return True


# A peer run as nobody: the attack named by argv[1] on the session's TCP
# port argv[2]; what it saw, as JSON on stdout.
NOBODY_PEER = textwrap.dedent(r"""
    import json, socket, struct, sys, time
    kind, port = sys.argv[1], int(sys.argv[2])

    def frame(data, lengths=None):
        data = data if isinstance(data, bytes) else json.dumps(data).encode()
        return struct.pack(">QQ", *(lengths or (len(data), 0))) + data

    def reply(sock):
        sock.settimeout(10)
        try:
            buf = b""
            while len(buf) < 16:
                chunk = sock.recv(16 - len(buf))
                if not chunk:
                    return "closed"
                buf += chunk
            head, size = struct.unpack(">QQ", buf)
            data = b""
            while len(data) < head:
                chunk = sock.recv(head - len(data))
                if not chunk:
                    return "closed"
                data += chunk
            return json.loads(data)
        except OSError as e:
            return "closed"

    def connect():
        return socket.create_connection(("127.0.0.1", port), timeout=10)

    out = {}
    start = time.monotonic()
    if kind == "non_ascii":
        s = connect(); s.sendall(frame({"op": "hello", "nonce": "\u00e9" * 64, "token": "\u00e9\u00e8"}))
        out["hello"] = reply(s)
        s = connect(); s.sendall(frame({"op": "hello", "nonce": "a" * 64}))
        out["first"] = reply(s)
        s.sendall(frame({"op": "auth", "proof": "\u00e9" * 64, "version": 2}))
        out["auth"] = reply(s)
    elif kind == "deep":
        s = connect(); s.sendall(frame(b"[" * 4000)); out["reply"] = reply(s)
    elif kind == "huge_payload":
        s = connect(); s.sendall(frame(b'{"op":"hello"}', (14, 2 ** 63))); out["reply"] = reply(s)
        s = connect(); s.sendall(frame(b"", (2 ** 62, 0))); out["header"] = reply(s)
    elif kind == "one_byte":
        s = connect(); s.sendall(b"\x00")
        print(json.dumps({"holding": True}), flush=True)
        out["reply"] = reply(s)
    elif kind == "slow":
        s = connect()
        data = frame({"op": "hello", "nonce": "a" * 64})
        print(json.dumps({"holding": True}), flush=True)
        try:
            for b in data:
                s.sendall(bytes([b])); time.sleep(0.4)
            out["reply"] = "sent it all"
        except OSError:
            out["reply"] = "closed"
    elif kind == "flood":
        held, refused = [], 0
        for _ in range(1000):
            try:
                held.append(socket.create_connection(("127.0.0.1", port), timeout=2))
            except OSError:
                refused += 1
        print(json.dumps({"holding": len(held)}), flush=True)
        time.sleep(3)
        alive = 0
        for s in held:
            s.setblocking(False)
            try:
                alive += s.recv(1) == b"" and 0 or 0
            except BlockingIOError:
                alive += 1
            except OSError:
                pass
        out = {"opened": len(held), "refused": refused, "still_open": alive}
    elif kind == "hello_no_token":
        s = connect(); s.sendall(frame({"op": "hello", "version": 2, "token": "0" * 64})); out["reply"] = reply(s)
        s = connect(); s.sendall(frame({"op": "hello", "nonce": "b" * 64, "version": 1})); out["first"] = reply(s)
    out["seconds"] = time.monotonic() - start
    print(json.dumps(out), flush=True)
""")


def run_as_nobody(code, *args, timeout=60):
    return subprocess.run(["setpriv", "--reuid", "nobody", "--regid", "nogroup", "--clear-groups", sys.executable,
                           "-c", code, *map(str, args)], capture_output=True, text=True, timeout=timeout)


def nobody_attack(x, kind, timeout=60):
    p = run_as_nobody(NOBODY_PEER, kind, x.port, timeout=timeout)
    assert p.returncode == 0, p.stderr
    return json.loads(p.stdout.strip().splitlines()[-1])


def start_nobody(x, kind):
    """The attack running as nobody in the background, once it holds its
    connection(s): (the process, its first line)."""
    p = subprocess.Popen(["setpriv", "--reuid", "nobody", "--regid", "nogroup", "--clear-groups", sys.executable,
                          "-c", NOBODY_PEER, kind, str(x.port)], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         text=True)
    return p, json.loads(p.stdout.readline())


def refused(reply, kind="PeerError"):
    return isinstance(reply, dict) and reply.get("ok") is False and reply["error"]["type"] == kind


# -- frames before authenticating, from another user (TCP) ------------------------------
@as_another_user
def test_a_token_that_is_not_ascii_is_refused(served):
    out = nobody_attack(served, "non_ascii")
    assert refused(out["hello"]), out
    assert out["first"]["ok"] and set(out["first"]["result"]) == {"proof", "nonce"}, out  # no version, no facts
    assert refused(out["auth"]), out
    healthy(served)


@as_another_user
def test_deeply_nested_json_is_refused_with_an_error_frame(served):
    out = nobody_attack(served, "deep")
    assert refused(out["reply"], "FormatError"), out
    healthy(served)


@as_another_user
def test_an_absurd_length_is_refused_before_allocating(served):
    rss = rank0_rss(served)
    out = nobody_attack(served, "huge_payload")
    assert refused(out["reply"], "FormatError") and refused(out["header"], "FormatError"), out
    assert out["seconds"] < 5, out
    assert rank0_rss(served) - rss < 64 << 20
    healthy(served)


def rank0_rss(x):
    with open(f"/proc/{x.s._pids[0]}/status") as f:
        return int(next(line for line in f if line.startswith("VmRSS")).split()[1]) * 1024


@as_another_user
def test_one_byte_then_silence_blocks_nobody_and_is_closed(served):
    p, first = start_nobody(served, "one_byte")
    try:
        assert first["holding"]
        healthy(served)  # while the silent peer holds its connection
        out = json.loads(p.communicate(timeout=30)[0].strip().splitlines()[-1])
    finally:
        p.kill()
    assert refused(out["reply"], "FormatError") or out["reply"] == "closed", out
    assert out["seconds"] < 8, out  # the hello deadline (2 s here) closed it
    healthy(served)


@as_another_user
def test_a_slow_peer_is_cut_off_at_the_hello_deadline(served):
    p, first = start_nobody(served, "slow")
    try:
        healthy(served)
        out = json.loads(p.communicate(timeout=60)[0].strip().splitlines()[-1])
    finally:
        p.kill()
    assert out["reply"] == "closed" and out["seconds"] < 10, out
    healthy(served)


@as_another_user
def test_a_thousand_idle_connections_do_not_stop_the_owner(served):
    p, first = start_nobody(served, "flood")
    try:
        assert first["holding"] > 0
        healthy(served)
        # New connections of the owner, on either socket, while the flood holds.
        other = tessera.connect(tcp=f"127.0.0.1:{served.port}", token=served.token, timeout=5)
        other.ping()
        other.close()
        other = tessera.connect(served.s.socket_path, timeout=5)
        other.ping()
        other.close()
        out = json.loads(p.communicate(timeout=60)[0].strip().splitlines()[-1])
    finally:
        p.kill()
    # At most a few wait to authenticate at once, and not past the deadline.
    assert out["still_open"] <= server.Limits.pending_per_peer, out
    healthy(served)


@as_another_user
def test_the_version_is_told_only_after_authenticating(served):
    out = nobody_attack(served, "hello_no_token")
    text = json.dumps(out)
    assert refused(out["reply"]) and "protocol" not in text and tessera.__version__ not in text, out
    assert set(out["first"]["result"]) == {"proof", "nonce"}, out


# -- frames of the owner's (authenticated) connections -------------------------------------
@pytest.mark.parametrize("transport", ["unix", "tcp"])
def test_malformed_requests_get_an_error_and_the_session_serves_on(served, transport):
    s = served.s if transport == "unix" else tessera.connect(tcp=f"127.0.0.1:{served.port}", token=served.token)
    g = s.grid((4, 4))
    a = s.zeros(10)
    bad = [
        ("components", [1, 2], None),                                          # list args
        ("components", {"graph": 123}, None),                                  # non-string ref
        ("components", {"graph": {"$": 1}}, None),
        ("components", {"graph": g.id, "algorithm": ["afforest"]}, None),
        ("generate", {"kind": "kron", "scale": 4, "dir": "/tmp"}, None),       # an undeclared parameter
        ("client_gone", {"gone": s.client_id}, None),                          # internal, never from the wire
        ("no_such_op", {}, None),
        (["components"], {}, None),
        ("pagerank", {"graph": g.id, "tolerance": float("nan")}, None),
        ("scatter", {"array": a.id}, [{"dtype": "object", "length": 1}, {"dtype": "float64", "length": 1}]),
        ("scatter", {"array": a.id}, [{"dtype": "int64", "length": 10 ** 12}, {"dtype": "float64", "length": 1}]),
        ("gather", {"array": a.id}, [{"dtype": "<U8", "length": 1}]),
        ("gather", {"array": a.id}, {"dtype": "int64"}),
    ]
    try:
        for op, args, payload in bad:
            header = {"op": op, "args": args}
            if payload is not None:
                header["payload"] = payload
            with s._lock:
                protocol.send(s._sock, header, b"\0" * 16 if payload else b"")
                reply, _ = protocol.receive(s._sock)
            assert refused(reply, "ConfigError"), (op, args, reply)
            s.ping()  # the same connection goes on
        assert s.components(g).count == 1
    finally:
        if s is not served.s:
            s.close()
    healthy(served)


@pytest.mark.parametrize("attack", ["deep", "huge_payload", "huge_header", "garbage"])
def test_the_owner_s_broken_frames_close_only_that_connection(served, attack):
    sock = owner_peer(served)
    data = {"deep": frame(b"[" * 200_000), "huge_payload": frame({"op": "ping"}, lengths=(13, 2 ** 62)),
            "huge_header": frame(b"", lengths=(2 ** 40, 0)), "garbage": frame(b"\xff\xfe{not json")}[attack]
    sock.sendall(data)
    reply = answer(sock)
    assert refused(reply, "FormatError"), reply
    assert closed_within(sock, 5)
    sock.close()
    healthy(served)


def test_a_join_must_prove_itself(served):
    s = served.s
    mine = s.zeros(5)
    for join in ({"client": s.client_id}, {"client": s.client_id, "secret": "0" * 64},
                 {"client": s.client_id, "secret": "\u00e9" * 64}, {"client": 7}, "c1"):
        sock = unix_peer(served)
        sock.sendall(frame({"op": "hello", "args": {}, "version": protocol.PROTOCOL_VERSION, "join": join}))
        assert refused(answer(sock)), join
        sock.close()
    # Nor as another client: no secret, no drop of another's object.
    other = tessera.connect(s.socket_path)
    try:
        with pytest.raises(tessera.PeerError, match="another client"):
            other.drop(mine.id)
    finally:
        other.close()
    # The client's own second connection (s.submit) still joins.
    assert s.submit("grid", (3, 3)).result(timeout=60).vertices == 9
    assert mine.id in {o["id"] for o in s.list()}
    healthy(served)


def test_a_peer_that_stops_reading_a_reply_is_dropped(served):
    s = served.s
    a = s.zeros(8 << 20)  # 64 MiB to copy
    sock = owner_peer(served)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    sock.sendall(frame({"op": "fetch", "args": {"ref": a.id, "field": "values", "limit": 1 << 30}}))
    time.sleep(0.5)
    healthy(served)  # the reply's send gives up after 2 s; the command after it runs
    assert closed_within(sock, 10) or answer(sock) == "closed"
    sock.close()
    s.drop(a)


# -- a token holder's bounds ---------------------------------------------------------------
def test_a_token_holder_cannot_name_paths_outside_the_root_or_start_programs(served, tmp_path):
    t = tessera.connect(tcp=f"127.0.0.1:{served.port}", token=served.token)
    try:
        assert t.read_graph("grid.el").vertices == 21  # relative: in the root (the starter's directory)
        with pytest.raises(tessera.ConfigError, match="outside the session's allowed root"):
            t.read_graph("/etc/passwd")
        with pytest.raises(tessera.ConfigError, match="outside"):
            t.read_graph("../../../../../../etc/passwd")
        os.symlink("/etc", os.path.join(served.root, "escape"))
        with pytest.raises(tessera.ConfigError, match="outside"):
            t.read_graph("escape/passwd")
        with pytest.raises(tessera.ConfigError, match="outside"):
            with t.trace(str(tmp_path / "evil.json")):
                pass
        assert not (tmp_path / "evil.json").exists()
        with pytest.raises(TypeError):
            t.generate("kron", scale=4, dir="/tmp")  # no such parameter
        g = t.persist(t.grid((4, 4)), "g")
        for options, match in ((dict(analysis={"program": "/bin/sh"}), "not taken from a request"),
                               (dict(analysis={"launcher": "sh -c"}), "not taken from a request"),
                               (dict(analysis={"control": "/tmp/c"}), "not taken from a request"),
                               (dict(output=str(tmp_path / "labels.txt")), "outside"),
                               (dict(checkpoint={"dir": "/tmp/ck"}), "outside")):
            with pytest.raises(tessera.ConfigError, match=match):
                t._request("command", {"graph": "g", "name": "cc", "options": json.dumps(options)})
        assert not (tmp_path / "labels.txt").exists()
        written = t._request("command", {"graph": "g", "name": "cc", "options": json.dumps({"output": "labels.txt"})})
        assert written["exit_code"] == 0 and os.path.exists(os.path.join(served.root, "labels.txt"))
        t.drop(g)
    finally:
        t.close()
    # The owner on the Unix socket is this user already: not bounded by default.
    g = served.s.read_graph(os.path.join(served.root, "grid.el"))
    assert g.vertices == 21
    served.s.drop(g)
    healthy(served)


def test_an_explicit_root_bounds_every_client(tmp_path):
    (tmp_path / "root").mkdir()
    (tmp_path / "root" / "g.el").write_text("0 1\n1 2\n")
    (tmp_path / "outside.el").write_text("0 1\n")
    with tessera.start(ranks=2, root=str(tmp_path / "root")) as s:
        assert s.read_graph(tmp_path / "root" / "g.el").vertices == 3
        with pytest.raises(tessera.ConfigError, match="outside"):
            s.read_graph(tmp_path / "outside.el")
        s.ping()


# -- clients trust only their own session ---------------------------------------------------
FAKE_TCP = textwrap.dedent(r"""
    import json, socket, struct, sys
    port, victim = int(sys.argv[1]), sys.argv[2]
    listener = socket.create_server(("127.0.0.1", port))
    print("listening", flush=True)
    conn, _ = listener.accept()
    conn.settimeout(10)
    got = b""
    try:
        got += conn.recv(65536)
        reply = {"ok": True, "result": {"proof": "0" * 64, "nonce": "a" * 64, "version": 2, "ranks": 1,
                 "host": socket.gethostname(), "job_id": "*", "client": "c1", "pids": [2 ** 22 + 1],
                 "shm_dir": victim, "secret": None}}
        data = json.dumps(reply).encode()
        conn.sendall(struct.pack(">QQ", len(data), 0) + data)
        while True:
            chunk = conn.recv(65536)
            if not chunk:
                break
            got += chunk
    except OSError:
        pass
    print(json.dumps({"received": got.decode("latin-1")}), flush=True)
""")


@as_another_user
def test_a_fake_tcp_listener_gets_no_token_and_deletes_nothing(served, tmp_path):
    victim = tmp_path / "victim"
    victim.mkdir()
    for name in ("tessera-x-0.seg", "precious.txt"):
        (victim / name).write_text("mine")
    port = free_port()
    fake = subprocess.Popen(["setpriv", "--reuid", "nobody", "--regid", "nogroup", "--clear-groups", sys.executable,
                             "-c", FAKE_TCP, str(port), str(victim)], stdout=subprocess.PIPE, text=True)
    try:
        assert fake.stdout.readline().strip() == "listening"
        with pytest.raises(tessera.PeerError, match="did not prove"):
            tessera.connect(tcp=f"127.0.0.1:{port}", token=served.token, timeout=10)
        received = json.loads(fake.communicate(timeout=30)[0].strip().splitlines()[-1])["received"]
    finally:
        fake.kill()
    assert served.token not in received and "auth" not in received, received
    assert sorted(os.listdir(victim)) == ["precious.txt", "tessera-x-0.seg"]
    healthy(served)


FAKE_UNIX = textwrap.dedent(r"""
    import json, socket, sys
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(sys.argv[1]); listener.listen(4)
    print("listening", flush=True)
    got = b""
    listener.settimeout(30)
    for _ in range(int(sys.argv[2])):
        conn, _ = listener.accept()
        conn.settimeout(5)
        try:
            while True:
                chunk = conn.recv(65536)
                if not chunk:
                    break
                got += chunk
        except OSError:
            pass
        conn.close()
    print(json.dumps({"received": len(got)}), flush=True)
""")


@as_another_user
def test_a_fake_unix_listener_of_another_user_is_told_nothing(served, tmp_path):
    d = tempfile.mkdtemp(prefix="tessera-fake-", dir="/tmp")  # where nobody can make a socket
    os.chmod(d, 0o777)
    path = os.path.join(d, "s.sock")
    program = os.path.join(PACKAGE_PARENT, "tessera", "bin", "tessera")
    cli = os.path.exists(program)
    fake = subprocess.Popen(["setpriv", "--reuid", "nobody", "--regid", "nogroup", "--clear-groups", sys.executable,
                             "-c", FAKE_UNIX, path, "2" if cli else "1"], stdout=subprocess.PIPE, text=True)
    try:
        assert fake.stdout.readline().strip() == "listening"
        with pytest.raises(tessera.PeerError, match="served by uid"):
            tessera.connect(path, timeout=10)
        if cli:  # the command line's client checks too
            p = subprocess.run([program, "cc", "--session", path, "@g"], capture_output=True, text=True, timeout=60)
            assert p.returncode != 0 and "served by uid" in p.stderr, p.stderr
        received = json.loads(fake.communicate(timeout=30)[0].strip().splitlines()[-1])["received"]
    finally:
        fake.kill()
        shutil.rmtree(d, ignore_errors=True)
    assert received == 0
    healthy(served)


def test_the_command_line_refuses_an_absurd_payload_before_allocating(tmp_path):
    program = os.path.join(PACKAGE_PARENT, "tessera", "bin", "tessera")
    if not os.path.exists(program):
        pytest.skip(f"no {program}")
    d = tmp_path / "s"
    d.mkdir(mode=0o700)
    path = str(d / "s.sock")
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(path)
    listener.listen(1)
    cli = subprocess.Popen([program, "cc", "--session", path, "@g"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                           text=True)
    try:
        listener.settimeout(30)
        conn, _ = listener.accept()
        conn.settimeout(10)
        conn.recv(65536)
        data = json.dumps({"ok": True, "result": {}}).encode()
        conn.sendall(struct.pack(">QQ", len(data), 1 << 40) + data)
        _, err = cli.communicate(timeout=30)
    finally:
        cli.kill()
        listener.close()
    assert cli.returncode != 0 and "payload" in err, err


def test_segments_are_removed_only_when_they_are_the_session_s(tmp_path):
    # What _remove_segments trusts: a directory of this user not writable
    # by others, or a sticky one (/dev/shm); a job id of the runtime's form.
    assert session_client._removable_dir("/dev/shm")
    mine = tmp_path / "mine"
    mine.mkdir(mode=0o700)
    assert session_client._removable_dir(str(mine))
    os.chmod(mine, 0o777)
    assert not session_client._removable_dir(str(mine))
    os.symlink("/dev/shm", tmp_path / "link")
    assert not session_client._removable_dir(str(tmp_path / "link")) and not session_client._removable_dir("shm")
    for bad in ("*", "../x", "a-b-c/d", ""):
        assert not session_client._JOB_ID.match(bad)
    with pytest.raises(tessera.PeerError):
        session_client._checked_facts({"version": 2, "ranks": 1, "host": "h", "job_id": "*", "client": "c1",
                                       "pids": [1], "shm_dir": "/"})


# -- this user's own files ------------------------------------------------------------------
@as_another_user
def test_a_runtime_directory_taken_by_another_user_is_not_used(tmp_path):
    os.chmod(tmp_path, 0o755)
    taken = tmp_path / f"tessera-{os.getuid()}"
    taken.mkdir(mode=0o777)
    os.chown(taken, 65534, 65534)
    code = "from tessera.session import protocol; print(protocol.runtime_dir()); print(protocol.new_socket_path())"
    env = {k: v for k, v in os.environ.items() if k != "XDG_RUNTIME_DIR"}
    p = subprocess.run([sys.executable, "-c", code], env={**env, "TMPDIR": str(tmp_path)}, capture_output=True,
                       text=True, timeout=60)
    assert p.returncode == 0, p.stderr
    chosen = p.stdout.split()[0]
    assert chosen != str(taken) and "not a private directory of yours" in p.stderr, (p.stdout, p.stderr)
    st = os.stat(chosen)
    assert st.st_uid == os.getuid() and stat.S_IMODE(st.st_mode) == 0o700


@pytest.mark.parametrize("case", ["others_write", "not_mine"])
def test_tessera_shm_dir_must_be_private(tmp_path, case):
    if case == "not_mine" and not NOBODY:
        pytest.skip("needs root to chown")
    d = tmp_path / "shm"
    d.mkdir(mode=0o700)
    if case == "others_write":
        os.chmod(d, 0o777)
    else:
        os.chown(d, 65534, 65534)
    start = time.monotonic()
    with pytest.raises(tessera.ConfigError, match="TESSERA_SHM_DIR"):
        tessera.start(ranks=2, env={"TESSERA_SHM_DIR": str(d)})
    assert time.monotonic() - start < 5  # refused before any rank starts


def test_the_log_is_not_opened_through_a_symlink(tmp_path):
    d = tmp_path / "s"
    d.mkdir(mode=0o700)
    victim = tmp_path / "victim.txt"
    victim.write_text("precious\n")
    os.symlink(victim, d / "s.sock.log")
    with pytest.raises(PermissionError, match="symlink"):
        tessera.start(ranks=1, socket=str(d / "s.sock"))
    assert victim.read_text() == "precious\n"


def test_the_log_is_private(served):
    assert stat.S_IMODE(os.stat(served.s._launched.log).st_mode) == 0o600


# -- one declaration of the operations --------------------------------------------------------
# Hand-written client methods and the declared parameters their own names stand for.
RENAMED = {("urand", "degree"): "edge_factor", ("get", "name"): "ref"}
CLIENT_ONLY = {"stop": {"timeout"}, "trace": {"path", "buffer_mb"}, "from_edges": {"chunk_edges"},
               "from_scipy": {"matrix"}, "from_networkx": {"graph", "weight"},
               "from_pandas": {"frame", "source", "target", "weight"}, "restart": {"from_save", "hosts"}}


def test_the_client_methods_match_the_declaration():
    for op in operations.OPERATIONS.values():
        for method_name in op.client:
            method = getattr(session_client.Session, method_name)
            sig = inspect.signature(method)
            params = [p for p in sig.parameters.values() if p.name != "self"]
            if hasattr(method, "__signature__"):  # made from the declaration: the same parameters and defaults
                got = [(p.name, p.default) for p in params]
                want = [(p.name, inspect.Parameter.empty if p.required else p.default) for p in op.params]
                assert got == want, (method_name, got, want)
                assert method.__doc__ and all(p.name in method.__doc__ for p in op.params), method_name
                continue
            for p in params:  # hand-written: each parameter a declared one (or the payload's), same default
                if p.name in CLIENT_ONLY.get(method_name, ()) or p.name in {n for n, _ in op.payload} | {"kind"}:
                    continue
                name = RENAMED.get((method_name, p.name), p.name)
                assert name in op.by_name, f"Session.{method_name}({p.name}) is not a parameter of {op.name}"
                declared = op.by_name[name]
                if p.default is not inspect.Parameter.empty and not declared.required:
                    assert p.default == declared.default or (name == "dtype"), (method_name, p.name)
    # Every public command method of the client sends a declared operation.
    senders = {m for op in operations.OPERATIONS.values() for m in op.client}
    public = {n for n, v in vars(session_client.Session).items() if callable(v) and not n.startswith("_")}
    assert public - senders <= {"close", "submit"}, public - senders


def test_the_server_handlers_match_the_declaration():
    operations.check_handlers(server.Session)

    class Drifted(server.Session):
        def op_components(self, client, graph, algorithm="lp"):
            return {}
    with pytest.raises(AssertionError, match="op_components"):
        operations.check_handlers(Drifted)

    class Extra(server.Session):
        def op_shell(self, client, command):
            return {}
    with pytest.raises(AssertionError, match="op_shell"):
        operations.check_handlers(Extra)


def test_validation_names_what_is_wrong():
    ctx = operations.Context(lambda path, write: path)
    for op, args, match in (("components", [1], "args must be an object"), ("components", {}, "missing graph"),
                            ("components", {"graph": 5}, "graph must name an object"),
                            ("array", {"n": 3, "dtype": "object"}, "dtype must be one of"),
                            ("bfs", {"graph": "g", "source": True}, "source must be an integer"),
                            ("read_graph", {"path": 7}, "path must be a file path"),
                            ("stuck", {"graph": "g"}, "unknown command")):
        with pytest.raises(operations.Invalid, match=match):
            operations.validate(op, args, ctx)
    op, args = operations.validate("pagerank", {"graph": "#1", "max_iterations": 5}, ctx)
    assert args == {"graph": "#1", "max_iterations": 5}
    arrays = operations.payload_arrays(operations.OPERATIONS["gather"], [{"dtype": "int64", "length": 2}],
                                       np.arange(2, dtype=np.int64).tobytes())
    assert arrays.tolist() == [0, 1]


def test_a_reply_sent_beside_a_read_does_not_cut_the_reader_s_wait():
    """The server's connection thread waits (no deadline) for its client's
    next request while the command thread sends that client replies, with
    a deadline, on the same socket: the sender's deadline must not become
    the reader's (an idle owner would be dropped as "too slow", and its
    session lost). So sends and reads with deadlines leave the socket's own
    timeout alone: a watcher thread sees it unchanged through 300 of each,
    and a read with no deadline outlasts the senders' deadlines."""
    server_end, client_end = socket.socketpair()
    done = threading.Event()
    seen, errors = set(), []

    def watch():
        while not done.is_set():
            seen.add(server_end.gettimeout())

    def read():
        try:
            errors.append(protocol.receive(server_end, 1 << 20)[0])
        except Exception as e:  # noqa: BLE001 - said by the assertion below
            errors.append(e)

    watcher = threading.Thread(target=watch)
    switch = sys.getswitchinterval()
    try:
        sys.setswitchinterval(1e-5)  # the watcher looks between any two steps of a send
        watcher.start()
        for n in range(300):
            protocol.send(server_end, {"progress": n}, timeout=0.05)
            protocol.receive(client_end, 0, timeout=1, first_timeout=1)
            protocol.send(client_end, {"n": n})
            protocol.receive(server_end, 0, timeout=0.05, first_timeout=1)
        done.set()
        watcher.join()
        sys.setswitchinterval(switch)
        assert seen == {None}, f"a send or read with a deadline set the socket's own timeout: {seen}"
        reader = threading.Thread(target=read)
        reader.start()
        until = time.monotonic() + 0.5  # ten times the senders' deadline, with replies going out
        while time.monotonic() < until:
            protocol.send(server_end, {"progress": 0}, timeout=0.05)
            protocol.receive(client_end, 0, timeout=1, first_timeout=1)
        protocol.send(client_end, {"op": "ping", "args": {}})
        reader.join(timeout=10)
        assert errors == [{"op": "ping", "args": {}}], f"the reader's wait was cut short: {errors}"
    finally:
        done.set()
        sys.setswitchinterval(switch)
        server_end.close()
        client_end.close()
