"""`piwatch trace SESSION ENTRY`: an event's tree neighbourhood and relationships."""

from __future__ import annotations

import argparse
import json
from typing import TextIO

from ..colour import SafeText
from ..wire import MIN_ID_PREFIX, NodeSummary, Target, TraceResult
from ._common import add_colour_arg, add_scope_args, run_op
from .read import node_line

__all__ = ["add_parser", "run", "print_trace"]


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("trace", help="show an event's parent, children, siblings and relationships")
    p.set_defaults(run=run)
    p.add_argument("session", metavar="SESSION", help=f"session id, or a unique prefix of {MIN_ID_PREFIX}+ characters")
    p.add_argument("entry", metavar="ENTRY", help="entry id")
    add_scope_args(p)
    p.add_argument("--json", action="store_true", help="print the result as JSON")
    add_colour_arg(p)


def _node(n: NodeSummary | None) -> str:
    return "-" if n is None else node_line(n)


def _target(t: Target) -> str:
    if t.path is not None:
        return t.path
    if t.entry_id:
        return f"{t.session_id}/{t.entry_id}" + ("" if t.indexed is not False else " (not indexed)")
    return str(t.ref or t.session_id)


def print_trace(r: TraceResult, out: TextIO | SafeText) -> None:
    leaf = r.materialized_leaf
    print(f"session {r.session_id}  entry {_node(r.node)}", file=out)
    print(f"materialized leaf: {leaf.entry_id if leaf.known else 'unknown'}", file=out)
    print(
        f"parent:   {_node(r.parent)}"
        + (f" (recorded {r.parent_missing}, not in the file)" if r.parent_missing else ""),
        file=out,
    )
    for c in r.children:
        print(f"child:    {_node(c)}", file=out)
    for s in r.siblings:
        print(f"sibling:  {_node(s)} (derived)", file=out)
    toward = r.toward_leaf
    if toward:
        print(f"toward the materialized leaf: {toward.entry_id} ({toward.via})", file=out)
    elif leaf.known and leaf.is_target:
        print("this is the materialized leaf", file=out)
    for e in r.relationships:
        if e.kind in ("parent", "child"):
            continue
        arrow = "->" if e.direction == "out" else "<-"
        detail = f"  {json.dumps(e.detail, ensure_ascii=False)}" if e.detail else ""
        print(f"{e.kind} {arrow} {_target(e.target)} [{e.provenance}]{detail}", file=out)


def run(ns: argparse.Namespace) -> int:
    return run_op(ns, "trace", {"sessionId": ns.session, "entryId": ns.entry}, print_trace)
