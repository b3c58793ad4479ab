"""`piwatch sessions`: the sessions this workspace may see, newest first."""

from __future__ import annotations

import argparse
import json
import sys
from datetime import datetime, timezone

from ._common import CommandFailed, add_scope_args, call

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
    return datetime.fromtimestamp(ms / 1000, tz=timezone.utc).strftime("%Y-%m-%d %H:%M")


def run(ns: argparse.Namespace) -> int:
    try:
        result = call(ns, "sessions", {"limit": ns.limit, "offset": ns.offset})
    except CommandFailed as exc:
        print(f"piwatch: {exc}", file=sys.stderr)
        return exc.exit_code
    if ns.json:
        print(json.dumps(result, indent=2, ensure_ascii=False))
        return 0
    for s in result["sessions"]:
        name = f"  {s['name']}" if s.get("name") else ""
        print(f"{_when(s['lastMs'])}  {s['sessionId']}  {s['events']:>6} events  {s['cwd']}{name}")
    if not result["sessions"]:
        print("no sessions visible from this workspace (try --all)")
    if result.get("hasMore"):
        print(f"(more: --offset {ns.offset + len(result['sessions'])})")
    return 0
