"""event_trace: an event's place in its tree and its typed relationships.

Parent and children come from recorded `parentId`s; siblings are derived
(they share a parent). Every relationship says whether the source records it
or it is derived. Nodes carry bounded metadata and a small preview from the
index, never content: `event_read` is for content. Every string goes through
the index's redaction rules; a change is listed under `omitted`.
"""

from __future__ import annotations

import sqlite3
from typing import Any

import orjson
from piwatch import wire

from ..catalog import child_sessions, session_by_path, session_row
from ..index.redaction import index_rules
from ..index.tree_store import DbTreeView, materialized_leaf_of
from ..redact import redact_payload
from ..tree import local_trace
from .read import OpError, node_summaries, node_summary, source_of

__all__ = ["event_trace", "MAX_EDGES"]

MAX_EDGES = 200  # per kind and direction; a trace stays small


def _target(conn: sqlite3.Connection, session_id: str | None, entry_id: str | None, ref: str | None) -> dict[str, Any]:
    if session_id and entry_id:
        indexed = (
            conn.execute("SELECT 1 FROM events WHERE session_id=? AND entry_id=?", (session_id, entry_id)).fetchone()
            is not None
        )
        return {"sessionId": session_id, "entryId": entry_id, "indexed": indexed}
    return {"ref": ref}


def _edges(conn: sqlite3.Connection, view: DbTreeView, sid: str, eid: str) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    node = view.node(eid)
    if node is not None and node.parent_id is not None:
        out.append(
            {
                "kind": "parent",
                "direction": "out",
                "provenance": "recorded",
                "target": _target(conn, sid, node.parent_id, None),
            }
        )
    for child in view.children(eid)[:MAX_EDGES]:
        out.append(
            {
                "kind": "child",
                "direction": "out",
                "provenance": "recorded",
                "target": {"sessionId": sid, "entryId": child.entry_id, "indexed": True},
            }
        )
    for kind, tsid, teid, ref, prov, detail in conn.execute(
        "SELECT kind, target_session_id, target_entry_id, target_ref, provenance, detail FROM relationships"
        " WHERE session_id=? AND entry_id=? LIMIT ?",
        (sid, eid, MAX_EDGES),
    ):
        out.append(
            {
                "kind": kind,
                "direction": "out",
                "provenance": prov,
                "target": _target(conn, tsid, teid, ref),
                "detail": orjson.loads(detail) if detail else None,
            }
        )
    # Incoming edges; labels resolve latest-wins by the label entry's append order.
    incoming = conn.execute(
        "SELECT r.kind, r.session_id, r.entry_id, r.provenance, r.detail, e.ordinal FROM relationships r"
        " LEFT JOIN events e ON e.session_id = r.session_id AND e.entry_id = r.entry_id"
        " WHERE r.target_session_id=? AND r.target_entry_id=? ORDER BY e.ordinal LIMIT ?",
        (sid, eid, MAX_EDGES),
    ).fetchall()
    last_label = max(
        (ordinal for kind, *_, ordinal in incoming if kind == "labels" and ordinal is not None), default=None
    )
    for kind, ssid, seid, prov, detail, ordinal in incoming:
        d = orjson.loads(detail) if detail else {}
        if kind == "labels":
            d["current"] = ordinal == last_label
        out.append(
            {
                "kind": kind,
                "direction": "in",
                "provenance": prov,
                "target": {"sessionId": ssid, "entryId": seid, "indexed": True},
                "detail": d or None,
            }
        )
    for path, mode, source, prov, raw, tool, call in conn.execute(
        "SELECT path, mode, source, provenance, raw_path, tool_name, call_id FROM file_evidence"
        " WHERE session_id=? AND entry_id=? LIMIT ?",
        (sid, eid, MAX_EDGES),
    ):
        out.append(
            {
                "kind": "file-read" if mode == "read" else "file-changed",
                "direction": "out",
                "provenance": prov,
                "target": {"path": path},
                "detail": {"recordedPath": raw, "source": source, "toolName": tool, "toolCallId": call},
            }
        )
    out.extend(_session_edges(conn, sid, eid))
    return out


def _session_edges(conn: sqlite3.Connection, sid: str, eid: str) -> list[dict[str, Any]]:
    """Session lineage; the entry-level fork anchor is derived only from what is indexed."""
    out = []
    for (ref,) in conn.execute(
        "SELECT target_ref FROM relationships WHERE session_id=? AND entry_id IS NULL AND kind='session-parent'", (sid,)
    ):
        row = session_by_path(conn, ref) or session_row(conn, ref)
        parent = row.session_id if row else None
        out.append(
            {
                "kind": "session-parent",
                "direction": "out",
                "provenance": "recorded",
                "target": {"ref": ref, "sessionId": parent, "indexed": parent is not None},
            }
        )
        if parent is None:
            continue
        # Pi's forks copy a prefix of entries with their ids; the fork point is
        # the last entry of the leading run the two sessions share.
        shared, anchor = _shared_prefix(conn, sid, parent)
        if anchor is not None:
            out.append(
                {
                    "kind": "fork-anchor",
                    "direction": "out",
                    "provenance": "derived",
                    "target": {"sessionId": parent, "entryId": anchor, "indexed": True},
                    "detail": {"sharedEntries": len(shared)},
                }
            )
        if eid in shared:
            out.append(
                {
                    "kind": "session-parent",
                    "direction": "out",
                    "provenance": "derived",
                    "target": {"sessionId": parent, "entryId": eid, "indexed": True},
                    "detail": {"copiedFrom": True},
                }
            )
    out.extend(_fork_children(conn, sid, eid))
    return out


def _shared_prefix(conn: sqlite3.Connection, child: str, parent: str) -> tuple[set[str], str | None]:
    """Ids of the child's leading entries that the parent also has, and the last of them."""
    shared: set[str] = set()
    anchor = None
    for entry_id, in_parent in conn.execute(
        "SELECT c.entry_id, p.entry_id IS NOT NULL FROM events c"
        " LEFT JOIN events p ON p.session_id = ? AND p.entry_id = c.entry_id"
        " WHERE c.session_id = ? ORDER BY c.ordinal",
        (parent, child),
    ):
        if not in_parent:
            break
        shared.add(entry_id)
        anchor = entry_id
    return shared, anchor


def _fork_children(conn: sqlite3.Connection, sid: str, eid: str) -> list[dict[str, Any]]:
    """Sessions forked from this one at this entry (derived, the reverse of fork-anchor)."""
    row = session_row(conn, sid)
    out = []
    for child in child_sessions(conn, [sid, *([row.path] if row else [])], exclude=sid):
        shared, anchor = _shared_prefix(conn, child, sid)
        if anchor == eid:
            out.append(
                {
                    "kind": "fork-child",
                    "direction": "in",
                    "provenance": "derived",
                    "target": {"sessionId": child, "entryId": anchor, "indexed": True},
                    "detail": {"sharedEntries": len(shared)},
                }
            )
    return out


def event_trace(conn: sqlite3.Connection, args: wire.TraceArgs) -> dict[str, Any]:
    """The trace result as wire data (`piwatch.wire.TraceResult`)."""
    sid, eid = args.session_id, args.entry_id
    source_of(conn, sid)
    view = DbTreeView(conn, sid)
    if view.node(eid) is None:
        raise OpError("not-found", f"entry {eid} is not indexed in session {sid}")
    local = local_trace(view, eid)
    leaf, known = materialized_leaf_of(conn, sid)
    toward = local["towardLeaf"]
    parent = local["parent"]
    direction = None
    if toward is not None:
        direction = "parent" if parent is not None and toward.entry_id == parent.entry_id else "child"
    return _redacted(
        conn,
        {
            "sessionId": sid,
            "entryId": eid,
            "node": node_summary(conn, view, eid),
            "materializedLeaf": {"entryId": leaf, "known": known, "isTarget": leaf == eid},
            "parent": node_summary(conn, view, parent.entry_id) if parent is not None else None,
            "parentMissing": local["parentRecorded"] if parent is None and local["parentRecorded"] else None,
            "children": node_summaries(conn, view, [c.entry_id for c in local["children"][:MAX_EDGES]]),
            "siblings": [
                {**n, "provenance": "derived"}
                for n in node_summaries(conn, view, [s.entry_id for s in local["siblings"][:MAX_EDGES]])
            ],
            "towardLeaf": None if toward is None else {"entryId": toward.entry_id, "via": direction},
            "towardLeafKnown": local["towardLeafKnown"],
            "relationships": _edges(conn, view, sid, eid),
        },
    )


def _redacted(conn: sqlite3.Connection, result: dict[str, Any]) -> dict[str, Any]:
    """Previews and labels through the index's redaction rules; each change listed under `omitted`."""
    result, notes = redact_payload(result, index_rules(conn))
    if notes:
        result["omitted"] = notes
    return result
