"""What the query commands share: the caller scope flags and the
daemon-or-index-file call with its fallback."""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Callable
from typing import Any

__all__ = ["add_scope_args", "caller_from", "call", "run_op", "CommandFailed"]


class CommandFailed(Exception):
    def __init__(self, message: str, exit_code: int) -> None:
        super().__init__(message)
        self.exit_code = exit_code


def add_scope_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--db", metavar="PATH",
                   help="answer from this index file directly (no daemon; all sessions unless --workspace)")
    p.add_argument("--workspace", metavar="ROOT",
                   help="authorization root (default: the Git worktree or directory you are in)")
    p.add_argument("--all", action="store_true", help="every indexed session, not only this workspace's")
    p.add_argument("--socket", metavar="PATH", help="piwatchd socket (default: $PIWATCH_SOCKET or the runtime dir)")
    p.add_argument("--wait", type=float, metavar="SEC", help="wait up to SEC for the named session to be fully indexed")


def caller_from(ns: argparse.Namespace) -> dict[str, Any]:
    if ns.all or (ns.db and not ns.workspace):
        return {"all": True}
    caller: dict[str, Any] = {"cwd": os.getcwd()}
    if ns.workspace:
        caller["workspaceRoot"] = os.path.abspath(os.path.expanduser(ns.workspace))
    return caller


def _direct(db: str | None, op: str, args: dict[str, Any], caller: dict[str, Any]) -> Any:
    from piwatch.protocol import ProtocolError
    from piwatchd.api import Api  # lazy: only the fallback needs the daemon package
    from piwatchd.direct import resolve_db

    path = resolve_db(db)
    if not path.exists():
        raise CommandFailed(f"no index at {path}: start piwatchd or run `piwatch index --once`", 1)
    try:
        return Api(path).handlers()[op](args, caller)
    except ProtocolError as exc:
        raise CommandFailed(exc.message, 2 if exc.code in ("query_error", "bad_request") else 1) from None


def call(ns: argparse.Namespace, op: str, args: dict[str, Any]) -> Any:
    """Ask piwatchd; if it is not running, say so and answer from the index file."""
    from piwatch.client import Client, DaemonNotRunning, PiwatchError, QueryError, RequestFailed

    caller = caller_from(ns)
    if ns.db:
        return _direct(ns.db, op, args, caller)
    try:
        with Client(getattr(ns, "socket", None)) as client:
            return client.request(op, args, caller)
    except DaemonNotRunning as exc:
        print(f"piwatch: {exc}\npiwatch: answering from the index file (read-only, may lag)", file=sys.stderr)
        return _direct(None, op, args, caller)
    except QueryError as exc:
        raise CommandFailed(exc.message, 2) from None
    except RequestFailed as exc:
        raise CommandFailed(exc.message, 2 if exc.code == "bad_request" else 1) from None
    except PiwatchError as exc:
        raise CommandFailed(str(exc), 1) from None


def run_op(
    ns: argparse.Namespace,
    op: str,
    args: dict[str, Any],
    show: Callable[[Any, Any], None],
    exit_code: Callable[[Any], int] = lambda result: 0,
) -> int:
    """Call `op`, then print its result as JSON (`--json`) or with `show`."""
    try:
        result = call(ns, op, args)
    except CommandFailed as exc:
        print(f"piwatch: {exc}", file=sys.stderr)
        return exc.exit_code
    if ns.json:
        print(json.dumps(result, indent=2, ensure_ascii=False))
    else:
        show(result, sys.stdout)
    return exit_code(result)
