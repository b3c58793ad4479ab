"""`piwatch trace SESSION ENTRY`: an event's tree neighbourhood and relationships,
in plain words for people (`--json` keeps the contract's terms: materialized
leaf, branch and selection states, relationship kinds, provenance)."""

from __future__ import annotations

import argparse
from typing import TextIO

from ..colour import SafeText
from ..wire import MIN_ID_PREFIX, NodeSummary, Relationship, Target, TraceResult
from ._common import add_colour_arg, add_scope_args, run_op

__all__ = ["BRANCH_WORDS", "EDGE_WORDS", "SELECTION_WORDS", "add_parser", "run", "print_trace"]


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("trace", help="show an event's parent, children, siblings and relationships")
    p.set_defaults(run=run)
    p.add_argument("session", metavar="SESSION", help=f"session id, or a unique prefix of {MIN_ID_PREFIX}+ characters")
    p.add_argument("entry", metavar="ENTRY", help="entry id")
    add_scope_args(p)
    p.add_argument("--json", action="store_true", help="print the result as JSON")
    add_colour_arg(p)


# The tree states in words (`--json` keeps the contract's terms: docs/concepts.md).
BRANCH_WORDS = {
    "selected": "on the branch the file ends on",
    "alternate": "on an abandoned branch",
    "unknown": "branch unknown",
}
SELECTION_WORDS = {
    "direct": "in the model's context",
    "summarized": "in the context only as a summary",
    "omitted": "removed from the context",
    "not-selected": "not in the context",
    "not-applicable": "",
    "unknown": "context unknown",
}
# Each relationship in words, as seen from the traced entry (kind, direction) -> phrase.
EDGE_WORDS = {
    ("tool-result-for", "out"): "the result of the tool call in",
    ("tool-result-for", "in"): "the result of its tool call is in",
    ("compacts", "out"): "a compaction that keeps the conversation from",
    ("compacts", "in"): "the conversation from here on is kept by the compaction at",
    ("branch-summary-from", "out"): "summarizes the branch left at",
    ("branch-summary-from", "in"): "a branch left here is summarized by",
    ("labels", "out"): "labels",
    ("labels", "in"): "labelled by",
    ("context-edit", "out"): "edits the context at",
    ("context-edit", "in"): "its place in the context is edited by",
    ("session-parent", "out"): "this session was forked from",
    ("fork-anchor", "out"): "the fork left its parent session after",
    ("fork-child", "in"): "a session forked from here:",
    ("file-read", "out"): "read the file",
    ("file-changed", "out"): "changed the file",
}


def _node(n: NodeSummary | None) -> str:
    """A node in words: id, what it is, where it stands, its preview."""
    if n is None:
        return "-"
    role = f"/{n.role}" if n.role else ""
    where = ", ".join(
        w
        for w in (
            BRANCH_WORDS.get(n.branch_state, n.branch_state),
            SELECTION_WORDS.get(n.selection_state, n.selection_state),
        )
        if w
    )
    preview = f"  {n.preview}" if n.preview else ""
    return f"{n.entry_id}  {n.type}{role} ({where}){preview}"


def _target(t: Target, here: str) -> str:
    if t.path is not None:
        return t.path
    if t.entry_id:
        where = (
            f"entry {t.entry_id}" if t.session_id in (None, here) else f"entry {t.entry_id} of session {t.session_id}"
        )
        return where + ("" if t.indexed is not False else " (not indexed)")
    if t.session_id:
        return f"session {t.session_id}"
    return "the start of the session" if t.ref == "root" else str(t.ref or "an entry the file does not name")


def _edge_detail(e: Relationship) -> str:
    """What the contract's detail adds, in words (never its raw JSON)."""
    d = e.detail or {}
    bits = []
    if e.kind == "labels" and d.get("label"):
        bits.append(f'as "{d["label"]}"')
    if e.kind == "labels" and d.get("current") is False:
        bits.append("a later label replaced it")
    if e.kind == "context-edit" and "omits" in d:
        bits.append("removing it" if d["omits"] else "replacing it")
    if isinstance(d.get("sharedEntries"), int):
        bits.append(f"{d['sharedEntries']} entries shared")
    if d.get("copiedFrom"):
        bits.append("copied by the fork")
    if d.get("toolName"):
        bits.append(f"by {d['toolName']}")
    if e.provenance == "derived":
        bits.append("inferred: the file does not say so")
    return f" ({'; '.join(bits)})" if bits else ""


def print_trace(r: TraceResult, out: TextIO | SafeText) -> None:
    """The trace in words; `--json` prints the contract's terms."""
    leaf = r.materialized_leaf
    print(f"session {r.session_id}, entry {_node(r.node)}", file=out)
    if not leaf.known:
        print("where the session's file ends: unknown", file=out)
    elif leaf.is_target:
        print("this is the last entry of the session's file", file=out)
    else:
        print(f"the session's file ends at entry {leaf.entry_id}", file=out)
    missing = f" (the file names {r.parent_missing}, which it does not hold)" if r.parent_missing else ""
    print(f"comes after {_node(r.parent) if r.parent else 'nothing: it starts the conversation'}{missing}", file=out)
    for c in r.children:
        print(f"followed by {_node(c)}", file=out)
    for s in r.siblings:
        print(f"beside      {_node(s)} (another entry after the same one)", file=out)
    toward = r.toward_leaf
    if toward:
        way = "the entry after it" if toward.via == "child" else "the entry before it"
        print(f"towards the end of the file: {way}, {toward.entry_id}", file=out)
    for e in r.relationships:
        if e.kind in ("parent", "child"):
            continue
        words = EDGE_WORDS.get((e.kind, e.direction), f"{e.kind} ({e.direction})")
        print(f"{words} {_target(e.target, r.session_id)}{_edge_detail(e)}", file=out)


def run(ns: argparse.Namespace) -> int:
    return run_op(ns, "trace", {"sessionId": ns.session, "entryId": ns.entry}, print_trace)
