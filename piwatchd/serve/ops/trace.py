"""event_trace: an event's place in its tree and its typed relationships.

Parent and children come from recorded `parentId`s; siblings are derived
(they share a parent). Every relationship says whether the source records it
or it is derived. Nodes carry bounded metadata and a small preview from the
index, never content: `event_read` is for content. Every string goes through
the index's redaction rules; a change is listed under `omitted`.
"""

from __future__ import annotations

import sqlite3
from typing import Literal

import orjson
from piwatch import wire

from ...model.tree import local_trace
from ...store.catalog import forks_of, parent_of
from ...store.evidence import event_files_sql
from ...store.ids import KEY
from ...store.redaction import index_rules
from ...store.tree_store import DbTreeView, materialized_leaf_of
from ..visibility import Visibility
from .nodes import node_summaries, node_summary, redact_result, source_of
from .request import OpRequest, not_found

__all__ = ["MAX_EDGES", "event_trace", "trace"]

MAX_EDGES = 200  # per kind and direction; a trace stays small


def _target(conn: sqlite3.Connection, session_id: str | None, entry_id: str | None, ref: str | None) -> wire.Target:
    if session_id and entry_id:
        indexed = (
            conn.execute(
                f"SELECT 1 FROM events WHERE session_key={KEY} AND entry_id=?", (session_id, entry_id)
            ).fetchone()
            is not None
        )
        return wire.Target(session_id=session_id, entry_id=entry_id, indexed=indexed)
    return wire.Target(ref=ref)


def _event(session_id: str, entry_id: str) -> wire.Target:
    """An indexed event as a relationship's target."""
    return wire.Target(session_id=session_id, entry_id=entry_id, indexed=True)


def _edge(
    kind: str,
    direction: Literal["in", "out"],
    provenance: str,
    target: wire.Target,
    detail: dict[str, object] | None = None,
) -> wire.Relationship:
    return wire.Relationship(kind=kind, direction=direction, provenance=provenance, target=target, detail=detail)


def _edges(conn: sqlite3.Connection, view: DbTreeView, sid: str, eid: str) -> list[wire.Relationship]:
    out: list[wire.Relationship] = []
    node = view.node(eid)
    if node is not None and node.parent_id is not None:
        out.append(_edge("parent", "out", "recorded", _target(conn, sid, node.parent_id, None)))
    for child in view.children(eid)[:MAX_EDGES]:
        out.append(_edge("child", "out", "recorded", _event(sid, child.entry_id)))
    for kind, teid, ref, prov, detail in conn.execute(
        "SELECT kind, target_entry_id, target_ref, provenance, detail FROM relationships"
        f" WHERE session_key={KEY} AND entry_id=? LIMIT ?",
        (sid, eid, MAX_EDGES),
    ):
        # A target entry is in the edge's own session (`relationships` in store/schema.py).
        target = _target(conn, sid if teid is not None else None, teid, ref)
        out.append(_edge(kind, "out", prov, target, orjson.loads(detail) if detail else None))
    out.extend(_incoming(conn, sid, eid))
    files = event_files_sql(
        "fe.path, fe.mode, {source}, {provenance}, fe.raw_path, fe.tool_name, fe.call_id",
        f"{{h}}.session_key = {KEY} AND {{h}}.entry_id = ?",
    )
    for path, mode, source, prov, raw, tool, call in conn.execute(f"{files} LIMIT ?", (sid, eid, sid, eid, MAX_EDGES)):
        detail = {"recordedPath": raw, "source": source, "toolName": tool, "toolCallId": call}
        kind = "file-read" if mode == "read" else "file-changed"
        out.append(_edge(kind, "out", prov, wire.Target(path=path), detail))
    out.extend(_session_edges(conn, sid, eid))
    return out


def _incoming(conn: sqlite3.Connection, sid: str, eid: str) -> list[wire.Relationship]:
    """Edges recorded by other entries; labels resolve latest-wins by the label entry's append order."""
    incoming = conn.execute(
        "SELECT r.kind, r.entry_id, r.provenance, r.detail, e.ordinal FROM relationships r"
        " LEFT JOIN events e ON e.session_key = r.session_key AND e.entry_id = r.entry_id"
        f" WHERE r.session_key={KEY} AND r.target_entry_id=? ORDER BY e.ordinal LIMIT ?",
        (sid, eid, MAX_EDGES),
    ).fetchall()
    last_label = max(
        (ordinal for kind, *_, ordinal in incoming if kind == "labels" and ordinal is not None), default=None
    )
    out = []
    for kind, seid, prov, detail, ordinal in incoming:
        d = orjson.loads(detail) if detail else {}
        if kind == "labels":
            d["current"] = ordinal == last_label
        out.append(_edge(kind, "in", prov, _event(sid, seid), d or None))
    return out


def _session_edges(conn: sqlite3.Connection, sid: str, eid: str) -> list[wire.Relationship]:
    """Session lineage; the entry-level fork anchor is derived only from what is indexed."""
    out = []
    for (ref,) in conn.execute(
        f"SELECT target_ref FROM relationships WHERE session_key={KEY} AND entry_id IS NULL AND kind='session-parent'",
        (sid,),
    ):
        parent = parent_of(conn, sid)
        out.append(
            _edge(
                "session-parent", "out", "recorded", wire.Target(ref=ref, session_id=parent, indexed=parent is not None)
            )
        )
        if parent is None:
            continue
        # Pi's forks copy a prefix of entries with their ids; the fork point is
        # the last entry of the leading run the two sessions share.
        shared, anchor = _shared_prefix(conn, sid, parent)
        if anchor is not None:
            out.append(_edge("fork-anchor", "out", "derived", _event(parent, anchor), {"sharedEntries": len(shared)}))
        if eid in shared:
            out.append(_edge("session-parent", "out", "derived", _event(parent, eid), {"copiedFrom": True}))
    out.extend(_fork_children(conn, sid, eid))
    return out


def _shared_prefix(conn: sqlite3.Connection, child: str, parent: str) -> tuple[set[str], str | None]:
    """Ids of the child's leading entries that the parent also has, and the last of them."""
    shared: set[str] = set()
    anchor = None
    for entry_id, in_parent in conn.execute(
        "SELECT c.entry_id, p.entry_id IS NOT NULL FROM events c"
        f" LEFT JOIN events p ON p.session_key = {KEY} AND p.entry_id = c.entry_id"
        f" WHERE c.session_key = {KEY} ORDER BY c.ordinal",
        (parent, child),
    ):
        if not in_parent:
            break
        shared.add(entry_id)
        anchor = entry_id
    return shared, anchor


def _fork_children(conn: sqlite3.Connection, sid: str, eid: str) -> list[wire.Relationship]:
    """Sessions forked from this one at this entry (derived, the reverse of fork-anchor)."""
    out = []
    for child in forks_of(conn, sid, MAX_EDGES):
        shared, anchor = _shared_prefix(conn, child, sid)
        if anchor == eid:
            out.append(_edge("fork-child", "in", "derived", _event(child, anchor), {"sharedEntries": len(shared)}))
    return out


def trace(args: wire.TraceArgs, req: OpRequest) -> wire.TraceResult:
    """An event's trace; nodes and targets the caller may not see are never in it."""
    return req.on_event(args.session_id, args.entry_id, lambda view: event_trace(view, args, req.vis))


def event_trace(view: DbTreeView, args: wire.TraceArgs, vis: Visibility) -> wire.TraceResult:
    """The trace of one indexed event as `vis`'s caller may see it, its strings redacted as the index's."""
    conn, sid, eid = view.conn, args.session_id, args.entry_id
    source_of(conn, sid)
    if view.node(eid) is None:
        raise not_found(f"entry {eid} is not indexed in session {sid}")
    local = local_trace(view, eid)
    leaf, known = materialized_leaf_of(conn, sid)
    toward, parent = local.toward_leaf, local.parent
    via: Literal["parent", "child"] = "child"
    if toward is not None and parent is not None and toward.entry_id == parent.entry_id:
        via = "parent"
    siblings = node_summaries(conn, view, [s.entry_id for s in local.siblings[:MAX_EDGES]])
    for n in siblings:
        n.provenance = "derived"
    result = wire.TraceResult(
        session_id=sid,
        entry_id=eid,
        node=node_summary(conn, view, eid),
        materialized_leaf=wire.Leaf(entry_id=leaf, known=known, is_target=leaf == eid),
        parent=node_summary(conn, view, parent.entry_id) if parent is not None else None,
        parent_missing=local.parent_recorded if parent is None and local.parent_recorded else None,
        children=node_summaries(conn, view, [c.entry_id for c in local.children[:MAX_EDGES]]),
        siblings=siblings,
        toward_leaf=None if toward is None else wire.TowardLeaf(entry_id=toward.entry_id, via=via),
        toward_leaf_known=local.toward_leaf_known,
        relationships=_edges(conn, view, sid, eid),
    )
    result = _only_visible(result, vis)
    # Previews and labels through the index's redaction rules; each change listed under `omitted`.
    result, notes = redact_result(result, index_rules(conn))
    if notes:
        result.omitted = notes
    return result


def _only_visible(result: wire.TraceResult, vis: Visibility) -> wire.TraceResult:
    """The nodes and relationship targets the caller may see, decided before the
    result is redacted (whose notes would list a hidden node's secrets)."""
    if vis.unrestricted:
        return result
    sid = result.session_id
    pairs = {(n.session_id, n.entry_id) for n in (result.node, result.parent, *result.children, *result.siblings) if n}
    if result.materialized_leaf.entry_id:
        pairs.add((sid, result.materialized_leaf.entry_id))
    if result.toward_leaf is not None:
        pairs.add((sid, result.toward_leaf.entry_id))
    for rel in result.relationships:
        if rel.target.entry_id:
            pairs.add((rel.target.session_id or sid, rel.target.entry_id))
    seen = vis.visible_events(pairs)

    def shown(node: wire.NodeSummary | None) -> wire.NodeSummary | None:
        return node if node is not None and (node.session_id, node.entry_id) in seen else None

    result.node = shown(result.node)
    result.parent = shown(result.parent)
    result.children = [n for n in result.children if shown(n)]
    result.siblings = [n for n in result.siblings if shown(n)]
    leaf = result.materialized_leaf
    if leaf.entry_id and (sid, leaf.entry_id) not in seen:
        # The materialized leaf lies past the cutoff: it is not known to this caller.
        result.materialized_leaf = wire.Leaf(entry_id=None, known=False, is_target=False)
        result.toward_leaf_known = False
    if result.toward_leaf is not None and (sid, result.toward_leaf.entry_id) not in seen:
        result.toward_leaf = None
    result.relationships = [r for r in result.relationships if _target_visible(r.target, sid, seen, vis)]
    return result


def _target_visible(target: wire.Target, sid: str, seen: set[tuple[str, str]], vis: Visibility) -> bool:
    if target.entry_id:
        return (target.session_id or sid, target.entry_id) in seen
    if target.session_id:
        return vis.session(target.session_id) is not None
    return True  # a path or a reference recorded in the visible entry itself
