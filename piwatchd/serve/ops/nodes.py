"""What read and trace share: node summaries with small previews, the event
fields both show, the session's source, and redaction of a whole result.

A node summary carries bounded metadata and a small preview (the read
model's text, or the fragment re-projected from its verified source line
when the text engine keeps no text in SQLite), never content.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Mapping
from typing import Any, TypedDict, TypeVar

import msgspec
from piwatch import wire

from ...model.redact import REDACTED_REASON, Rules, redact_payload
from ...store.catalog import session_row
from ...store.ids import IN_IDS, KEY, id_list
from ...store.source_events import project_rows
from ...store.tree_store import DbTreeView
from ...text.search import iso_time
from .request import not_found

__all__ = [
    "SMALL_PREVIEW",
    "EventFacts",
    "event_facts",
    "node_summaries",
    "node_summary",
    "redact_result",
    "redaction_omitted",
    "source_of",
]

SMALL_PREVIEW = 160  # neighbours and trace nodes
W = TypeVar("W", bound=msgspec.Struct)


def source_of(conn: sqlite3.Connection, session_id: str) -> tuple[str, str | None]:
    """(source path, recorded cwd) of an indexed session."""
    row = session_row(conn, session_id)
    if row is None:
        raise not_found(f"session {session_id} is not indexed")
    return row.path, row.cwd


class EventFacts(TypedDict):
    """The event fields a read and its neighbour summaries both show (keyword arguments of both shapes)."""

    timestamp: str | None
    tool_names: list[str]
    is_error: bool
    context_role: str
    branch_state: str
    selection_state: str


def event_facts(row: Mapping[str, Any]) -> EventFacts:
    """An indexed event row's shared fields (`DbTreeView.row`)."""
    return EventFacts(
        timestamp=iso_time(row["tsMs"]),
        tool_names=row["toolNames"],
        is_error=row["isError"],
        context_role=row["contextRole"],
        branch_state=row["branchState"],
        selection_state=row["selectionState"],
    )


def _previews(
    conn: sqlite3.Connection, session_id: str, entry_ids: list[str], limit: int = SMALL_PREVIEW
) -> dict[str, tuple[str, str]]:
    """Small previews, {entry id: (text, where from)}, a navigation aid and
    never canonical content: the first fragment's indexed text, or, when the
    text engine keeps no text in the read model (Tantivy), the same fragment
    re-projected from its verified source line. Batched: one query, and one
    open of the session's file, for all the nodes."""
    out: dict[str, tuple[str, str]] = {}
    from_source: dict[int, str] = {}
    for entry_id, event_rowid, body in conn.execute(
        "SELECT e.entry_id, e.event_rowid, (SELECT f.body FROM fragments f WHERE f.event_rowid = e.event_rowid"
        f" ORDER BY f.frag_rowid LIMIT 1) FROM events e WHERE e.session_key={KEY} AND e.entry_id {IN_IDS}",
        (session_id, id_list(dict.fromkeys(entry_ids))),
    ):
        if body:
            out[entry_id] = (_short_preview(body, limit), "index")
        elif body is None:
            from_source[event_rowid] = entry_id
    if from_source:
        for event_rowid, event in project_rows(conn, list(from_source)).items():
            text = event.fragments[0].display_text() if event.fragments else ""
            if text:
                out[from_source[event_rowid]] = (_short_preview(text, limit), "source")
    return out


def _short_preview(text: str, limit: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[:limit] + "…"


def node_summaries(conn: sqlite3.Connection, view: DbTreeView, entry_ids: list[str]) -> list[wire.NodeSummary]:
    """Summaries of the indexed nodes among `entry_ids`, in order (two queries, not two per node)."""
    rows = [(eid, row) for eid in entry_ids if (row := view.row(eid)) is not None]
    previews = _previews(conn, view.session_id, [eid for eid, _ in rows])
    out = []
    for eid, row in rows:
        preview = previews.get(eid)
        out.append(
            wire.NodeSummary(
                session_id=view.session_id,
                entry_id=eid,
                type=row["type"],
                role=row["role"],
                **event_facts(row),
                preview=preview[0] if preview else None,
                preview_source=preview[1] if preview else "index",
            )
        )
    return out


def node_summary(conn: sqlite3.Connection, view: DbTreeView, entry_id: str) -> wire.NodeSummary | None:
    found = node_summaries(conn, view, [entry_id])
    return found[0] if found else None


def redaction_omitted(field_name: str, counts: Mapping[str, int]) -> wire.Omitted:
    """The entry a read or trace lists under `omitted` for a redacted field: kinds and counts, never values."""
    return wire.Omitted(field=field_name, kind="redacted", counts=dict(sorted(counts.items())), reason=REDACTED_REASON)


def redact_result(result: W, rules: Rules) -> tuple[W, list[wire.Omitted]]:
    """Redact every string inside a wire result in place (`redact_payload`, the
    one walker), each changed field reported as an `omitted` entry."""
    out, notes = redact_payload(result, rules)
    assert out is result  # a Struct is redacted in place
    return result, [redaction_omitted(n["field"], n["counts"]) for n in notes]
