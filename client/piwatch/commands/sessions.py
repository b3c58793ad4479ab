"""`piwatch sessions`: the sessions this workspace may see, newest first."""

from __future__ import annotations

import argparse
from datetime import UTC, datetime

from ._common import add_scope_args, run_op

__all__ = ["add_parser", "run"]


def add_parser(sub) -> None:
    p = sub.add_parser("sessions", help="list indexed sessions (authorized for this workspace)")
    p.add_argument("--limit", type=int, default=50, help="sessions to list (1-500, default 50)")
    p.add_argument("--offset", type=int, default=0)
    p.add_argument("--json", action="store_true", help="print the result as JSON")
    add_scope_args(p)
    p.set_defaults(run=run)


def _when(ms: int | None) -> str:
    if ms is None:
        return "?"
    return datetime.fromtimestamp(ms / 1000, tz=UTC).strftime("%Y-%m-%d %H:%M")


def run(ns: argparse.Namespace) -> int:
    return run_op(
        ns, "sessions", {"limit": ns.limit, "offset": ns.offset}, lambda r, out: print_sessions(r, out, ns.offset)
    )


def print_sessions(result, out, offset: int = 0) -> None:
    for s in result["sessions"]:
        name = f"  {s['name']}" if s.get("name") else ""
        print(f"{_when(s['lastMs'])}  {s['sessionId']}  {s['events']:>6} events  {s['cwd']}{name}", file=out)
    if not result["sessions"]:
        print("no sessions visible from this workspace (try --all)", file=out)
    if result.get("hasMore"):
        print(f"(more: --offset {offset + len(result['sessions'])})", file=out)
