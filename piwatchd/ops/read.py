"""event_read: one event exactly, with its content read from the source file.

The index gives identity, metadata, tree state and where the line is; the
content comes from the source line itself, after proving with the recorded
fingerprint that the bytes are the ones that were indexed. A changed or
missing source is reported, and no content is served from the index in its
place. Private reasoning, images, signatures and tool `details` are left out
and listed under `omitted`; long fragments come as a bounded preview plus a
locator, and `fragmentId` + `offset` + `length` pages through one of them.

Texts come from the indexing projection (`piwatchd.project`, unbounded), so
a read redacts secrets exactly as the index did; each redacted field is
listed under `omitted` with counts by kind. `unredacted: true` (the trusted
local CLI only; the API refuses it for workspace callers) turns that off.
"""

from __future__ import annotations

import os
import sqlite3
from datetime import UTC, datetime
from typing import Any

from piwatch import wire

from ..catalog import session_row
from ..index.redaction import index_rules
from ..index.source_events import project_rows, verified_line
from ..index.tree_store import DbTreeView
from ..model import Entry
from ..project import MAX_FRAGMENTS_PER_EVENT, project_entry
from ..redact import NO_RULES, redact_payload, redaction_note
from ..source.lines import RawLine, decode_line
from ..source.reader import open_source
from ..tree import branch_after, branch_before

__all__ = [
    "OpError",
    "event_read",
    "read_source_line",
    "node_summary",
    "node_summaries",
    "PREVIEW_CHARS",
    "WINDOW_DEFAULT",
    "WINDOW_MAX",
    "NEIGHBOURS_MAX",
]

PREVIEW_CHARS = 2_000  # per fragment in a plain read
SMALL_PREVIEW = 160  # neighbours and trace nodes
WINDOW_DEFAULT = 8_000
WINDOW_MAX = wire.WINDOW_MAX  # the wire contract's bounds, defined once there
NEIGHBOURS_MAX = wire.NEIGHBOURS_MAX


class OpError(ValueError):
    """The request cannot be answered; `code` is not-found | invalid."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code


def _iso(ms: int | None) -> str | None:
    if ms is None:
        return None
    return datetime.fromtimestamp(ms / 1000, tz=UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def source_of(conn: sqlite3.Connection, session_id: str) -> tuple[str, str | None]:
    """(source path, recorded cwd) of an indexed session."""
    row = session_row(conn, session_id)
    if row is None:
        raise OpError("not-found", f"session {session_id} is not indexed")
    return row.path, row.cwd


def read_source_line(path: str, offset: int, length: int, fingerprint: str) -> tuple[str, bytes | None, str | None]:
    """(status, line bytes, detail): status is verified | changed | missing | unreadable."""
    try:
        fd = open_source(path)
    except FileNotFoundError:
        return "missing", None, f"the source file {path} no longer exists"
    except OSError as exc:
        return "unreadable", None, f"cannot open {path}: {exc.strerror or exc}"
    try:
        line = verified_line(fd, offset, length, fingerprint)
    except OSError as exc:
        return "unreadable", None, f"cannot read {path}: {exc.strerror or exc}"
    finally:
        os.close(fd)
    if line is None:
        return (
            "changed",
            None,
            f"the bytes at {path}:{offset} no longer match the indexed line (the file was rewritten or"
            " truncated); no content is served from the index instead: re-index and read again",
        )
    return "verified", line, None


def not_indexed(fragments: int) -> list[dict[str, Any]]:
    """The fragments past the index's per-entry cap: readable here, never found by search."""
    if fragments <= MAX_FRAGMENTS_PER_EVENT:
        return []
    return [
        {
            "field": f"content[{MAX_FRAGMENTS_PER_EVENT}:]",
            "kind": "not-indexed",
            "reason": f"only the first {MAX_FRAGMENTS_PER_EVENT} of this entry's {fragments} fragments are searchable",
        }
    ]


def omitted_fields(data: dict[str, Any]) -> list[dict[str, Any]]:
    """What the read leaves out on purpose, so a caller never mistakes it for absent."""
    out: list[dict[str, Any]] = []
    msg = data.get("message") if data.get("type") == "message" else None
    container = msg if isinstance(msg, dict) else data
    prefix = "message." if isinstance(msg, dict) else ""
    content = container.get("content")
    for i, block in enumerate(content if isinstance(content, list) else []):
        if not isinstance(block, dict):
            continue
        btype = block.get("type")
        where = f"{prefix}content[{i}]"
        if btype == "thinking":
            out.append({"field": where, "kind": "thinking", "reason": "private reasoning is excluded"})
        elif btype == "image":
            size = len(b64) if isinstance(b64 := block.get("data"), str) else None
            out.append(
                {
                    "field": where,
                    "kind": "image",
                    "mimeType": block.get("mimeType"),
                    "base64Chars": size,
                    "reason": "image data is excluded",
                }
            )
        for key in ("textSignature", "thinkingSignature", "thoughtSignature", "partialJson"):
            if key in block:
                out.append(
                    {
                        "field": f"{where}.{key}",
                        "kind": "provider-private",
                        "reason": "provider-private metadata is excluded",
                    }
                )
    if isinstance(msg, dict):
        role = msg.get("role")
        if role in ("system", "developer"):
            out.append(
                {
                    "field": "message.content",
                    "kind": "prompt",
                    "reason": "system/developer prompts are not event content",
                }
            )
        if "details" in msg:
            out.append(
                {
                    "field": "message.details",
                    "kind": "details",
                    "reason": "tool details are not model-visible content; see the source locator",
                }
            )
        if "usage" in msg:
            out.append({"field": "message.usage", "kind": "accounting", "reason": "token accounting is not content"})
        if isinstance(msg.get("attachments"), list):
            out.append(
                {"field": "message.attachments", "kind": "attachment", "reason": "attachment bodies are excluded"}
            )
    elif "details" in data and data.get("type") in ("custom_message", "compaction", "branch_summary"):
        out.append(
            {
                "field": "details",
                "kind": "details",
                "reason": "extension/summary details are not content; see the source locator",
            }
        )
    if data.get("type") == "custom":
        out.append(
            {"field": "data", "kind": "extension-state", "reason": "extension state is not conversation content"}
        )
    if data.get("type") == "compaction" and isinstance(data.get("systemMessage"), dict):
        out.append({"field": "systemMessage", "kind": "prompt", "reason": "the prompt checkpoint is not event content"})
    if data.get("type") == "context_edit" and isinstance(data.get("replacement"), dict):
        out.append(
            {"field": "replacement", "kind": "edit", "reason": "replacement content is read from the source locator"}
        )
    return out


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
    ids = list(dict.fromkeys(entry_ids))
    for start in range(0, len(ids), 500):
        chunk = ids[start : start + 500]
        for entry_id, event_rowid, body in conn.execute(
            "SELECT e.entry_id, e.event_rowid, (SELECT f.body FROM fragments f WHERE f.event_rowid = e.event_rowid"
            " ORDER BY f.frag_rowid LIMIT 1) FROM events e"
            f" WHERE e.session_id=? AND e.entry_id IN ({','.join('?' * len(chunk))})",
            (session_id, *chunk),
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


def _event_facts(row: dict[str, Any]) -> dict[str, Any]:
    """The event fields a read and its neighbour summaries both show."""
    return {
        "timestamp": _iso(row["tsMs"]),
        "toolNames": row["toolNames"],
        "isError": row["isError"],
        "contextRole": row["contextRole"],
        "branchState": row["branchState"],
        "selectionState": row["selectionState"],
    }


def node_summaries(conn: sqlite3.Connection, view: DbTreeView, entry_ids: list[str]) -> list[dict[str, Any]]:
    """Summaries of the indexed nodes among `entry_ids`, in order (two queries, not two per node)."""
    rows = [(eid, row) for eid in entry_ids if (row := view.row(eid)) is not None]
    previews = _previews(conn, view.session_id, [eid for eid, _ in rows])
    return [
        {
            "sessionId": view.session_id,
            "entryId": eid,
            "type": row["type"],
            "role": row["role"],
            **_event_facts(row),
            "preview": previews[eid][0] if eid in previews else None,
            "previewSource": previews[eid][1] if eid in previews else "index",
        }
        for eid, row in rows
    ]


def node_summary(conn: sqlite3.Connection, view: DbTreeView, entry_id: str) -> dict[str, Any] | None:
    found = node_summaries(conn, view, [entry_id])
    return found[0] if found else None


def _neighbours(
    conn: sqlite3.Connection, view: DbTreeView, entry_id: str, order: str, before: int, after: int
) -> dict[str, Any]:
    out: dict[str, Any] = {"order": order}
    if order == "append":
        row = view.row(entry_id)
        assert row is not None  # read resolved the target before asking for its neighbours
        prev, nxt = view.by_ordinal(row["ordinal"], before, after)
        out["before"] = node_summaries(conn, view, [n.entry_id for n in prev])
        out["after"] = node_summaries(conn, view, [n.entry_id for n in nxt])
        return out
    prev_nodes = branch_before(view, entry_id, before)
    walk = branch_after(view, entry_id, after)
    out["before"] = node_summaries(conn, view, [n.entry_id for n in prev_nodes])
    out["after"] = node_summaries(conn, view, [n.entry_id for n in walk.nodes])
    out["alternatives"] = walk.alternatives
    out["stoppedAtFork"] = walk.stopped_at_fork
    node = view.node(prev_nodes[0].entry_id) if prev_nodes else view.node(entry_id)
    out["reachedRoot"] = node is not None and (node.parent_id is None or view.node(node.parent_id) is None)
    return out


def event_read(conn: sqlite3.Connection, args: wire.ReadArgs) -> dict[str, Any]:
    """The read result as wire data (`piwatch.wire.ReadResult`); `args` are
    already validated by the wire contract."""
    sid, eid = args.session_id, args.entry_id
    order, before, after = args.order, args.before, args.after
    path, cwd = source_of(conn, sid)
    view = DbTreeView(conn, sid)
    row = view.row(eid)
    if row is None:
        raise OpError("not-found", f"entry {eid} is not indexed in session {sid}")
    locator = {"path": path, "byteOffset": row["byteOffset"], "byteLength": row["byteLength"]}
    result: dict[str, Any] = {
        "sessionId": sid,
        "entryId": eid,
        "event": {
            "type": row["type"],
            "role": row["role"],
            "parentId": row["parentId"],
            "idRecorded": row["idRecorded"],
            **_event_facts(row),
            "meta": row["meta"],
        },
        "session": {"cwd": cwd, "sourcePath": path},
        "source": {**locator, "fingerprint": row["fingerprint"]},
    }
    status, line, detail = read_source_line(path, row["byteOffset"], row["byteLength"], row["fingerprint"])
    result["source"]["status"] = status
    if detail:
        result["source"]["detail"] = detail
    if line is not None:
        decoded = decode_line(RawLine(row["byteOffset"], line))
        data = decoded.value if isinstance(decoded.value, dict) else {}
        entry = Entry(
            eid,
            row["parentId"],
            row["type"],
            row["ordinal"],
            row["byteOffset"],
            row["byteLength"],
            row["fingerprint"],
            data,
            row["idRecorded"],
        )
        rules = NO_RULES if args.unredacted else index_rules(conn)
        fragments = project_entry(sid, entry, rules, bounded=False).fragments
        texts = {f.fragment_id: f.text for f in fragments}
        content = []
        redacted = []
        for f in fragments:
            full = f.text
            if f.redactions:
                redacted.append(redaction_note(f"content.{f.fragment_id}", dict(f.redactions)))
            item: dict[str, Any] = {
                "fragmentId": f.fragment_id,
                "kind": f.kind.value,
                "toolName": f.tool_name,
                "callId": f.call_id,
                "length": len(full),
                "text": full[:PREVIEW_CHARS],
                "truncated": len(full) > PREVIEW_CHARS,
            }
            if item["truncated"]:
                item["next"] = {"fragmentId": f.fragment_id, "offset": PREVIEW_CHARS}
                item["locator"] = locator
            content.append(item)
        result["content"] = content
        result["omitted"] = omitted_fields(data) + redacted + not_indexed(len(fragments))
        if args.fragment_id is not None:
            result["fragment"] = _window(args, texts, {f.fragment_id: f for f in fragments}, locator)
    elif args.fragment_id is not None:
        raise OpError("not-found", f"cannot read fragment {wire.quote(args.fragment_id)}: {detail}")
    if before or after:
        result["neighbours"] = _neighbours(conn, view, eid, order, before, after)
    if args.unredacted:
        result["unredacted"] = True
        return result
    # Every other field (meta, previews, paths) through the same rules; nothing silent.
    result, notes = redact_payload(result, index_rules(conn))
    result.setdefault("omitted", []).extend(notes)
    return result


def _window(args: wire.ReadArgs, texts: dict[str, str], fragments: dict, locator: dict) -> dict[str, Any]:
    fid = args.fragment_id
    if fid is None or fid not in fragments:
        raise OpError(
            "not-found", f"no fragment {wire.quote(fid)} in this event (fragments: {', '.join(fragments) or 'none'})"
        )
    text = texts[fid]
    offset = 0 if args.offset is None else args.offset
    if offset > len(text):
        raise OpError("invalid", f"offset must be between 0 and {len(text)} (the fragment's length)")
    length = WINDOW_DEFAULT if args.length is None else args.length
    piece = text[offset : offset + length]
    end = offset + len(piece)
    return {
        "fragmentId": fid,
        "kind": fragments[fid].kind.value,
        "offset": offset,
        "length": len(piece),
        "totalLength": len(text),
        "text": piece,
        "hasMore": end < len(text),
        "nextOffset": end if end < len(text) else None,
        "locator": locator,
    }
