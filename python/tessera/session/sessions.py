"""Finding a session again: every session's rank 0 writes a connection file
(its socket, TCP address, PIDs, ranks, hosts, start time, versions) into
this user's private runtime directory, as Jupyter does for its kernels, and
removes it when it stops. ``tessera.connect()`` without a path joins the
user's only running session; ``tessera sessions`` (``python3 -m
tessera.session.sessions``) lists them with their residents and memory.
A file whose session is gone (killed: its rank 0 no longer runs) is removed
when found, with the socket it left.
"""
import argparse
import json
import os
import socket as _socket
import sys
import time

from .. import _errors
from . import protocol

_SUFFIX = ".json"


def directory():
    """The directory of connection files: ``runtime_dir()/sessions`` (mode 0700).

    Returns
    -------
    str
    """
    return protocol.private_dir(os.path.join(protocol.private_dir(protocol.runtime_dir()), "sessions"))


def write(facts):
    """Writes this session's connection file (rank 0, once serving).

    Parameters
    ----------
    facts : dict
        ``socket``, ``tcp``, ``token_file``, ``pid``, ``pids``, ``ranks``,
        ``hosts``, ``started``, ``job_id``, ``version``, ``protocol``.

    Returns
    -------
    str
        The file's path (removed by ``remove`` when the session stops).
    """
    path = os.path.join(directory(), f"{_socket.gethostname()}-{os.getpid()}{_SUFFIX}")
    remove(path)  # a file of an earlier process of this PID, gone without removing it
    protocol.write_private(path, json.dumps(facts, indent=1) + "\n")
    return path


def remove(path):
    """Removes a connection file (a session stopping), if it is still there."""
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass


def _alive(facts):
    """Whether the session of ``facts`` still runs, as far as this node can
    tell: its rank 0's process (on this host), else its socket answering."""
    if facts.get("host") == _socket.gethostname():
        pid = int(facts.get("pid", 0))
        if pid <= 0:
            return False
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                return b"tessera.session.server" in f.read()
        except OSError:
            return False
    probe = _socket.socket(_socket.AF_UNIX, _socket.SOCK_STREAM)
    try:
        probe.settimeout(2.0)
        probe.connect(facts.get("socket", ""))
        return True
    except OSError:
        return False
    finally:
        probe.close()


def _forget(path, facts):
    """A killed session's connection file and socket (its log stays: the
    session failed, and the log says how)."""
    remove(path)
    sock = facts.get("socket")
    if sock and os.path.exists(sock):
        probe = _socket.socket(_socket.AF_UNIX, _socket.SOCK_STREAM)
        try:
            probe.connect(sock)
        except OSError:
            for leftover in (sock, sock + ".token"):
                try:
                    os.unlink(leftover)
                except OSError:
                    pass
        finally:
            probe.close()


def running():
    """This user's running sessions, from their connection files (files of
    sessions that are gone are removed on the way).

    Returns
    -------
    list of dict
        Each session's facts (see ``write``) plus ``file``: its connection
        file; oldest first.

    Examples
    --------
    >>> [s["socket"] for s in tessera.session.sessions.running()]
    """
    found = []
    for name in sorted(os.listdir(directory())):
        if not name.endswith(_SUFFIX):
            continue
        path = os.path.join(directory(), name)
        try:
            with open(path) as f:
                facts = json.load(f)
        except (OSError, ValueError):
            continue  # being written, or not a connection file: left alone
        if not isinstance(facts, dict):
            continue
        if not _alive(facts):
            _forget(path, facts)
            continue
        facts["file"] = path
        found.append(facts)
    return sorted(found, key=lambda f: f.get("started", 0))


def _describe(facts):
    return (f"{facts.get('socket')} ({facts.get('ranks')} ranks on {', '.join(facts.get('hosts') or [])}, "
            f"started {time.strftime('%Y-%m-%d %H:%M:%S', time.localtime(facts.get('started', 0)))})")


def only_socket():
    """The socket of this user's only running session.

    Returns
    -------
    str

    Raises
    ------
    tessera.ConfigError
        No session runs, or several do (they are listed: pass one's socket).
    """
    live = running()
    if not live:
        raise _errors.ConfigError("no running session of yours was found (its connection files are in "
                                  f"{directory()}); start one: tessera serve -n K, or tessera.start(keep=True)")
    if len(live) > 1:
        raise _errors.ConfigError("you have several running sessions; name one: tessera.connect(PATH) with PATH "
                                  "one of\n  " + "\n  ".join(_describe(f) for f in live))
    return live[0]["socket"]


def _memory(pids):
    """Resident bytes of the session's processes on this node (VmRSS)."""
    total = 0
    for pid in pids or []:
        try:
            with open(f"/proc/{int(pid)}/status") as f:
                for line in f:
                    if line.startswith("VmRSS:"):
                        total += int(line.split()[1]) * 1024
        except (OSError, ValueError):
            pass
    return total


def table(live, with_residents=True):
    """Each running session with its residents and memory (the rows of
    ``tessera sessions``).

    Parameters
    ----------
    live : list of dict
        From ``running()``.
    with_residents : bool, default True
        Ask each session for its resident objects (a request rank 0
        answers alone, never waiting for a command).

    Returns
    -------
    list of dict
        ``facts`` plus ``memory_bytes`` (this node's ranks' resident memory)
        and ``residents`` (names, or the error that prevented asking).
    """
    from . import client
    rows = []
    for facts in live:
        row = dict(facts, memory_bytes=_memory(facts.get("pids")))
        if with_residents:
            try:
                s = client.connect(facts["socket"], timeout=5.0)
                try:
                    objects = s.list()
                    row["residents"] = [o["id"] for o in objects if not o["id"].startswith("#")]
                    row["objects"] = len(objects)
                    row["running"] = (s.status().get("running") or {}).get("op")
                finally:
                    s.close()
            except (_errors.Error, OSError) as e:
                row["residents"] = f"(not asked: {e})"
        rows.append(row)
    return rows


def main(argv=None):
    """``tessera sessions [--json]``: this user's running sessions; the
    process's exit status (0)."""
    parser = argparse.ArgumentParser(prog="tessera sessions", description="This user's running sessions.")
    parser.add_argument("--json", action="store_true", help="one JSON document (a list) instead of the table")
    args = parser.parse_args(argv)
    rows = table(running())
    if args.json:
        print(json.dumps(rows, indent=1))
        return 0
    if not rows:
        print("no running sessions (tessera serve -n K starts one)")
        return 0
    for row in rows:
        residents = row.get("residents")
        named = ", ".join(residents) if isinstance(residents, list) else residents
        age = time.time() - row.get("started", time.time())
        print(f"{row['socket']}\n  {row['ranks']} ranks on {', '.join(row.get('hosts') or [])}, pid {row['pid']}, "
              f"up {age / 60:.1f} min, {row['memory_bytes'] / 2**20:.0f} MiB resident here, "
              f"{row.get('objects', '?')} objects; named: {named or 'none'}"
              + (f"; running {row['running']}" if row.get("running") else "")
              + (f"\n  tcp {row['tcp']} (token in {row['token_file']})" if row.get("tcp") else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
