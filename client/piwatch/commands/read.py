"""`piwatch read SESSION ENTRY`: one event exactly, content from the source file."""

from __future__ import annotations

import argparse
from typing import Any

from ._common import add_colour_arg, add_scope_args, run_op

__all__ = ["add_parser", "run", "read_args", "print_read"]


def add_parser(sub) -> None:
    p = sub.add_parser("read", help="read one event from its source file, with neighbours")
    p.set_defaults(run=run)
    p.add_argument("session", metavar="SESSION", help="session id")
    p.add_argument("entry", metavar="ENTRY", help="entry id")
    p.add_argument("--fragment", metavar="ID", help="page through this fragment (ids are shown by a plain read)")
    p.add_argument("--offset", type=int, default=None, help="with --fragment: first character (default 0)")
    p.add_argument("--length", type=int, default=None, help="with --fragment: characters to return (default 8000)")
    p.add_argument("--before", type=int, default=0, help="neighbours before the event (0-50)")
    p.add_argument("--after", type=int, default=0, help="neighbours after the event (0-50)")
    p.add_argument(
        "--order",
        choices=("append", "branch"),
        default="append",
        help="neighbour order: append (file order) or branch (the conversation path)",
    )
    p.add_argument(
        "--unredacted",
        action="store_true",
        help="show secrets instead of [redacted: kind] markers (needs --all: your own files, never a model)",
    )
    add_scope_args(p)
    p.add_argument("--json", action="store_true", help="print the result as JSON")
    add_colour_arg(p)


def read_args(ns: argparse.Namespace) -> dict[str, Any]:
    args: dict[str, Any] = {
        "sessionId": ns.session,
        "entryId": ns.entry,
        "order": ns.order,
        "before": ns.before,
        "after": ns.after,
    }
    if ns.unredacted:
        args["unredacted"] = True
    if ns.fragment is not None:
        args["fragmentId"] = ns.fragment
        if ns.offset is not None:
            args["offset"] = ns.offset
        if ns.length is not None:
            args["length"] = ns.length
    return args


def _line(n: dict[str, Any] | None) -> str:
    if n is None:
        return "?"
    role = f"/{n['role']}" if n.get("role") else ""
    preview = f"  {n['preview']}" if n.get("preview") else ""
    return f"{n['entryId']}  {n['type']}{role}  [{n['branchState']}, {n['selectionState']}]{preview}"


def print_read(r: dict[str, Any], out) -> None:
    ev, src = r["event"], r["source"]
    role = f"/{ev['role']}" if ev.get("role") else ""
    print(f"session {r['sessionId']}  entry {r['entryId']}  {ev['type']}{role}", file=out)
    print(
        f"  {ev['timestamp'] or '?'}  parent {ev['parentId'] or '-'}  branch {ev['branchState']}"
        f"  selection {ev['selectionState']}  {ev['contextRole']}",
        file=out,
    )
    print(f"  source {src['path']} bytes {src['byteOffset']}+{src['byteLength']}: {src['status']}", file=out)
    if src.get("detail"):
        print(f"  ! {src['detail']}", file=out)
    nb = r.get("neighbours")
    if nb and nb["before"]:
        print(f"-- before ({nb['order']} order)", file=out)
        for n in nb["before"]:
            print(f"  {_line(n)}", file=out)
    if "fragment" in r:
        fr = r["fragment"]
        print(
            f"-- fragment {fr['fragmentId']} ({fr['kind']}) chars {fr['offset']}-{fr['offset'] + fr['length']}"
            f" of {fr['totalLength']}",
            file=out,
        )
        print(fr["text"], file=out)
        if fr["hasMore"]:
            print(f"-- more: --fragment {fr['fragmentId']} --offset {fr['nextOffset']}", file=out)
    else:
        for c in r.get("content", []):
            tool = f" {c['toolName']}" if c.get("toolName") else ""
            print(f"-- {c['fragmentId']} ({c['kind']}{tool}, {c['length']} chars)", file=out)
            print(c["text"], file=out)
            if c["truncated"]:
                print(f"-- truncated: --fragment {c['fragmentId']} --offset {c['next']['offset']}", file=out)
    for o in r.get("omitted", []):
        counts = ", ".join(f"{k} x{n}" for k, n in (o.get("counts") or {}).items())
        print(f"(omitted {o['field']}: {o['reason']}{f': {counts}' if counts else ''})", file=out)
    if nb:
        if nb["after"] or nb.get("stoppedAtFork") or nb.get("alternatives"):
            print(f"-- after ({nb['order']} order)", file=out)
        for n in nb["after"]:
            print(f"  {_line(n)}", file=out)
        for alt in nb.get("alternatives") or []:
            print(
                f"  (at {alt['at']} followed {alt['followed']}; other branches: {', '.join(alt['alternatives'])})",
                file=out,
            )
        fork = nb.get("stoppedAtFork")
        if fork:
            print(f"  (stopped at fork {fork['at']}: candidates {', '.join(fork['candidates'])})", file=out)


def run(ns: argparse.Namespace) -> int:
    # Exit 3: the source changed since indexing, so the content could not be verified.
    return run_op(ns, "read", read_args(ns), print_read, lambda r: 0 if r["source"]["status"] == "verified" else 3)
