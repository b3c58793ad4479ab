"""`piwatch trace SESSION ENTRY`: an event's tree neighbourhood and relationships."""

from __future__ import annotations

import argparse
import json
from typing import Any

from ._common import add_colour_arg, add_scope_args, run_op

__all__ = ["add_parser", "run", "print_trace"]


def add_parser(sub) -> None:
    p = sub.add_parser("trace", help="show an event's parent, children, siblings and relationships")
    p.set_defaults(run=run)
    p.add_argument("session", metavar="SESSION", help="session id")
    p.add_argument("entry", metavar="ENTRY", help="entry id")
    add_scope_args(p)
    p.add_argument("--json", action="store_true", help="print the result as JSON")
    add_colour_arg(p)


def _node(n: dict[str, Any] | None) -> str:
    if n is None:
        return "-"
    role = f"/{n['role']}" if n.get("role") else ""
    preview = f"  {n['preview']}" if n.get("preview") else ""
    return f"{n['entryId']}  {n['type']}{role}  [{n['branchState']}, {n['selectionState']}]{preview}"


def _target(t: dict[str, Any]) -> str:
    if "path" in t:
        return t["path"]
    if t.get("entryId"):
        return f"{t['sessionId']}/{t['entryId']}" + ("" if t.get("indexed", True) else " (not indexed)")
    return str(t.get("ref") or t.get("sessionId"))


def print_trace(r: dict[str, Any], out) -> None:
    leaf = r["materializedLeaf"]
    print(f"session {r['sessionId']}  entry {_node(r['node'])}", file=out)
    print(f"materialized leaf: {leaf['entryId'] if leaf['known'] else 'unknown'}", file=out)
    print(
        f"parent:   {_node(r['parent'])}"
        + (f" (recorded {r['parentMissing']}, not in the file)" if r.get("parentMissing") else ""),
        file=out,
    )
    for c in r["children"]:
        print(f"child:    {_node(c)}", file=out)
    for s in r["siblings"]:
        print(f"sibling:  {_node(s)} (derived)", file=out)
    toward = r["towardLeaf"]
    if toward:
        print(f"toward the materialized leaf: {toward['entryId']} ({toward['via']})", file=out)
    elif leaf["known"] and leaf["isTarget"]:
        print("this is the materialized leaf", file=out)
    for e in r["relationships"]:
        if e["kind"] in ("parent", "child"):
            continue
        arrow = "->" if e["direction"] == "out" else "<-"
        detail = f"  {json.dumps(e['detail'], ensure_ascii=False)}" if e.get("detail") else ""
        print(f"{e['kind']} {arrow} {_target(e['target'])} [{e['provenance']}]{detail}", file=out)


def run(ns: argparse.Namespace) -> int:
    return run_op(ns, "trace", {"sessionId": ns.session, "entryId": ns.entry}, print_trace)
