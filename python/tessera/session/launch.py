"""Starting a session's ranks: the one place the Python package launches
anything. mpirun itself is built by the library (``tessera mpirun``,
src/runtime/launch.cpp: its arguments, environment and session directory
base, as for every job Tessera starts); this module adds the session's
program and its options, watches the start, and after the end removes what
the ranks could not (client.py only connects).
"""
import os
import re
import shutil
import socket
import subprocess
import sys
import time

from .. import _errors
from . import client
from . import protocol
from . import sessions

_PACKAGE_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def program():
    """The ``tessera`` program that launches the ranks: ``bin/tessera`` in
    the package (a build tree links it there, ``pip install`` puts it
    there), else ``TESSERA_PROGRAM``, else ``tessera`` on ``PATH``.

    Returns
    -------
    str
        Its path.

    Raises
    ------
    tessera.ConfigError
        No such program (the package was copied without its ``bin/``).
    """
    for candidate in (os.path.join(_PACKAGE_DIR, "bin", "tessera"), os.environ.get("TESSERA_PROGRAM"),
                      shutil.which("tessera")):
        if candidate and os.access(candidate, os.X_OK):
            return candidate
    raise _errors.ConfigError(f"no tessera program to start a session with: not in {_PACKAGE_DIR}/bin, not "
                              "TESSERA_PROGRAM, not on PATH (run make build, or pip install ./python)")


def server_command(ranks, socket_path, *, hosts=None, tcp=None, owner=0, dashboard=False, dashboard_port=None,
                   trace=None, trace_buffer_mb=None, root=None, autosave=None, autosave_minutes=10.0):
    """The command that starts a session's ranks: ``tessera mpirun`` (the
    library's launch) running ``python -m tessera.session.server`` on
    ``ranks`` ranks.

    Parameters
    ----------
    ranks : int
        How many ranks.
    socket_path : str
        The session's Unix socket.
    hosts : str, optional
        mpirun's ``--host`` list (``HOST:N,...``); default this node.
    tcp, owner, dashboard, dashboard_port, trace, trace_buffer_mb, root, autosave, autosave_minutes
        As ``tessera.start`` (``owner``: the PID whose end stops an unkept
        session, 0 for none).

    Returns
    -------
    list of str
        The argv.
    """
    cmd = [program(), "mpirun", "-n", str(int(ranks))]
    if hosts:
        cmd += ["--host", hosts]
    cmd += [sys.executable, "-m", "tessera.session.server", "--socket", socket_path]
    if tcp:
        cmd += ["--tcp", tcp]
    for r in ([root] if isinstance(root, (str, os.PathLike)) else (root or [])):
        cmd += ["--root", os.path.abspath(os.fspath(r))]
    if owner:
        cmd += ["--owner", f"{os.uname().nodename}:{int(owner)}"]
    if dashboard:
        cmd += ["--dashboard", "--dashboard-quiet"]  # the URL's token goes to the client, not to the log
        if dashboard_port:
            cmd += ["--dashboard-port", str(int(dashboard_port))]
    if trace:
        cmd += ["--trace", os.path.abspath(os.fspath(trace))]
        if trace_buffer_mb:
            cmd += ["--trace-buffer-mb", str(int(trace_buffer_mb))]
    if autosave:
        cmd += ["--autosave", os.path.abspath(os.fspath(autosave)), "--autosave-minutes", str(float(autosave_minutes))]
    return cmd


def server_environment(extra=None):
    """This process's environment with the package first on ``PYTHONPATH``
    (the ranks import this very package; ``tessera mpirun`` names
    ``PYTHONPATH`` and every ``TESSERA_*`` variable for ranks on other
    nodes) and ``extra`` on top.

    Returns
    -------
    dict
    """
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (os.path.dirname(_PACKAGE_DIR), env.get("PYTHONPATH")) if p)
    env.update(extra or {})
    return env


class SessionProcess:
    """The ranks a client started: their ``tessera mpirun`` process (in a
    process group of its own, so a notebook's Ctrl-C does not reach it), its
    log, and its Open MPI session directory base.

    Attributes
    ----------
    process : subprocess.Popen
    log : str
        The ranks' output; removed when they end cleanly, kept (and named
        by the error) when they fail.
    keep : bool
        Whether the ranks outlive the client (``tessera.start(keep=True)``).
    """

    def __init__(self, process, log, keep, chosen_base):
        self.process, self.log, self.keep = process, log, bool(keep)
        self._chosen_base = chosen_base  # the user's OMPI_MCA_orte_tmpdir_base: never removed
        self.mpi_base = None
        self.relaunch = None  # launch()'s arguments, for Session.restart

    def death(self, rank_hosts=None):
        """What mpirun said of the rank that ended the session: "rank R (pid
        P) on node H: signal S (Name)", or that node H was lost (naming the
        ranks that ran there, given each rank's node), or "" when its log
        says nothing."""
        if not self.log or not os.path.exists(self.log):
            return ""
        with open(self.log, errors="replace") as f:
            text = f.read()
        m = re.search(r"process rank (\d+) with PID (\d+) on node (\S+) exited on signal (\d+) \(([^)]*)\)", text)
        if m:
            return f"rank {m[1]} (pid {m[2]}) on node {m[3]} was killed by signal {m[4]} ({m[5]})"
        m = re.search(r"process rank (\d+) with PID (\d+) on node (\S+) exited with(?: a)? status (\d+)", text) or \
            re.search(r"rank (\d+) with PID (\d+) on node (\S+) exited.*?status (\d+)", text, re.S)
        if m:
            return f"rank {m[1]} (pid {m[2]}) on node {m[3]} exited with status {m[4]}"
        m = re.search(r"lost (?:communication|contact) with .*? node (\S+)", text) or \
            re.search(r"lost communication with a remote daemon.*?Remote daemon\s*:\s*\S+ on node (\S+)", text, re.S)
        if not m:
            return ""
        ranks = [str(r) for r, h in enumerate(rank_hosts or []) if h == m[1]]
        on = f" (rank{'s' if len(ranks) > 1 else ''} {', '.join(ranks)} ran there)" if ranks else ""
        return f"node {m[1]} was lost{on}: its Open MPI daemon stopped answering"

    def note_base(self):
        """Reads the session directory base ``tessera mpirun`` gave mpirun
        (its environment, once it runs), to remove it when mpirun has ended."""
        try:
            with open(f"/proc/{self.process.pid}/environ", "rb") as f:
                env = dict(v.split(b"=", 1) for v in f.read().split(b"\0") if b"=" in v)
        except OSError:
            return
        base = env.get(b"OMPI_MCA_orte_tmpdir_base", b"").decode(errors="replace")
        if base and base != self._chosen_base:
            self.mpi_base = base

    def ended(self, timeout):
        """Waits up to ``timeout`` seconds for the ranks to end, killing
        them after that; their exit status."""
        try:
            code = self.process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.process.kill()
            code = self.process.wait()
        self.tidy(code == 0)
        return code

    def tidy(self, clean):
        """After the end: the session directory base goes; the log too when
        the ranks ended cleanly."""
        if self.process.poll() is None:
            return
        if self.mpi_base:
            shutil.rmtree(self.mpi_base, ignore_errors=True)
            try:
                os.rmdir(os.path.dirname(self.mpi_base))  # the directory of bases, with its last base
            except OSError:
                pass
            self.mpi_base = None
        if clean and self.log:
            try:
                os.unlink(self.log)
            except FileNotFoundError:
                pass

    def log_tail(self, lines=8):
        """``"; its log PATH ends: ..."`` (its last lines), or ``""``."""
        if not self.log or not os.path.exists(self.log):
            return ""
        with open(self.log, errors="replace") as f:
            tail = f.read().splitlines()[-lines:]
        return ("; its log " + self.log + " ends:\n  " + "\n  ".join(tail)) if tail else ""


def node_answers(host, env=None, timeout=30.0):
    """Whether one rank can be started on ``host`` (by mpirun, as the
    session's ranks are), within ``timeout`` seconds."""
    try:
        p = subprocess.run([program(), "mpirun", "-n", "1", "--host", f"{host}:1", "true"], env=server_environment(env),
                           stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                           timeout=timeout, start_new_session=True)
    except subprocess.TimeoutExpired:
        return False
    return p.returncode == 0


def surviving_hosts(rank_hosts, ended, env=None):
    """Where a session's ranks go again after it ended: ``(hosts, lost)``,
    ``hosts`` an mpirun ``--host`` list of the nodes that still answer with
    the same number of ranks (a lost node's ranks dealt to the others in
    turn), ``lost`` the nodes left out ([] when every node answers; ``hosts``
    is then None: where it ran before). This node always counts: the
    client runs here. ``ended`` (a SessionProcess) names a node mpirun
    said it lost; the others are asked (``node_answers``).

    Raises
    ------
    tessera.SystemError
        No node of the session answers.
    """
    here = socket.gethostname()
    nodes = list(dict.fromkeys(rank_hosts))
    if nodes == [here]:
        return None, []
    said = ended.death() if ended is not None else ""
    gone = re.match(r"node (\S+) was lost", said)  # death()'s words
    lost = [h for h in nodes if h != here and ((gone and h == gone[1]) or not node_answers(h, env))]
    if not lost:
        return None, []
    survivors = [h for h in nodes if h not in lost]
    if not survivors:
        raise _errors.SystemError(f"no node of the session answers ({', '.join(nodes)}); nowhere to restart it")
    counts = {h: sum(1 for r in rank_hosts if r == h) for h in survivors}
    for k in range(len(rank_hosts) - sum(counts.values())):
        counts[survivors[k % len(survivors)]] += 1
    return ",".join(f"{h}:{n}" for h, n in counts.items()), lost


def launch(ranks, socket_path, *, keep=False, hosts=None, tcp=None, timeout=120.0, env=None, dashboard=False,
           dashboard_port=None, trace=None, trace_buffer_mb=None, root=None, autosave=None, autosave_minutes=10.0):
    """Starts a session's ranks and waits until they serve ``socket_path``.

    Returns
    -------
    SessionProcess

    Raises
    ------
    tessera.ConfigError
        A ``TESSERA_SHM_DIR`` that others may write, or no tessera program.
    tessera.SystemError
        The ranks exited before serving (the log's end is in the message),
        or did not serve within ``timeout`` seconds.
    """
    sessions.running()  # forgets the connection files and sockets of sessions killed since
    environment = server_environment(env)
    try:
        protocol.check_shm_dir(environment)
    except PermissionError as e:
        raise _errors.ConfigError(str(e)) from None
    log = socket_path + ".log"
    command = server_command(ranks, socket_path, hosts=hosts, tcp=tcp, owner=0 if keep else os.getpid(),
                             dashboard=dashboard, dashboard_port=dashboard_port, trace=trace,
                             trace_buffer_mb=trace_buffer_mb, root=root, autosave=autosave,
                             autosave_minutes=autosave_minutes)
    with protocol.open_log(log) as out:
        process = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                   env=environment, start_new_session=True)
    started = SessionProcess(process, log, keep, environment.get("OMPI_MCA_orte_tmpdir_base"))
    started.relaunch = dict(ranks=ranks, socket_path=socket_path, keep=keep, hosts=hosts, tcp=tcp, timeout=timeout,
                            env=env, dashboard=dashboard, dashboard_port=dashboard_port, trace=None,
                            trace_buffer_mb=None, root=root, autosave=autosave, autosave_minutes=autosave_minutes)
    deadline = time.monotonic() + timeout
    while not os.path.exists(socket_path):
        if process.poll() is not None:
            with open(log, errors="replace") as f:
                tail = f.read()[-3000:]
            raise _errors.SystemError(f"the session's ranks exited with {process.returncode} before serving "
                                      f"{socket_path}; its log ({log}):\n{tail}")
        if time.monotonic() > deadline:
            process.kill()
            process.wait()
            raise _errors.SystemError(f"the session did not serve {socket_path} within {timeout:.0f} s; log: {log}")
        time.sleep(0.05)
    started.note_base()
    return started


def start(ranks=2, *, socket=None, keep=False, hosts=None, tcp=None, timeout=120.0, env=None,
          max_transfer_bytes=protocol.DEFAULT_MAX_TRANSFER_BYTES, copy_results=False, dashboard=False,
          dashboard_port=None, trace=None, trace_buffer_mb=None, root=None, memory_limit=None, restore=None,
          autosave=None, autosave_minutes=10.0, restart=None):
    """Starts a session of resident ranks and connects to it.

    The ranks run under ``tessera mpirun`` in a process group of their own
    (a notebook's Ctrl-C does not reach them). A context manager: the ranks
    stop on exit unless ``keep``; unless ``keep`` they also stop (within a
    second or two) when this process ends without stopping them (a kernel
    killed or restarted). A session that ends cleanly leaves nothing behind
    (its log is kept, and named, only when the ranks fail).

    Parameters
    ----------
    ranks : int, default 2
        How many ranks.
    socket : str, optional
        Its Unix socket (default: a new one in this user's private runtime
        directory, ``tessera.session.protocol.runtime_dir()``).
    keep : bool, default False
        The ranks outlive this process (join them with ``tessera.connect``).
    hosts : str, optional
        mpirun's ``--host`` list, ``HOST:N,...`` (default this node).
    tcp : str, optional
        ``"[HOST:]PORT"``: also serve TCP (127.0.0.1 unless a host is
        given), with a token in ``SOCKET.token``.
    timeout : float, default 120
        Seconds the ranks have to start serving.
    env : dict, optional
        Variables set for the ranks (``TESSERA_SHM_DIR``, ...).
    max_transfer_bytes : int, default 1 GiB
        The most bytes one array copied through the socket may have.
    copy_results : bool, default False
        Copy result arrays even where they could be mapped.
    dashboard : bool, default False
        Rank 0 also serves the session's live page on 127.0.0.1
        (``s.dashboard_url``, a token in it).
    dashboard_port : int, optional
        The live page's port (default any free one).
    trace : str, optional
        Record the whole session into this file (written when it stops).
    trace_buffer_mb : int, optional
        Each rank's trace buffer in MiB.
    root : str or list of str, optional
        Directories requests' paths must lie in, for every client (by
        default TCP clients are bounded by this working directory, Unix
        socket clients are not: docs/security.md).
    memory_limit : float, int or str, optional
        The session's memory limit (docs/memory.md): a command whose
        estimated peak on a node, with what the session holds there, is over
        it is refused at once. A fraction of the node's memory (0.8), bytes,
        or a text such as "90%", "20G", "none"; default 90%.

    restore : str, optional
        A save's directory (``s.save_all``, autosave): its residents come
        back under their names, at any rank count.
    autosave : str, optional
        Save the named residents into this directory when the session stops
        (not when it is killed) and after ``autosave_minutes`` without
        commands.
    autosave_minutes : float, default 10
        Idle minutes before an autosave.
    restart : None or "auto", default None
        "auto": when a rank dies, the session relaunches itself and restores
        the last save (``autosave`` or ``s.save_all``); the command that
        was running raises ``SessionLost`` saying so, and the session is
        usable again. Otherwise ``s.restart()`` does it when asked.

    Returns
    -------
    Session

    Raises
    ------
    tessera.ConfigError
        A ``TESSERA_SHM_DIR`` others may write, or no tessera program.
    tessera.FormatError
        ``restore`` names a damaged or partial save (the session is stopped).
    tessera.SystemError
        The ranks exited before serving (the log's end in the message), or
        did not serve within ``timeout``.

    Examples
    --------
    >>> with tessera.start(ranks=2) as s:
    ...     g = s.kron(scale=10)
    ...     s.components(g).count
    """
    if socket is None:
        socket = protocol.new_socket_path()
    else:
        socket = os.path.abspath(socket)
        protocol.private_dir(os.path.dirname(socket))
    if memory_limit is not None:  # memory guardrail (issue 58): the ranks' TESSERA_MEMORY_LIMIT (session/memory.py)
        from . import memory, operations
        try:
            limit = operations.MemoryLimit().check(memory_limit, None)
        except operations.Invalid as e:
            raise _errors.ConfigError(f"memory_limit {e}") from None
        env = dict(env or {}, **{memory.ENV: memory.limit_text(limit)})
    launched = launch(ranks, socket, keep=keep, hosts=hosts, tcp=tcp, timeout=timeout, env=env,
                              dashboard=dashboard, dashboard_port=dashboard_port, trace=trace,
                              trace_buffer_mb=trace_buffer_mb, root=root, autosave=autosave,
                              autosave_minutes=autosave_minutes)
    try:
        s = client.Session(socket, max_transfer_bytes=max_transfer_bytes, copy_results=copy_results, timeout=timeout)
    except BaseException:
        launched.process.kill()
        launched.ended(timeout=10)
        raise
    s._launched = launched
    if restart not in (None, "auto"):
        s.stop()
        raise _errors.ConfigError(f'restart must be None or "auto", not {restart!r}')
    s._restart_auto = restart == "auto"
    s._last_save = os.path.abspath(autosave) if autosave else None
    if restore is not None:
        try:
            s.restore(restore)
        except BaseException:
            s.stop()
            raise
    return s
