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
import inspect
import os
import re
import socket as _socket
import stat
import sys
import threading
import time
import types

import numpy as np

from .. import _display
from .. import _errors
from .. import _tessera
from .. import interop
from . import operations
from . import progress as _progress
from . import protocol

_CLASSES = {cls.__name__: cls for cls in _errors.CLASSES.values()}


class SessionLost(_errors.PeerError):
    """The session ended (a rank died, or it was stopped) while this client
    used it. Its shared-memory segments are removed when this client can
    prove its ranks are gone. A ``tessera.PeerError``.

    Examples
    --------
    >>> try:
    ...     s.pagerank(g)
    ... except tessera.SessionLost as e:
    ...     print(e)                 # names the command and the ranks' log's end
    """


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
    in the session (``#N``, or the name given by ``s.persist``).

    Made by the session's commands, not by hand.

    Parameters
    ----------
    session : Session
        The connection its arrays are read through.
    description : dict
        The session's description: ``id``, ``kind``, ``arrays``, ``fields``.

    Examples
    --------
    >>> c = s.components(g)
    >>> c.count, c.arrays
    (2, ('file_ids', 'labels'))
    >>> c.labels.flags.owndata          # a view of the session's memory
    False
    """

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
        be mapped, else (or with ``copy=True``) a copy through the socket.

        Parameters
        ----------
        name : str
            One of ``arrays``.
        copy : bool, default False
            Copy it through the socket even where it could be mapped.

        Returns
        -------
        numpy.ndarray
            Read-only.

        Examples
        --------
        >>> h.array("times", copy=True).flags.owndata
        True
        """
        if copy:
            return self._session._fetch(self, name)
        return getattr(self, name)

    def to_scipy(self):
        """A graph as a ``scipy.sparse.csr_array`` (n x n, arc ``i -> j`` of
        weight ``w`` at ``(i, j)``; ones for an unweighted graph). The
        destinations and weights are the session's own arrays where they map
        on this node as one (one rank, or parts on page boundaries: see
        ``is_view("dst")``), else one copy through the socket; the row
        pointer is made here from the out-degrees.

        Returns
        -------
        scipy.sparse.csr_array

        Raises
        ------
        tessera.MismatchError
            This object is not a graph.

        Examples
        --------
        >>> A = s.from_scipy(B).to_scipy()
        >>> (A != B).nnz
        0
        """
        if self.kind != "Graph":
            raise _errors.MismatchError(f"{self.id} is a {self.kind}, not a Graph: only graphs convert to SciPy")
        weights = self.weight if self.fields.get("weighted") else None
        return interop.csr_of(int(self.vertices), self.out_degrees, self.dst, weights)

    def to_pandas(self):
        """This object's per-vertex arrays as a pandas DataFrame: a column
        ``file_id`` (the vertex's id in its file or input) first, then one
        column per array of that length (``labels``, ``times``, ``scores``,
        ``depths``, ...). The columns are this client's views or copies.

        Returns
        -------
        pandas.DataFrame

        Raises
        ------
        tessera.ConfigError
            pandas is not installed.
        tessera.MismatchError
            The object has no per-vertex arrays.

        Examples
        --------
        >>> s.hitting_times(lcc, targets=[0]).to_pandas().head()
        """
        names = [n for n in self.arrays if n not in ("dst", "weight", "out_degrees")]
        if "file_ids" not in names:
            raise _errors.MismatchError(f"{self.id} (a {self.kind}) has no per-vertex arrays with file ids")
        ids = self.file_ids
        columns = {"file_id": ids}
        for name in names:
            if name != "file_ids":
                values = getattr(self, name)
                if len(values) == len(ids):
                    columns[name] = values
        return _display.data_frame(f"{self.kind} {self.id}", columns)

    def is_view(self, name):
        """Whether the array ``name`` (read here if not yet) is a view of the
        session's memory rather than a copy.

        Parameters
        ----------
        name : str
            One of ``arrays``.

        Returns
        -------
        bool

        Examples
        --------
        >>> c.is_view("labels")
        True
        """
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
    hosts = result.get("hosts")  # each rank's node (sessions before it: rank 0's for all)
    if hosts is None:
        result["hosts"] = [result["host"]] * len(result["pids"])
    elif not isinstance(hosts, list) or len(hosts) != len(result["pids"]) or \
            not all(isinstance(h, str) for h in hosts):
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
    disconnects.

    Parameters
    ----------
    path : str
        The session's Unix socket (None with TCP).
    token : str, optional
        TCP: the session's token.
    max_transfer_bytes : int, default 1 GiB
        The most bytes one reply may carry (a copied array).
    copy_results : bool, default False
        Copy arrays through the socket even where they could be mapped.
    timeout : float, default 30.0
        Seconds to wait for the connection and the greeting.

    Examples
    --------
    >>> with tessera.start(ranks=2) as s:
    ...     s.ranks
    2
    """

    def __init__(self, path, *, token=None, max_transfer_bytes=protocol.DEFAULT_MAX_TRANSFER_BYTES,
                 copy_results=False, timeout=30.0, _join=None, _tcp=None):
        self.socket_path = os.path.abspath(path) if path else None
        self.max_transfer_bytes = int(max_transfer_bytes)
        self.copy_results = bool(copy_results)
        self._token = token
        self._tcp = _tcp
        self._launched = None  # the ranks' process when this client started them (launch.SessionProcess)
        self._restart_auto = False  # tessera.start(restart="auto")
        self._last_save = None      # where restart() restores from: the last save, else autosave's
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
        self.hosts = hello["hosts"]  # each rank's node
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
                lost = e
            else:
                lost = None
        if lost is not None:  # outside the lock: a restart sends requests of its own
            self._lost(op, lost)
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
        if self._launched is not None:
            code = self._launched.ended(timeout=10)
            death = self._launched.death(self.hosts)
            detail = (f": {death}" if death else "") + f" (its mpirun exited with {code})" + self._launched.log_tail()
        self._remove_segments()
        message = f"the session at {self.socket_path or self._tcp} ended while running {op!r}{detail}: {cause}"
        if self._restart_auto and self._launched is not None:
            try:
                restored = self.restart()
            except _errors.Error as e:
                raise SessionLost(f"{message}\nrestarting it failed: {e}") from None
            raise SessionLost(f"{message}\nthe session was restarted ({self.ranks} ranks) and "
                              + (f"restored {', '.join(restored) or 'nothing'} from {self._last_save}"
                                 if self._last_save else "holds nothing (no save to restore)")
                              + f"; run {op!r} again") from None
        raise SessionLost(message) from None

    def restart(self, from_save=None, hosts=None):
        """Relaunches the ranks of a session this client started (after a
        rank died, or to start afresh) and restores the last save.

        Parameters
        ----------
        from_save : str, optional
            The save to restore (default: the last ``save_all``/``save``
            directory of this client, else ``autosave``'s; none: an empty
            session).
        hosts : str, optional
            mpirun's ``--host`` list for the new ranks (``HOST:N,...``).
            Default: where the session ran; when it spanned nodes, a node
            that no longer answers is left out and its ranks go to the
            others (the same number of ranks, on the survivors).

        Returns
        -------
        list of str
            The names restored.

        Raises
        ------
        tessera.ConfigError
            This client did not start the session (``tessera.connect``).
        tessera.FormatError
            The save is damaged or partial (the session is up, empty).

        Examples
        --------
        >>> try:
        ...     s.pagerank(g)
        ... except tessera.SessionLost:
        ...     s.restart()                       # back with the saved residents
        """
        from . import launch as _launch  # launching is launch.py's
        if self._launched is None or self._launched.relaunch is None:
            raise _errors.ConfigError("only the client that started a session restarts it (tessera.start); "
                                      "this one joined it (tessera.connect)")
        old = self._launched
        if old.process.poll() is None:  # still running: stopped first
            try:
                self._request("shutdown", {})
            except (SessionLost, _errors.Error):
                pass
            old.ended(timeout=30)
        self._remove_segments()
        if self._sock is not None:
            self._sock.close()
        relaunch = dict(old.relaunch)
        if hosts is not None:
            relaunch["hosts"] = hosts
        else:
            survivors, lost = _launch.surviving_hosts(self.hosts, old, relaunch.get("env"))
            if lost:
                relaunch["hosts"] = survivors
                print(f"tessera: {', '.join(lost)} no longer answer{'s' if len(lost) == 1 else ''}; "
                      f"restarting the session's {self.ranks} ranks on {survivors}", file=sys.stderr, flush=True)
        launched = _launch.launch(**relaunch)
        fresh = Session(old.relaunch["socket_path"], max_transfer_bytes=self.max_transfer_bytes,
                        copy_results=self.copy_results, timeout=self._timeout)
        keep = {k: self.__dict__[k] for k in ("on_progress", "cancel_wait", "_restart_auto", "_last_save")
                if k in self.__dict__}
        self.__dict__.update(fresh.__dict__)
        self.__dict__.update(keep)
        fresh.__dict__["_sock"] = None  # the connection is this object's now
        self._launched = launched
        source = from_save or self._last_save
        if source is None:
            return []
        return self.restore(source)["names"]

    @property
    def _process(self):
        """The ranks' ``tessera mpirun`` process (a ``subprocess.Popen``)
        when this client started them, else None."""
        return self._launched.process if self._launched is not None else None

    def _ranks_gone(self, wait):
        """Whether this node's ranks have all ended (within ``wait`` s);
        only they can be seen from here (another node's pids name other
        processes here, or none)."""
        here = _socket.gethostname()
        mine = [p for p, h in zip(self._pids, self.hosts) if h == here]
        if not mine:
            return False
        deadline = time.monotonic() + wait
        while True:
            alive = [p for p in mine if os.path.exists(f"/proc/{p}")]
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
        valid until dropped), waits for them, and removes what they left:
        their shared-memory segments, their Open MPI session directory, and
        their log when they ended cleanly.

        Parameters
        ----------
        timeout : float, default 60
            Seconds the ranks have to end before they are killed.

        Examples
        --------
        >>> s.stop()
        """
        try:
            self._request("shutdown", {})
        except SessionLost:
            pass
        self.close()
        if self._launched is not None:
            self._launched.ended(timeout)
        self._remove_segments()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        if self._launched is not None and not self._launched.keep:
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
        """The resident object ``name`` (a name given by ``persist``, or an id ``#N``).

        Parameters
        ----------
        name : str
            Its name or id.

        Returns
        -------
        Remote

        Raises
        ------
        tessera.ConfigError
            No such object in the session.

        Examples
        --------
        >>> g = s.get("web")
        """
        return Remote(self, self._request("describe", {"ref": name}))

    def trace(self, path, *, buffer_mb=None):
        """Records the commands run inside ``with s.trace(PATH):`` into PATH
        (a Chrome Trace Event file: ``tessera trace summary PATH``).

        Parameters
        ----------
        path : str
            The trace file, written by rank 0 when the block ends.
        buffer_mb : int, optional
            Each rank's event buffer in MiB (default the recorder's, 64).

        Returns
        -------
        context manager

        Examples
        --------
        >>> with s.trace("run.json"):
        ...     s.components(g)
        """
        return _Recording(self, path, buffer_mb)

    # -- commands (every rank) ---------------------------------------------
    # read_graph, generate, components, largest_component, hitting_times,
    # pagerank, bfs, spectral, argsort, persist and drop are made from their
    # declaration (operations.py) below the class: their signatures,
    # defaults and docstrings are the declaration's.
    def _make(self, op, **args):
        return Remote(self, self._request(op, {k: v for k, v in args.items() if v is not None}))

    def kron(self, scale=16, edge_factor=16, seed=1, *, delete_fraction=0.0, permute=False, memory_limit=None):
        """A Kronecker (Graph500) graph generated in the session.

        Parameters
        ----------
        scale : int, default 16
            2**scale vertices.
        edge_factor : int, default 16
            Edges per vertex.
        seed : int, default 1
        delete_fraction : float, default 0.0
            The share of edges deleted at random.
        permute : bool, default False
            Permute the vertex ids.
        memory_limit : float, int or str, optional
            Refuse it at once when its estimated peak on a node, with what
            the session holds there, is over this: a fraction of the node's
            memory, bytes, or "none" (default: the session's, 90%;
            docs/memory.md).

        Returns
        -------
        Remote

        Examples
        --------
        >>> s.kron(scale=10).vertices
        1024
        """
        return self.generate("kron", scale=scale, edge_factor=edge_factor, seed=seed, delete_fraction=delete_fraction,
                             permute=permute, memory_limit=memory_limit)

    def urand(self, scale=16, degree=16, seed=1, *, delete_fraction=0.0, permute=False, memory_limit=None):
        """A uniform random graph generated in the session.

        Parameters
        ----------
        scale : int, default 16
            2**scale vertices.
        degree : int, default 16
            Edges per vertex.
        seed : int, default 1
        delete_fraction : float, default 0.0
        permute : bool, default False
        memory_limit : float, int or str, optional
            Refuse it at once when its estimated peak on a node, with what
            the session holds there, is over this: a fraction of the node's
            memory, bytes, or "none" (default: the session's, 90%;
            docs/memory.md).

        Returns
        -------
        Remote

        Examples
        --------
        >>> s.urand(scale=10).vertices
        1024
        """
        return self.generate("urand", scale=scale, edge_factor=degree, seed=seed, delete_fraction=delete_fraction,
                             permute=permute, memory_limit=memory_limit)

    def grid(self, dims, seed=1, *, delete_fraction=0.0, permute=False, memory_limit=None):
        """A grid graph (a long-diameter graph) generated in the session.

        Parameters
        ----------
        dims : str or sequence of int
            Its sides, ``"100x100"`` or ``(100, 100)``.
        seed : int, default 1
        delete_fraction : float, default 0.0
        permute : bool, default False
        memory_limit : float, int or str, optional
            Refuse it at once when its estimated peak on a node, with what
            the session holds there, is over this: a fraction of the node's
            memory, bytes, or "none" (default: the session's, 90%;
            docs/memory.md).

        Returns
        -------
        Remote

        Examples
        --------
        >>> s.grid("10x10").vertices
        100
        """
        if not isinstance(dims, str):
            dims = "x".join(str(int(d)) for d in dims)
        return self.generate("grid", dims=dims, seed=seed, delete_fraction=delete_fraction, permute=permute,
                             memory_limit=memory_limit)

    # -- distributed arrays ----------------------------------------------
    def zeros(self, n, dtype=np.float64):
        """A new DistArray of ``n`` zeros in the session.

        Parameters
        ----------
        n : int
            Global length.
        dtype : numpy dtype, default numpy.float64
            A plain numeric dtype.

        Returns
        -------
        Remote
            A session DistArray: ``size``, ``dtype``; its ``values`` array.

        Examples
        --------
        >>> counts = s.zeros(10, np.int64)
        """
        return self._make("array", n=int(n), dtype=np.dtype(dtype).name, fill="zeros")

    def arange(self, n, dtype=np.int64):
        """A new DistArray holding 0, 1, ..., n-1 in the session.

        Parameters
        ----------
        n : int
            Global length.
        dtype : numpy dtype, default numpy.int64
            A plain numeric dtype.

        Returns
        -------
        Remote
            A session DistArray (``values``).

        Examples
        --------
        >>> s.arange(5).values
        array([0, 1, 2, 3, 4])
        """
        return self._make("array", n=int(n), dtype=np.dtype(dtype).name, fill="arange")

    def gather(self, array, indices):
        """``array[indices]``: a copy, through the aggregators and the socket.

        Parameters
        ----------
        array : Remote or (Remote, str)
            A session DistArray, or (object, "field"), e.g. ``(c, "labels")``.
        indices : array_like of int
            Global indices.

        Returns
        -------
        numpy.ndarray
            The values.

        Raises
        ------
        tessera.RangeError
            An index out of range.

        Examples
        --------
        >>> s.gather((c, "labels"), [0, 5])
        """
        idx = np.ascontiguousarray(indices, dtype=np.int64)
        return self._request("gather", {"array": _array_ref(array)}, (idx,))["values"]

    def scatter(self, array, indices, values):
        """``array[indices] = values`` on the session's ranks (with duplicate
        indices one of the values is kept).

        Parameters
        ----------
        array : Remote or (Remote, str)
            A session DistArray, or (object, "field").
        indices : array_like of int
            Global indices.
        values : array_like
            One per index, of a dtype the array holds without loss.

        Raises
        ------
        tessera.RangeError, tessera.MismatchError
            As ``DistArray.scatter``.

        Examples
        --------
        >>> s.scatter(a, [1, 3], [10.0, 30.0])
        """
        idx = np.ascontiguousarray(indices, dtype=np.int64)
        self._request("scatter", {"array": _array_ref(array)}, (idx, np.ascontiguousarray(values)))

    def update(self, array, indices, values, op="add"):
        """``array[indices] = op(array[indices], values)``, every value folded in.

        Parameters
        ----------
        array : Remote or (Remote, str)
            A session DistArray, or (object, "field").
        indices : array_like of int
            Global indices.
        values : array_like or scalar
            One per index, or one for all (``s.update(a, idx, 1)``: a histogram).
        op : {"add", "min", "max", "xor"}, default "add"
            How a value folds in.

        Examples
        --------
        >>> s.update(counts, np.array([3, 3, 7]), 1)
        """
        idx = np.ascontiguousarray(indices, dtype=np.int64)
        vals = np.ascontiguousarray(np.broadcast_to(values, idx.shape) if np.ndim(values) == 0 else values)
        self._request("update", {"array": _array_ref(array), "op": op}, (idx, vals))


    # -- residents saved and restored ----------------------------------------------
    def save(self, name, dir):
        """Writes one resident to ``dir`` through the resilience store:
        checksummed, complete or not at all, readable at any rank count.

        Parameters
        ----------
        name : str or Remote
            The resident (a name given by ``persist``, or the object).
        dir : str
            The save's directory (made if absent; a save there before is
            replaced once this one is whole).

        Returns
        -------
        dict
            ``{"dir", "names"}``.

        Examples
        --------
        >>> s.save("web", "saves/web")
        """
        return self._save(dir, _ref(name))

    def save_all(self, dir):
        """Writes every named resident to ``dir`` (graphs with their id maps,
        component labels, hitting times and other results, arrays): what
        ``tessera.start(restore=dir)`` brings back, at any rank count.

        Parameters
        ----------
        dir : str
            The save's directory.

        Returns
        -------
        dict
            ``{"dir", "names"}``.

        Examples
        --------
        >>> s.persist(g, "web"); s.save_all("saves/today")
        """
        return self._save(dir, None)

    def _save(self, dir, name):
        result = self._request("save", {"dir": self._path(dir), "name": name})
        self._last_save = result["dir"]  # what restart() restores
        return result

    def restore(self, dir, *, memory_limit=None):
        """Brings a save's residents back under their names. Graphs come back
        as graphs (every command takes them); other results as their fields
        and arrays. Before anything is read, what they will take on each
        node is checked against it, as a command's estimate (docs/memory.md).

        Parameters
        ----------
        dir : str
            A directory ``save``, ``save_all`` or autosave wrote.
        memory_limit : float, int or str, optional
            As a command's: refuse the restore when it would take a node
            past this (default: the session's limit).

        Returns
        -------
        dict
            ``{"names", "ranks_saved"}``.

        Raises
        ------
        tessera.FormatError
            The save is damaged or partial (which piece, and why, is said);
            nothing of it is loaded.
        tessera.ConfigError
            The session already holds one of its names.
        tessera.RangeError
            Its residents would not fit a node (the numbers are said);
            nothing of it is loaded.

        Examples
        --------
        >>> s.restore("saves/today")["names"]
        ['labels', 'web']
        """
        return self._request("restore", {"dir": self._path(dir), "memory_limit": memory_limit})

    # -- graphs in from the client's arrays ------------------------------------
    def from_edges(self, src, dst, weights=None, *, undirected=False, symmetric=False, relabel=False, vertices=None,
                   chunk_edges=None, memory_limit=None):
        """A graph in the session from edges held here (as ``tessera.from_edges``).

        The edges travel in parts of ``chunk_edges`` (default: as many as fit
        ``max_transfer_bytes``), with progress for more than one part; rank
        0 keeps the parts until the last arrives (refused past half the
        memory its node has available), then every rank builds its share.

        Parameters
        ----------
        src, dst : array_like of int
            Each edge's source and destination ids, non-negative.
        weights : array_like of float, optional
            One per edge; None for an unweighted graph.
        undirected : bool, default False
            Add the reverse of every edge (duplicates dropped).
        symmetric : bool, default False
            The edges are listed in both directions already (verified).
        relabel : bool, default False
            Ids are any non-negative numbers; the vertices are the ids that
            occur, and ``file_ids`` gives each one's id.
        vertices : int, optional
            The vertex count without relabel (default the largest id + 1).
        chunk_edges : int, optional
            Edges per part sent.
        memory_limit : float, int or str, optional
            Refuse it at once when its estimated peak on a node, with what
            the session holds there, is over this: a fraction of the node's
            memory, bytes, or "none" (default: the session's, 90%;
            docs/memory.md).

        Returns
        -------
        Remote
            The graph (``vertices``, ``edges``, ``arcs``, ``directed``, ...).

        Raises
        ------
        tessera.MismatchError
            Arrays of different lengths.
        tessera.RangeError
            A negative id, an id past ``vertices``, a weight that is not
            finite, or more edges than rank 0's node can hold.

        Examples
        --------
        >>> g = s.from_edges([0, 1, 2], [1, 2, 0], undirected=True)
        >>> s.components(g).count
        1
        """
        src, dst, weights = interop.checked_edges(src, dst, weights)
        n = int(src.size)
        per = int(chunk_edges) if chunk_edges else max(1, self.max_transfer_bytes // 24)
        no_weights = np.empty(0, np.float64)
        parts = range(0, max(n, 1), per)
        shown = self._progress_sink("from_edges", {}) if len(parts) > 1 else None
        for k, lo in enumerate(parts):
            hi = min(n, lo + per)
            arrays = (src[lo:hi], dst[lo:hi], weights[lo:hi] if weights is not None else no_weights)
            if k < len(parts) - 1:
                self._request("edges_chunk", {}, arrays)
                shown.line(f"sent {hi} of {n} edges")
                continue
            if shown is not None:
                shown.line(f"sent {n} of {n} edges; building the graph")
                shown.finish("done")
            return self._make_with("from_edges", arrays, undirected=bool(undirected), symmetric=bool(symmetric),
                                   relabel=bool(relabel), vertices=None if vertices is None else int(vertices),
                                   memory_limit=memory_limit)

    def from_scipy(self, matrix, *, symmetric=False):
        """A graph in the session from a square SciPy sparse matrix: entry
        ``(i, j)`` of value ``v`` is the arc ``i -> j`` of weight ``v``;
        vertex ``i`` is row ``i`` (all ``n`` of them, isolated ones too).
        ``g.to_scipy()`` gives the matrix back (duplicates summed, as SciPy's
        canonical form).

        Parameters
        ----------
        matrix : scipy.sparse matrix or array, n x n
        symmetric : bool, default False
            The matrix is symmetric: an undirected graph (verified).

        Returns
        -------
        Remote
            The graph.

        Raises
        ------
        tessera.MismatchError
            Not a sparse matrix, not square, or (``symmetric``) not symmetric.

        Examples
        --------
        >>> g = s.from_scipy(scipy.sparse.random(100, 100, density=0.05, format="csr"))
        >>> (g.to_scipy() != A).nnz
        0
        """
        src, dst, weights, n = interop.edges_of_scipy(matrix)
        return self.from_edges(src, dst, weights, symmetric=symmetric, vertices=n)

    def from_networkx(self, graph, *, weight="weight"):
        """A graph in the session from a NetworkX graph: node ``k`` of
        ``list(graph.nodes)`` is vertex (and file id) ``k``, isolated nodes
        included; an undirected ``nx.Graph`` gives an undirected graph.
        The result's ``nodes`` lists the NetworkX nodes in that order, so
        ``nodes[file_id]`` names a result's vertex.

        Parameters
        ----------
        graph : networkx.Graph or networkx.DiGraph
        weight : str or None, default "weight"
            The edge attribute holding weights (None: unweighted).

        Returns
        -------
        Remote
            The graph, with ``nodes``.

        Examples
        --------
        >>> g = s.from_networkx(nx.karate_club_graph())
        >>> s.components(g).count
        1
        """
        src, dst, weights, nodes, directed = interop.edges_of_networkx(graph, weight)
        g = self.from_edges(src, dst, weights, undirected=not directed, vertices=len(nodes))
        g.__dict__["nodes"] = nodes
        return g

    def from_pandas(self, frame, source="source", target="target", weight=None, *, undirected=False):
        """A graph in the session from two columns of a pandas DataFrame
        (an edge per row). Integer ids are kept as the vertices' file ids
        (any non-negative numbers; the vertices are those that occur);
        other labels are numbered in order of first appearance, and the
        result's ``nodes`` lists them (``nodes[file_id]``).

        Parameters
        ----------
        frame : pandas.DataFrame
        source, target : str, default "source", "target"
            The columns holding each edge's ends.
        weight : str, optional
            The column holding weights.
        undirected : bool, default False
            Add the reverse of every edge.

        Returns
        -------
        Remote
            The graph.

        Raises
        ------
        tessera.ConfigError
            A column that is not in the frame.

        Examples
        --------
        >>> df = pd.DataFrame({"source": [10, 20], "target": [20, 30]})
        >>> s.from_pandas(df, undirected=True).vertices
        3
        """
        src, dst, weights, labels = interop.edges_of_pandas(frame, source, target, weight)
        g = self.from_edges(src, dst, weights, undirected=undirected, relabel=labels is None,
                            vertices=len(labels) if labels is not None else None)
        if labels is not None:
            g.__dict__["nodes"] = labels
        return g

    def _make_with(self, op, arrays, **args):
        return Remote(self, self._request(op, args, arrays))

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
        (the same client) and returns a ``concurrent.futures.Future``; the
        arguments are the command's own (forwarded as they are).

        Parameters
        ----------
        command : str
            A session method's name (``"hitting_times"``, ...).
        *args, **kwargs
            That method's arguments.

        Returns
        -------
        concurrent.futures.Future

        Examples
        --------
        >>> f = s.submit("pagerank", g)
        >>> f.result().iterations
        """
        future = concurrent.futures.Future()

        def run():
            try:
                other = Session(self.socket_path, token=self._token, max_transfer_bytes=self.max_transfer_bytes,
                                copy_results=self.copy_results, _join=(self.client_id, self._secret),
                                _tcp=self._tcp)
                other._pids, other._shm_dir = self._pids, self._shm_dir
                other.on_progress = self.on_progress  # a verbose command's lines go where this client's go
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
    """Joins a running session (``tessera serve``, or ``tessera.start(keep=True)``).

    Parameters
    ----------
    path : str, optional
        Its Unix socket (printed by ``tessera serve``); default: the socket
        of your only running session (``tessera sessions`` lists them; with
        several, the error lists them too).
    tcp : str, optional
        ``"HOST:PORT"`` instead of the socket (with the session's token).
    token : str, optional
        The TCP token.
    token_file : str, optional
        A file holding the token (``SOCKET.token``).
    max_transfer_bytes : int, default 1 GiB
        The most bytes one array copied through the connection may have.
    copy_results : bool, default False
        Copy result arrays through the socket even where they could be mapped.
    timeout : float, default 30
        Seconds to wait for the session to answer.

    Returns
    -------
    Session

    Raises
    ------
    tessera.PeerError
        The socket is another user's, or the token is wrong.
    tessera.ConfigError
        A session of another protocol version.

    Examples
    --------
    >>> s = tessera.connect("/run/user/1000/tessera/session-1234-ab12cd34.sock")
    >>> s.list()
    """
    if path is None and tcp is None:
        from . import sessions  # the user's only running session, by its connection file
        path = sessions.only_socket()
    if tcp and token is None and token_file:
        with open(token_file) as f:
            token = f.read().strip()
    return Session(path, token=token, max_transfer_bytes=max_transfer_bytes, copy_results=copy_results,
                   timeout=timeout, _tcp=tcp)
