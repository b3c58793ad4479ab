"""What the one writer is handed for each entry (pure): flat rows of plain
values, no parse objects.

An ingest worker runs the pure pipeline (decode, project, redact, the text
index's `forms`, the tree's per-entry facts) and sends these rows back as
msgpack; the writer only inserts them. A tuple of plain values crosses a
process boundary in ~2 us an entry where the parse objects took ~31 us
pickled (issue 32), and the same rows are what the writer gets when the
pipeline runs in its own process.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any, NamedTuple

import orjson

from .events import Entry, Event, FragmentKind
from .relations import MAX_PATHS_PER_EVENT, entry_edges, entry_file_evidence
from .tree import node_facts

__all__ = ["EventRow", "FragRow", "TreeRow", "event_row", "tree_row", "unpack_event", "unpack_tree"]


class FragRow(NamedTuple):
    """A fragment's columns, its texts and its `forms` value (None: not computed)."""

    fragment_id: str
    kind: str
    tool_name: str | None
    call_id: str | None  # a call's own id (a result is linked by its edge instead)
    text: str
    tail: str | None
    meta: str
    full_length: int
    forms: str | None


class EventRow(NamedTuple):
    """An event's columns in the `events` table's order (entry_id .. meta),
    then what the session row and the text index take from it."""

    entry_id: str
    ordinal: int
    parent_id: str | None
    type: str
    role: str | None
    tool_names: str | None
    ts_ms: int | None
    byte_offset: int
    byte_len: int
    fingerprint: str
    is_error: int
    id_recorded: int
    context_role: str
    meta: str | None  # JSON
    redactions: Sequence[Sequence[Any]]  # (kind, count) pairs
    name: str | None  # the session's name it sets ('' clears it), if any
    fragments: Sequence[FragRow]


class TreeRow(NamedTuple):
    """An entry's tree facts, edges and file evidence, as the tree store writes them."""

    entry_id: str
    parent_id: str | None
    type: str
    role: str | None  # a message's role (the tree's, not the projection's)
    ordinal: int
    byte_offset: int
    facts: dict[str, Any]
    edges: Sequence[Sequence[Any]]  # (kind, target_entry_id, target_ref, provenance, detail JSON)
    files: Sequence[Sequence[Any]]  # (path, mode, source, provenance, raw_path, tool_name, call_id)
    capped: bool  # its file evidence reached MAX_PATHS_PER_EVENT
    calls: Sequence[str]  # an assistant message's tool call ids
    result_of: str | None  # a tool result's call id


def event_row(ev: Event, forms: Callable[[Iterable[str]], str] | None = None) -> EventRow:
    """An event as the writer stores it; `forms` computes each fragment's
    `forms` value (None: left to the text index)."""
    frags = [
        FragRow(
            f.fragment_id,
            f.kind.value,
            f.tool_name,
            f.call_id if f.kind is FragmentKind.TOOL_CALL else None,
            f.text,
            f.tail,
            f.meta,
            f.full_length,
            None if forms is None else forms(v for v in (f.text, f.tail, f.meta) if v),
        )
        for f in ev.fragments
    ]
    name = ev.meta.get("name", "") if ev.type in ("session_info", "title_change") else None
    return EventRow(
        ev.entry_id,
        ev.ordinal,
        ev.parent_id,
        ev.type,
        ev.role,
        ",".join(ev.tool_names) or None,
        ev.timestamp_ms,
        ev.byte_offset,
        ev.byte_len,
        ev.fingerprint,
        int(ev.is_error),
        int(ev.id_recorded),
        ev.context_role.value,
        orjson.dumps(ev.meta).decode() if ev.meta else None,
        ev.redactions,
        name,
        frags,
    )


def tree_row(e: Entry, cwd: str | None) -> TreeRow:
    data = e.data
    msg = data.get("message") if e.type == "message" else None
    msg = msg if isinstance(msg, dict) else {}
    role = msg.get("role")
    evidence = entry_file_evidence(data, cwd)
    call_id = msg.get("toolCallId")
    return TreeRow(
        e.entry_id,
        e.parent_id,
        e.type,
        role if isinstance(role, str) and role else None,
        e.ordinal,
        e.byte_offset,
        node_facts(e.type, data),
        [
            (
                x.kind,
                x.target_entry_id,
                x.target_ref,
                x.provenance,
                orjson.dumps(x.detail).decode() if x.detail else None,
            )
            for x in entry_edges(data)
        ],
        [(v.path, v.mode, v.source, v.provenance, v.raw_path, v.tool_name, v.call_id) for v in evidence],
        len(evidence) >= MAX_PATHS_PER_EVENT,
        _call_ids(msg) if role == "assistant" else (),
        call_id if role == "toolResult" and isinstance(call_id, str) and call_id else None,
    )


def _call_ids(msg: dict[str, Any]) -> list[str]:
    content = msg.get("content")
    return [
        block["id"]
        for block in (content if isinstance(content, list) else [])
        if isinstance(block, dict)
        and block.get("type") == "toolCall"
        and isinstance(block.get("id"), str)
        and block["id"]
    ]


def unpack_event(values: Sequence[Any]) -> EventRow:
    """An event row as msgpack gave it back (lists for tuples)."""
    row = EventRow._make(values)
    return row._replace(fragments=[FragRow._make(f) for f in row.fragments])


def unpack_tree(values: Sequence[Any]) -> TreeRow:
    return TreeRow._make(values)
