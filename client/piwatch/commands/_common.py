"""What the query commands share: the caller scope flags and the
daemon-or-index-file call with its fallback (one request path: both go
through `Client`, over the socket or `LocalTransport`)."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable
from typing import Any

__all__ = ["add_colour_arg", "add_scope_args", "caller_from", "call", "failed", "run_op", "CommandFailed"]


class CommandFailed(Exception):
    def __init__(self, message: str, exit_code: int) -> None:
        super().__init__(message)
        self.exit_code = exit_code


def add_scope_args(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--db", metavar="PATH", help="answer from this index file directly (no daemon; all sessions unless --workspace)"
    )
    p.add_argument(
        "--workspace", metavar="ROOT", help="authorization root (default: the Git worktree or directory you are in)"
    )
    p.add_argument("--all", action="store_true", help="every indexed session, not only this workspace's")
    p.add_argument("--socket", metavar="PATH", help="piwatchd socket (default: $PIWATCH_SOCKET or the runtime dir)")
    p.add_argument("--wait", type=float, metavar="SEC", help="wait up to SEC for the named session to be fully indexed")


def add_colour_arg(p: argparse.ArgumentParser, what: str = "escaped control characters") -> None:
    from ..colour import COLOR_CHOICES

    p.add_argument(
        "--color",
        "--colour",
        dest="color",
        choices=COLOR_CHOICES,
        default="auto",
        help=f"colour {what}: auto (on a terminal, unless NO_COLOR is set), always, never",
    )


def caller_from(ns: argparse.Namespace) -> dict[str, Any]:
    if ns.all or (ns.db and not ns.workspace):
        return {"all": True}
    caller: dict[str, Any] = {"cwd": os.getcwd()}
    if ns.workspace:
        caller["workspaceRoot"] = os.path.abspath(os.path.expanduser(ns.workspace))
    return caller


def _db_path(db: str | None) -> str:
    from piwatchd.config import resolve_db  # lazy: only the fallback needs the daemon package

    return str(resolve_db(db))


def failed(exc: Exception) -> CommandFailed:
    """A client error as a person reads it (the message, never the wire's code) and its exit code:
    2 for what the command line asked wrongly, 1 for the rest."""
    from piwatch.client import QueryError, RequestFailed

    if isinstance(exc, QueryError):
        return CommandFailed(exc.message, 2)
    if isinstance(exc, RequestFailed):
        return CommandFailed(exc.message, 2 if exc.code == "bad_request" else 1)
    return CommandFailed(str(exc), 1)


def call(ns: argparse.Namespace, op: str, args: dict[str, Any]) -> tuple[Any, list[Any]]:
    """Ask piwatchd; if it is not running, say so and answer from the index
    file through the same api (`LocalTransport`), with the same authorization."""
    from piwatch.client import Client, DaemonNotRunning, LocalTransport, PiwatchError

    from ..colour import visible_controls

    caller = caller_from(ns)
    try:
        client = Client(transport=LocalTransport(_db_path(ns.db))) if ns.db else Client(getattr(ns, "socket", None))
        try:
            with client:
                result = client.request(op, args, caller)
        except DaemonNotRunning as exc:
            print(f"piwatch: {exc}\npiwatch: answering from the index file (read-only, may lag)", file=sys.stderr)
            with Client(transport=LocalTransport(_db_path(None))) as client:
                result = client.request(op, args, caller)
    except PiwatchError as exc:
        raise failed(exc) from None
    for warning in client.last_warnings:
        if warning.code == "indexing":
            print(f"piwatch: {visible_controls(warning.message)}", file=sys.stderr)  # the answer may be incomplete
    return result, client.last_warnings


def run_op(
    ns: argparse.Namespace,
    op: str,
    args: dict[str, Any],
    show: Callable[[Any, Any], None],
    exit_code: Callable[[Any], int] = lambda result: 0,
) -> int:
    """Call `op`, then print its result as JSON (`--json`) or with `show`.

    Human output goes through `SafeText`: session text (snippets, content,
    names, cwds, previews, tool names) may hold terminal escape sequences,
    and none reaches the terminal raw, piped or not, colour on or off."""
    from ..colour import SafeText, use_colour, visible_controls

    try:
        result, warnings = call(ns, op, args)
    except CommandFailed as exc:
        print(f"piwatch: {visible_controls(str(exc))}", file=sys.stderr)
        return exc.exit_code
    if ns.json:
        from piwatch.wire import to_builtins, to_json

        print(to_json({**to_builtins(result), "warnings": to_builtins(warnings)}))
    else:
        show(result, SafeText(sys.stdout, use_colour(getattr(ns, "color", "auto"), sys.stdout, os.environ)))
    return exit_code(result)
