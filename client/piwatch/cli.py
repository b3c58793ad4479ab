"""`piwatch`: the command line for piwatchd and its index.

This module never imports `piwatchd` at import time: the direct-database
commands (`index --once`, and `search` on an index file) import it lazily, so
the client package stays usable where only the client is installed.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import time
from datetime import datetime, timezone
from typing import Any, Sequence

__all__ = ["main", "build_parser", "parse_time"]

EXIT_OK, EXIT_ERROR, EXIT_USAGE = 0, 1, 2

_RELATIVE = re.compile(r"^(\d+)([smhdw])$")
_UNIT_SECONDS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}


def parse_time(value: str, now: float | None = None) -> int:
    """`7d`, `12h`, `30m` ago, or an ISO date/time (UTC if no zone) -> epoch ms."""
    value = value.strip()
    m = _RELATIVE.match(value)
    if m:
        now = time.time() if now is None else now
        return int((now - int(m.group(1)) * _UNIT_SECONDS[m.group(2)]) * 1000)
    try:
        dt = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a time: {value!r} (use 7d, 12h, 30m or an ISO date)") from None
    if dt.tzinfo is None:
        dt = dt.replace(tzinfo=timezone.utc)
    return int(dt.timestamp() * 1000)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="piwatch",
        description="Search, read and trace what the Pi coding agent did in earlier sessions.",
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True

    p_index = sub.add_parser("index", help="index Pi session files into the database")
    p_index.add_argument("--once", action="store_true", required=True, help="one reconciliation pass, then exit")
    p_index.add_argument(
        "--sessions", action="append", metavar="DIR",
        help="session directory to index (repeatable; default: Pi's own session directories)",
    )
    p_index.add_argument("--db", metavar="PATH", help="index database (default: piwatch's state directory)")
    p_index.add_argument("--json", action="store_true", help="print the summary as JSON")
    p_index.add_argument("--quiet", action="store_true", help="no progress output")

    p_search = sub.add_parser("search", help="search indexed events (terms AND-ed, \"quoted phrases\")")
    p_search.add_argument("query", nargs="+", help="plain terms and quoted phrases; FTS syntax is treated as text")
    p_search.add_argument("--db", metavar="PATH", help="search this index file directly")
    p_search.add_argument("--json", action="store_true", help="print the result as JSON")
    p_search.add_argument("--limit", type=int, default=20, help="hits to return (1-200, default 20)")
    p_search.add_argument("--offset", type=int, default=0, help="skip this many hits (pagination)")
    p_search.add_argument("--session", action="append", metavar="ID", help="only this session id (repeatable)")
    p_search.add_argument("--cwd", metavar="PATH", help="only sessions whose recorded cwd is exactly PATH")
    p_search.add_argument("--under", metavar="PATH", help="only sessions whose cwd is PATH or below it")
    p_search.add_argument("--type", action="append", metavar="TYPE", help="entry type: message, compaction, ...")
    p_search.add_argument("--kind", action="append", metavar="KIND", help="semantic kind: user.text, tool.result, ...")
    p_search.add_argument("--role", action="append", metavar="ROLE", help="message role: user, assistant, toolResult, ...")
    p_search.add_argument("--tool", action="append", metavar="NAME", help="tool name of a call or result")
    p_search.add_argument("--since", type=parse_time, metavar="TIME", help="not before TIME (7d, 12h, ISO date)")
    p_search.add_argument("--until", type=parse_time, metavar="TIME", help="before TIME")
    err = p_search.add_mutually_exclusive_group()
    err.add_argument("--errors", dest="is_error", action="store_const", const=True, help="only errors")
    err.add_argument("--no-errors", dest="is_error", action="store_const", const=False, help="exclude errors")
    p_search.add_argument("--branch", action="append", metavar="STATE", help="selected | alternate | unknown")
    p_search.add_argument("--selection", action="append", metavar="STATE",
                          help="direct | summarized | omitted | not-selected | not-applicable | unknown")
    return parser


def _search_args(ns: argparse.Namespace) -> dict[str, Any]:
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
    }
    return {
        "query": " ".join(ns.query),
        "filters": {k: v for k, v in filters.items() if v is not None},
        "limit": ns.limit,
        "offset": ns.offset,
    }


def _mark(snippet: str, spans: list[list[int]], tty: bool) -> str:
    on, off = ("\x1b[1;33m", "\x1b[0m") if tty else ("**", "**")
    out, pos = [], 0
    for start, end in spans:
        out.append(snippet[pos:start])
        out.append(on + snippet[start:end] + off)
        pos = end
    out.append(snippet[pos:])
    return "".join(out)


def _print_hits(result: dict[str, Any], out) -> None:
    tty = out.isatty()
    hits = result["hits"]
    if not hits:
        print("no hits", file=out)
        return
    for n, hit in enumerate(hits, start=result["offset"] + 1):
        ev = hit["evidence"]
        when = (hit["timestamp"] or "?")[:19].replace("T", " ")
        tool = f" tool={ev['toolName']}" if ev.get("toolName") else ""
        err = " ERROR" if hit["isError"] else ""
        print(f"{n}. {when}  {ev['kind']}{tool}{err}  {hit['cwd'] or '?'}", file=out)
        print(f"   session {hit['sessionId']}  entry {hit['entryId']}  fragment {ev['fragmentId']}", file=out)
        print(f"   {_mark(hit['snippet'], hit['spans'], tty)}", file=out)
    if result.get("hasMore"):
        print(f"(more: --offset {result['offset'] + len(hits)})", file=out)


def _cmd_index(ns: argparse.Namespace) -> int:
    from piwatchd.direct import index_once  # lazy: the daemon package is optional for the client

    stderr = sys.stderr
    counter = {"n": 0}

    def progress(outcome) -> None:
        counter["n"] += 1
        if not ns.quiet and not ns.json and stderr.isatty() and counter["n"] % 25 == 0:
            print(f"\r{counter['n']} files…", end="", file=stderr, flush=True)
        if outcome.error and not ns.quiet and not ns.json:
            print(f"\n{outcome.state}: {outcome.path}: {outcome.error}", file=stderr)

    summary = index_once(ns.db, ns.sessions, progress=progress)
    if ns.json:
        print(json.dumps(summary, indent=2))
    else:
        if stderr.isatty() and not ns.quiet:
            print("\r", end="", file=stderr)
        mb = summary["bytesRead"] / 1e6
        rate = mb / summary["seconds"] if summary["seconds"] else 0.0
        print(
            f"indexed {summary['files']} files ({summary['changed']} changed, {summary['removed']} removed): "
            f"{summary['events']} events, {mb:.1f} MB in {summary['seconds']:.2f} s ({rate:.1f} MB/s)"
        )
        if summary["diagnostics"]:
            print(f"{summary['diagnostics']} lines skipped or repaired (see `piwatch status`)")
        print(f"index: {summary['db']}")
    return EXIT_OK if not summary["problems"] else EXIT_OK


def _cmd_search(ns: argparse.Namespace) -> int:
    from piwatchd.direct import QueryError, search_index

    try:
        result = search_index(ns.db, _search_args(ns))
    except QueryError as exc:
        print(f"piwatch: {exc}", file=sys.stderr)
        return EXIT_USAGE
    if ns.json:
        print(json.dumps(result, indent=2, ensure_ascii=False))
    else:
        _print_hits(result, sys.stdout)
    return EXIT_OK


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    ns = parser.parse_args(argv)
    try:
        if ns.command == "index":
            return _cmd_index(ns)
        if ns.command == "search":
            return _cmd_search(ns)
    except FileNotFoundError as exc:
        print(f"piwatch: {exc}", file=sys.stderr)
        return EXIT_ERROR
    except KeyboardInterrupt:
        return 130
    except Exception as exc:  # the schema mismatch and similar carry their own advice
        if type(exc).__name__ in ("SchemaMismatch", "QueryTimeout"):
            print(f"piwatch: {exc}", file=sys.stderr)
            return EXIT_ERROR
        raise
    parser.error(f"unknown command {ns.command}")
    return EXIT_USAGE


if __name__ == "__main__":
    sys.exit(main())
