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
import os
import shutil
import socket as _socket
import subprocess
import sys
import tempfile
import threading
import time
import types

import numpy as np

from .. import _errors
from .. import _tessera
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
        self._sock = self._open(timeout)
        hello = self._hello(self._sock, _join)
        self.ranks = hello["ranks"]
        self.host = hello["host"]
        self.job_id = hello["job_id"]
        self.client_id = hello["client"]
        self._pids = hello["pids"]
        self._shm_dir = hello["shm_dir"]
        # The live page's URL with its token (tessera.start(dashboard=True)), else None.
        self.dashboard_url = hello.get("dashboard")
        self.same_node = self.host == _socket.gethostname()

    # -- the wire ----------------------------------------------------------
    def _open(self, timeout):
        deadline = time.monotonic() + timeout
        while True:
            try:
                if self._tcp:
                    host, _, port = self._tcp.rpartition(":")
                    return _socket.create_connection((host or "127.0.0.1", int(port)))
                s = _socket.socket(_socket.AF_UNIX, _socket.SOCK_STREAM)
                s.connect(self.socket_path)
                return s
            except (FileNotFoundError, ConnectionRefusedError):
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.05)

    def _request(self, op, args, payload_arrays=()):
        header = {"op": op, "args": args}
        payload = b""
        if payload_arrays:
            header["payload"] = [{"dtype": a.dtype.name, "length": int(a.size)} for a in payload_arrays]
            payload = b"".join(np.ascontiguousarray(a).tobytes() for a in payload_arrays)
        with self._lock:
            if self._sock is None:
                raise _errors.ConfigError("this session connection is closed")
            try:
                protocol.send(self._sock, header, payload)
                reply, data = protocol.receive(self._sock)
                shown = None
                while "progress" in reply and "ok" not in reply:  # a verbose command's lines, as they come
                    if shown is None:
                        shown = self._progress_sink(op, args)
                    shown.line(reply["progress"])
                    reply, data = protocol.receive(self._sock)
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
        reply, _ = protocol.receive(sock)
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
                reply, _ = protocol.receive(old)
                if "ok" in reply:
                    return
        except (OSError, protocol.ProtocolError):
            print(f"tessera: {op} did not stop within {self.cancel_wait:g} s; it ends on the session",
                  file=sys.stderr, flush=True)

    def _hello(self, sock, join):
        """The greeting on a new connection (``join``: as that client): the
        session's facts, or its refusal raised."""
        protocol.send(sock, {"op": "hello", "args": {}, "version": protocol.PROTOCOL_VERSION, "token": self._token,
                             "join": join})
        reply, _ = protocol.receive(sock)
        if not reply.get("ok"):
            _raise(reply.get("error") or {})
        return reply["result"]

    def _reconnect(self):
        sock = self._open(5.0)
        self._sock = sock
        self._hello(sock, self.client_id)

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
        rank is proven gone (a killed rank cannot remove its own)."""
        if self._ranks_gone(10.0):
            for path in glob.glob(os.path.join(self._shm_dir, f"tessera-{self.job_id}-*")):
                try:
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
    def _make(self, op, **args):
        return Remote(self, self._request(op, {k: v for k, v in args.items() if v is not None}))

    def read_graph(self, path, *, base=None, relabel=False, undirected=False, symmetric=False, pattern=False):
        """Reads a graph file on every rank (as ``tessera.read_graph``)."""
        return self._make("read_graph", path=os.path.abspath(str(path)), base=base, relabel=relabel,
                          undirected=undirected, symmetric=symmetric, pattern=pattern)

    def generate(self, kind, **options):
        return self._make("generate", kind=kind, **options)

    def kron(self, scale=16, edge_factor=16, seed=1, **options):
        return self.generate("kron", scale=scale, edge_factor=edge_factor, seed=seed, **options)

    def urand(self, scale=16, degree=16, seed=1, **options):
        return self.generate("urand", scale=scale, edge_factor=degree, seed=seed, **options)

    def grid(self, dims, seed=1, **options):
        if not isinstance(dims, str):
            dims = "x".join(str(int(d)) for d in dims)
        return self.generate("grid", dims=dims, seed=seed, **options)

    def components(self, graph, algorithm="afforest"):
        return self._make("components", graph=_ref(graph), algorithm=algorithm)

    def largest_component(self, graph, components=None, algorithm="afforest"):
        return self._make("largest_component", graph=_ref(graph),
                          components=_ref(components) if components is not None else None, algorithm=algorithm)

    def hitting_times(self, graph, targets=None, **options):
        if targets is not None:
            targets = [int(t) for t in np.atleast_1d(targets)]
        return self._make("hitting_times", graph=_ref(graph), targets=targets, **options)

    def pagerank(self, graph, **options):
        return self._make("pagerank", graph=_ref(graph), **options)

    def bfs(self, graph, source, **options):
        return self._make("bfs", graph=_ref(graph), source=int(source), **options)

    def spectral(self, graph, what="fiedler", **options):
        return self._make("spectral", graph=_ref(graph), what=what, **options)

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

    def argsort(self, array, digit_bits=16):
        return self._make("argsort", array=_array_ref(array), digit_bits=int(digit_bits))

    # -- names -----------------------------------------------------------------
    def persist(self, obj, name):
        """Names ``obj`` in the session: it outlives this client, and any
        client (or ``tessera ... --session``) finds it by name."""
        return Remote(self, self._request("persist", {"ref": _ref(obj), "name": str(name)}))

    def drop(self, obj):
        """Forgets a name or an unnamed object of this client; its memory goes
        with the last name and the last view."""
        self._request("drop", {"ref": _ref(obj)})

    # -- long work -----------------------------------------------------------
    def cancel(self):
        """Stops this client's running command at its next cancellation
        point (an iteration, a round, a batch of a pass), as Ctrl-C does to
        a command this process waits for; a command started by ``submit``
        then raises ``tessera.Cancelled`` from its future. Returns the
        command's name, or None when no command of this client runs."""
        sock = self._open(5.0)
        try:
            self._hello(sock, self.client_id)
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
                                copy_results=self.copy_results, _join=self.client_id, _tcp=self._tcp)
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


class _Recording:
    """``with s.trace(PATH) as t:``; ``t.path`` is the file written at the end."""

    def __init__(self, session, path, buffer_mb):
        self.session = session
        self.path = os.path.abspath(os.fspath(path))
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
                   dashboard_port=None, trace=None, trace_buffer_mb=None):
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
          dashboard_port=None, trace=None, trace_buffer_mb=None):
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
    rank 0 when the session stops)."""
    if socket is None:
        socket = protocol.new_socket_path()
    else:
        socket = os.path.abspath(socket)
        protocol.private_dir(os.path.dirname(socket))
    log = socket + ".log"
    environment = server_environment(env)
    mpi_base = _own_mpi_base(environment, hosts)
    with open(log, "w") as out:
        command = server_command(ranks, socket, hosts=hosts, tcp=tcp, owner=0 if keep else os.getpid(),
                                 dashboard=dashboard, dashboard_port=dashboard_port, trace=trace,
                                 trace_buffer_mb=trace_buffer_mb)
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
