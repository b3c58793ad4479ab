"""`piwatch reindex [SESSION]`: rebuild one session (or everything) from source."""

from __future__ import annotations

import argparse
import sys

from ..wire import MIN_ID_PREFIX, to_json

__all__ = ["add_parser", "run"]


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("reindex", help="ask piwatchd to re-read a session (or all) from the source files")
    p.add_argument(
        "session",
        nargs="?",
        metavar="SESSION",
        help=f"session id, or a unique prefix of {MIN_ID_PREFIX}+ characters (default: every session)",
    )
    p.add_argument("--socket", metavar="PATH", help="piwatchd socket")
    p.add_argument("--json", action="store_true")
    p.set_defaults(run=run)


def run(ns: argparse.Namespace) -> int:
    from piwatch.client import Client, DaemonNotRunning, PiwatchError

    from ._common import failed

    try:
        with Client(ns.socket) as client:
            result = client.reindex(ns.session)
    except DaemonNotRunning as exc:
        print(f"piwatch: {exc}\n(or rebuild an index file without the daemon: piwatch index --once)", file=sys.stderr)
        return 1
    except PiwatchError as exc:
        problem = failed(exc)
        print(f"piwatch: {problem}", file=sys.stderr)
        return problem.exit_code
    print(to_json(result, indent=0) if ns.json else f"queued: {result.queued}")
    return 0
