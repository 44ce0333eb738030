"""``python3 -m tessera.session serve -n K [--socket PATH] [--tcp [HOST:]PORT] [--root DIR] [--dashboard]``
(what ``tessera serve`` runs): starts a session and serves until Ctrl-C or
until a client stops it, printing where it serves (and, with
``--dashboard``, the URL of its live page, token included)."""
import argparse
import signal
import sys

from . import client, launch


def main(argv=None):
    """``tessera serve``: starts a session and serves until Ctrl-C, SIGTERM
    or a client's ``s.stop()``.

    Parameters
    ----------
    argv : list of str, optional
        ``serve -n K [--socket PATH] [--tcp [HOST:]PORT] [--host LIST]
        [--root DIR ...] [--dashboard] [--dashboard-port P]`` (default:
        ``sys.argv[1:]``).

    Returns
    -------
    int
        The exit status: 0 when the session ended cleanly, 1 when its ranks
        failed.

    Raises
    ------
    tessera.SystemError
        The ranks did not start (their log's end in the message).
    tessera.ConfigError
        The shared-memory directory cannot be used.

    Examples
    --------
    >>> from tessera.session.__main__ import main
    >>> main(["serve", "-n", "2", "--socket", "/tmp/s/s.sock"])     # blocks until stopped
    """
    parser = argparse.ArgumentParser(prog="tessera serve", description="Start a session of resident ranks.")
    parser.add_argument("command", choices=["serve"])
    parser.add_argument("-n", "--ranks", type=int, default=2)
    parser.add_argument("--socket", default=None, help="its Unix socket (its directory is made mode 0700)")
    parser.add_argument("--tcp", default=None, help="also serve TCP at [HOST:]PORT, token in SOCKET.token")
    parser.add_argument("--host", default=None, help="mpirun --host list (ranks across nodes)")
    parser.add_argument("--dashboard", action="store_true", help="serve a live page of the session on 127.0.0.1 "
                        "(its URL printed, with its token)")
    parser.add_argument("--dashboard-port", type=int, default=None, help="its port (default: any free one)")
    parser.add_argument("--root", action="append", default=None, help="a directory requests' paths must lie in "
                        "(repeatable; bounds every client; default: this directory, for TCP clients only; "
                        "docs/security.md)")
    args = parser.parse_args(argv)
    s = launch.start(args.ranks, socket=args.socket, tcp=args.tcp, hosts=args.host, keep=True, root=args.root,
                     dashboard=args.dashboard or bool(args.dashboard_port), dashboard_port=args.dashboard_port)
    print(f"tessera session: {s.ranks} ranks serving {s.socket_path}" +
          (f" (tcp {args.tcp}, token in {s.socket_path}.token)" if args.tcp else ""), flush=True)
    print(f"  from Python: s = tessera.connect({s.socket_path!r})", flush=True)
    if s.dashboard_url:
        print(f"  live page: {s.dashboard_url}", flush=True)
    s.close()
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    try:
        code = s._process.wait()
        return 0 if code == 0 else 1
    except (KeyboardInterrupt, SystemExit):
        stopper = client.connect(s.socket_path)
        stopper._launched = s._launched
        stopper.stop()
        return 0


if __name__ == "__main__":
    sys.exit(main())
