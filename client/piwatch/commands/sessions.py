"""`piwatch sessions`: the sessions this workspace may see, newest first;
with a query, only those holding one of its best hits."""

from __future__ import annotations

import argparse
from datetime import UTC, datetime
from typing import Any, TextIO

from ..colour import SafeText
from ..timeparse import parse_time
from ..wire import MAX_INDEX, MAX_SESSIONS_LIMIT, SessionsResult, agent_label
from ._common import add_colour_arg, add_scope_args, run_op, whole

__all__ = ["add_parser", "run", "sessions_args", "print_sessions"]


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("sessions", help="list indexed sessions (authorized for this workspace), optionally by query")
    p.add_argument(
        "query", nargs="*", help="only sessions holding one of this search's best 1000 hits (search's query syntax)"
    )
    p.add_argument(
        "--limit",
        type=whole(1, MAX_SESSIONS_LIMIT),
        default=50,
        help=f"sessions to list, 1-{MAX_SESSIONS_LIMIT} (default 50)",
    )
    p.add_argument("--offset", type=whole(0, MAX_INDEX), default=0, help="skip this many sessions (pagination)")
    p.add_argument("--json", action="store_true", help="print the result as JSON")
    add_colour_arg(p)
    add_scope_args(p)
    p.add_argument("--cwd", metavar="PATH", help="only sessions whose recorded cwd is exactly PATH")
    p.add_argument("--under", metavar="PATH", help="only sessions whose cwd is PATH or below it")
    p.add_argument("--since", type=parse_time, metavar="TIME", help="active at or after TIME (7d, 12h, ISO date)")
    p.add_argument("--until", type=parse_time, metavar="TIME", help="started before TIME")
    p.set_defaults(run=run)


def _when(ms: int | None) -> str:
    if ms is None:
        return "?"
    return datetime.fromtimestamp(ms / 1000, tz=UTC).strftime("%Y-%m-%d %H:%M")


def sessions_args(ns: argparse.Namespace) -> dict[str, Any]:
    args = {
        "limit": ns.limit,
        "offset": ns.offset,
        "query": " ".join(ns.query) if ns.query else None,
        "cwd": ns.cwd,
        "cwdUnder": ns.under,
        "sinceMs": ns.since,
        "untilMs": ns.until,
    }
    return {k: v for k, v in args.items() if v is not None}


def run(ns: argparse.Namespace) -> int:
    return run_op(ns, "sessions", sessions_args(ns), lambda r, out: print_sessions(r, out, ns.offset))


def print_sessions(result: SessionsResult, out: TextIO | SafeText, offset: int = 0) -> None:
    for s in result.sessions:
        name = f"  {s.name}" if s.name else ""
        print(
            f"{_when(s.last_ms)}  {s.session_id}  {s.events:>6} events  {s.cwd}{agent_label(s.agent)}{name}", file=out
        )
    if not result.sessions:
        print("no sessions visible from this workspace (try --all)", file=out)
    if result.has_more:
        print(f"(more: --offset {offset + len(result.sessions)})", file=out)
