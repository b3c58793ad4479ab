"""`piwatch read SESSION ENTRY`: one event exactly, content from the source file."""

from __future__ import annotations

import argparse
import sys
from typing import Any, TextIO

from ..colour import SafeText
from ..wire import (
    MAX_INDEX,
    MIN_ID_PREFIX,
    NEIGHBOURS_MAX,
    WINDOW_DEFAULT,
    WINDOW_MAX,
    Neighbours,
    NodeSummary,
    ReadResult,
)
from ._common import add_colour_arg, add_scope_args, run_op, whole

__all__ = ["add_parser", "node_line", "print_read", "read_args", "run"]


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("read", help="read one event from its source file, with neighbours")
    p.set_defaults(run=run)
    p.add_argument("session", metavar="SESSION", help=f"session id, or a unique prefix of {MIN_ID_PREFIX}+ characters")
    p.add_argument("entry", metavar="ENTRY", help="entry id")
    p.add_argument("--fragment", metavar="ID", help="page through this fragment (ids are shown by a plain read)")
    p.add_argument(
        "--offset", type=whole(0, MAX_INDEX), default=None, help="with --fragment: first character (default 0)"
    )
    p.add_argument(
        "--length",
        type=whole(1, WINDOW_MAX),
        default=None,
        help=f"with --fragment: characters to return, 1-{WINDOW_MAX:,} (default {WINDOW_DEFAULT:,})",
    )
    p.add_argument(
        "--before", type=whole(0, NEIGHBOURS_MAX), default=0, help=f"neighbours before the event, 0-{NEIGHBOURS_MAX}"
    )
    p.add_argument(
        "--after", type=whole(0, NEIGHBOURS_MAX), default=0, help=f"neighbours after the event, 0-{NEIGHBOURS_MAX}"
    )
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


def node_line(n: NodeSummary | None) -> str:
    """One tree node on one line: id, type/role, branch and selection state, preview."""
    if n is None:
        return "?"
    role = f"/{n.role}" if n.role else ""
    preview = f"  {n.preview}" if n.preview else ""
    return f"{n.entry_id}  {n.type}{role}  [{n.branch_state}, {n.selection_state}]{preview}"


def _print_content(r: ReadResult, out: TextIO | SafeText) -> None:
    fr = r.fragment
    if fr is not None:
        print(
            f"-- fragment {fr.fragment_id} ({fr.kind}) chars {fr.offset}-{fr.offset + fr.length} of {fr.total_length}",
            file=out,
        )
        print(fr.text, file=out)
        if fr.has_more:
            print(f"-- more: --fragment {fr.fragment_id} --offset {fr.next_offset}", file=out)
        return
    for c in r.content or []:
        tool = f" {c.tool_name}" if c.tool_name else ""
        print(f"-- {c.fragment_id} ({c.kind}{tool}, {c.length} chars)", file=out)
        print(c.text, file=out)
        if c.truncated and c.next is not None:
            print(f"-- truncated: --fragment {c.fragment_id} --offset {c.next.offset}", file=out)


def _print_after(nb: Neighbours, out: TextIO | SafeText) -> None:
    if nb.after or nb.stopped_at_fork or nb.alternatives:
        print(f"-- after ({nb.order} order)", file=out)
    for n in nb.after:
        print(f"  {node_line(n)}", file=out)
    for alt in nb.alternatives or []:
        print(f"  (at {alt.at} followed {alt.followed}; other branches: {', '.join(alt.alternatives)})", file=out)
    fork = nb.stopped_at_fork
    if fork:
        print(f"  (stopped at fork {fork.at}: candidates {', '.join(fork.candidates)})", file=out)


def print_read(r: ReadResult, out: TextIO | SafeText) -> None:
    ev, src = r.event, r.source
    role = f"/{ev.role}" if ev.role else ""
    print(f"session {r.session_id}  entry {r.entry_id}  {ev.type}{role}", file=out)
    print(
        f"  {ev.timestamp or '?'}  parent {ev.parent_id or '-'}  branch {ev.branch_state}"
        f"  selection {ev.selection_state}  {ev.context_role}",
        file=out,
    )
    print(f"  source {src.path} bytes {src.byte_offset}+{src.byte_length}: {src.status}", file=out)
    if src.detail:
        print(f"  ! {src.detail}", file=out)
    nb = r.neighbours
    if nb and nb.before:
        print(f"-- before ({nb.order} order)", file=out)
        for n in nb.before:
            print(f"  {node_line(n)}", file=out)
    _print_content(r, out)
    for o in r.omitted or []:
        counts = ", ".join(f"{k} x{n}" for k, n in (o.counts or {}).items())
        print(f"(omitted {o.field}: {o.reason}{f': {counts}' if counts else ''})", file=out)
    if nb:
        _print_after(nb, out)


def run(ns: argparse.Namespace) -> int:
    if ns.fragment is None and (ns.offset is not None or ns.length is not None):
        print(
            "piwatch read: --offset and --length page through one fragment: add --fragment ID"
            " (a plain read shows each fragment's id)",
            file=sys.stderr,
        )
        return 2
    # Exit 3: the source changed since indexing, so the content could not be verified.
    return run_op(ns, "read", read_args(ns), print_read, lambda r: 0 if r.source.status == "verified" else 3)
