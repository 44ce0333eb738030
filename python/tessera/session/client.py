"""A client of an analyst's session, from any plain Python process (a
notebook's kernel): no MPI here. Results are proxies whose arrays are
read-only NumPy views of the session's memory (on the session's node), or
copies through the socket when asked or elsewhere.

    with tessera.start(ranks=2) as s:
        g = s.read_graph("graph.el", undirected=True)
        c = s.components(g)
        c.labels                      # a read-only view: owndata False
        lcc = s.largest_component(g, c)
        h = s.hitting_times(lcc)

``tessera.start(..., dashboard=True)`` also serves a live page of the
session on 127.0.0.1 (``s.dashboard_url``, its token in it);
``trace=FILE`` records the whole session, ``with s.trace(PATH):`` the
commands run inside it.
"""
import concurrent.futures
import glob
import inspect
import os
import re
import shutil
import socket as _socket
import stat
import subprocess
import sys
import tempfile
import threading
import time
import types

import numpy as np

from .. import _errors
from .. import _tessera
from . import operations
from . import progress as _progress
from . import protocol

_CLASSES = {cls.__name__: cls for cls in _errors.CLASSES.values()}


class SessionLost(_errors.PeerError):
    """The session ended (a rank died, or it was stopped) while this client
    used it. Its shared-memory segments are removed when this client can
    prove its ranks are gone."""


def _raise(error):
    cls = _CLASSES.get(error.get("type"), _errors.Error)
    message = error.get("message", "the session reported an error")
    rank = error.get("rank", 0)
    if not message.startswith("on rank "):
        message = f"on rank {rank}: {message}"
    e = cls(message)
    e.rank = rank
    raise e


class Remote:
    """An object resident in the session (a graph, components, hitting
    times, ...). Its scalar fields are attributes; its arrays (``labels``,
    ``times``, ``file_ids``, ...) are read-only NumPy arrays on first access:
    views of the session's memory on its node, else copies. ``id`` names it
    in the session (``#N``, or the name given by ``s.persist``)."""

    def __init__(self, session, description):
        self.__dict__["_session"] = session
        self.__dict__["id"] = description["id"]
        self.__dict__["kind"] = description["kind"]
        self.__dict__["arrays"] = tuple(description["arrays"])
        self.__dict__["fields"] = dict(description["fields"])
        self.__dict__["_how"] = {}
        for k, v in description["fields"].items():
            self.__dict__.setdefault(k, v)

    def __getattr__(self, name):
        if name in self.__dict__["arrays"]:
            value = self._session._array(self, name)
            self.__dict__[name] = value
            return value
        raise AttributeError(f"a session {self.kind} has no attribute {name!r}")

    def array(self, name, copy=False):
        """The array ``name``: a view (no copy) where the session's memory can
        be mapped, else (or with ``copy=True``) a copy through the socket."""
        if copy:
            return self._session._fetch(self, name)
        return getattr(self, name)

    def is_view(self, name):
        """Whether ``name`` (once accessed) is a view of the session's memory."""
        getattr(self, name)
        return self._how[name] == "view"

    def __repr__(self):
        shown = ", ".join(f"{k}={v!r}" for k, v in list(self.fields.items())[:6] if not isinstance(v, (dict, list)))
        return f"tessera.session.{self.kind}({self.id}: {shown})"


_JOB_ID = re.compile(r"^[0-9a-f]{1,16}-[0-9a-f]{1,16}-[0-9a-f]{1,32}$")


def _removable_dir(path):
    """Whether a client may remove its session's files in ``path``: an
    absolute directory (no symlink) owned by this user and not writable by
    others, or a root-owned sticky one (/dev/shm, /tmp), where only a
    file's owner may remove it."""
    if not isinstance(path, str) or not os.path.isabs(path):
        return False
    try:
        st = os.lstat(path)
    except OSError:
        return False
    if not stat.S_ISDIR(st.st_mode):
        return False
    if st.st_uid not in (0, os.getuid()):
        return False
    return bool(st.st_mode & stat.S_ISVTX) or (st.st_uid == os.getuid() and not st.st_mode & 0o022)


def _checked_facts(result):
    """The hello reply's facts, each of the type it must have (a reply
    that is not a session's is refused before anything uses it)."""
    want = {"version": int, "ranks": int, "host": str, "job_id": str, "client": str, "pids": list, "shm_dir": str}
    if not isinstance(result, dict) or any(not isinstance(result.get(k), t) for k, t in want.items()) or \
            not all(isinstance(p, int) for p in result["pids"]) or not _JOB_ID.match(result["job_id"]) or \
            not (result.get("secret") is None or protocol.is_nonce(result.get("secret"))):
        raise _errors.PeerError("the session's greeting is not a Tessera session's; refused")
    return result


def _ref(obj):
    if isinstance(obj, Remote):
        return obj.id
    if isinstance(obj, str):
        return obj
    raise TypeError(f"expected an object of the session (or its name), not {type(obj).__name__}")


def _array_ref(obj):
    """A DistArray of the session, or (object, array field)."""
    if isinstance(obj, tuple) and len(obj) == 2:
        return [_ref(obj[0]), str(obj[1])]
    return _ref(obj)


class Session:
    """A connection to a session's ranks. Made by ``tessera.start`` (which
    also starts the ranks) or ``tessera.connect``; a context manager that
    stops the ranks on exit when it started them (unless ``keep``), else only
    disconnects."""

    def __init__(self, path, *, token=None, max_transfer_bytes=protocol.DEFAULT_MAX_TRANSFER_BYTES,
                 copy_results=False, timeout=30.0, _join=None, _tcp=None):
        self.socket_path = os.path.abspath(path) if path else None
        self.max_transfer_bytes = int(max_transfer_bytes)
        self.copy_results = bool(copy_results)
        self._token = token
        self._tcp = _tcp
        self._process = None
        self._keep = True
        self._log = None
        self._mpi_base = None  # the session's own Open MPI session directory base (start)
        self._lock = threading.Lock()
        # What a verbose command's progress lines go to: None shows them
        # as a progress block updated in place in a notebook, else as lines
        # on stderr; any callable taking a line replaces that.
        self.on_progress = None
        # How long a Ctrl-C waits for the cancelled command to stop.
        self.cancel_wait = 60.0
        self._timeout = float(timeout)
        self._sock = self._open(timeout)
        try:
            hello = self._hello(self._sock, _join)
        except BaseException:
            self._sock.close()
            raise
        self.ranks = hello["ranks"]
        self.host = hello["host"]
        self.job_id = hello["job_id"]
        self.client_id = hello["client"]
        # What this client's other connections prove themselves with (join).
        self._secret = hello["secret"] if _join is None else _join[1]
        self._pids = hello["pids"]
        self._shm_dir = hello["shm_dir"]
        # The live page's URL with its token (tessera.start(dashboard=True)), else None.
        self.dashboard_url = hello.get("dashboard")
        self.same_node = self.host == _socket.gethostname()

    # -- the wire ----------------------------------------------------------
    def _open(self, timeout):
        """A connection to the session; on the Unix socket, only to a
        server of this user (SO_PEERCRED), checked before anything is sent."""
        deadline = time.monotonic() + timeout
        while True:
            try:
                if self._tcp:
                    host, _, port = self._tcp.rpartition(":")
                    return _socket.create_connection((host or "127.0.0.1", int(port)), timeout=timeout)
                s = _socket.socket(_socket.AF_UNIX, _socket.SOCK_STREAM)
                try:
                    s.connect(self.socket_path)
                    _pid, uid = protocol.peer_credentials(s)
                except BaseException:
                    s.close()
                    raise
                if uid != os.getuid():
                    s.close()
                    raise _errors.PeerError(f"the socket {self.socket_path} is served by uid {uid}, not by you "
                                            f"(uid {os.getuid()}): not your session; nothing was sent to it")
                return s
            except (FileNotFoundError, ConnectionRefusedError):
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.05)

    def _path(self, path):
        """A path as a request carries it: absolute here on the Unix socket
        (the session resolves it against this process's working directory
        anyway); as given on TCP (the session resolves it in its root)."""
        path = os.fspath(path)
        return path if self._tcp else os.path.abspath(path)

    def _receive(self, sock, sent=0):
        """A reply: limits checked before allocating (a payload at most
        max_transfer_bytes, or what was sent), no deadline for the first
        byte (a command may run for hours), the session's io limit after."""
        return protocol.receive(sock, max(self.max_transfer_bytes, sent), timeout=max(self._timeout, 30.0))

    def _request(self, op, args, payload_arrays=()):
        header = {"op": op, "args": args}
        payload = b""
        if payload_arrays:
            header["payload"] = [{"dtype": a.dtype.name, "length": int(a.size)} for a in payload_arrays]
            if sum(a.nbytes for a in payload_arrays) > self.max_transfer_bytes:
                raise _errors.ConfigError(f"{op} would send {sum(a.nbytes for a in payload_arrays)} bytes, more than "
                                          f"max_transfer_bytes={self.max_transfer_bytes}; send it in parts")
            payload = b"".join(np.ascontiguousarray(a).tobytes() for a in payload_arrays)
        with self._lock:
            if self._sock is None:
                raise _errors.ConfigError("this session connection is closed")
            try:
                protocol.send(self._sock, header, payload)
                reply, data = self._receive(self._sock, len(payload))
                shown = None
                while "progress" in reply and "ok" not in reply:  # a verbose command's lines, as they come
                    if shown is None:
                        shown = self._progress_sink(op, args)
                    shown.line(str(reply["progress"]))
                    reply, data = self._receive(self._sock, len(payload))
                if shown is not None:
                    shown.finish("done" if reply.get("ok") else "failed")
            except KeyboardInterrupt:
                # A new connection of the same client is made before the old
                # one closes, so the session never sees this client gone
                # (which would reclaim its objects); through it the running
                # command is cancelled, and its end awaited on the old one.
                old, self._sock = self._sock, None
                self._reconnect()
                try:
                    self._cancel_running(old)
                finally:
                    old.close()
                raise
            except (ConnectionError, OSError, protocol.ProtocolError) as e:
                self._sock = None
                self._lost(op, e)
        if not reply.get("ok"):
            _raise(reply.get("error") or {})
        result = reply.get("result") or {}
        if isinstance(result.get("values"), dict):
            spec = result["values"]
            result["values"] = np.frombuffer(data, dtype=np.dtype(spec["dtype"]), count=spec["length"]).copy()
        return result

    def _progress_sink(self, op, args):
        """Where one command's progress lines go (see ``on_progress``)."""
        if self.on_progress is not None:
            sink = self.on_progress
            return types.SimpleNamespace(line=sink, finish=lambda outcome: None)
        if _progress.in_notebook():
            return _progress.NotebookProgress(args.get("name") or op, _progress.default_tolerance(op, args))
        return types.SimpleNamespace(line=_progress.print_line, finish=lambda outcome: None)

    @staticmethod
    def _ask_to_cancel(sock):
        """The session's answer to "cancel" on ``sock`` (a connection of this
        client): the name of the command it stops, or None."""
        protocol.send(sock, {"op": "cancel", "args": {}})
        reply, _ = protocol.receive(sock, 0, timeout=30.0, first_timeout=30.0)
        return (reply.get("result") or {}).get("cancelling")

    def _cancel_running(self, old):
        """Asks the session to stop this client's running command at its
        next cancellation point (an iteration, a round, a pass) and waits
        for it to end, at most ``cancel_wait`` seconds (a second Ctrl-C
        stops waiting; the command then ends on its own)."""
        op = self._ask_to_cancel(self._sock)
        if not op:
            return
        old.settimeout(self.cancel_wait)
        try:
            while True:
                reply, _ = protocol.receive(old, self.max_transfer_bytes, timeout=self.cancel_wait,
                                            first_timeout=self.cancel_wait)
                if "ok" in reply:
                    return
        except (OSError, protocol.ProtocolError):
            print(f"tessera: {op} did not stop within {self.cancel_wait:g} s; it ends on the session",
                  file=sys.stderr, flush=True)

    def _hello(self, sock, join):
        """The greeting on a new connection (``join``: (client id, secret),
        as that client): the session's facts, checked, or its refusal
        raised. On TCP the session first proves it holds the token (an HMAC
        of this client's nonce); the token itself is never sent, and nothing
        else is until the proof holds (protocol.py)."""
        limits = dict(max_payload=0, max_header=1 << 20, timeout=self._timeout, first_timeout=self._timeout)
        hello = {"op": "hello", "args": {}, "version": protocol.PROTOCOL_VERSION}
        if join is not None:
            hello["join"] = {"client": join[0], "secret": join[1]}
        if self._tcp:
            if not isinstance(self._token, str) or not self._token:
                raise _errors.ConfigError("a TCP session needs its token (token= or token_file=)")
            nonce = protocol.new_nonce()
            first = {"op": "hello", "args": {}, "nonce": nonce}
            protocol.send(sock, first)
            reply, _ = protocol.receive(sock, **limits)
            result = reply.get("result") if reply.get("ok") else None
            if not isinstance(result, dict) or not protocol.is_nonce(result.get("nonce")) or \
                    not protocol.proof_matches(protocol.proof(self._token, "server", nonce, result["nonce"]),
                                               result.get("proof")):
                if not reply.get("ok") and isinstance(reply.get("error"), dict):
                    _raise(reply["error"])
                raise _errors.PeerError(f"the listener at {self._tcp} did not prove it holds the session's token: "
                                        "not this session (nothing was sent to it)")
            protocol.send(sock, {"op": "auth", "proof": protocol.proof(self._token, "client", result["nonce"], nonce),
                                 **{k: v for k, v in hello.items() if k != "op"}})
        else:
            protocol.send(sock, hello)
        reply, _ = protocol.receive(sock, **limits)
        if not reply.get("ok"):
            _raise(reply.get("error") if isinstance(reply.get("error"), dict) else {})
        return _checked_facts(reply.get("result"))

    def _reconnect(self):
        sock = self._open(5.0)
        self._sock = sock
        self._hello(sock, (self.client_id, self._secret))

    def _lost(self, op, cause):
        """The session went away under us: say so, and leave nothing behind."""
        detail = ""
        if self._process is not None:
            try:
                code = self._process.wait(timeout=10)
                detail = f" (its mpirun exited with {code})"
            except subprocess.TimeoutExpired:
                self._process.kill()
                self._process.wait()
            detail += self._log_tail()
        self._remove_segments()
        raise SessionLost(f"the session at {self.socket_path or self._tcp} ended while running {op!r}{detail}: "
                          f"{cause}") from None

    def _log_tail(self, lines=8):
        if not self._log or not os.path.exists(self._log):
            return ""
        with open(self._log, errors="replace") as f:
            tail = f.read().splitlines()[-lines:]
        return ("; its log " + self._log + " ends:\n  " + "\n  ".join(tail)) if tail else ""

    def _ranks_gone(self, wait):
        if self.host != _socket.gethostname():
            return False
        deadline = time.monotonic() + wait
        while True:
            alive = [p for p in self._pids if os.path.exists(f"/proc/{p}")]
            if not alive or time.monotonic() > deadline:
                return not alive
            time.sleep(0.05)

    def _remove_segments(self):
        """The session's files in its shared-memory directory, once every
        rank is proven gone (a killed rank cannot remove its own): only
        regular files of this user named for this session's job, in a
        directory that is this user's or sticky (/dev/shm)."""
        if not self._ranks_gone(10.0):
            pass
        elif _removable_dir(self._shm_dir) and _JOB_ID.match(str(self.job_id)):
            prefix = f"tessera-{self.job_id}-"
            try:
                names = os.listdir(self._shm_dir)
            except OSError:
                names = []
            for name in names:
                if not name.startswith(prefix):
                    continue
                path = os.path.join(self._shm_dir, name)
                try:
                    st = os.lstat(path)
                    if stat.S_ISREG(st.st_mode) and st.st_uid == os.getuid():
                        os.unlink(path)
                except OSError:
                    pass
            if self._mpi_base and (self._process is None or self._process.poll() is not None):
                shutil.rmtree(self._mpi_base, ignore_errors=True)

    # -- lifetime ----------------------------------------------------------
    def close(self):
        """Disconnects (the session keeps serving; unnamed objects of this
        client are reclaimed)."""
        with self._lock:
            if self._sock is not None:
                self._sock.close()
                self._sock = None

    def stop(self, timeout=60):
        """Stops the session's ranks (every object goes; views held here stay
        valid until dropped)."""
        try:
            self._request("shutdown", {})
        except SessionLost:
            pass
        self.close()
        if self._process is not None:
            try:
                self._process.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                self._process.kill()
                self._process.wait()
        self._remove_segments()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        if self._process is not None and not self._keep:
            self.stop()
        else:
            self.close()

    # -- what rank 0 answers alone --------------------------------------
    def ping(self):
        """A round trip to rank 0 (no rank waits)."""
        self._request("ping", {})

    def noop(self):
        """A round trip through every rank (a barrier)."""
        self._request("noop", {})

    def status(self):
        """ranks, objects, clients, the running command (op, client, seconds)
        or None, commands queued, uptime."""
        return self._request("status", {})  # answered even while another command runs

    def list(self):
        """The resident objects: id, kind, named, owner."""
        return self._request("list", {})["objects"]

    def get(self, name):
        """A resident object by name or id (after a kernel restart, say)."""
        return Remote(self, self._request("describe", {"ref": name}))

    def trace(self, path, *, buffer_mb=None):
        """Records the commands run inside ``with s.trace(PATH):`` into PATH
        (a trace file, Chrome Trace Event JSON: Perfetto, ``tessera trace
        summary|plot``), each command a phase ``session: OP``. Rank 0 of the
        session writes PATH (on its node) when the block ends; the live page
        then draws its timeline. ``buffer_mb``: the recorder's buffer per
        thread (default: the recorder's). One recording at a time."""
        return _Recording(self, path, buffer_mb)

    # -- commands (every rank) ---------------------------------------------
    # read_graph, generate, components, largest_component, hitting_times,
    # pagerank, bfs, spectral, argsort, persist and drop are made from their
    # declaration (operations.py) below the class: their signatures,
    # defaults and docstrings are the declaration's.
    def _make(self, op, **args):
        return Remote(self, self._request(op, {k: v for k, v in args.items() if v is not None}))

    def kron(self, scale=16, edge_factor=16, seed=1, *, delete_fraction=0.0, permute=False):
        """A Graph500 Kronecker graph of 2**scale vertices (``generate("kron", ...)``)."""
        return self.generate("kron", scale=scale, edge_factor=edge_factor, seed=seed, delete_fraction=delete_fraction,
                             permute=permute)

    def urand(self, scale=16, degree=16, seed=1, *, delete_fraction=0.0, permute=False):
        """A uniform random graph of 2**scale vertices, ``degree`` edges per vertex."""
        return self.generate("urand", scale=scale, edge_factor=degree, seed=seed, delete_fraction=delete_fraction,
                             permute=permute)

    def grid(self, dims, seed=1, *, delete_fraction=0.0, permute=False):
        """A 2D or 3D grid, ``dims`` as (rows, cols) or "RxC"."""
        if not isinstance(dims, str):
            dims = "x".join(str(int(d)) for d in dims)
        return self.generate("grid", dims=dims, seed=seed, delete_fraction=delete_fraction, permute=permute)

    # -- distributed arrays ----------------------------------------------
    def zeros(self, n, dtype=np.float64):
        return self._make("array", n=int(n), dtype=np.dtype(dtype).name, fill="zeros")

    def arange(self, n, dtype=np.int64):
        return self._make("array", n=int(n), dtype=np.dtype(dtype).name, fill="arange")

    def gather(self, array, indices):
        """array[indices] (a copy, through the aggregators and the socket).
        ``array``: a session DistArray, or (object, "field")."""
        idx = np.ascontiguousarray(indices, dtype=np.int64)
        return self._request("gather", {"array": _array_ref(array)}, (idx,))["values"]

    def scatter(self, array, indices, values):
        idx = np.ascontiguousarray(indices, dtype=np.int64)
        self._request("scatter", {"array": _array_ref(array)}, (idx, np.ascontiguousarray(values)))

    def update(self, array, indices, values, op="add"):
        idx = np.ascontiguousarray(indices, dtype=np.int64)
        vals = np.ascontiguousarray(np.broadcast_to(values, idx.shape) if np.ndim(values) == 0 else values)
        self._request("update", {"array": _array_ref(array), "op": op}, (idx, vals))


    # -- long work -----------------------------------------------------------
    def cancel(self):
        """Stops this client's running command at its next cancellation
        point (an iteration, a round, a batch of a pass), as Ctrl-C does to
        a command this process waits for; a command started by ``submit``
        then raises ``tessera.Cancelled`` from its future. Returns the
        command's name, or None when no command of this client runs."""
        sock = self._open(5.0)
        try:
            self._hello(sock, (self.client_id, self._secret))
            return self._ask_to_cancel(sock)
        finally:
            sock.close()

    def submit(self, command, /, *args, **kwargs):
        """Runs ``s.<command>(*args, **kwargs)`` on a connection of its own
        (the same client) and returns a ``concurrent.futures.Future``."""
        future = concurrent.futures.Future()

        def run():
            try:
                other = Session(self.socket_path, token=self._token, max_transfer_bytes=self.max_transfer_bytes,
                                copy_results=self.copy_results, _join=(self.client_id, self._secret),
                                _tcp=self._tcp)
                other._pids, other._shm_dir = self._pids, self._shm_dir
                result = getattr(other, command)(*args, **kwargs)
                if isinstance(result, Remote):
                    result.__dict__["_session"] = self  # its arrays come through this connection
                other.close()
                future.set_result(result)
            except BaseException as e:  # noqa: BLE001 - handed to the future
                future.set_exception(e)

        threading.Thread(target=run, daemon=True).start()
        return future

    # -- arrays to the client ---------------------------------------------------
    def _array(self, obj, name):
        if not self.copy_results and self.same_node:
            where = self._request("view", {"ref": obj.id, "field": name})
            try:
                view = _tessera._attach(where["metadata"], False, True).whole()
                obj._how[name] = "view"
                return view
            except (_errors.MismatchError, _errors.SystemError, _errors.FormatError):
                pass  # not mappable here (parts not on page boundaries, files unreachable): a copy
        values = self._fetch(obj, name)
        obj._how[name] = "copy"
        return values

    def _fetch(self, obj, name):
        values = self._request("fetch", {"ref": obj.id, "field": name, "limit": self.max_transfer_bytes})["values"]
        values.flags.writeable = False
        return values

    def __repr__(self):
        return f"tessera.Session({self.ranks} ranks at {self.socket_path or self._tcp}, job {self.job_id})"


def _wire_value(session, kind, value):
    """A client-side value as its declared type carries it (a Remote as its
    id, NumPy scalars as plain numbers, a path absolute on the Unix socket)."""
    if isinstance(kind, operations.Optional):
        return None if value is None else _wire_value(session, kind.inner, value)
    if isinstance(kind, operations.Ref):
        return _ref(value)
    if isinstance(kind, operations.ArrayRef):
        return _array_ref(value)
    if isinstance(kind, operations.Path):
        return session._path(value)
    if isinstance(kind, operations.IntList):
        return [int(t) for t in np.atleast_1d(value)]
    if isinstance(kind, operations.Bool):
        return bool(value)
    if isinstance(kind, operations.Int):
        return int(value)
    if isinstance(kind, operations.Float):
        return float(value)
    if isinstance(kind, operations.Dtype):
        return np.dtype(value).name
    if isinstance(kind, (operations.Str, operations.Name)):
        return str(value)
    return value


def _declared_method(name):
    """Session.NAME made from operations.OPERATIONS[NAME]: its parameters
    (names, order, defaults) and docstring are the declaration's. What the
    caller gave is sent in the order given, then the other defaults (the
    live page shows a command as sent)."""
    op = operations.OPERATIONS[name]
    names = [p.name for p in op.params]

    def method(self, *args, **kwargs):
        if len(args) > len(names):
            raise TypeError(f"{name}() takes {len(names)} arguments, {len(args)} given")
        given = dict(zip(names, args))
        for key, value in kwargs.items():
            if key not in op.by_name:
                raise TypeError(f"{name}() got an unexpected keyword argument {key!r} (its parameters: "
                                f"{', '.join(names)})")
            if key in given:
                raise TypeError(f"{name}() got multiple values for argument {key!r}")
            given[key] = value
        missing = [p.name for p in op.params if p.required and p.name not in given]
        if missing:
            raise TypeError(f"{name}() missing {', '.join(missing)}")
        wire = {k: _wire_value(self, op.by_name[k].type, v) for k, v in given.items()}
        for p in op.params:
            if p.name not in wire and not p.required:
                wire[p.name] = p.default
        result = self._request(name, {k: v for k, v in wire.items() if v is not None})
        if op.returns == operations.OBJECT:
            return Remote(self, result)
        return None if op.returns == "{}" else result

    params = [inspect.Parameter("self", inspect.Parameter.POSITIONAL_OR_KEYWORD)]
    params += [inspect.Parameter(p.name, inspect.Parameter.POSITIONAL_OR_KEYWORD,
                                 default=inspect.Parameter.empty if p.required else p.default) for p in op.params]
    method.__signature__ = inspect.Signature(params)
    method.__name__ = name
    method.__qualname__ = f"Session.{name}"
    method.__doc__ = operations.docstring(op)
    return method


for _name in ("read_graph", "generate", "components", "largest_component", "hitting_times", "pagerank", "bfs",
              "spectral", "argsort", "persist", "drop"):
    setattr(Session, _name, _declared_method(_name))
del _name


class _Recording:
    """``with s.trace(PATH) as t:``; ``t.path`` is the file written at the end."""

    def __init__(self, session, path, buffer_mb):
        self.session = session
        self.path = session._path(path)
        self.buffer_mb = buffer_mb
        self.written = None

    def __enter__(self):
        args = {"path": self.path}
        if self.buffer_mb is not None:
            args["buffer_mb"] = int(self.buffer_mb)
        self.session._request("trace_start", args)
        return self

    def __exit__(self, kind, error, tb):
        try:
            self.written = self.session._request("trace_stop", {})["path"]
        except SessionLost:
            if kind is None:
                raise
        return False

    def __repr__(self):
        return f"tessera.session trace({self.path!r})"


def connect(path=None, *, tcp=None, token=None, token_file=None, max_transfer_bytes=protocol.DEFAULT_MAX_TRANSFER_BYTES,
            copy_results=False, timeout=30.0):
    """Joins a running session at its Unix socket ``path`` (or over TCP at
    ``tcp="HOST:PORT"`` with its token, read from ``token_file``)."""
    if tcp and token is None and token_file:
        with open(token_file) as f:
            token = f.read().strip()
    return Session(path, token=token, max_transfer_bytes=max_transfer_bytes, copy_results=copy_results,
                   timeout=timeout, _tcp=tcp)


def _package_parent():
    return os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def server_command(ranks, socket_path, *, hosts=None, tcp=None, owner=0, mpirun="mpirun", dashboard=False,
                   dashboard_port=None, trace=None, trace_buffer_mb=None, root=None):
    """The mpirun command that starts a session's ranks."""
    cmd = [shutil.which(mpirun) or mpirun, "--oversubscribe", "-n", str(int(ranks))]
    if hosts:
        cmd += ["--host", hosts]
    # Ranks on other nodes get the package and Tessera's settings too.
    for name in ["PYTHONPATH"] + sorted(k for k in os.environ if k.startswith("TESSERA_")):
        cmd += ["-x", name]
    cmd += [sys.executable, "-m", "tessera.session.server", "--socket", socket_path]
    if tcp:
        cmd += ["--tcp", tcp]
    for r in ([root] if isinstance(root, (str, os.PathLike)) else (root or [])):
        cmd += ["--root", os.path.abspath(os.fspath(r))]
    if owner:
        cmd += ["--owner", f"{_socket.gethostname()}:{int(owner)}"]
    if dashboard:
        cmd += ["--dashboard", "--dashboard-quiet"]  # the URL's token goes to the client, not to the log
        if dashboard_port:
            cmd += ["--dashboard-port", str(int(dashboard_port))]
    if trace:
        cmd += ["--trace", os.path.abspath(os.fspath(trace))]
        if trace_buffer_mb:
            cmd += ["--trace-buffer-mb", str(int(trace_buffer_mb))]
    return cmd


def server_environment(extra=None):
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (_package_parent(), env.get("PYTHONPATH")) if p)
    # As scripts/mpirun.sh: root allowed (containers, CI), idle ranks yield.
    env.setdefault("OMPI_ALLOW_RUN_AS_ROOT", "1")
    env.setdefault("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1")
    env.setdefault("OMPI_MCA_mpi_yield_when_idle", "1")
    env.setdefault("OMPI_MCA_pml", "ob1")
    env.update(extra or {})
    return env


_TMPDIR_BASES = ("OMPI_MCA_orte_tmpdir_base", "OMPI_MCA_orte_local_tmpdir_base", "OMPI_MCA_orte_remote_tmpdir_base")


def _own_mpi_base(environment, hosts):
    """A session on this node alone gets an Open MPI session directory base
    of its own, as scripts/mpirun.sh gives its jobs: Open MPI removes its
    shared top directory ($TMPDIR/ompi.HOST.UID) when a job ends and finds
    it empty, and a job starting then fails. Bases sit in this user's
    runtime directory, one folder per PID namespace, and hold the mpirun's
    PID once started; each start removes those of ended mpiruns (a kept
    session's, a killed client's). Returns the base, set in `environment`,
    or None where the user chose one or the session spans hosts."""
    if hosts or environment.get("OMPI_MCA_orte_default_hostfile") or any(environment.get(k) for k in _TMPDIR_BASES):
        return None
    try:
        namespace = os.stat("/proc/self/ns/pid").st_ino
    except OSError:
        namespace = 0
    bases = protocol.private_dir(os.path.join(protocol.private_dir(protocol.runtime_dir()), f"mpi.{namespace}"))
    for base in glob.glob(os.path.join(bases, "*")):
        try:
            with open(os.path.join(base, "mpirun.pid")) as f:
                pid = int(f.read())
        except FileNotFoundError:  # a start in progress writes it as soon as mpirun runs
            if time.time() - os.path.getmtime(base) > 3600:
                shutil.rmtree(base, ignore_errors=True)
            continue
        except (OSError, ValueError):
            continue
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            shutil.rmtree(base, ignore_errors=True)
        except PermissionError:
            pass
    base = tempfile.mkdtemp(dir=bases)
    environment["OMPI_MCA_orte_tmpdir_base"] = base
    return base


def start(ranks=2, *, socket=None, keep=False, hosts=None, tcp=None, timeout=120.0, env=None,
          max_transfer_bytes=protocol.DEFAULT_MAX_TRANSFER_BYTES, copy_results=False, dashboard=False,
          dashboard_port=None, trace=None, trace_buffer_mb=None, root=None):
    """Starts a session of ``ranks`` ranks (mpirun, in a process group of its
    own so a notebook's Ctrl-C does not reach it) and connects to it. A
    context manager: the ranks stop on exit unless ``keep``. ``socket``:
    its Unix socket (default: a new one in a private directory,
    ``tessera.session.protocol.runtime_dir()``); ``tcp="[HOST:]PORT"`` also
    serves TCP (127.0.0.1 unless a host is given) with a token in
    ``SOCKET.token``. Unless ``keep``, the ranks also stop (within a second
    or two) when this process ends without stopping them (a kernel killed
    or restarted); a kept session serves until stopped.

    ``dashboard=True``: rank 0 also serves the session's live page on
    127.0.0.1 (port ``dashboard_port``, default any free one) with a token
    in its URL, ``s.dashboard_url``; a request without the token is refused.
    ``trace=FILE``: the ranks record the whole session into FILE (written by
    rank 0 when the session stops).

    ``root``: a directory (or a list) that requests' paths must lie in,
    for every client; by default TCP clients (token holders) are bounded by
    this process's working directory and Unix-socket clients (this user's
    own processes) are not (docs/security.md)."""
    environment = server_environment(env)
    try:
        protocol.check_shm_dir(environment)
    except PermissionError as e:
        raise _errors.ConfigError(str(e)) from None
    if socket is None:
        socket = protocol.new_socket_path()
    else:
        socket = os.path.abspath(socket)
        protocol.private_dir(os.path.dirname(socket))
    log = socket + ".log"
    mpi_base = _own_mpi_base(environment, hosts)
    with protocol.open_log(log) as out:
        command = server_command(ranks, socket, hosts=hosts, tcp=tcp, owner=0 if keep else os.getpid(),
                                 dashboard=dashboard, dashboard_port=dashboard_port, trace=trace,
                                 trace_buffer_mb=trace_buffer_mb, root=root)
        process = subprocess.Popen(command, stdout=out,
                                   stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=environment,
                                   start_new_session=True)
    if mpi_base:
        with open(os.path.join(mpi_base, "mpirun.pid"), "w") as f:
            f.write(str(process.pid))
    deadline = time.monotonic() + timeout
    while not os.path.exists(socket):
        if process.poll() is not None:
            with open(log, errors="replace") as f:
                tail = f.read()[-3000:]
            raise _errors.SystemError(f"the session's ranks exited with {process.returncode} before serving "
                                      f"{socket}; its log ({log}):\n{tail}")
        if time.monotonic() > deadline:
            process.kill()
            raise _errors.SystemError(f"the session did not serve {socket} within {timeout:.0f} s; log: {log}")
        time.sleep(0.05)
    s = Session(socket, max_transfer_bytes=max_transfer_bytes, copy_results=copy_results, timeout=timeout)
    s._process, s._keep, s._log, s._mpi_base = process, bool(keep), log, mpi_base
    return s
