"""``tessera CMD --session PATH @NAME`` (what the tessera program runs for
it, src/cli/session_client.cpp): the command's workflow run by a session's
ranks on a graph it holds, through this package's client, so the wire
protocol is written once (protocol.py) and the command is the declared
operation ``command`` (operations.py). Progress lines go to stderr as they
come, the document to stdout with ``--json``; the exit status is the
command's.

    python3 -m tessera.session.command --session PATH --graph NAME --name cc --options JSON [--json] [--verbose]
"""
import argparse
import json
import sys

from .. import _errors
from . import client


def main(argv=None):
    """Runs one command in a session; returns the process's exit status
    (the command's, or 1 with ``tessera: error: ...`` on stderr)."""
    parser = argparse.ArgumentParser(prog="tessera CMD --session", description=__doc__.split("\n\n")[0])
    parser.add_argument("--session", required=True, help="the session's Unix socket")
    parser.add_argument("--graph", required=True, help="the resident graph's name (without @)")
    parser.add_argument("--name", required=True, help="the command (cc, hitting, pagerank, bfs, spectral)")
    parser.add_argument("--options", required=True, help="the command line's options as JSON")
    parser.add_argument("--json", action="store_true", help="print the command's JSON document on stdout")
    parser.add_argument("--verbose", action="store_true", help="progress lines on stderr as the command runs")
    args = parser.parse_args(argv)
    try:
        s = client.connect(args.session)
        s.on_progress = lambda line: print(line, file=sys.stderr, flush=True)
        try:
            result = s._request("command", {"graph": args.graph, "name": args.name,
                                            "options": args.options, "verbose": args.verbose})
        finally:
            s.close()
    except _errors.Error as e:
        print(f"tessera: error: {e}", file=sys.stderr, flush=True)
        return 1
    except (OSError, ValueError) as e:
        print(f"tessera: error: --session {args.session}: {e}", file=sys.stderr, flush=True)
        return 1
    if args.json:
        print(json.dumps(result.get("document", {})), flush=True)
    return int(result.get("exit_code", 0))


if __name__ == "__main__":
    sys.exit(main())
