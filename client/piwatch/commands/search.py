"""`piwatch search`: ranked event hits with marked snippets."""

from __future__ import annotations

import argparse
import os
from typing import Any

from ..colour import COLOR_CHOICES, highlight, use_colour
from ..timeparse import parse_time
from ._common import add_scope_args, run_op

__all__ = ["add_parser", "run", "search_args", "print_hits"]


def add_parser(sub) -> None:
    p_search = sub.add_parser("search", help='search indexed events (terms AND-ed, "quoted phrases")')
    p_search.set_defaults(run=run)
    p_search.add_argument("query", nargs="+", help="plain terms and quoted phrases; FTS syntax is treated as text")
    p_search.add_argument("--json", action="store_true", help="print the result as JSON")
    p_search.add_argument(
        "--color",
        "--colour",
        dest="color",
        choices=COLOR_CHOICES,
        default="auto",
        help="highlight matches: auto (on a terminal, unless NO_COLOR is set), always, never",
    )
    add_scope_args(p_search)
    p_search.add_argument("--limit", type=int, default=20, help="hits to return (1-200, default 20)")
    p_search.add_argument("--offset", type=int, default=0, help="skip this many hits (pagination)")
    p_search.add_argument("--session", action="append", metavar="ID", help="only this session id (repeatable)")
    p_search.add_argument("--cwd", metavar="PATH", help="only sessions whose recorded cwd is exactly PATH")
    p_search.add_argument("--under", metavar="PATH", help="only sessions whose cwd is PATH or below it")
    p_search.add_argument("--type", action="append", metavar="TYPE", help="entry type: message, compaction, ...")
    p_search.add_argument("--kind", action="append", metavar="KIND", help="semantic kind: user.text, tool.result, ...")
    p_search.add_argument(
        "--role", action="append", metavar="ROLE", help="message role: user, assistant, toolResult, ..."
    )
    p_search.add_argument("--tool", action="append", metavar="NAME", help="tool name of a call or result")
    p_search.add_argument("--since", type=parse_time, metavar="TIME", help="not before TIME (7d, 12h, ISO date)")
    p_search.add_argument("--until", type=parse_time, metavar="TIME", help="before TIME")
    err = p_search.add_mutually_exclusive_group()
    err.add_argument("--errors", dest="is_error", action="store_const", const=True, help="only errors")
    err.add_argument("--no-errors", dest="is_error", action="store_const", const=False, help="exclude errors")
    p_search.add_argument("--branch", action="append", metavar="STATE", help="selected | alternate | unknown")
    p_search.add_argument(
        "--selection",
        action="append",
        metavar="STATE",
        help="direct | summarized | omitted | not-selected | not-applicable | unknown",
    )
    p_search.add_argument(
        "--file",
        action="append",
        metavar="PATH",
        help="only events that read or changed PATH (or a file below it); repeatable",
    )
    p_search.add_argument(
        "--file-mode",
        choices=("read", "changed", "any"),
        default=None,
        help="with --file: read, changed or any (default any)",
    )


def search_args(ns: argparse.Namespace) -> dict[str, Any]:
    filters = {
        "sessionId": ns.session,
        "cwd": ns.cwd,
        "cwdUnder": ns.under,
        "eventType": ns.type,
        "kind": ns.kind,
        "role": ns.role,
        "tool": ns.tool,
        "sinceMs": ns.since,
        "untilMs": ns.until,
        "isError": ns.is_error,
        "branchState": ns.branch,
        "selectionState": ns.selection,
        # Resolved here: relative to the caller, not to whoever serves the request.
        "files": [os.path.abspath(os.path.expanduser(p)) for p in ns.file] if ns.file else None,
        "fileMode": ns.file_mode,
    }
    return {
        "query": " ".join(ns.query),
        "filters": {k: v for k, v in filters.items() if v is not None},
        "limit": ns.limit,
        "offset": ns.offset,
    }


def print_hits(result: dict[str, Any], out, colour: bool | None = None) -> None:
    """Hits as text; matches in colour when `colour` (default: `--color auto` for `out`)."""
    if colour is None:
        colour = use_colour("auto", out, os.environ)
    hits = result["hits"]
    if not hits:
        roots = (result.get("scope") or {}).get("roots")
        where = f" in the sessions of {', '.join(roots)} (--all searches every project)" if roots else ""
        print(f"no hits{where}", file=out)
        return
    for n, hit in enumerate(hits, start=result["offset"] + 1):
        ev = hit["evidence"]
        when = (hit["timestamp"] or "?")[:19].replace("T", " ")
        tool = f" tool={ev['toolName']}" if ev.get("toolName") else ""
        err = " ERROR" if hit["isError"] else ""
        state = f"  [{hit['branchState']}, {hit['selectionState']}]"
        print(f"{n}. {when}  {ev['kind']}{tool}{err}{state}  {hit['cwd'] or '?'}", file=out)
        print(f"   session {hit['sessionId']}  entry {hit['entryId']}  fragment {ev['fragmentId']}", file=out)
        print(f"   {highlight(hit['snippet'], hit['spans'], colour)}", file=out)
    if result.get("hasMore"):
        print(f"(more: --offset {result['offset'] + len(hits)})", file=out)


def run(ns: argparse.Namespace) -> int:
    args = search_args(ns)
    if ns.wait:
        args["waitSeconds"] = ns.wait
    return run_op(
        ns, "search", args, lambda result, out: print_hits(result, out, use_colour(ns.color, out, os.environ))
    )
