"""event_read: one event exactly, with its content read from the source file.

The index gives identity, metadata, tree state and where the line is; the
content comes from the source line itself, after proving with the recorded
fingerprint that the bytes are the ones that were indexed. A changed or
missing source is reported, and no content is served from the index in its
place. Private reasoning, images, signatures and tool `details` are left out
and listed under `omitted`; long fragments come as a bounded preview plus a
locator, and `fragmentId` + `offset` + `length` pages through one of them.

Texts come from the indexing projection (`piwatchd.model.project`, unbounded), so
a read redacts secrets exactly as the index did; each redacted field is
listed under `omitted` with counts by kind. `unredacted: true` (the trusted
local CLI only; the API refuses it for workspace callers) turns that off.
"""

from __future__ import annotations

import os
from typing import Any, Literal

from piwatch import wire

from ...model.events import Entry
from ...model.project import MAX_FRAGMENTS_PER_EVENT, project_entry
from ...model.redact import NO_RULES
from ...model.tree import branch_after, branch_before
from ...source.reader import open_source
from ...store.extractors import index_extractors
from ...store.redaction import index_rules
from ...store.source_events import line_entry, verified_line
from ...store.tree_store import DbTreeView
from ..visibility import Visibility
from .nodes import event_facts, node_summaries, redact_result, redaction_omitted, source_of
from .request import OpRequest, bad_request, not_found

__all__ = ["PREVIEW_CHARS", "WINDOW_DEFAULT", "read", "read_source_line"]

PREVIEW_CHARS = 2_000  # per fragment in a plain read
WINDOW_DEFAULT = wire.WINDOW_DEFAULT


SourceStatus = Literal["verified", "changed", "missing", "unreadable"]


def read_source_line(
    path: str, offset: int, length: int, fingerprint: str
) -> tuple[SourceStatus, bytes | None, str | None]:
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


def not_indexed(fragments: int) -> list[wire.Omitted]:
    """The fragments past the index's per-entry cap: readable here, never found by search."""
    if fragments <= MAX_FRAGMENTS_PER_EVENT:
        return []
    return [
        wire.Omitted(
            field=f"content[{MAX_FRAGMENTS_PER_EVENT}:]",
            kind="not-indexed",
            reason=f"only the first {MAX_FRAGMENTS_PER_EVENT} of this entry's {fragments} fragments are searchable",
        )
    ]


_PRIVATE_KEYS = ("textSignature", "thinkingSignature", "thoughtSignature", "partialJson")
# oh-my-pi keeps images in its blob store and writes this reference in their place.
BLOB_REF = "blob:sha256:"
# oh-my-pi cuts a string over 500,000 characters when it saves a session, and says so in it.
TRUNCATION_NOTICE = "[Session persistence truncated large content]"


def _truncated(text: Any, where: str) -> list[wire.Omitted]:
    if not isinstance(text, str) or TRUNCATION_NOTICE not in text:
        return []
    reason = "oh-my-pi kept only the first 500,000 characters of this text when it saved the session"
    return [wire.Omitted(field=where, kind="truncated", reason=reason)]


def _block_omissions(block: dict[str, Any], where: str) -> list[wire.Omitted]:
    out: list[wire.Omitted] = []
    btype = block.get("type")
    if btype == "thinking":
        out.append(wire.Omitted(field=where, kind="thinking", reason="private reasoning is excluded"))
    elif btype == "image":
        b64 = block.get("data")
        mime = block.get("mimeType")
        blob = isinstance(b64, str) and b64.startswith(BLOB_REF)
        out.append(
            wire.Omitted(
                field=where,
                kind="image",
                mime_type=mime if isinstance(mime, str) else None,
                base64_chars=len(b64) if isinstance(b64, str) and not blob else None,
                reason="image data is excluded" + (" (in oh-my-pi's blob store)" if blob else ""),
            )
        )
    elif btype == "text":
        out.extend(_truncated(block.get("text"), f"{where}.text"))
    for key in _PRIVATE_KEYS:
        if key in block:
            out.append(
                wire.Omitted(
                    field=f"{where}.{key}", kind="provider-private", reason="provider-private metadata is excluded"
                )
            )
    return out


def _message_omissions(msg: dict[str, Any]) -> list[wire.Omitted]:
    out: list[wire.Omitted] = []
    if msg.get("role") in ("system", "developer"):
        out.append(
            wire.Omitted(
                field="message.content", kind="prompt", reason="system/developer prompts are not event content"
            )
        )
    if "details" in msg:
        out.append(
            wire.Omitted(
                field="message.details",
                kind="details",
                reason="tool details are not model-visible content; see the source locator",
            )
        )
    if "usage" in msg:
        out.append(wire.Omitted(field="message.usage", kind="accounting", reason="token accounting is not content"))
    if isinstance(msg.get("attachments"), list):
        out.append(
            wire.Omitted(field="message.attachments", kind="attachment", reason="attachment bodies are excluded")
        )
    return out


def _entry_omissions(data: dict[str, Any]) -> list[wire.Omitted]:
    out: list[wire.Omitted] = []
    etype = data.get("type")
    if "details" in data and etype in ("custom_message", "compaction", "branch_summary"):
        out.append(
            wire.Omitted(
                field="details",
                kind="details",
                reason="extension/summary details are not content; see the source locator",
            )
        )
    if etype == "custom":
        out.append(
            wire.Omitted(field="data", kind="extension-state", reason="extension state is not conversation content")
        )
    if etype == "compaction" and isinstance(data.get("systemMessage"), dict):
        out.append(
            wire.Omitted(field="systemMessage", kind="prompt", reason="the prompt checkpoint is not event content")
        )
    if etype == "session_init":
        for key in ("systemPrompt", "task"):
            if key in data:
                out.append(
                    wire.Omitted(field=key, kind="prompt", reason="oh-my-pi's session prompts are not event content")
                )
    if etype == "context_edit" and isinstance(data.get("replacement"), dict):
        out.append(
            wire.Omitted(field="replacement", kind="edit", reason="replacement content is read from the source locator")
        )
    return out


def omitted_fields(data: dict[str, Any]) -> list[wire.Omitted]:
    """What the read leaves out on purpose, so a caller never mistakes it for absent."""
    msg = data.get("message") if data.get("type") == "message" else None
    container = msg if isinstance(msg, dict) else data
    prefix = "message." if isinstance(msg, dict) else ""
    content = container.get("content")
    out: list[wire.Omitted] = []
    for i, block in enumerate(content if isinstance(content, list) else []):
        if isinstance(block, dict):
            out.extend(_block_omissions(block, f"{prefix}content[{i}]"))
    out.extend(_truncated(content, f"{prefix}content"))
    if isinstance(msg, dict):
        out.extend(_message_omissions(msg))
    else:
        out.extend(_entry_omissions(data))
    return out


def _neighbours(view: DbTreeView, entry_id: str, order: str, before: int, after: int) -> wire.Neighbours:
    conn = view.conn
    if order == "append":
        row = view.row(entry_id)
        assert row is not None  # read resolved the target before asking for its neighbours
        prev, nxt = view.by_ordinal(row["ordinal"], before, after)
        return wire.Neighbours(
            order="append",
            before=node_summaries(conn, view, [n.entry_id for n in prev]),
            after=node_summaries(conn, view, [n.entry_id for n in nxt]),
        )
    prev_nodes = branch_before(view, entry_id, before)
    walk = branch_after(view, entry_id, after)
    node = view.node(prev_nodes[0].entry_id) if prev_nodes else view.node(entry_id)
    stop = walk.stopped_at_fork
    return wire.Neighbours(
        order="branch",
        before=node_summaries(conn, view, [n.entry_id for n in prev_nodes]),
        after=node_summaries(conn, view, [n.entry_id for n in walk.nodes]),
        alternatives=[
            wire.Alternative(at=a["at"], followed=a["followed"], alternatives=a["alternatives"])
            for a in walk.alternatives
        ],
        stopped_at_fork=None if stop is None else wire.ForkStop(at=stop["at"], candidates=stop["candidates"]),
        reached_root=node is not None and (node.parent_id is None or view.node(node.parent_id) is None),
    )


def _visible_neighbours(nb: wire.Neighbours, sid: str, vis: Visibility) -> wire.Neighbours:
    """The neighbours and fork alternatives the caller may see, decided before the
    result is redacted (whose notes would list a hidden neighbour's secrets)."""
    if vis.unrestricted:
        return nb
    ids = {n.entry_id for n in (*nb.before, *nb.after)}
    for alt in nb.alternatives or []:
        ids.update([alt.at, alt.followed, *alt.alternatives])
    if nb.stopped_at_fork is not None:
        ids.update([nb.stopped_at_fork.at, *nb.stopped_at_fork.candidates])
    seen = {eid for _, eid in vis.visible_events((sid, eid) for eid in ids)}
    nb.before = [n for n in nb.before if n.entry_id in seen]
    nb.after = [n for n in nb.after if n.entry_id in seen]
    if nb.alternatives is not None:
        nb.alternatives = [
            wire.Alternative(at=a.at, followed=a.followed, alternatives=[x for x in a.alternatives if x in seen])
            for a in nb.alternatives
            if a.at in seen and a.followed in seen
        ]
    fork = nb.stopped_at_fork
    if fork is not None:
        nb.stopped_at_fork = (
            wire.ForkStop(at=fork.at, candidates=[c for c in fork.candidates if c in seen]) if fork.at in seen else None
        )
    return nb


def read(args: wire.ReadArgs, req: OpRequest) -> wire.ReadResult:
    """One event, its content from the verified source line; neighbours the caller may not see are never in it."""
    if args.unredacted and req.vis.scope.roots is not None:
        # Model-facing output is always redacted; only the file owner's local CLI may opt out.
        raise bad_request(
            "unredacted is allowed only for the local CLI with caller all: true (`piwatch read --all --unredacted`)"
        )
    return req.on_event(args.session_id, args.entry_id, lambda view: event_read(view, args, req.vis))


def event_read(view: DbTreeView, args: wire.ReadArgs, vis: Visibility) -> wire.ReadResult:
    """The read result as `vis`'s caller may see it; `args` are already validated by the wire contract."""
    conn, sid, eid = view.conn, args.session_id, args.entry_id
    path, cwd = source_of(conn, sid)
    row = view.row(eid)
    if row is None:
        raise not_found(f"entry {eid} is not indexed in session {sid}")
    locator = wire.Locator(path=path, byte_offset=row["byteOffset"], byte_length=row["byteLength"])
    status, line, detail = read_source_line(path, row["byteOffset"], row["byteLength"], row["fingerprint"])
    result = wire.ReadResult(
        session_id=sid,
        entry_id=eid,
        event=wire.EventInfo(
            type=row["type"],
            role=row["role"],
            parent_id=row["parentId"],
            id_recorded=row["idRecorded"],
            **event_facts(row),
            meta=row["meta"],
        ),
        session=wire.SessionInfo(cwd=cwd, source_path=path),
        source=wire.SourceInfo(
            path=path,
            byte_offset=locator.byte_offset,
            byte_length=locator.byte_length,
            fingerprint=row["fingerprint"],
            status=status,
            detail=detail,
        ),
    )
    if line is not None:
        _content(result, view, row, line, args, locator)
    elif args.fragment_id is not None:
        raise not_found(f"cannot read fragment {wire.quote(args.fragment_id)}: {detail}")
    if args.before or args.after:
        result.neighbours = _visible_neighbours(_neighbours(view, eid, args.order, args.before, args.after), sid, vis)
    if args.unredacted:
        result.unredacted = True
        return result
    # Every other field (meta, previews, paths) through the same rules; nothing silent.
    result, notes = redact_result(result, index_rules(conn))
    result.omitted = [*(result.omitted or []), *notes]
    return result


def _content(
    result: wire.ReadResult,
    view: DbTreeView,
    row: dict[str, Any],
    line: bytes,
    args: wire.ReadArgs,
    locator: wire.Locator,
) -> None:
    """The event's fragments from its verified line, projected (and redacted) as the index did."""
    indexed = Entry(
        args.entry_id,
        row["parentId"],
        row["type"],
        row["ordinal"],
        row["byteOffset"],
        row["byteLength"],
        row["fingerprint"],
        {},
        bool(row["idRecorded"]),
    )
    entry = line_entry(indexed, line)
    data = entry.data
    rules = NO_RULES if args.unredacted else index_rules(view.conn)
    fragments = project_entry(
        args.session_id, entry, rules, bounded=False, extractors=index_extractors(view.conn)
    ).fragments
    content = []
    redacted = []
    for f in fragments:
        if f.redactions:
            redacted.append(redaction_omitted(f"content.{f.fragment_id}", dict(f.redactions)))
        truncated = len(f.text) > PREVIEW_CHARS
        content.append(
            wire.ContentItem(
                fragment_id=f.fragment_id,
                kind=f.kind.value,
                tool_name=f.tool_name,
                call_id=f.call_id,
                length=len(f.text),
                text=f.text[:PREVIEW_CHARS],
                truncated=truncated,
                next=wire.FragmentRef(fragment_id=f.fragment_id, offset=PREVIEW_CHARS) if truncated else None,
                locator=_copy(locator) if truncated else None,
            )
        )
    result.content = content
    result.omitted = omitted_fields(data) + redacted + not_indexed(len(fragments))
    if args.fragment_id is not None:
        result.fragment = _window(args, {f.fragment_id: (f.kind.value, f.text) for f in fragments}, locator)


def _window(args: wire.ReadArgs, texts: dict[str, tuple[str, str]], locator: wire.Locator) -> wire.FragmentWindow:
    """One page of one fragment's full text."""
    fid = args.fragment_id
    if fid is None or fid not in texts:
        raise not_found(f"no fragment {wire.quote(fid)} in this event (fragments: {', '.join(texts) or 'none'})")
    kind, text = texts[fid]
    offset = 0 if args.offset is None else args.offset
    if offset > len(text):
        raise bad_request(f"offset must be between 0 and {len(text)} (the fragment's length)")
    length = WINDOW_DEFAULT if args.length is None else args.length
    piece = text[offset : offset + length]
    end = offset + len(piece)
    return wire.FragmentWindow(
        fragment_id=fid,
        kind=kind,
        offset=offset,
        length=len(piece),
        total_length=len(text),
        text=piece,
        has_more=end < len(text),
        next_offset=end if end < len(text) else None,
        locator=_copy(locator),
    )


def _copy(locator: wire.Locator) -> wire.Locator:
    # Each field its own value: redaction walks and reports every place a path is shown.
    return wire.Locator(path=locator.path, byte_offset=locator.byte_offset, byte_length=locator.byte_length)
