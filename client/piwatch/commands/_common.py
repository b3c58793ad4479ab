"""What the query commands share: the caller scope flags and the
daemon-or-index-file call with its fallback (one request path: both go
through `Client`, over the socket or `LocalTransport`)."""

from __future__ import annotations

import argparse
import os
import sys
import tomllib
from collections.abc import Callable, Mapping
from typing import Any, TypeVar

from ..paths import config_path
from ..wire import MAX_WAIT_SECONDS

_N = TypeVar("_N", int, float)

__all__ = [
    "probe_daemon",
    "add_colour_arg",
    "add_scope_args",
    "caller_from",
    "call",
    "default_scope",
    "failed",
    "number",
    "run_op",
    "whole",
    "widened",
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
    scope = p.add_mutually_exclusive_group()
    scope.add_argument(
        "--all",
        action="store_true",
        help="every project's sessions, not only this workspace's (the default with PIWATCH_SCOPE=all"
        ' or scope = "all" under [cli] in config.toml)',
    )
    scope.add_argument(
        "--project", action="store_true", help="only this workspace's sessions, whatever the default scope"
    )
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


SCOPES = ("project", "all")


def default_scope(env: Mapping[str, str] | None = None) -> str:
    """The local user's default scope for the command line and the TUI: `PIWATCH_SCOPE`,
    else `scope` under `[cli]` in config.toml, else "project". Never the Pi tool's: the
    daemon reads neither, and a model's caller is always its project."""
    env = os.environ if env is None else env
    value: object = env.get("PIWATCH_SCOPE") or None
    where = "PIWATCH_SCOPE"
    if value is None:
        path = config_path(env)
        try:
            with open(path, "rb") as fh:
                table = tomllib.load(fh).get("cli")
        except FileNotFoundError:
            table = None
        except (OSError, tomllib.TOMLDecodeError) as exc:
            raise CommandFailed(f"cannot read config {path}: {exc}", 2) from None
        value = table.get("scope") if isinstance(table, dict) else None
        where = f"config {path}: scope under [cli]"
    if value is None:
        return "project"
    if value not in SCOPES:
        raise CommandFailed(f'{where} must be "project" or "all", not {str(value)[:40]!r}', 2)
    return str(value)


def caller_from(ns: argparse.Namespace) -> dict[str, Any]:
    """The command line's caller: every session with --all (or --db, or the default
    scope "all", unless --project or --workspace), else the workspace it is in."""
    narrowed = getattr(ns, "project", False) or ns.workspace
    if ns.all or (not narrowed and (ns.db or default_scope() == "all")):
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


def call(
    ns: argparse.Namespace, op: str, args: dict[str, Any], caller: dict[str, Any] | None = None, quiet: bool = False
) -> tuple[Any, list[Any]]:
    """Ask piwatchd (as `caller`, default the command line's); if it is not running,
    say so (unless `quiet`) and answer from the index file through the same api
    (`LocalTransport`), with the same authorization."""
    from piwatch.client import Client, DaemonNotRunning, LocalTransport, PiwatchError

    from ..colour import visible_controls

    caller = caller or caller_from(ns)
    try:
        client = Client(transport=LocalTransport(_db_path(ns.db))) if ns.db else Client(getattr(ns, "socket", None))
        try:
            with client:
                result = client.request(op, args, caller)
        except DaemonNotRunning as exc:
            if not quiet:
                print(f"piwatch: {exc}\npiwatch: answering from the index file (read-only, may lag)", file=sys.stderr)
            with Client(transport=LocalTransport(_db_path(None))) as client:
                result = client.request(op, args, caller)
    except PiwatchError as exc:
        raise failed(exc) from None
    for warning in [] if quiet else client.last_warnings:
        if warning.code == "indexing":
            print(f"piwatch: {visible_controls(warning.message)}", file=sys.stderr)  # the answer may be incomplete
    return result, client.last_warnings


def widened(ns: argparse.Namespace, op: str, args: dict[str, Any]) -> Any | None:
    """The same request over every project, when the command line's project scope
    answered nothing: None when the caller already sees every project or it fails.
    For the local user's own command line only (who may add --all anyway): one more
    request, made only for an empty answer; the Pi tool never asks one."""
    if "all" in caller_from(ns):
        return None
    try:
        return call(ns, op, args, caller={"all": True}, quiet=True)[0]
    except CommandFailed:
        return None


def _explained(ns: argparse.Namespace, op: str, args: dict[str, Any], exc: CommandFailed) -> CommandFailed:
    """A read or trace not found in the caller's project that another project holds says so."""
    if exc.code != "not_found" or op not in ("read", "trace") or widened(ns, op, args) is None:
        return exc
    return CommandFailed(f"{exc}; a session of another project holds it: add --all to {op} it", exc.exit_code, exc.code)


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
    except CommandFailed as failure:
        exc = _explained(ns, op, args, failure)
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


def probe_daemon(socket: str | None = None) -> str:
    """ "answering" when a piwatchd (a service's or one started by hand) greets on
    the socket, else why not, in the client's words."""
    from ..client import Client, PiwatchError

    try:
        with Client(socket, timeout=2.0) as c:
            c.hello()
        return "answering"
    except PiwatchError as exc:
        return str(exc)
