"""What the query commands share: the caller scope flags and the
daemon-or-index-file call with its fallback (one request path: both go
through `Client`, over the socket or `LocalTransport`)."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable
from typing import Any, TypeVar

from ..wire import MAX_WAIT_SECONDS

_N = TypeVar("_N", int, float)

__all__ = [
    "add_colour_arg",
    "add_scope_args",
    "caller_from",
    "call",
    "failed",
    "number",
    "run_op",
    "whole",
    "CommandFailed",
]


class CommandFailed(Exception):
    """A failed command: its message for people, its exit code, and the wire's error code
    (`not_found`, `bad_request`, ...) when piwatchd answered one (`--json` prints it)."""

    def __init__(self, message: str, exit_code: int, code: str | None = None) -> None:
        super().__init__(message)
        self.exit_code = exit_code
        self.code = code


def whole(low: int, high: int) -> Callable[[str], int]:
    """An argparse type: a whole number from `low` to `high` (the wire's bounds, stated in
    each option's help), else a usage error saying which bound (`--limit: must be at least 1`)."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text[:40]!r} is not a whole number") from None
        return _within(value, low, high)

    return parse


def number(low: float, high: float) -> Callable[[str], float]:
    """An argparse type: a number of seconds from `low` to `high`."""

    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text[:40]!r} is not a number") from None
        if value != value:  # NaN is inside no bounds
            raise argparse.ArgumentTypeError("must be a number")
        return _within(value, low, high)

    return parse


def _within(value: _N, low: _N, high: _N) -> _N:
    if value < low:
        raise argparse.ArgumentTypeError(f"must be at least {low:,}")
    if value > high:
        raise argparse.ArgumentTypeError(f"must be at most {high:,}")
    return value


def add_scope_args(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--db", metavar="PATH", help="answer from this index file directly (no daemon; all sessions unless --workspace)"
    )
    p.add_argument(
        "--workspace", metavar="ROOT", help="authorization root (default: the Git worktree or directory you are in)"
    )
    p.add_argument("--all", action="store_true", help="every indexed session, not only this workspace's")
    p.add_argument("--socket", metavar="PATH", help="piwatchd socket (default: $PIWATCH_SOCKET or the runtime dir)")
    p.add_argument(
        "--wait",
        type=number(0, MAX_WAIT_SECONDS),
        metavar="SEC",
        help=f"wait up to SEC (at most {MAX_WAIT_SECONDS:g}) for the named session to be fully indexed",
    )


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
        return CommandFailed(exc.message, 2, exc.code)
    if isinstance(exc, RequestFailed):
        return CommandFailed(exc.message, 2 if exc.code == "bad_request" else 1, exc.code)
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
        if ns.json and exc.code:  # a script reads what went wrong on stdout too, by the wire's code
            from piwatch.wire import to_json

            print(to_json({"error": {"code": exc.code, "message": str(exc)}}))
        return exc.exit_code
    if ns.json:
        from piwatch.wire import to_builtins, to_json

        print(to_json({**to_builtins(result), "warnings": to_builtins(warnings)}))
    else:
        show(result, SafeText(sys.stdout, use_colour(getattr(ns, "color", "auto"), sys.stdout, os.environ)))
    return exit_code(result)
